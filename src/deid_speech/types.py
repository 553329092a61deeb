"""Core types shared by every stage: Span (seconds), Word, Transcript, EntitySpan (characters).

Every detector, aligner, redactor and metric speaks these types. They are frozen,
ordered and round-trip through plain JSON dicts (``to_dict`` / ``from_dict``).
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Protocol

LABELS: tuple[str, ...] = (
    "PERSON",
    "NRIC",
    "PASSPORT_NUM",
    "PHONE",
    "EMAIL",
    "CREDIT_CARD",
    "CAR_PLATE",
    "BANK_ACCOUNT",
    "DATE",
    "SECRET",
)
# the paper's nine labels: those of the seed corpus, the benchmark, the shipped models (the
# end-to-end model's tag tokens, the trained NER) and the experiment matrix. SECRET (a PIN, a
# one-time password or TAC, a password said aloud) came later: the cue-anchored rules find it
# (deid_speech.ner.cue_runs, rule 10); no shipped model knows it.
PAPER_LABELS: tuple[str, ...] = LABELS[:9]


def check_label(label: str) -> str:
    if label not in LABELS:
        raise ValueError(f"unknown label {label!r}; expected one of {', '.join(LABELS)}")
    return label


@dataclass(frozen=True, order=True)
class Span:
    """A labelled time region in seconds. Ordered by (start, end, label, ...)."""

    start: float
    end: float
    label: str = ""
    score: float = 1.0
    source: str = ""
    text: str = ""

    def __post_init__(self) -> None:
        if not (self.start >= 0 and self.end >= self.start):
            raise ValueError(f"bad span times: start={self.start} end={self.end}")

    @property
    def duration(self) -> float:
        return self.end - self.start

    def overlaps(self, other: Span) -> bool:
        return self.start < other.end and other.start < self.end

    def to_dict(self) -> dict:
        d = asdict(self)
        d["start"] = round(self.start, 3)
        d["end"] = round(self.end, 3)
        d["score"] = round(self.score, 3)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Span:
        return cls(
            start=float(d["start"]),
            end=float(d["end"]),
            label=d.get("label", ""),
            score=float(d.get("score", 1.0)),
            source=d.get("source", ""),
            text=d.get("text", ""),
        )


@dataclass(frozen=True, order=True)
class EntitySpan:
    """A labelled character region [char_start, char_end) of a text."""

    char_start: int
    char_end: int
    label: str

    def __post_init__(self) -> None:
        if not (0 <= self.char_start < self.char_end):
            raise ValueError(f"bad entity chars: {self.char_start}..{self.char_end}")

    def to_dict(self) -> dict:
        return {"label": self.label, "char_start": self.char_start, "char_end": self.char_end}

    @classmethod
    def from_dict(cls, d: dict) -> EntitySpan:
        return cls(int(d["char_start"]), int(d["char_end"]), d["label"])


@dataclass(frozen=True)
class Word:
    """One recognised word with its times (seconds) and offsets in Transcript.text."""

    text: str
    start: float
    end: float
    char_start: int
    char_end: int
    prob: float = 1.0

    def to_dict(self) -> dict:
        return {
            "text": self.text,
            "start": round(self.start, 3),
            "end": round(self.end, 3),
            "char_start": self.char_start,
            "char_end": self.char_end,
            "prob": round(self.prob, 3),
        }

    @classmethod
    def from_dict(cls, d: dict) -> Word:
        return cls(d["text"], float(d["start"]), float(d["end"]), int(d["char_start"]),
                   int(d["char_end"]), float(d.get("prob", 1.0)))


@dataclass(frozen=True)
class Transcript:
    """Text plus its words; each word records where it sits in ``text``.

    Build with :meth:`from_words` so offsets are computed once; a character span then
    maps to time by lookup (:meth:`char_span_to_time`), never by re-scanning text.
    """

    text: str
    words: tuple[Word, ...] = field(default_factory=tuple)
    segments: tuple[Span, ...] = field(default_factory=tuple)  # ASR segments (label "")

    @classmethod
    def from_words(cls, items: Iterable[tuple[str, float, float] | tuple[str, float, float, float]],
                   segments: Iterable[Span] = ()) -> Transcript:
        """Join (text, start, end[, prob]) tuples with single spaces, recording offsets."""
        parts: list[str] = []
        words: list[Word] = []
        pos = 0
        for item in items:
            w, s, e = item[0].strip(), float(item[1]), float(item[2])
            p = float(item[3]) if len(item) > 3 else 1.0
            if not w:
                continue
            if parts:
                parts.append(" ")
                pos += 1
            words.append(Word(w, s, max(e, s), pos, pos + len(w), p))
            parts.append(w)
            pos += len(w)
        return cls("".join(parts), tuple(words), tuple(segments))

    def words_in(self, char_start: int, char_end: int) -> list[Word]:
        """Words that overlap the character range [char_start, char_end)."""
        return [w for w in self.words if w.char_start < char_end and char_start < w.char_end]

    def words_during(self, start: float, end: float) -> list[Word]:
        """Words that overlap the time range (start, end) in seconds."""
        return [w for w in self.words if w.start < end and start < w.end]

    def char_span_to_time(self, char_start: int, char_end: int) -> tuple[float, float] | None:
        ws = self.words_in(char_start, char_end)
        if not ws:
            return None
        return min(w.start for w in ws), max(w.end for w in ws)

    def to_dict(self) -> dict:
        return {
            "text": self.text,
            "words": [w.to_dict() for w in self.words],
            "segments": [s.to_dict() for s in self.segments],
        }

    @classmethod
    def from_dict(cls, d: dict) -> Transcript:
        return cls(d["text"], tuple(Word.from_dict(w) for w in d.get("words", [])),
                   tuple(Span.from_dict(s) for s in d.get("segments", [])))


# --- the paper's tagged-text format: "[PHONE] nine eight ... [PHONE]" -------------------

_TAG_RE = re.compile(r"\[(" + "|".join(LABELS) + r")\]")


def _append(out: list[str], text_len: int, raw: str) -> int:
    """Append a whitespace-normalised chunk (no space before closing punctuation)."""
    chunk = " ".join(raw.split())
    if not chunk:
        return text_len
    if text_len and chunk[0] not in ",.!?;:)'":
        out.append(" ")
        text_len += 1
    out.append(chunk)
    return text_len + len(chunk)


def parse_tagged(tagged: str) -> tuple[str, list[EntitySpan]]:
    """Parse ``"call [PHONE] nine eight [PHONE] ok"`` into plain text and entity spans.

    Tags must be balanced and non-nested; raises ValueError otherwise. Whitespace is
    normalised to single spaces.
    """
    out: list[str] = []
    entities: list[EntitySpan] = []
    open_label: str | None = None
    open_at = 0
    pos = 0
    text_len = 0
    for m in _TAG_RE.finditer(tagged):
        text_len = _append(out, text_len, tagged[pos:m.start()])
        label = m.group(1)
        if open_label is None:
            open_label = label
            open_at = text_len + (1 if text_len else 0)
        elif label == open_label:
            if text_len <= open_at:
                raise ValueError(f"empty [{label}] entity in {tagged!r}")
            entities.append(EntitySpan(open_at, text_len, label))
            open_label = None
        else:
            raise ValueError(f"[{label}] inside open [{open_label}] in {tagged!r}")
        pos = m.end()
    if open_label is not None:
        raise ValueError(f"unclosed [{open_label}] in {tagged!r}")
    _append(out, text_len, tagged[pos:])
    text = "".join(out)
    if re.search(r"\[[A-Z_]+\]", text):
        raise ValueError(f"unknown tag in {tagged!r}")
    return text, entities


def render_tagged(text: str, entities: Iterable[EntitySpan]) -> str:
    """Inverse of :func:`parse_tagged`."""
    parts: list[str] = []
    pos = 0
    for e in sorted(entities):
        if e.char_start < pos:
            raise ValueError("overlapping entities cannot be rendered")
        parts.append(text[pos:e.char_start])
        parts.append(f"[{e.label}] {text[e.char_start:e.char_end]} [{e.label}]")
        pos = e.char_end
    parts.append(text[pos:])
    return " ".join("".join(parts).split())


@dataclass(frozen=True)
class Recognition:
    """What a recogniser made of one recording: the transcript with word times and, for a
    recogniser that tags entities itself (the end-to-end model), its entity spans."""

    transcript: Transcript
    spans: tuple[Span, ...] = ()


class Recognizer(Protocol):
    """Audio to :class:`Recognition`. Implementations keep no per-call state, so one
    recogniser (and the Redactor holding it) can serve several threads."""

    name: str

    def recognize(self, audio16k, progress=None) -> Recognition: ...
