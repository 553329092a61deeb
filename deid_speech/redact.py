"""Redaction operators: audio (beep, silence) and text (numbered typed placeholders).

Detection is elsewhere; this module only acts on Spans. A span whose timing looks
implausible (too short for what was said) is widened to the plausibly timed words around
it, within its ASR segment, never dropped.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from deid_speech.audio import Audio, frame_rms
from deid_speech.spoken import clean_token, normalize_tokens
from deid_speech.types import Span, Transcript

MODES = ("beep", "silence")
MIN_SECONDS_PER_CHAR = 0.03  # fast speech is ~15 chars/s; below half that, distrust the times
GAP_REACH = 0.3  # seconds a span may grow into the pause before/after it (see reach_gaps)


@dataclass(frozen=True)
class RedactOptions:
    mode: str = "beep"
    padding: float = 0.1
    beep_hz: float = 1000.0
    fade: float = 0.005

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {self.mode!r}")
        if not 0 <= self.padding <= 2:
            raise ValueError("padding must be between 0 and 2 seconds")


def place_spans(spans: list[Span], transcript: Transcript) -> list[Span]:
    """Widen spans whose time is implausibly short for their text (:func:`_widen_short`),
    then let every span reach across the pauses to its neighbouring words
    (:func:`reach_gaps`)."""
    return reach_gaps(_widen_short(spans, transcript), transcript)


def reach_gaps(spans: list[Span], transcript: Transcript, max_reach: float = GAP_REACH) -> list[Span]:
    """Extend each span's start back to the end of the word before it and its end forward
    to the start of the word after it, by at most ``max_reach`` seconds each side.

    Whisper's word times start late and end early on names and numbers (tiny.en put
    "Samantha" 0.24 s after its onset on synthetic speech), so the first syllable of an
    entity can escape a span plus the usual padding. The pause between two recognised
    words holds no other recognised speech, so beeping it costs nothing.
    """
    out = []
    for s in spans:
        before = [w.end for w in transcript.words if w.end <= s.start]
        after = [w.start for w in transcript.words if w.start >= s.end]
        start = max(max(before, default=0.0), s.start - max_reach)
        end = min(min(after, default=s.end + max_reach), s.end + max_reach)
        out.append(Span(min(start, s.start), max(end, s.end), s.label, s.score, s.source, s.text))
    return out


def _needed(text: str) -> float:
    """The least time ``text`` takes to say (see MIN_SECONDS_PER_CHAR)."""
    return MIN_SECONDS_PER_CHAR * len(re.sub(r"\W", "", text))


def _widen_short(spans: list[Span], transcript: Transcript) -> list[Span]:
    """A span too short for its text has words Whisper mistimed. Its audio lies between the
    nearest words around it whose own timing is plausible: widen it to that stretch, within
    its ASR segment(s) (a whole segment can run 20 s, so it is the bound, not the target);
    a side with no such word takes the segment's edge, or, with no segment either, half
    the shortfall. A stretch still too short grows by the shortfall on both sides."""
    good = [w for w in transcript.words if w.end - w.start >= _needed(w.text)]
    out: list[Span] = []
    for s in spans:
        need = _needed(s.text)
        if s.duration >= need:
            out.append(s)
            continue
        mid = (s.start + s.end) / 2
        segs = [g for g in transcript.segments if g.start <= mid <= g.end] or \
               [g for g in transcript.segments if g.overlaps(s)]
        short = (need - s.duration) / 2
        lo = min((g.start for g in segs), default=max(0.0, s.start - short))
        hi = max((g.end for g in segs), default=s.end + short)
        start = max([lo] + [w.end for w in good if w.end <= s.start])
        end = min([hi] + [w.start for w in good if w.start >= s.end])
        start, end = min(start, s.start), max(end, s.end)
        if end - start < need:
            grow = (need - (end - start)) / 2
            start, end = max(0.0, start - grow), end + grow
        out.append(Span(start, end, s.label, s.score, s.source + "+widened", s.text))
    return out


def speech_level(x: np.ndarray, sr: int) -> float:
    """RMS of the active (speech) frames of a mono signal: the loudest 50% of 20 ms frames."""
    rms = frame_rms(x, sr, 0.02)
    if rms.size == 0:
        return float(np.sqrt(np.mean(x ** 2))) if len(x) else 0.0
    active = rms[rms >= np.median(rms)]
    return float(np.sqrt(np.mean(active ** 2))) if active.size else 0.0


def redact_audio(audio: Audio, spans: list[Span], options: RedactOptions = RedactOptions()) -> Audio:
    """Replace every span (plus padding) in every channel by a beep at speech level or silence.

    Length, rate and channel count are kept; the input array is not modified.
    """
    sr = audio.sample_rate
    out = audio.samples.copy()
    n = out.shape[0]
    level = speech_level(audio.samples.mean(axis=1), sr)
    amp = min(0.9, max(level, 0.01) * np.sqrt(2.0))
    for s in spans:
        a = max(0, int(np.floor((s.start - options.padding) * sr)))
        b = min(n, int(np.ceil((s.end + options.padding) * sr)))
        if b <= a:
            continue
        if options.mode == "silence":
            out[a:b, :] = 0.0
            continue
        t = np.arange(a, b) / sr
        tone = (amp * np.sin(2 * np.pi * options.beep_hz * t)).astype(np.float32)
        k = min(int(options.fade * sr), (b - a) // 2)
        if k > 0:
            ramp = np.linspace(0.0, 1.0, k, dtype=np.float32)
            tone[:k] *= ramp
            tone[-k:] *= ramp[::-1]
        out[a:b, :] = tone[:, None]
    return Audio(out, sr, audio.format, audio.subtype)


def value_key(label: str, text: str) -> str:
    """A normal form of a mention, so two mentions of one value get one placeholder.

    Structured values compare by their symbols ("nine one two three" == "9123");
    names and dates by their lower-cased words.
    """
    if label in ("PERSON", "DATE"):
        return " ".join(clean_token(t) for t in text.split())
    if label == "EMAIL":
        t = text.lower().replace(" at ", "@").replace(" dot ", ".")
        return re.sub(r"\s+", "", t)
    runs = normalize_tokens(text.split())
    return "".join(r[2].text for r in runs) or text.lower()


def _covers(s: Span, w) -> bool:
    """A word belongs to a span when its midpoint, or most of it, lies inside the span."""
    if s.start <= (w.start + w.end) / 2 <= s.end:
        return True
    inside = min(w.end, s.end) - max(w.start, s.start)
    return w.end > w.start and inside >= 0.5 * (w.end - w.start)


def word_tags(transcript: Transcript, spans: list[Span]) -> list[str | None]:
    """Each word's placeholder ``[LABEL_n]`` if a span covers it, else None; n counts
    distinct values per label within the call, in order of first mention."""
    numbering: dict[tuple[str, str], int] = {}
    counts: dict[str, int] = {}
    tags: list[str | None] = [None] * len(transcript.words)
    for s in sorted(spans):
        key = (s.label, value_key(s.label, s.text))
        if key not in numbering:
            counts[s.label] = counts.get(s.label, 0) + 1
            numbering[key] = counts[s.label]
        for i, w in enumerate(transcript.words):
            if tags[i] is None and _covers(s, w):
                tags[i] = f"[{s.label}_{numbering[key]}]"
    return tags


def redact_text(transcript: Transcript, spans: list[Span]) -> str:
    """The transcript with each span's words replaced by their placeholder
    (:func:`word_tags`). Runs of words under one placeholder collapse to one; a trailing
    punctuation mark of the last word is kept."""
    tags = word_tags(transcript, spans)
    parts: list[str] = []
    for i, w in enumerate(transcript.words):
        tag = tags[i]
        if tag is None:
            parts.append(w.text)
            continue
        trail = re.search(r"[.,!?;:]+$", w.text)
        if i > 0 and tags[i - 1] == tag:
            parts.pop()
        parts.append(tag + (trail.group() if trail else ""))
    return " ".join(parts)


def redacted_words(transcript: Transcript, spans: list[Span]) -> list[dict]:
    """The word list with every covered word's text replaced by its placeholder (times
    kept, character offsets and probabilities dropped: they would tell the PII's length)."""
    return [{"text": tag or w.text, "start": round(w.start, 3), "end": round(w.end, 3)}
            for w, tag in zip(transcript.words, word_tags(transcript, spans))]
