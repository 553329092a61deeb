"""Whisper transcription with word timestamps, in windows for long calls.

Backends: faster-whisper (CTranslate2 folders; int8 on CPU) and openai-whisper
(``.pt`` checkpoints). Long audio is cut at quiet points into windows of about
``window_s`` seconds; each window is decoded with ``overlap_s`` of context on both
sides and keeps only the words whose midpoint falls inside its own stretch, so no word is
lost or duplicated at a boundary.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from deid_speech.asr.models import ResolvedModel, resolve_model
from deid_speech.audio import MODEL_RATE
from deid_speech.errors import DeidError
from deid_speech.types import Span, Transcript


@dataclass(frozen=True)
class AsrOptions:
    model: str = "tiny.en"
    beam_size: int = 5
    window_s: float = 300.0
    overlap_s: float = 5.0
    compute_type: str = "int8"
    device: str = "cpu"
    language: str | None = "en"

    def __post_init__(self) -> None:
        if self.window_s < 30 or self.overlap_s < 0 or self.overlap_s * 4 > self.window_s:
            raise ValueError("window_s must be >= 30 s and overlap_s <= window_s / 4")


RawWord = tuple[str, float, float, float]  # text, start, end, probability


def cut_points(audio: np.ndarray, sr: int, window_s: float, search_s: float = 10.0) -> list[float]:
    """Boundaries (seconds, incl. 0 and the end) near every ``window_s``, moved to the
    quietest 50 ms frame within ``search_s`` before the nominal cut."""
    dur = len(audio) / sr
    cuts = [0.0]
    frame = int(0.05 * sr)
    t = window_s
    while t < dur - window_s * 0.25:
        lo, hi = int(max(t - search_s, cuts[-1] + 1) * sr), int(t * sr)
        seg = audio[lo:hi]
        n = len(seg) // frame
        if n > 0:
            energy = (seg[: n * frame].reshape(n, frame) ** 2).mean(axis=1)
            t = (lo + int(np.argmin(energy)) * frame + frame // 2) / sr
        cuts.append(t)
        t = cuts[-1] + window_s
    cuts.append(dur)
    return cuts


class Transcriber:
    """Loads a Whisper model once; ``transcribe`` turns 16 kHz mono audio into a Transcript."""

    def __init__(self, options: AsrOptions = AsrOptions()):
        self.options = options
        self.resolved: ResolvedModel = resolve_model(options.model)
        self._model = self._load()

    @property
    def name(self) -> str:
        return self.resolved.name

    def _load(self):
        r = self.resolved
        try:
            if r.kind == "ct2":
                from faster_whisper import WhisperModel

                return WhisperModel(str(r.path), device=self.options.device,
                                    compute_type=self.options.compute_type)
            import whisper  # openai-whisper

            return whisper.load_model(str(r.path), device=self.options.device)
        except ImportError as e:
            raise DeidError(f"ASR backend for {r.name} is not installed ({e.name}); run `make demo`") from None
        except Exception as e:
            raise DeidError(f"cannot load Whisper model {r.path}: {str(e).splitlines()[0] if str(e) else e}") from None

    def _decode(self, audio: np.ndarray) -> tuple[list[RawWord], list[tuple[float, float]]]:
        o = self.options
        if self.resolved.kind == "ct2":
            segments, _ = self._model.transcribe(
                audio, language=o.language if self._multilingual() else None, beam_size=o.beam_size,
                word_timestamps=True, condition_on_previous_text=False, vad_filter=False)
            words: list[RawWord] = []
            segs: list[tuple[float, float]] = []
            for s in segments:
                segs.append((s.start, s.end))
                words.extend((w.word, w.start, w.end, w.probability) for w in (s.words or []))
            return words, segs
        result = self._model.transcribe(audio, language=o.language, beam_size=o.beam_size,
                                        word_timestamps=True, condition_on_previous_text=False,
                                        fp16=False)
        words = [(w["word"], w["start"], w["end"], w.get("probability", 1.0))
                 for s in result["segments"] for w in s.get("words", [])]
        return words, [(s["start"], s["end"]) for s in result["segments"]]

    def _multilingual(self) -> bool:
        m = self._model
        return bool(getattr(m, "model", None) is not None and m.model.is_multilingual)

    def transcribe(self, audio: np.ndarray, progress=None) -> Transcript:
        """Transcribe 16 kHz mono float32 audio. ``progress(done_s, total_s)`` if given."""
        if audio.ndim != 1:
            raise ValueError("transcribe expects mono 16 kHz audio")
        sr = MODEL_RATE
        o = self.options
        cuts = cut_points(audio, sr, o.window_s)
        words: list[RawWord] = []
        segs: list[Span] = []
        for k in range(len(cuts) - 1):
            own_lo, own_hi = cuts[k], cuts[k + 1]
            lo = max(0.0, own_lo - (o.overlap_s if k > 0 else 0.0))
            hi = min(cuts[-1], own_hi + (o.overlap_s if k < len(cuts) - 2 else 0.0))
            chunk = audio[int(lo * sr): int(hi * sr)]
            w, s = self._decode(chunk)
            for text, ws, we, p in w:
                ws, we = ws + lo, we + lo
                mid = (ws + we) / 2
                if own_lo <= mid < own_hi or (k == len(cuts) - 2 and mid >= own_hi):
                    words.append((text, ws, min(we, cuts[-1]), p))
            for a, b in s:
                a, b = a + lo, min(b + lo, cuts[-1])
                if b > own_lo and a < own_hi and b >= a:
                    segs.append(Span(max(a, 0.0), b, source="asr"))
            if progress:
                progress(own_hi, cuts[-1])
        return Transcript.from_words(words, segments=segs)
