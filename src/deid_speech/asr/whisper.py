"""Whisper transcription with word timestamps, in windows for long calls.

Backends: faster-whisper (CTranslate2 folders; int8 on CPU) and openai-whisper
(``.pt`` checkpoints). Audio of any length is cut at quiet points into windows of at most
``window_s`` seconds, so each is one Whisper window (Whisper's own seeking across 30 s
windows was seen to skip 20 s of speech on the shipped example). Each window is decoded
with ``overlap_s`` of context on both sides and the preceding words as its prompt, and
keeps only the words whose midpoint falls inside its own stretch, so no word is lost or
duplicated at a boundary. Speech that no
word covers afterwards is decoded again on its own (:func:`uncovered_speech`).
"""
from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from deid_speech.asr.models import ResolvedModel, resolve_model
from deid_speech.audio import MODEL_RATE, frame_rms
from deid_speech.errors import DeidError
from deid_speech.types import Recognition, Span, Transcript


@dataclass(frozen=True)
class AsrOptions:
    model: str = "tiny.en"
    beam_size: int = 5
    window_s: float = 27.0
    overlap_s: float = 1.0
    compute_type: str = "int8"
    device: str = "cpu"
    language: str | None = "en"

    def __post_init__(self) -> None:
        if self.window_s < 5 or self.overlap_s < 0 or self.overlap_s * 4 > self.window_s:
            raise ValueError("window_s must be >= 5 s and overlap_s <= window_s / 4")


RawWord = tuple[str, float, float, float]  # text, start, end, probability
FRAME_S = 0.05
PROMPT_WORDS = 40  # words of the preceding window given as the prompt (context across windows)


MAX_COMPRESSION = 2.4  # whisper's own threshold for a repetitive (hallucinated) decoding
MAX_WORDS_PER_S = 6.0  # fast speech is ~4 words/s


def hallucinated(words: list[RawWord], seconds: float) -> bool:
    """A decoding that loops or invents: its text compresses more than whisper allows
    (``gzip`` ratio over :data:`MAX_COMPRESSION`, texts of 60+ characters), or it has more
    words than speech could hold in ``seconds``."""
    import zlib

    text = " ".join(w[0].strip() for w in words).encode("utf-8")
    if len(text) >= 60 and len(text) / len(zlib.compress(text)) > MAX_COMPRESSION:
        return True
    return seconds > 0 and len(words) > MAX_WORDS_PER_S * seconds and len(words) >= 12


def audio_seed(audio: np.ndarray) -> int:
    """A random seed that is a function of the samples alone."""
    digest = hashlib.sha1(np.ascontiguousarray(audio, dtype=np.float32).tobytes()).digest()
    return int.from_bytes(digest[:4], "little")


def cut_points(audio: np.ndarray, sr: int, window_s: float, search_s: float | None = None) -> list[float]:
    """Boundaries (seconds, incl. 0 and the end) such that no stretch is longer than
    ``window_s``; each cut sits on the quietest 50 ms frame of the last ``search_s``
    seconds (default: a third of the window) before the limit."""
    dur = len(audio) / sr
    search_s = window_s / 3 if search_s is None else search_s
    cuts = [0.0]
    frame = int(FRAME_S * sr)
    while dur - cuts[-1] > window_s:
        hi_t = cuts[-1] + window_s
        lo, hi = int(max(hi_t - search_s, cuts[-1] + 1) * sr), int(hi_t * sr)
        energy = frame_rms(audio[lo:hi], sr, FRAME_S)
        t = hi_t
        if energy.size:
            t = (lo + int(np.argmin(energy)) * frame + frame // 2) / sr
        cuts.append(t)
    cuts.append(dur)
    return cuts


def uncovered_speech(audio: np.ndarray, sr: int, words: list[RawWord] | tuple, min_len: float = 1.0,
                     margin: float = 0.3) -> list[tuple[float, float]]:
    """Stretches of at least ``min_len`` s that sound like speech (frame energy above a
    tenth of the loud frames' level) but that no word (padded by ``margin``) covers."""
    rms = frame_rms(audio, sr, FRAME_S)
    n = rms.size
    if n == 0:
        return []
    loud = np.percentile(rms, 90)
    active = rms > max(0.1 * loud, 1e-4)
    covered = np.zeros(n, bool)
    for w in words:
        ws, we = (w[1], w[2]) if isinstance(w, tuple) else (w.start, w.end)
        covered[max(0, int((ws - margin) / FRAME_S)): int((we + margin) / FRAME_S) + 1] = True
    gaps, start = [], None
    for k, gap in enumerate(np.append(active & ~covered, False)):
        if gap and start is None:
            start = k
        elif not gap and start is not None:
            gaps.append((start * FRAME_S, k * FRAME_S))
            start = None
    merged: list[tuple[float, float]] = []  # short pauses inside a stretch (<= 0.5 s) join it
    for a, b in gaps:
        if merged and a - merged[-1][1] <= 0.5:
            merged[-1] = (merged[-1][0], b)
        else:
            merged.append((a, b))
    return [(a, b) for a, b in merged if b - a >= min_len]


class Transcriber:
    """Loads a Whisper model once; ``transcribe`` turns 16 kHz mono audio into a Transcript,
    ``recognize`` into a :class:`Recognition` (Whisper tags no entities). Safe to share
    between threads: one window is decoded at a time, because the decoding seeds its
    sampler through a process-wide seed."""

    def __init__(self, options: AsrOptions = AsrOptions()):
        self.options = options
        self.resolved: ResolvedModel = resolve_model(options.model)
        self._model = self._load()
        self._lock = threading.Lock()

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
            from deid_speech.asr.convert import load_openai_model  # applies stored alignment heads

            return load_openai_model(str(r.path), device=self.options.device)
        except ImportError as e:
            raise DeidError(f"ASR backend for {r.name} is not installed ({e.name}); run `make demo`") from None
        except Exception as e:
            raise DeidError(f"cannot load Whisper model {r.path}: {str(e).splitlines()[0] if str(e) else e}") from None

    def _decode(self, audio: np.ndarray, prompt: str | None = None) -> tuple[list[RawWord], list[tuple[float, float]]]:
        with self._lock:  # the seed is process-wide: set it and decode (lazy segments included) as one step
            return self._decode_unlocked(audio, prompt)

    def _decode_unlocked(self, audio: np.ndarray, prompt: str | None) -> tuple[list[RawWord], list[tuple[float, float]]]:
        o = self.options
        if self.resolved.kind == "ct2":
            # the temperature fallback samples: seed it from the audio, so the same input gives
            # the same transcript (and the same redaction) on every run
            import ctranslate2

            ctranslate2.set_random_seed(audio_seed(audio))
            segments, _ = self._model.transcribe(
                audio, language=o.language if self._multilingual() else None, beam_size=o.beam_size,
                word_timestamps=True, condition_on_previous_text=False, vad_filter=False,
                initial_prompt=prompt or None)
            words: list[RawWord] = []
            segs: list[tuple[float, float]] = []
            for s in segments:
                segs.append((s.start, s.end))
                words.extend((w.word, w.start, w.end, w.probability) for w in (s.words or []))
            return words, segs
        import torch

        torch.manual_seed(audio_seed(audio))
        result = self._model.transcribe(audio, language=o.language, beam_size=o.beam_size,
                                        word_timestamps=True, condition_on_previous_text=False,
                                        fp16=False, initial_prompt=prompt or None)
        words = [(w["word"], w["start"], w["end"], w.get("probability", 1.0))
                 for s in result["segments"] for w in s.get("words", [])]
        return words, [(s["start"], s["end"]) for s in result["segments"]]

    def _multilingual(self) -> bool:
        m = self._model
        return bool(getattr(m, "model", None) is not None and m.model.is_multilingual)

    def recognize(self, audio: np.ndarray, progress=None) -> Recognition:
        """The :class:`~deid_speech.types.Recognizer` protocol: a transcript, no spans."""
        return Recognition(self.transcribe(audio, progress))

    def transcribe(self, audio: np.ndarray, progress=None) -> Transcript:
        """Transcribe 16 kHz mono float32 audio. ``progress(done_s, total_s)`` if given."""
        if audio.ndim != 1:
            raise ValueError("transcribe expects mono 16 kHz audio")
        sr = MODEL_RATE
        cuts = cut_points(audio, sr, self.options.window_s)
        words: list[RawWord] = []
        segs: list[Span] = []
        failed: list[tuple[float, float]] = []
        for k in range(len(cuts) - 1):
            lo, hi = cuts[k], cuts[k + 1]
            # a window that loops ("-0 -0 -0 ...", ".co .co ...") is decoded again without the
            # previous words as its prompt (a loop must not be fed forward); if it still
            # loops, its words are dropped and its speech is left uncovered (redacted or failed
            # by the caller, never passed as checked)
            for prompt in (True, False):
                n, m = len(words), len(segs)
                self._decode_owned(audio, lo, hi, words, segs, prompt=prompt)
                if not hallucinated(words[n:], hi - lo):
                    break
                del words[n:], segs[m:]
            else:
                failed.append((lo, hi))
            if progress:
                progress(hi, cuts[-1])
        # second chance for speech that no word covers (Whisper skipped it): decode the
        # stretch alone, with the words before it as the prompt, which tiny.en needs to
        # recognise a short isolated phrase (seen on the shipped example)
        for a, b in uncovered_speech(audio, sr, words):
            if any(a < y and x < b for x, y in failed):
                continue
            n, m = len(words), len(segs)
            self._decode_owned(audio, a, b, words, segs)
            if hallucinated(words[n:], b - a):
                del words[n:], segs[m:]
        words.sort(key=lambda w: (w[1], w[2]))
        segs.sort()
        return Transcript.from_words(words, segments=segs)

    def _decode_owned(self, audio: np.ndarray, own_lo: float, own_hi: float,
                      words: list[RawWord], segs: list[Span], prompt: bool = True) -> None:
        """Decode [own_lo, own_hi] with overlap context; keep words whose midpoint is owned.
        ``prompt``: give the preceding words as the prompt."""
        sr, total = MODEL_RATE, len(audio) / MODEL_RATE
        lo = max(0.0, own_lo - self.options.overlap_s)
        hi = min(total, own_hi + self.options.overlap_s)
        before = [x[0] for x in words if x[2] <= own_lo + 1e-6][-PROMPT_WORDS:] if prompt else []
        w, s = self._decode(audio[int(lo * sr): int(hi * sr)], " ".join(t.strip() for t in before))
        last = own_hi >= total - 1e-6
        recent = [x for x in words[-40:] if x[2] > lo]  # kept words near this window's start
        for text, ws, we, p in w:
            ws, we = ws + lo, max(min(we + lo, total), ws + lo)
            mid = (ws + we) / 2
            if not (own_lo <= mid < own_hi or (last and mid >= own_hi)):
                continue
            # the same word decoded by both windows lands a little apart: keep it once
            if any(min(we, x[2]) - max(ws, x[1]) > 0.5 * min(we - ws, x[2] - x[1]) for x in recent):
                continue
            words.append((text, ws, we, p))
        for a, b in s:
            a, b = a + lo, min(b + lo, total)
            if b > own_lo and a < own_hi and b >= a:
                segs.append(Span(max(a, own_lo), min(b, own_hi), source="asr"))


class CachedTranscriber:
    """A :class:`Transcriber` whose transcripts are kept in a JSONL file, keyed by the
    audio's samples, the model's files and the decoding options, so the same audio is
    decoded once across runs (an experiment scores many NER models on one transcript of
    each test file). A last line cut short by an interrupted run is dropped. The model is loaded
    only when some audio is not in the cache yet."""

    def __init__(self, options: AsrOptions, path: Path):
        from deid_speech.asr.models import _identity

        self.options, self.path = options, Path(path)
        self.resolved: ResolvedModel = resolve_model(options.model)
        ident = json.dumps([_identity(str(self.resolved.path)), asdict(options)], sort_keys=True)
        self.model_key = hashlib.sha1(ident.encode()).hexdigest()[:16]
        self.items: dict[str, dict] = {}
        self.hits = self.misses = 0
        self._transcriber: Transcriber | None = None
        from deid_speech.manifest import read_resumable  # drops (and truncates away) a line cut short

        for d in read_resumable(self.path):
            if isinstance(d, dict) and {"model", "audio", "transcript"} <= set(d):
                self.items[f"{d['model']}:{d['audio']}"] = d["transcript"]

    @property
    def name(self) -> str:
        return self.resolved.name

    def _key(self, audio: np.ndarray) -> str:
        return hashlib.sha1(np.ascontiguousarray(audio, dtype=np.float32).tobytes()).hexdigest()

    def cached(self, audio: np.ndarray) -> Transcript | None:
        d = self.items.get(f"{self.model_key}:{self._key(audio)}")
        return Transcript.from_dict(d) if d is not None else None

    def recognize(self, audio: np.ndarray, progress=None) -> Recognition:
        return Recognition(self.transcribe(audio, progress))

    def transcribe(self, audio: np.ndarray, progress=None) -> Transcript:
        hit = self.cached(audio)
        if hit is not None:
            self.hits += 1
            return hit
        self.misses += 1
        if self._transcriber is None:
            self._transcriber = Transcriber(self.options)
        tr = self._transcriber.transcribe(audio, progress=progress)
        d, key = tr.to_dict(), self._key(audio)
        self.items[f"{self.model_key}:{key}"] = d
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"model": self.model_key, "audio": key, "transcript": d}) + "\n")
        return tr
