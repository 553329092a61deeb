"""Synthesizer protocol, backend registry, and tagged-text voicing with entity times.

A backend turns plain text into mono float32 audio at its own ``sample_rate``.
:func:`voice_tagged` speaks paper-format tagged text (``call me at [PHONE] nine
eight [PHONE] lah``) one segment at a time (split only at entity boundaries),
trims each segment's silence, joins them with short random pauses and returns
16 kHz audio plus the time span of every entity.
"""
from __future__ import annotations

import importlib
import os
import subprocess
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from deid_speech.audio import frame_rms, resample
from deid_speech.types import EntitySpan, Span, parse_tagged

TARGET_SR = 16000
_BACKEND_MODULES = {"piper": "piper", "espeak": "espeak", "flite": "flite", "festival": "festival",
                    "whisperspeech": "whisperspeech"}


class BackendUnavailable(RuntimeError):
    """A TTS backend cannot run here; the message names what to install."""


class Synthesizer(ABC):
    """Text-to-speech backend: ``synthesize(text)`` -> mono float32 at ``sample_rate``."""

    name: str = ""
    sample_rate: int = 0

    @abstractmethod
    def synthesize(self, text: str) -> np.ndarray:
        """Speak ``text``; return a 1-D float32 array in [-1, 1] at ``self.sample_rate``."""


SYNTHESIZERS: dict[str, Callable[..., Synthesizer]] = {}


def register(name: str) -> Callable[[Callable[..., Synthesizer]], Callable[..., Synthesizer]]:
    """Class decorator: make a backend constructible by ``get_synthesizer(name)``."""

    def deco(factory: Callable[..., Synthesizer]) -> Callable[..., Synthesizer]:
        SYNTHESIZERS[name] = factory
        return factory

    return deco


def require_binary(name: str, install: str) -> str:
    """Path of the executable ``name``; BackendUnavailable naming ``install`` if absent."""
    import shutil

    path = shutil.which(name)
    if path is None:
        raise BackendUnavailable(f"{name} binary not found on PATH; run: {install}")
    return path


def get_synthesizer(name: str, **kwargs: object) -> Synthesizer:
    """Build the backend registered as ``name`` (``piper``, ``espeak``, ``flite``)."""
    if name not in SYNTHESIZERS and name in _BACKEND_MODULES:
        importlib.import_module(f"deid_speech.tts.{_BACKEND_MODULES[name]}")
    if name not in SYNTHESIZERS:
        raise KeyError(f"unknown synthesizer {name!r}; known: {', '.join(sorted(SYNTHESIZERS))}")
    return SYNTHESIZERS[name](**kwargs)


class CommandSynthesizer(Synthesizer):
    """A command-line synthesizer that reads a text file and writes a WAV file
    (flite, Festival's text2wave): subclasses give :meth:`command`; the sample rate is
    probed once (``self.sample_rate = self._run("a")[1]``) and every later call checked
    against it."""

    @abstractmethod
    def command(self, text_file: str, wav_file: str) -> list[str]:
        """The argv that speaks ``text_file`` into ``wav_file``."""

    def synthesize(self, text: str) -> np.ndarray:
        text = " ".join(text.split())
        if not text:
            return np.zeros(0, dtype=np.float32)
        audio, sr = self._run(text)
        if sr != self.sample_rate:
            raise RuntimeError(f"{self.name} returned {sr} Hz, expected {self.sample_rate}")
        return audio

    def _run(self, text: str, timeout: float = 120) -> tuple[np.ndarray, int]:
        import soundfile as sf

        with tempfile.TemporaryDirectory(prefix="tts-") as tmp:
            txt, wav = os.path.join(tmp, "in.txt"), os.path.join(tmp, "out.wav")
            with open(txt, "w", encoding="utf-8") as fh:
                fh.write(text + "\n")
            proc = subprocess.run(self.command(txt, wav), capture_output=True, check=False, timeout=timeout)
            if proc.returncode != 0 or not os.path.isfile(wav):
                err = proc.stderr.decode("utf-8", "replace").strip()
                raise RuntimeError(f"{type(self).__name__} failed: {err or proc.returncode}")
            audio, sr = sf.read(wav, dtype="float32", always_2d=True)
        return audio.mean(axis=1).astype(np.float32), int(sr)


# --- signal helpers -------------------------------------------------------------------


def trim_silence(audio: np.ndarray, sr: int, rel_db: float = -40.0, floor: float = 1e-3,
                 margin_s: float = 0.015) -> np.ndarray:
    """Cut leading/trailing frames quieter than ``rel_db`` below the loudest 10 ms frame.

    A frame counts as speech when its RMS exceeds both ``floor`` and the relative
    threshold; ``margin_s`` of audio is kept either side of the first/last speech
    frame so soft onsets and fricative tails survive. Returns an empty array when
    nothing is above threshold.
    """
    rms = frame_rms(audio, sr)
    if rms.size == 0:
        return audio[:0]
    thr = max(floor, float(rms.max()) * 10 ** (rel_db / 20))
    loud = np.flatnonzero(rms > thr)
    if loud.size == 0:
        return audio[:0]
    n = len(audio) // rms.size
    pad = int(round(margin_s * sr))
    start = max(0, loud[0] * n - pad)
    end = min(len(audio), (loud[-1] + 1) * n + pad)
    return audio[start:end]


# --- voicing tagged text --------------------------------------------------------------


@dataclass
class Utterance:
    """16 kHz mono speech for one tagged text, with entity times and offsets.

    ``parts`` tiles the whole audio in order: speech segments (``source="speech"``,
    ``label`` = entity label or ``""``) and silences (``source="pause"``).
    ``entities[i]`` (seconds) and ``entity_chars[i]`` (offsets into ``text``) describe
    the same entity.
    """

    audio: np.ndarray
    sample_rate: int
    text: str
    tagged: str
    entities: list[Span] = field(default_factory=list)
    entity_chars: list[EntitySpan] = field(default_factory=list)
    parts: list[Span] = field(default_factory=list)

    @property
    def duration(self) -> float:
        return len(self.audio) / self.sample_rate


def _segments(text: str, ents: list[EntitySpan]) -> list[tuple[str, EntitySpan | None]]:
    """Split ``text`` at entity boundaries into (segment text, entity or None)."""
    out: list[tuple[str, EntitySpan | None]] = []
    pos = 0
    for e in sorted(ents):
        out.append((text[pos:e.char_start], None))
        out.append((text[e.char_start:e.char_end], e))
        pos = e.char_end
    out.append((text[pos:], None))
    # a segment after an entity may open with its punctuation (", two times"): drop it
    return [(s.strip() if e else s.strip().lstrip(",;:.!? "), e) for s, e in out
            if e is not None or _speakable(s)]


def _speakable(s: str) -> bool:
    return any(ch.isalnum() for ch in s)


def voice_tagged(tagged: str, synth: Synthesizer, rng: np.random.Generator,
                 pause_range: tuple[float, float] = (0.12, 0.3),
                 edge_pause: float = 0.1) -> Utterance:
    """Speak tagged text; return 16 kHz audio plus each entity's time span.

    Segments (text before an entity, the entity, text after, ...) are synthesised
    separately, trimmed of silence, and joined with pauses drawn uniformly from
    ``pause_range``; ``edge_pause`` seconds of silence lead and trail. Entity spans
    therefore start and end exactly on their trimmed speech. Raises ValueError for
    unbalanced tags (from :func:`parse_tagged`) or an entity that yields no audio.
    """
    text, ents = parse_tagged(tagged)
    lo, hi = pause_range
    if not 0 <= lo <= hi:
        raise ValueError(f"bad pause_range {pause_range}")
    chunks: list[np.ndarray] = []
    parts: list[Span] = []
    spans: list[Span] = []
    pos = 0  # samples written so far; times derive from it, so they never drift

    def append(audio: np.ndarray, **span_kw: str) -> Span:
        nonlocal pos
        span = Span(pos / TARGET_SR, (pos + len(audio)) / TARGET_SR, **span_kw)
        chunks.append(audio)
        parts.append(span)
        pos += len(audio)
        return span

    def add_silence(seconds: float) -> None:
        n = int(round(seconds * TARGET_SR))
        if n > 0:
            append(np.zeros(n, dtype=np.float32), source="pause")

    add_silence(edge_pause)
    for i, (seg, ent) in enumerate(_segments(text, ents)):
        if i:
            add_silence(float(rng.uniform(lo, hi)))
        audio = trim_silence(resample(np.asarray(synth.synthesize(seg)).reshape(-1), synth.sample_rate, TARGET_SR),
                             TARGET_SR)
        if audio.size == 0:
            if ent is not None:
                raise ValueError(f"{synth.name} produced no audio for entity {seg!r}")
            continue
        span = append(audio, label=ent.label if ent else "", source="speech", text=seg)
        if ent is not None:
            spans.append(Span(span.start, span.end, label=ent.label, source=synth.name,
                              text=seg))
    add_silence(edge_pause)
    audio = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float32)
    return Utterance(audio=audio, sample_rate=TARGET_SR, text=text, tagged=tagged,
                     entities=spans, entity_chars=sorted(ents), parts=parts)
