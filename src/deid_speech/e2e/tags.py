"""Lenient parsing of the end-to-end model's tagged transcripts.

The model writes ``can call me at [PHONE] nine eight seven six [PHONE] lah``: the same
tag opens and closes an entity. Its output is not always well formed, and a tag it
wrote is evidence of PII, so a malformed tag is widened, never dropped:

* a tag left open runs to the end of its sentence (or segment);
* a lone tag with no words after it in its sentence is a stray *closing* tag: the
  entity opens back to the previous pause (or tag, or sentence start);
* a different tag inside an open one closes the first (and opens its own entity);
* an empty pair (``[PHONE] [PHONE]``) covers the word on each side of it.

Pure functions on text: :func:`strip_tags` removes the tags and records where they
were in the plain text (:class:`TagMark`); :func:`pair_tags` turns those marks into
character entities, given optional pause positions (from word times) and segment
boundaries. :func:`parse_tags` does both; on well-formed input it agrees with
:func:`deid_speech.types.parse_tagged`.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from deid_speech.types import PAPER_LABELS, EntitySpan, _append

TAG_TEXTS: tuple[str, ...] = tuple(f"[{label}]" for label in PAPER_LABELS)  # the shipped model's tag tokens
# a known label in brackets, tolerating case and inner spaces ("[ phone ]"); unknown
# bracketed words ("[inaudible]") stay text
_TAG = re.compile(r"\[\s*(" + "|".join(PAPER_LABELS) + r")\s*\]", re.IGNORECASE)
_STOP = re.compile(r"(?<!\b[Mm]r)(?<!\b[Mm]rs)(?<!\b[Mm]s)(?<!\b[Dd]r)[.?!]+(?=\s|$)")
_WORD = re.compile(r"[^\W_]", re.UNICODE)


@dataclass(frozen=True, order=True)
class TagMark:
    """A tag that stood at character ``pos`` of the plain text (between two words)."""

    pos: int
    label: str


def strip_tags(tagged: str) -> tuple[str, list[TagMark]]:
    """Plain text (whitespace normalised as in :func:`parse_tagged`) and the tags' positions."""
    out: list[str] = []
    marks: list[TagMark] = []
    text_len = pos = 0
    for m in _TAG.finditer(tagged):
        text_len = _append(out, text_len, tagged[pos:m.start()])
        marks.append(TagMark(text_len, m.group(1).upper()))
        pos = m.end()
    _append(out, text_len, tagged[pos:])
    return "".join(out), marks


def sentence_bounds(text: str, stops: Iterable[int] = ()) -> list[tuple[int, int]]:
    """[start, end) character ranges of the sentences of ``text``: split after . ? !
    (followed by a space; not after Mr/Mrs/Ms/Dr) and at the given ``stops``."""
    cuts = {0, len(text)} | {m.end() for m in _STOP.finditer(text)}
    cuts |= {c for c in stops if 0 < c < len(text)}
    edges = sorted(cuts)
    return [(a, b) for a, b in zip(edges, edges[1:])] or [(0, 0)]


def _has_word(text: str, a: int, b: int) -> bool:
    return a < b and _WORD.search(text, a, b) is not None


def _trim(text: str, a: int, b: int) -> tuple[int, int]:
    """Shrink [a, b) to start and end on a word character (punctuation and spaces dropped)."""
    while a < b and not _WORD.match(text[a]):
        a += 1
    while b > a and not _WORD.match(text[b - 1]):
        b -= 1
    return a, b


def _word_before(text: str, pos: int, lo: int) -> int:
    """Start of the word that ends at or before ``pos`` (not before ``lo``)."""
    a, b = _trim(text, lo, pos)
    if a >= b:
        return pos
    k = text.rfind(" ", a, b)
    return a if k < 0 else k + 1


def _word_after(text: str, pos: int, hi: int) -> int:
    """End of the word that starts at or after ``pos`` (not beyond ``hi``)."""
    a, b = _trim(text, pos, hi)
    if a >= b:
        return pos
    k = text.find(" ", a, b)
    return _trim(text, a, b if k < 0 else k)[1]


def pair_tags(text: str, marks: list[TagMark], pauses: Iterable[int] = (),
              stops: Iterable[int] = ()) -> list[EntitySpan]:
    """Character entities of ``text`` from its tag marks (see the module rules).

    ``pauses``: character positions where a pause begins a stretch of speech (word
    starts after a silence), used to open a stray closing tag. ``stops``: extra hard
    boundaries (segment or window starts) that an entity never crosses.
    """
    sentences = sentence_bounds(text, stops)
    pause_at = sorted(set(pauses))

    def sentence_of(pos: int) -> tuple[int, int]:
        for a, b in sentences:
            if a <= pos < b or (pos == b == len(text)):
                return a, b
        return sentences[-1]

    found: list[tuple[int, int, str]] = []
    prev_end = 0  # where the last tag stood: an entity never reaches back past it

    def emit(a: int, b: int, label: str) -> None:
        a, b = _trim(text, a, b)
        if a < b:
            found.append((a, b, label))

    def close_open(open_: TagMark) -> None:
        """A tag nobody closed: runs to its sentence end or, with no words after it, back."""
        s_start, s_end = sentence_of(open_.pos)
        if _has_word(text, open_.pos, s_end):
            emit(open_.pos, s_end, open_.label)
        else:  # stray closing tag
            lo = max([p for p in pause_at if s_start <= p < open_.pos] + [s_start, prev_end])
            if lo >= open_.pos or not _has_word(text, lo, open_.pos):
                lo = s_start
            emit(lo, open_.pos, open_.label)

    def close_pair(open_: TagMark, end: int, label: str) -> None:
        if _has_word(text, open_.pos, end):
            emit(open_.pos, end, label)
        else:  # empty pair: the word on each side
            s_start, s_end = sentence_of(open_.pos)
            emit(_word_before(text, open_.pos, s_start), _word_after(text, end, s_end), label)

    open_: TagMark | None = None
    for m in sorted(marks):
        if open_ is not None and sentence_of(open_.pos) != sentence_of(m.pos) \
                and _has_word(text, sentence_of(open_.pos)[1], m.pos):
            close_open(open_)  # the open tag's sentence ended first
            prev_end, open_ = sentence_of(open_.pos)[1], None
        if open_ is None:
            open_ = m
        elif m.label == open_.label:
            close_pair(open_, m.pos, m.label)
            prev_end, open_ = m.pos, None
        else:  # a different tag closes the open one and opens its own entity
            close_pair(open_, m.pos, open_.label)
            prev_end, open_ = m.pos, m
    if open_ is not None:
        close_open(open_)
    return _merge(found)


def _merge(found: list[tuple[int, int, str]]) -> list[EntitySpan]:
    """Sorted entities; overlapping ones (widening can cause that) become one."""
    out: list[list] = []
    for a, b, label in sorted(found):
        if out and a < out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b, label])
    return [EntitySpan(a, b, label) for a, b, label in out]


def parse_tags(tagged: str, stops: Iterable[int] = ()) -> tuple[str, list[EntitySpan]]:
    """Plain text and entities of a tagged transcript, tolerating malformed tags."""
    text, marks = strip_tags(tagged)
    return text, pair_tags(text, marks, stops=stops)
