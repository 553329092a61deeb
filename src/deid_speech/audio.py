"""Audio I/O: read any rate/channel count, a 16 kHz mono view for the models, and a
writer that keeps the input's rate, channels, length and container, atomically."""
from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from deid_speech.errors import DeidError

MODEL_RATE = 16000
EXTENSIONS = (".wav", ".flac", ".ogg", ".mp3")
# containers libsndfile cannot read or write: decoded with PyAV (installed with faster-whisper),
# redacted into FLAC ("call.m4a" -> "call.redacted.flac")
TRANSCODED = (".m4a", ".aac", ".amr", ".wma", ".mp4", ".3gp", ".webm", ".mka", ".opus")


@dataclass(frozen=True)
class Audio:
    """Samples as float32 ``(frames, channels)`` plus what is needed to write them back."""

    samples: np.ndarray
    sample_rate: int
    format: str = "WAV"
    subtype: str | None = None

    @property
    def channels(self) -> int:
        return self.samples.shape[1]

    @property
    def duration(self) -> float:
        return self.samples.shape[0] / self.sample_rate

    def mono16k(self) -> np.ndarray:
        """Mixdown to mono and resample to 16 kHz float32, for detection."""
        return resample(self.samples.mean(axis=1), self.sample_rate, MODEL_RATE)

    def tracks16k(self) -> list[tuple[int | None, np.ndarray]]:
        """What detection listens to: each distinct channel on its own at 16 kHz (a channel
        equal to an earlier one, or to its negation, is heard once), or the one channel of a
        mono file (``None``).
        Never the mixdown alone: two channels can cancel in the mix (right = minus left),
        and two talkers on two channels mask each other in it."""
        kept: list[int] = []
        for k in range(self.channels):
            x = self.samples[:, k]
            if not any(_same_channel(x, self.samples[:, j]) for j in kept):
                kept.append(k)
        if len(kept) == 1:
            return [(None, resample(self.samples[:, 0], self.sample_rate, MODEL_RATE))]
        return [(k, resample(self.samples[:, k], self.sample_rate, MODEL_RATE)) for k in kept]


MIN_RATE, MAX_RATE, MAX_CHANNELS = 4000, 384000, 32


def _ratio(sr_in: int, sr_out: int) -> tuple[int, int]:
    """(up, down) of a resampling; an odd rate ("44101 Hz") is taken at the nearest ratio
    with a denominator up to 1000 (a pitch error under 0.1 %), so the filter, and the
    memory it needs, stays small whatever the header says."""
    from fractions import Fraction

    r = Fraction(sr_out, sr_in).limit_denominator(1000)
    return r.numerator, r.denominator


def _blocks(n: int, sr_in: int, down: int, block_s: float, align: int = 1):
    """``(s, e, lo, hi)``: blocks [s, e) of about ``block_s`` seconds (multiples of ``down``
    and ``align`` samples) and the stretch [lo, hi) to read for each: the block with the
    context that scipy's polyphase filter (10 taps per side and phase) reaches."""
    from math import lcm

    unit = lcm(down, align)
    block = max(unit, int(block_s * sr_in) // unit * unit)
    pad = -(-(10 * max(down, 1) + 2) // down) * down
    for s in range(0, n, block):
        e = min(n, s + block)
        yield s, e, max(0, s - pad), min(n, e + pad)


def _resample_part(y: np.ndarray, s: int, e: int, lo: int, up: int, down: int, out_len: int) -> tuple[int, np.ndarray]:
    """The output samples of input block [s, e) from ``y`` (input [lo, ...), context
    included): (first output index, samples)."""
    from scipy.signal import resample_poly

    r = resample_poly(np.asarray(y, dtype=np.float32), up, down, axis=0)
    first, o = (s - lo) * up // down, s * up // down
    count = min(out_len, -(-e * up // down)) - o
    return o, r[first:first + count].astype(np.float32, copy=False)


def resample(x: np.ndarray, sr_in: int, sr_out: int, block_s: float = 60.0) -> np.ndarray:
    """Polyphase resampling (:func:`_ratio`), ``block_s`` seconds of input at a time, each
    block with enough context on both sides for the filter: the result equals one pass
    over the whole signal, and memory does not grow with it."""
    if sr_in == sr_out:
        return np.asarray(x, dtype=np.float32)
    up, down = _ratio(sr_in, sr_out)
    n = len(x)
    out = np.empty(-(-n * up // down), np.float32)
    for s, e, lo, hi in _blocks(n, sr_in, down, block_s):
        o, part = _resample_part(x[lo:hi], s, e, lo, up, down, len(out))
        out[o:o + len(part)] = part
    return out


QUIET_DBFS = -45.0  # speech this quiet is raised before recognition
TARGET_DBFS = -25.0
QUIET_STRETCH_DB = 15.0  # a stretch this far under the call's level ...
QUIET_STRETCH_OVER_FLOOR_DB = 20.0  # ... that holds sound this far over its floor is raised (quiet_stretches)
QUIET_STRETCH_SPREAD_DB = 10.0  # ... and rises and falls as speech does (hiss holds its level)
QUIET_STRETCH_MIN_S = 1.0
QUIET_STRETCH_SOUND_S = 0.5
QUIET_STRETCH_MAX_GAIN_DB = 60.0
DC_MAX = 1e-3  # a constant offset larger than this (-60 dBFS) is taken off before recognition (for_recognition)
DITHER = 1e-4  # amplitude of :func:`dither` (-80 dBFS; about 55 dB under speech at TARGET_DBFS)


def dither(x: np.ndarray, seed: int, amplitude: float = DITHER, block: int = 1 << 20,
           out: np.ndarray | None = None) -> np.ndarray:
    """``x`` plus Gaussian noise of ``amplitude`` drawn from ``seed`` (float32). Inaudible,
    yet it changes what Whisper writes for noisy audio, whose decoding is chaotic: a second
    decoding of the dithered audio misses other entities than the first
    (``pipeline.Redactor.verify``; ``bench/dither.py`` measures the spread with it). The
    draws are those of one call, made ``block`` samples at a time (no float64 copy of a long
    call); ``out=x`` dithers in place, with the same values. One stream for both: this is
    :class:`DitheredTrack` read whole."""
    return DitheredTrack(x, seed, amplitude, block).read(0, len(x), out)


class DitheredTrack:
    """``dither(x, seed)`` without a dithered copy of the whole of ``x``: each slice is
    dithered when it is read, with the very values :func:`dither` gives it. The noise is one
    stream of Gaussian draws; the generator's state is noted at each ``block`` of samples the
    first time the stream passes it, so a slice costs the draws of the blocks it touches.

    It is what the verifier's dithered pass hears in the helper process
    (:mod:`deid_speech.asr.helper`), whose track is shared with this process and never
    written: a 21-minute track is 78 MB, and a dithered copy of it would be 78 MB more.
    The Whisper transcriber reads its audio by slices (windows, seek pieces, the
    uncovered-speech pass), and so does the voice activity detector, a block at a time,
    which remembers its regions under :meth:`fingerprint`."""

    ndim = 1
    dtype = np.dtype(np.float32)

    def __init__(self, x: np.ndarray, seed: int, amplitude: float = DITHER, block: int = 1 << 20):
        if x.ndim != 1:
            raise ValueError("DitheredTrack expects a mono track")
        self.x, self.seed, self.amplitude, self.block = x, seed, amplitude, block
        self._rng = np.random.default_rng(seed)
        self._at = 0  # the block the generator draws next
        self._states = [self._rng.bit_generator.state]  # the generator's state at each block start reached
        self._last: tuple[int, np.ndarray] | None = None  # the last block's noise

    def __len__(self) -> int:
        return len(self.x)

    @property
    def shape(self) -> tuple[int]:
        return (len(self.x),)

    def _noise(self, j: int) -> np.ndarray:
        """The draws of block ``j`` (float64, as :func:`dither` adds them)."""
        if self._last is not None and self._last[0] == j:
            return self._last[1]
        k = min(j, len(self._states) - 1)  # the nearest noted state at or before block j
        if j < self._at or k > self._at:
            self._rng.bit_generator.state = self._states[k]
            self._at = k
        while True:  # on to block j, noting the states passed
            noise = self._rng.standard_normal(max(0, min(self.block, len(self.x) - self._at * self.block)))
            self._at += 1
            if self._at == len(self._states):
                self._states.append(self._rng.bit_generator.state)
            if self._at - 1 == j:
                self._last = (j, noise)
                return noise

    def read(self, a: int, b: int, out: np.ndarray | None = None) -> np.ndarray:
        """Samples ``[a, b)`` dithered, into ``out`` (``b - a`` long; it may be ``x[a:b]``
        itself) or a new float32 array."""
        out = np.empty(max(0, b - a), np.float32) if out is None else out
        for j in range(a // self.block, -(-b // self.block)) if b > a else ():
            s, e = max(a, j * self.block), min(b, (j + 1) * self.block)
            out[s - a: e - a] = self.x[s:e] + self.amplitude * self._noise(j)[s - j * self.block: e - j * self.block]
        return out

    def __getitem__(self, key) -> np.ndarray:
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("a DitheredTrack is read by slices with step 1")
        a, b, _ = key.indices(len(self.x))
        return self.read(a, b)

    def fingerprint(self) -> bytes:
        """What the track holds, as a key (the VAD's memory): a hash of the samples it
        dithers, the seed and the amplitude (the block changes no value), not of a dithered
        copy."""
        import hashlib

        h = hashlib.sha1(np.ascontiguousarray(self.x, dtype=np.float32).data)
        h.update(repr((self.seed, float(self.amplitude))).encode())
        return b"dithered:" + h.digest()

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        whole = self[:]
        return whole if dtype is None else whole.astype(dtype, copy=False)


def verifier_pass(x: np.ndarray, k: int) -> np.ndarray:
    """What the verifier's pass ``k`` hears: the audio itself for pass 0, else the audio with
    the dither of seed ``k``."""
    return x if k == 0 else dither(x, k)


def dc_offset(x: np.ndarray, sr: int = MODEL_RATE) -> float:
    """The constant offset of ``x``: the median of its one-second means (the mean of all of
    it when it is shorter). Speech's own low frequencies average out over a second, and the
    median passes over the odd second that a loud low sound (a pop, a bump) moves."""
    n = len(x) // sr
    if n == 0:
        return float(np.mean(x, dtype=np.float64)) if len(x) else 0.0
    return float(np.median([np.mean(x[k * sr:(k + 1) * sr], dtype=np.float64) for k in range(n)]))


def for_recognition(x: np.ndarray, sr: int = MODEL_RATE) -> np.ndarray:
    """``x`` as the recogniser and the voice activity detector hear it: a constant offset
    larger than :data:`DC_MAX` taken off (:func:`dc_offset`), then quiet audio raised to a
    speech level the recogniser hears (level of the loudest 10 % of 50 ms frames under
    :data:`QUIET_DBFS` -> :data:`TARGET_DBFS`, peaks kept under 0.99), then a passage far
    quieter than the rest of the call raised to the call's level (:func:`quiet_stretches`).
    Audio with no such offset at a normal level and no such passage, or digital silence, is
    returned as it is.

    The offset matters because the Silero VAD misses speech under one: with 0.005 (-46 dBFS)
    added, it covered 96.5 % of the word time of 60 dev utterances against 100 %, down to 43 %
    of one utterance, and speech it misses is neither decoded nor beeped as unchecked
    (docs/results.md §0az). An offset also hides quiet speech from the level check."""
    offset = dc_offset(x, sr)
    if abs(offset) > DC_MAX:
        x = np.asarray(x, dtype=np.float32) - np.float32(offset)
    rms = frame_rms(x, sr, 0.05)
    if rms.size == 0:
        return x
    level = float(np.percentile(rms, 90))
    if level <= 0:
        return x
    if 20 * np.log10(level) < QUIET_DBFS:
        gain = min(10 ** ((TARGET_DBFS - 20 * np.log10(level)) / 20), 0.99 / max(float(np.abs(x).max()), 1e-12))
        x = (x * gain).astype(np.float32)
    stretches = quiet_stretches(x, sr)
    return _raise_stretches(x, stretches, sr) if stretches else x


def quiet_stretches(x: np.ndarray, sr: int = MODEL_RATE, frame_s: float = 0.05) -> list[tuple[int, int, float]]:
    """Stretches of ``x`` far quieter than the rest that still hold sound, as ``(start, end,
    gain)`` in samples, ``gain`` the factor that brings them to the call's level
    (:func:`for_recognition` applies it).

    In 50 ms frames, each frame's mean taken off: the call's level is that of its loudest
    10 % of frames, its floor that of its quietest 5 %. A run of at least
    :data:`QUIET_STRETCH_MIN_S` of frames at least :data:`QUIET_STRETCH_DB` under the level
    is a quiet stretch when at least :data:`QUIET_STRETCH_SOUND_S` of it is
    :data:`QUIET_STRETCH_OVER_FLOOR_DB` over the floor, and that sound rises and falls as
    speech does (its loudest and quietest tenth of frames :data:`QUIET_STRETCH_SPREAD_DB`
    apart; a pause's hiss or hum holds its level). The run is bounded by loud frames, so it
    takes in the pauses around the quiet passage and nothing of it is lost at its edges; its
    first and last frame are left out (they may hold the edge of the loud speech beside it).

    An NRIC turned down by 50 dB inside a call at a normal level was neither decoded nor
    beeped: the voice activity detector heard no speech there; a caller 28 dB under the
    agent lost 1.8 % of the entity time to it (docs/results.md §0be). Pauses hold nothing
    over the floor, and a noisy line leaves little room between floor + 20 dB and
    level - 15 dB, so no recording of the unseen-voice benchmark or the real-speech sets
    has such a stretch (``bench/quiet_passage.py``); a passage quieter than the line's
    noise is heard by no one. The gain brings the loudest 10 % of the stretch's sound
    frames to the call's level, at most :data:`QUIET_STRETCH_MAX_GAIN_DB`."""
    n = max(1, int(round(frame_s * sr)))
    rms = frame_rms(x, sr, frame_s, centred=True)
    if rms.size == 0:
        return []
    db = 20 * np.log10(np.maximum(rms, 1e-6))
    level, floor = float(np.percentile(db, 90)), float(np.percentile(db, 5))
    if level - floor < QUIET_STRETCH_DB + QUIET_STRETCH_OVER_FLOOR_DB:
        return []
    quiet = np.concatenate([[False], db <= level - QUIET_STRETCH_DB, [False]])
    edges = np.flatnonzero(np.diff(quiet.astype(np.int8)))
    out = []
    for a, b in zip(edges[::2], edges[1::2]):
        run = db[a:b]
        sound = run[run >= floor + QUIET_STRETCH_OVER_FLOOR_DB]
        if (b - a) * frame_s < QUIET_STRETCH_MIN_S or len(sound) * frame_s < QUIET_STRETCH_SOUND_S:
            continue
        if float(np.percentile(sound, 90) - np.percentile(sound, 10)) < QUIET_STRETCH_SPREAD_DB:
            continue  # a steady sound (hiss, hum): a pause, not a passage
        gain_db = min(level - float(np.percentile(sound, 90)), QUIET_STRETCH_MAX_GAIN_DB)
        # the frames at its edges may hold the start or the end of the loud speech beside it
        start = (a + 1) * n if a > 0 else 0
        end = len(x) if b == len(db) else (b - 1) * n  # a partial last frame goes with the run it ends
        out.append((int(start), int(end), float(10 ** (gain_db / 20))))
    return out


def _raise_stretches(x: np.ndarray, stretches: list[tuple[int, int, float]], sr: int) -> np.ndarray:
    """A copy of ``x`` with each stretch's own offset taken off and the stretch multiplied by
    its gain, the gain ramped in and out over 20 ms inside the stretch (no click at its
    edges), peaks kept under 0.99."""
    y = np.array(x, dtype=np.float32)
    ramp = max(1, int(0.02 * sr))
    for a, b, gain in stretches:
        part = y[a:b].astype(np.float64)
        part -= part.mean() if len(part) else 0.0  # its own offset, which the call's may not be
        peak = float(np.abs(part).max()) if len(part) else 0.0
        gain = min(gain, 0.99 / peak) if peak > 0 else gain
        g = np.full(len(part), gain)
        k = min(ramp, len(part) // 2)
        if k:
            up = np.linspace(1.0, gain, k, endpoint=False)
            g[:k], g[len(part) - k:] = up, up[::-1]
        y[a:b] = (part * g).astype(np.float32)
    return y


def frame_rms(audio: np.ndarray, sr: int, frame_s: float = 0.01, centred: bool = False) -> np.ndarray:
    """RMS of consecutive non-overlapping frames of ``frame_s`` seconds (a partial last
    frame is dropped; ``centred``: each frame's mean taken off first, so an offset is not
    counted as sound); a 2-D ``(frames, channels)`` array is mixed down first. Computed a
    million samples at a time, so memory does not grow with the signal."""
    n = max(1, int(round(frame_s * sr)))
    count = len(audio) // n
    out = np.empty(count, np.float32)
    step = max(1, (1 << 20) // n)
    for k in range(0, count, step):
        seg = np.asarray(audio[k * n: min(count, k + step) * n], dtype=np.float64)
        if seg.ndim == 2:
            seg = seg.mean(axis=1)
        frames = seg.reshape(-1, n)
        out[k: k + len(seg) // n] = frames.std(axis=1) if centred else np.sqrt((frames ** 2).mean(axis=1))
    return out


def all_finite(x: np.ndarray, block: int = 1 << 20) -> bool:
    """Whether every sample is finite, checked a block at a time."""
    return all(np.isfinite(x[k: k + block]).all() for k in range(0, len(x), block))


def _same_channel(x: np.ndarray, y: np.ndarray, block: int = 1 << 20) -> bool:
    """``x`` equals ``y`` or its negation (a block at a time)."""
    same = neg = True
    for k in range(0, len(x), block):
        a, b = x[k: k + block], y[k: k + block]
        same = same and np.array_equal(a, b)
        neg = neg and np.array_equal(a, -b)
        if not (same or neg):
            return False
    return True


def _check_file(p: Path):
    """The soundfile info of ``p``, or None for a container PyAV must decode; a one-line
    DeidError for anything unusable."""
    import soundfile as sf

    if not p.exists():
        raise DeidError(f"{p}: no such file")
    if p.is_dir():
        raise DeidError(f"{p}: is a directory, not an audio file")
    if p.stat().st_size == 0:
        raise DeidError(f"{p}: empty file (0 bytes)")
    try:
        with open(p, "rb") as fh:  # a file object: non-UTF-8 names work too
            info = sf.info(fh)
    except Exception as e:  # soundfile raises LibsndfileError/RuntimeError/TypeError
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        if p.suffix.lower() in TRANSCODED:
            return None
        raise DeidError(f"{p}: cannot read audio ({msg})") from None
    # a header that lies (one flipped bit: 129 channels, 1,000,003 Hz) fails here, not open
    if not MIN_RATE <= info.samplerate <= MAX_RATE:
        raise DeidError(f"{p}: the header claims {info.samplerate} Hz; speech audio is {MIN_RATE}-{MAX_RATE} Hz "
                        "(a damaged or mislabelled file?)")
    if not 1 <= info.channels <= MAX_CHANNELS:
        raise DeidError(f"{p}: the header claims {info.channels} channels (at most {MAX_CHANNELS}; "
                        "a damaged or mislabelled file?)")
    return info


def load(path: str | os.PathLike) -> Audio:
    """Read an audio file; raise DeidError with a one-line reason for anything unusable."""
    import soundfile as sf

    p = Path(path)
    info = _check_file(p)
    if info is None:
        return _load_with_av(p)
    if info.frames >= 2**62:  # a legal stream of unknown length (FLAC total_samples = 0): decode to the end
        return _load_with_av(p, *_written_as(p, info.format, info.subtype))
    try:
        with open(p, "rb") as fh:
            data, sr = sf.read(fh, dtype="float32", always_2d=True)
    except Exception as e:  # soundfile raises LibsndfileError/RuntimeError/TypeError
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise DeidError(f"{p}: cannot read audio ({msg})") from None
    if data.shape[0] == 0:
        raise DeidError(f"{p}: audio has zero length")
    if not all_finite(data):
        raise DeidError(f"{p}: audio contains NaN or infinite samples")
    return Audio(data, int(sr), *_written_as(p, info.format, info.subtype))


def _written_as(p: Path, fmt: str, subtype: str | None) -> tuple[str, str | None]:
    """The format and subtype the redacted copy of ``p`` is written in: the input's own, but
    FLAC for a :data:`TRANSCODED` name even where libsndfile reads the file itself (an
    ".opus" file is Ogg Opus to it), since the output is named ``.flac``
    (:func:`deid_speech.pipeline.output_paths`)."""
    return ("FLAC", "PCM_16") if p.suffix.lower() in TRANSCODED else (fmt, subtype)


@dataclass(frozen=True)
class AudioFile:
    """A file libsndfile reads with a known length, read a block at a time, so a long
    call never sits in memory at its own rate: :meth:`tracks16k` reads it once for
    detection, :meth:`write_redacted` once more to write the redacted copy."""

    path: Path
    frames: int
    sample_rate: int
    channels: int
    format: str
    subtype: str | None

    BLOCK_S = 60.0

    @property
    def duration(self) -> float:
        return self.frames / self.sample_rate

    @classmethod
    def open(cls, path: str | os.PathLike) -> AudioFile | None:
        """The file, checked; None where it must be decoded whole (PyAV containers, a
        stream of unknown length): use :func:`load`."""
        p = Path(path)
        info = _check_file(p)
        if info is None or info.frames >= 2**62:
            return None
        if info.frames == 0:
            raise DeidError(f"{p}: audio has zero length")
        return cls(p, int(info.frames), int(info.samplerate), int(info.channels), *_written_as(p, info.format, info.subtype))

    def _blocks(self, align: int = 1):
        """``(s, e, lo, hi, samples of [lo, hi))`` in order: blocks with resampling context.
        The file is read straight through, never seeking: a block's context before it is
        the end of the block before (libsndfile cannot seek in some codecs, GSM 6.10 WAV
        among them, the format of many call recorders)."""
        import soundfile as sf

        down = _ratio(self.sample_rate, MODEL_RATE)[1]
        try:
            with open(self.path, "rb") as fh, sf.SoundFile(fh) as f:
                tail_lo, tail = 0, np.zeros((0, self.channels), np.float32)  # the last block's end, as read
                for s, e, lo, hi in _blocks(self.frames, self.sample_rate, down, self.BLOCK_S, align):
                    pos = tail_lo + len(tail)
                    if lo < tail_lo:  # _blocks' context reaches back less than it reaches ahead
                        raise RuntimeError(f"block context from {lo} reaches back past {tail_lo}")
                    new = f.read(hi - pos, dtype="float32", always_2d=True)
                    if len(new) != hi - pos:
                        raise DeidError(f"{self.path}: the file ends early ({pos + len(new)} of {self.frames} frames)")
                    y = np.concatenate([tail[lo - tail_lo:], new]) if lo < pos else new
                    # kept before the caller may beep into the block: the next block's context, as read
                    cut = max(0, (e - lo) - (hi - e))
                    tail_lo, tail = lo + cut, y[cut:].copy()
                    yield s, e, lo, hi, y
        except DeidError:
            raise
        except Exception as e:
            raise DeidError(f"{self.path}: cannot read audio ({str(e).splitlines()[0] if str(e) else e})") from None

    def tracks16k(self) -> tuple[Iterator[tuple[int | None, np.ndarray]], float]:
        """What :meth:`Audio.tracks16k` gives (each distinct channel at 16 kHz), as an
        iterator, and the speech level of the mixdown (:func:`deid_speech.redact.speech_level`).
        The file is read once to find its distinct channels and level, keeping the first
        channel's track, and once more for each further distinct channel when the caller
        comes to it: one 16 kHz track at a time is in memory (the caller lets go of each
        before asking for the next)."""
        first, kept, level = self._first_pass()
        box = [first]  # handed on by pop: nothing here holds a track while the caller works on it
        del first

        def tracks():
            for k in kept:
                yield (None if len(kept) == 1 else k), (box.pop() if k == kept[0] else self._channel16k(k))

        return tracks(), level

    def _first_pass(self) -> tuple[np.ndarray, list[int], float]:
        """Channel 0 at 16 kHz, the distinct channels (one equal to an earlier one, or to its
        negation, is heard once) and the mixdown's speech level, in one read."""
        from deid_speech.redact import level_from_frames

        ch = self.channels
        track = self._empty16k()
        same = np.ones((ch, ch), bool)  # same[j, k]: channel k equals channel j so far
        neg = np.ones((ch, ch), bool)  # ... or its negation
        rms: list[np.ndarray] = []
        for s, e, lo, _hi, y in self._blocks(align=self._frame):
            core = y[s - lo: e - lo]
            if not all_finite(core):
                raise DeidError(f"{self.path}: audio contains NaN or infinite samples")
            for k in range(ch):
                for j in range(k):
                    same[j, k] = same[j, k] and np.array_equal(core[:, k], core[:, j])
                    neg[j, k] = neg[j, k] and np.array_equal(core[:, k], -core[:, j])
            rms.append(frame_rms(core, self.sample_rate, 0.02))
            self._put16k(track, s, e, lo, y[:, :1])
        kept: list[int] = []
        for k in range(ch):
            if not any(same[j, k] or neg[j, k] for j in kept):
                kept.append(k)
        level = level_from_frames(np.concatenate(rms) if rms else np.zeros(0, np.float32))
        return track, kept, level

    def _channel16k(self, k: int) -> np.ndarray:
        """Channel ``k`` at 16 kHz, read again from the file."""
        track = self._empty16k()
        for s, e, lo, _hi, y in self._blocks(align=self._frame):  # the first pass's blocks
            self._put16k(track, s, e, lo, y[:, k: k + 1])
        return track

    @property
    def _frame(self) -> int:
        """Samples per 20 ms level frame: blocks are whole frames."""
        return max(1, int(round(0.02 * self.sample_rate)))

    def _empty16k(self) -> np.ndarray:
        up, down = _ratio(self.sample_rate, MODEL_RATE)
        return np.empty(-(-self.frames * up // down), np.float32)

    def _put16k(self, track: np.ndarray, s: int, e: int, lo: int, y: np.ndarray) -> None:
        """Block ``[s, e)`` of one channel (``y``: its samples from ``lo``, with context), at
        16 kHz, into ``track``."""
        up, down = _ratio(self.sample_rate, MODEL_RATE)
        if up == down == 1:
            track[s:e] = y[s - lo: e - lo, 0]
            return
        o, part = _resample_part(y, s, e, lo, up, down, len(track))
        track[o:o + len(part)] = part[:, 0]

    def write_redacted(self, out: str | os.PathLike, spans, options, level: float) -> None:
        """The redacted copy (same rate, channels, length, container), written atomically
        a block at a time: :func:`deid_speech.redact.region_fills` over each block. A
        region's fill is made when the first block it reaches is written, and let go after
        its last: the beeps of a long call (at its own rate) are never all in memory."""
        from deid_speech.redact import region_fills

        fills = region_fills(spans, options, self.sample_rate, self.frames, max(level, 0.01))  # in order

        def blocks():
            live: list = []  # the regions that reach into this block or beyond
            upcoming = next(fills, None)
            for s, e, lo, _hi, y in self._blocks():
                while upcoming is not None and upcoming[0] < e:
                    live.append(upcoming)
                    upcoming = next(fills, None)
                core = y[s - lo: e - lo]
                for a, b, fill in live:
                    if a < e and b > s:
                        x, z = max(a, s), min(b, e)
                        core[x - s: z - s, :] = 0.0 if fill is None else fill[x - a: z - a, None]
                live = [r for r in live if r[1] > e]
                yield core

        _write_blocks(Path(out), self.sample_rate, self.channels, self.format, self.subtype, blocks())


def _load_with_av(p: Path, fmt: str = "FLAC", subtype: str | None = "PCM_16") -> Audio:
    """Decode with PyAV what libsndfile cannot read (m4a/aac/amr/..., or a stream whose
    header does not say its length); the redacted output is written as ``fmt``/``subtype``
    (16-bit FLAC by default) at the same rate and channel count."""
    try:
        import av

        with av.open(str(p)) as c:
            stream = c.streams.audio[0]
            sr, ch = stream.rate, stream.channels
            if not MIN_RATE <= sr <= MAX_RATE or not 1 <= ch <= MAX_CHANNELS:
                raise DeidError(f"{p}: the container claims {sr} Hz, {ch} channels (a damaged file?)")
            frames = [f.to_ndarray() for f in c.decode(stream)]
    except DeidError:
        raise
    except Exception as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise DeidError(f"{p}: cannot decode audio ({msg})") from None
    if not frames:
        raise DeidError(f"{p}: audio has zero length")
    # planar (channels, n) or packed (1, n * channels) per frame
    parts = [f.reshape(ch, -1) if f.shape[0] == ch else f.reshape(-1, ch).T for f in frames]
    data = np.concatenate(parts, axis=1).T.astype(np.float32)
    if np.issubdtype(frames[0].dtype, np.integer):
        data /= float(np.iinfo(frames[0].dtype).max)
    if not np.isfinite(data).all():
        raise DeidError(f"{p}: audio contains NaN or infinite samples")
    return Audio(np.ascontiguousarray(data), int(sr), fmt, subtype)


def umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def save(audio: Audio, path: str | os.PathLike) -> None:
    """Write atomically (temp file in the same folder, then rename), a block at a time."""
    block = 1 << 18
    _write_blocks(Path(path), audio.sample_rate, audio.channels, audio.format, audio.subtype,
                  (audio.samples[k: k + block] for k in range(0, len(audio.samples), block)))


FLOAT_SUBTYPES = frozenset({"FLOAT", "DOUBLE"})  # samples written as they are, beyond full scale too


def _write_blocks(p: Path, sample_rate: int, channels: int, fmt: str, subtype: str | None, blocks) -> None:
    """Write ``blocks`` (float32 ``(frames, channels)``) to a temporary file beside ``p``,
    then rename it over ``p``; nothing is left behind on failure. Clipped to [-1, 1] unless
    the file keeps floats: a float WAV may hold samples beyond full scale, and its copy keeps
    them outside the redactions (they were clipped, so 9 % of a hot file's samples changed)."""
    import soundfile as sf

    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=p.suffix, dir=p.parent)
    os.close(fd)
    try:
        with open(tmp, "wb") as fh, sf.SoundFile(fh, "w", sample_rate, channels, subtype, format=fmt) as out:
            floats = subtype in FLOAT_SUBTYPES
            for b in blocks:  # a file object: non-UTF-8 names work too
                out.write(b if floats else np.clip(b, -1.0, 1.0))
        os.chmod(tmp, umask_mode())  # mkstemp makes 0600; outputs get the usual permissions
        os.replace(tmp, p)
    except BaseException as e:  # Ctrl-C and SIGTERM too: never leave a temporary file behind
        Path(tmp).unlink(missing_ok=True)
        if not isinstance(e, Exception):
            raise
        if isinstance(e, DeidError):
            raise
        raise DeidError(f"{p}: cannot write audio ({write_error(e)})") from None


def display_name(path: str | os.PathLike) -> str:
    """A path as text that can always be printed or stored as JSON: bytes that are not
    UTF-8 (a file name from another system) appear as ``\\xe9`` escapes."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def write_error(e: BaseException) -> str:
    """A one-line reason for a failed write that says what to do about it."""
    import errno

    code = getattr(e, "errno", None)
    return {errno.ENOSPC: "disk full", errno.EDQUOT: "disk quota exceeded", errno.EACCES: "permission denied",
            errno.EPERM: "permission denied", errno.EROFS: "read-only file system",
            errno.ENAMETOOLONG: "file name too long", errno.ENOTDIR: "a path component is a file, not a folder",
            }.get(code, str(e).splitlines()[0] if str(e) else type(e).__name__)


def write_text_atomic(path: str | os.PathLike, text: str, mode: int | None = None) -> None:
    """Write ``text`` atomically (temp file, then rename); ``mode`` overrides the usual
    permissions (0600 for a file that holds personal data)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=p.suffix, dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, umask_mode() if mode is None else mode)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
