"""Voice activity: the Silero VAD model that faster-whisper ships (ONNX, run with
onnxruntime), as speech regions in seconds.

It decides which stretches of a call are decoded (windows are cut in its pauses and
stretches without speech are skipped) and which stretches count as speech that no
transcribed word covers (:func:`deid_speech.asr.whisper.uncovered_speech`). A privacy
tool would rather decode a pause than skip a word, so the threshold is lower than
Silero's own default (0.5) and every region is padded.

Silero is recurrent, and its state remembers what it heard: after minutes of one voice or
channel it can hear the next one as no speech at all. Carried over two minutes, it missed
3.9 % of the word time and 2.0 % of the entity time of the ten-minute call joined from four
dev calls (the first seconds of every call after a clean one), and 2.0 % / 2.3 % of the
benchmark's dev utterances (noisy telephone speech). With the state begun afresh every 10 s on
two grids half a block apart, each frame taking the larger of its two probabilities, it misses
none of the long call's and 1.0 % / 1.1 % of the utterances' (docs/results.md §0ai). Speech it
misses is neither decoded nor beeped as unchecked, so it leaks.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from deid_speech.errors import DeidError

RATE = 16000
FRAME = 512  # samples per Silero frame (32 ms at 16 kHz)
FRAME_S = FRAME / RATE
SUB_FRAMES = 250  # frames per ONNX call within a block (the LSTM state carried across calls)
CONTEXT = 64  # samples of the frame before that each frame is given


@dataclass(frozen=True)
class VadOptions:
    threshold: float = 0.3  # speech probability at or above which a frame is speech (Silero default: 0.5)
    pad_s: float = 0.3  # each region is widened by this much on both sides
    min_gap_s: float = 0.3  # regions closer than this are one region
    min_speech_s: float = 0.1  # shorter regions are dropped (clicks)
    block_s: float = 10.0  # the state begins afresh every block_s, on two grids half a block apart (see above)

    def __post_init__(self) -> None:
        if not self.block_s >= 2 * FRAME_S:
            raise ValueError(f"VAD block_s must be at least {2 * FRAME_S} s, got {self.block_s}")

    @property
    def block_frames(self) -> int:
        return max(2, round(self.block_s / FRAME_S))


class SileroVad:
    """The Silero model, loaded once (its file is checked like every model's). ``probs``
    gives one speech probability per 32 ms frame; ``regions`` the padded speech
    regions. Safe to share between threads (the ONNX session is locked)."""

    def __init__(self, options: VadOptions = VadOptions()):
        from deid_speech import models

        self.options = options
        path = models.path("silero-vad")
        try:
            from faster_whisper.vad import SileroVADModel
        except ImportError as e:
            raise DeidError(f"the voice activity detector needs faster-whisper and onnxruntime ({e.name}); "
                            "run `make demo`") from None
        try:
            self._model = SileroVADModel(str(path))
        except Exception as e:
            raise DeidError(f"cannot load the Silero VAD model {path}: {str(e).splitlines()[0] if str(e) else e}") from None
        self._lock = threading.Lock()

    def probs(self, audio: np.ndarray) -> np.ndarray:
        """Speech probability of each 32 ms frame of 16 kHz mono ``audio`` (the last frame
        zero-padded): the larger of two grids of blocks of ``block_s``, each block begun
        afresh, the second grid starting half a block in (module doc). ``audio`` is read a
        block at a time: an array, or a track read by slices such as the verifier's dithered
        track (:class:`deid_speech.audio.DitheredTrack`), which is never made whole here."""
        if not hasattr(audio, "__getitem__") or not hasattr(audio, "ndim"):
            audio = np.asarray(audio, dtype=np.float32)
        if audio.ndim != 1:
            raise ValueError("the VAD expects mono 16 kHz audio")
        block, half = self.options.block_frames, self.options.block_frames // 2
        with self._lock:
            out = self._grid(audio, block, 0)
            if len(out) > half:
                np.maximum(out[half:], self._grid(audio, block, half * FRAME), out=out[half:])
        return out

    def _grid(self, audio: np.ndarray, block: int, start: int) -> np.ndarray:
        """Probabilities of every frame of ``audio[start:]``, in blocks of ``block`` frames,
        each begun afresh."""
        n = max(0, len(audio) - start)
        out = np.zeros(-(-n // FRAME), np.float32)
        step = block * FRAME
        for k in range(0, n, step):
            part = np.asarray(audio[start + k: start + min(k + step, n)], dtype=np.float32)
            p = self._block_probs(np.pad(part, (0, -len(part) % FRAME)))
            out[k // FRAME: k // FRAME + len(p)] = p
        return out

    def _block_probs(self, block: np.ndarray) -> np.ndarray:
        """What faster-whisper's ``SileroVADModel(block)`` gives (each frame with the last
        :data:`CONTEXT` samples of the frame before it, the LSTM state carried from frame to
        frame), run :data:`SUB_FRAMES` frames per ONNX call with the state carried between
        calls: the same probabilities bit for bit, without the model's activations for two
        minutes of frames at once (about 45 MB)."""
        frames = block.reshape(-1, FRAME)  # ``block`` is this method's own (np.pad's copy)
        frames[-1, -CONTEXT:] = 0.0  # as faster-whisper does (its context view zeroes the last frame's tail)
        context = np.roll(frames[:, -CONTEXT:], 1, axis=0)
        h = np.zeros((1, 1, 128), np.float32)
        c = np.zeros((1, 1, 128), np.float32)
        out = []
        for i in range(0, len(frames), SUB_FRAMES):
            batch = np.concatenate([context[i: i + SUB_FRAMES], frames[i: i + SUB_FRAMES]], axis=1)
            p, h, c = self._model.session.run(None, {"input": batch, "h": h, "c": c})
            out.append(np.asarray(p).reshape(-1))
        return np.concatenate(out) if out else np.zeros(0, np.float32)

    def regions(self, audio: np.ndarray) -> list[tuple[float, float]]:
        """Speech regions (seconds) of 16 kHz mono ``audio``."""
        return regions_from_probs(self.probs(audio), len(audio) / RATE, self.options)


def regions_from_probs(probs: np.ndarray, duration: float, o: VadOptions = VadOptions()) -> list[tuple[float, float]]:
    """Frames at or above the threshold, as regions padded by ``pad_s`` (clipped to the
    audio), joined across gaps under ``min_gap_s``, regions under ``min_speech_s`` (before
    padding) dropped."""
    active = np.append(np.asarray(probs) >= o.threshold, False)
    raw, start = [], None
    for k, on in enumerate(active):
        if on and start is None:
            start = k
        elif not on and start is not None:
            if (k - start) * FRAME_S >= o.min_speech_s:
                raw.append((start * FRAME_S, k * FRAME_S))
            start = None
    out: list[tuple[float, float]] = []
    for a, b in raw:
        a, b = max(0.0, a - o.pad_s), min(duration, b + o.pad_s)
        if out and a - out[-1][1] < o.min_gap_s:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        elif b > a:
            out.append((a, b))
    return out


_shared: dict[VadOptions, SileroVad] = {}
_shared_lock = threading.Lock()


def shared(options: VadOptions = VadOptions()) -> CachedVad:
    """One VAD per process and options, remembering its last results: the recogniser and
    the uncovered-speech check of the same call ask for the same regions."""
    with _shared_lock:
        if options not in _shared:
            _shared[options] = CachedVad(SileroVad(options))
        return _shared[options]


class CachedVad:
    """A :class:`SileroVad` whose ``regions`` remembers the last few audios (by a hash of
    their samples)."""

    def __init__(self, vad: SileroVad, keep: int = 4):
        self.vad, self.keep = vad, keep
        self._memo: dict[bytes, list[tuple[float, float]]] = {}
        self._lock = threading.Lock()

    def regions(self, audio: np.ndarray) -> list[tuple[float, float]]:
        import hashlib

        fingerprint = getattr(audio, "fingerprint", None)  # a track read by slices names itself
        key = fingerprint() if callable(fingerprint) else hashlib.sha1(
            np.ascontiguousarray(audio, dtype=np.float32).data).digest()
        with self._lock:
            if key in self._memo:
                return list(self._memo[key])
        found = self.vad.regions(audio)
        with self._lock:
            self._memo[key] = found
            while len(self._memo) > self.keep:
                self._memo.pop(next(iter(self._memo)))
        return list(found)
