"""The detector protocol, a registry by name, and the one merge step.

Every detector takes a :class:`Transcript` and returns :class:`Span` objects in seconds
that record their ``source``. Character hits map to time through the words' offsets.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

from deid_speech.errors import DeidError
from deid_speech.types import Span, Transcript, Word


class Detector(Protocol):
    name: str

    def detect(self, transcript: Transcript) -> list[Span]: ...


REGISTRY: dict[str, Callable[[], Detector]] = {}
# where each detector registers itself: building one by name imports only its module
MODULES = {"patterns": "deid_speech.ner.patterns", "cue-runs": "deid_speech.ner.cue_runs",
           "spacy": "deid_speech.ner.spacy_ner", "spacy-plain": "deid_speech.ner.spacy_plain",
           "ner": "deid_speech.ner.trained", "presidio": "deid_speech.ner.presidio"}


def register(name: str):
    def wrap(factory):
        REGISTRY[name] = factory
        return factory
    return wrap


def build(name: str, config=None) -> Detector | None:
    """The detector registered as ``name``, made for ``config`` (a RedactConfig: a factory
    with ``from_config`` reads its options there, and may return None when the config
    needs no such detector, e.g. no trained NER); without ``from_config``, ``factory()``."""
    from importlib import import_module

    if name not in MODULES:
        raise DeidError(f"unknown detector {name!r}; choose from {', '.join(MODULES)}")
    import_module(MODULES[name])
    factory = REGISTRY[name]
    make = getattr(factory, "from_config", None)
    return make(config) if make is not None and config is not None else factory()


def build_all(names: tuple[str, ...], config=None) -> list[Detector]:
    return [d for d in (build(n, config) for n in names) if d is not None]


def span_from_words(transcript: Transcript, words: list[Word], label: str, score: float,
                    source: str) -> Span:
    """A Span covering ``words`` (their union in time), text from the transcript."""
    text = transcript.text[words[0].char_start: words[-1].char_end].strip(".,!?;:\"'")
    return Span(min(w.start for w in words), max(w.end for w in words), label, score, source, text)


def span_from_chars(transcript: Transcript, char_start: int, char_end: int, label: str,
                    score: float, source: str) -> Span | None:
    words = transcript.words_in(char_start, char_end)
    if not words:
        return None
    return span_from_words(transcript, words, label, score, source)


# the source tag of a span whose stretch every decoding (the first and each verifier pass)
# found (pipeline.agreed_spans): its edges are the union of their times, padded less
AGREED = "agreed"
# the source tag of what is left of a first-decoder span that the verifier's passes cut parts
# off (pipeline.trimmed)
TRIMMED = "trimmed"


def overlapping(spans: list[Span], gap: float = 0.0) -> Iterator[list[Span]]:
    """The spans in order of time, in groups that overlap one another, chained (touching is
    not overlap; ``gap``: closer than this is)."""
    group: list[Span] = []
    for s in sorted(spans):
        if group and s.start >= max(g.end for g in group) + gap:
            yield group
            group = []
        group.append(s)
    if group:
        yield group


def merge_spans(spans: list[Span], gap: float = 0.0) -> list[Span]:
    """Merge spans that overlap (touching is not overlap) into one per region
    (:func:`overlapping`).

    The merged span keeps the label of its highest-scoring member, the max score, the
    union of times, all sources joined with '+', and the texts of distinct members;
    :data:`AGREED` only when every member holds it (a span that one decoding alone found
    is padded in full, and so is the region it joins).
    """
    out: list[Span] = []
    for group in overlapping(spans, gap):
        best = max(group, key=lambda s: (s.score, s.duration))
        agreed = all(AGREED in s.source.split("+") for s in group)
        sources = "+".join(sorted({p for s in group for p in s.source.split("+") if p and (agreed or p != AGREED)}))
        texts: list[str] = []
        for s in sorted(group):
            if s.text and not any(s.text in t for t in texts):
                texts = [t for t in texts if t not in s.text] + [s.text]
        out.append(Span(min(s.start for s in group), max(s.end for s in group), best.label,
                        best.score, sources, " | ".join(texts)))
    return out
