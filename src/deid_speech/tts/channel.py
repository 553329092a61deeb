"""Seeded channel augmentations for 16 kHz mono float32 speech, entity spans kept valid.

Every operation either keeps the timeline sample for sample (noise, telephone, gain)
or scales it by an exact, returned factor (speed), so the entity spans of
:func:`deid_speech.tts.base.voice_tagged` stay true after augmentation:

* :func:`speed_perturb` - Kaldi-style speed perturbation by resampling (tempo and
  pitch move together); times become ``t / factor``.
* :func:`add_noise` - white or pink noise at a set SNR, measured on speech frames.
* :func:`telephone` - 300-3400 Hz band, 8 kHz, 8-bit mu-law, back to 16 kHz.
* :func:`apply_gain` - gain in dB, reduced where needed so the peak stays below 0.99;
  :func:`normalize_loudness` levels speech to -26 dBFS first (voices differ).
* :func:`codec` - a round trip through a real lossy speech or music codec (AMR-NB,
  G.726, Opus, MP3: :data:`CODECS`, encoded and decoded by PyAV's FFmpeg), re-aligned
  to the input's timeline.
* :func:`reverb` - a synthetic room: direct sound plus an exponentially decaying noise
  tail with a given RT60 (the direct path stays at time 0, so times do not move).
* :func:`add_babble` - other speech mixed in at a set SNR on the speech frames.

:class:`AugmentSpec` bundles one draw of these (see :data:`POLICIES`) and applies them
in the order speed, noise (acoustic background), telephone line, gain.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

from deid_speech.audio import resample
from deid_speech.tts.base import TARGET_SR, frame_rms
from deid_speech.types import Span

SPEEDS: tuple[float, ...] = (0.9, 1.0, 1.1)
NOISE_COLOURS: tuple[str, ...] = ("white", "pink")
PEAK = 0.99
PHONE_SR = 8000


def speed_perturb(audio: np.ndarray, factor: float, sr: int = TARGET_SR) -> tuple[np.ndarray, float]:
    """Speed ``audio`` up by ``factor`` (0.9 = slower, longer); return (audio, factor used).

    The audio is resampled from ``round(sr * factor)`` Hz to ``sr`` Hz, so the factor
    used is that rational number (exactly 0.9 / 1.1 at 16 kHz). A time ``t`` in the
    input is at ``t / factor`` in the output (see :func:`scale_spans`).
    """
    if not 0.5 <= factor <= 2.0:
        raise ValueError(f"speed factor must be in 0.5..2, got {factor}")
    src = int(round(sr * factor))
    return resample(audio, src, sr), src / sr


def scale_spans(spans: Sequence[Span], factor: float) -> list[Span]:
    """Spans (or Words: anything with start/end) re-timed for audio sped up by ``factor``."""
    return [replace(s, start=s.start / factor, end=s.end / factor) for s in spans]


def speech_mask(audio: np.ndarray, sr: int = TARGET_SR, rel_db: float = -35.0,
                frame_s: float = 0.01) -> np.ndarray:
    """Boolean per sample: inside a frame within ``rel_db`` of the loudest 10 ms frame."""
    rms = frame_rms(audio, sr, frame_s)
    mask = np.zeros(len(audio), dtype=bool)
    if rms.size == 0 or float(rms.max()) <= 0.0:
        return mask
    n = len(audio) // rms.size
    loud = rms > float(rms.max()) * 10 ** (rel_db / 20)
    mask[:rms.size * n] = np.repeat(loud, n)
    return mask


def make_noise(n: int, rng: np.random.Generator, colour: str = "white",
               sr: int = TARGET_SR) -> np.ndarray:
    """``n`` samples of unit-power noise; pink = 1/f power from 20 Hz up."""
    if colour not in NOISE_COLOURS:
        raise ValueError(f"noise colour must be one of {', '.join(NOISE_COLOURS)}, got {colour!r}")
    x = rng.standard_normal(n)
    if colour == "pink" and n > 1:
        spec = np.fft.rfft(x)
        f = np.fft.rfftfreq(n, 1 / sr)
        spec[f < 20.0] = 0.0
        spec[f >= 20.0] /= np.sqrt(f[f >= 20.0])
        x = np.fft.irfft(spec, n)
    power = float(np.mean(x**2)) if n else 0.0
    return (x / np.sqrt(power) if power > 0 else x).astype(np.float32)


def add_noise(audio: np.ndarray, snr_db: float, rng: np.random.Generator,
              colour: str = "white", sr: int = TARGET_SR) -> np.ndarray:
    """Add noise so that speech power / noise power on the speech frames is ``snr_db``.

    Speech frames come from :func:`speech_mask` of the clean audio; the noise is scaled
    on those same frames, so the SNR holds there exactly. Silent audio is returned
    unchanged (no SNR can be defined).
    """
    x = np.asarray(audio, dtype=np.float32)
    return _mix(x, make_noise(len(x), rng, colour, sr), snr_db, sr)


def add_babble(audio: np.ndarray, others: Sequence[np.ndarray], snr_db: float,
               rng: np.random.Generator, sr: int = TARGET_SR) -> np.ndarray:
    """Mix the sum of ``others`` (other talkers' clips, each looped from a random offset to
    the input's length) in at ``snr_db`` on the input's speech frames, as :func:`add_noise`."""
    x = np.asarray(audio, dtype=np.float32)
    if not len(x) or not others:
        return x.copy()
    bab = np.zeros(len(x), dtype=np.float64)
    for o in others:
        o = np.asarray(o, dtype=np.float32).reshape(-1)
        if not len(o) or not np.any(o):
            continue
        start = int(rng.integers(len(o)))
        bab += np.resize(np.roll(o, -start), len(x)) / (np.sqrt(np.mean(o.astype(np.float64) ** 2)) or 1.0)
    return _mix(x, bab.astype(np.float32), snr_db, sr)


def _mix(x: np.ndarray, noise: np.ndarray, snr_db: float, sr: int) -> np.ndarray:
    mask = speech_mask(x, sr)
    if not mask.any() or not np.any(noise[mask]):
        return x.copy()
    p_speech = float(np.mean(x[mask].astype(np.float64) ** 2))
    p_noise = float(np.mean(noise[mask].astype(np.float64) ** 2))
    scale = np.sqrt(p_speech / (p_noise * 10 ** (snr_db / 10)))
    return (x + scale * noise).astype(np.float32)


@functools.lru_cache(maxsize=1)
def _phone_band() -> np.ndarray:
    """Second-order sections at 8 kHz: 300 Hz high-pass, 60 dB down from 3.6 kHz."""
    from scipy.signal import butter, cheby2

    hp = butter(4, 300, "highpass", fs=PHONE_SR, output="sos")
    lp = cheby2(10, 60, 3600, "lowpass", fs=PHONE_SR, output="sos")
    return np.vstack([hp, lp])


def mu_law_encode(x: np.ndarray, mu: int = 255) -> np.ndarray:
    """G.711-style mu-law companding of [-1, 1] floats to 8-bit codes (uint8)."""
    x = np.clip(np.asarray(x, dtype=np.float64), -1.0, 1.0)
    y = np.sign(x) * np.log1p(mu * np.abs(x)) / np.log1p(mu)
    return np.round((y + 1) / 2 * mu).astype(np.uint8)


def mu_law_decode(q: np.ndarray, mu: int = 255) -> np.ndarray:
    """Inverse of :func:`mu_law_encode` (float32 in [-1, 1])."""
    y = np.asarray(q, dtype=np.float64) / mu * 2 - 1
    return (np.sign(y) * np.expm1(np.abs(y) * np.log1p(mu)) / mu).astype(np.float32)


def telephone(audio: np.ndarray, sr: int = TARGET_SR) -> np.ndarray:
    """Narrow-band phone line: to 8 kHz, band-limit 300-3400 Hz, mu-law, band-limit
    again (the codec's quantisation noise is broadband), back to ``sr``. Zero-phase
    filters keep the timeline; the output has the input's length."""
    from scipy.signal import sosfiltfilt

    x = np.asarray(audio, dtype=np.float32)
    if len(x) < 64:
        return np.zeros_like(x)
    band = _phone_band()
    x8 = sosfiltfilt(band, resample(x, sr, PHONE_SR))
    x8 = sosfiltfilt(band, mu_law_decode(mu_law_encode(x8)))
    y = resample(x8.astype(np.float32), PHONE_SR, sr)[:len(x)]
    return np.pad(y, (0, len(x) - len(y))).astype(np.float32)


# name -> (FFmpeg encoder, container, sample rate, bit rates to draw from)
CODECS: dict[str, tuple[str, str, int, tuple[int, ...]]] = {
    "amr": ("libopencore_amrnb", "amr", 8000, (7950, 12200)),   # GSM/3G mobile voice
    "g726": ("g726", "wav", 8000, (16000, 24000, 32000)),       # ADPCM trunk lines, DECT
    "opus": ("libopus", "ogg", 16000, (8000, 12000, 16000)),    # VoIP, WhatsApp calls
    "mp3": ("libmp3lame", "mp3", 16000, (16000, 24000, 32000)),  # call-recorder archives
}


def codec(audio: np.ndarray, name: str, bit_rate: int | None = None, sr: int = TARGET_SR) -> np.ndarray:
    """``audio`` encoded with codec ``name`` (:data:`CODECS`) at ``bit_rate`` (default the
    lowest listed) and decoded again, at ``sr``, the input's length. The codec's delay is
    found by cross-correlating the envelopes (within 100 ms) and removed, so times hold."""
    import io

    import av

    if name not in CODECS:
        raise ValueError(f"codec must be one of {', '.join(CODECS)}, got {name!r}")
    encoder, container, rate, rates = CODECS[name]
    x = np.clip(np.asarray(audio, dtype=np.float32).reshape(-1), -1.0, 1.0)
    if len(x) < sr // 50:
        return x.copy()
    buf = io.BytesIO()
    with av.open(buf, "w", format=container) as out:
        stream = out.add_stream(encoder, rate=rate)
        stream.bit_rate = int(bit_rate or rates[0])
        stream.layout = "mono"
        frame = av.AudioFrame.from_ndarray((x[None, :] * 32767).astype(np.int16), format="s16", layout="mono")
        frame.sample_rate = sr
        to_codec = av.AudioResampler(format=stream.format.name, layout="mono", rate=rate)
        for f in [*to_codec.resample(frame), *to_codec.resample(None), None]:
            for packet in stream.encode(f):
                out.mux(packet)
    buf.seek(0)
    parts = []
    with av.open(buf) as inp:
        back = av.AudioResampler(format="flt", layout="mono", rate=sr)
        for f in inp.decode(audio=0):
            parts.extend(g.to_ndarray().reshape(-1) for g in back.resample(f))
        parts.extend(g.to_ndarray().reshape(-1) for g in back.resample(None))
    y = np.concatenate(parts).astype(np.float32) if parts else np.zeros(0, np.float32)
    lag = _lag(x, y, sr)
    y = y[lag:lag + len(x)]
    return np.pad(y, (0, len(x) - len(y))).astype(np.float32)


def _lag(x: np.ndarray, y: np.ndarray, sr: int, max_s: float = 0.1) -> int:
    """Samples by which ``y`` lags ``x`` (0..max_s), from 1 ms envelopes."""
    hop = sr // 1000
    def env(a: np.ndarray) -> np.ndarray:
        n = len(a) // hop
        return np.abs(a[:n * hop]).reshape(n, hop).mean(axis=1)
    ex, ey = env(x), env(y)
    span = int(max_s * 1000)
    if len(ex) < 10 or len(ey) < len(ex):
        return 0
    m = len(ex) - span
    scores = [float(np.dot(ex[:m], ey[k:k + m])) for k in range(span + 1)]
    return int(np.argmax(scores)) * hop


def reverb(audio: np.ndarray, rt60: float, rng: np.random.Generator, direct_ratio_db: float = 3.0,
           sr: int = TARGET_SR) -> np.ndarray:
    """A synthetic room: a unit direct path at time 0 plus a noise tail decaying 60 dB in
    ``rt60`` seconds, ``direct_ratio_db`` below the direct sound in energy; the output has
    the input's length and level (RMS)."""
    from scipy.signal import fftconvolve

    x = np.asarray(audio, dtype=np.float32).reshape(-1)
    if rt60 <= 0 or not len(x) or not np.any(x):
        return x.copy()
    n = max(2, int(rt60 * sr))
    t = np.arange(n) / sr
    tail = rng.standard_normal(n) * np.exp(-6.9 * t / rt60)
    tail[: int(0.002 * sr)] = 0.0  # the first reflections come after the direct sound
    tail *= np.sqrt(10 ** (-direct_ratio_db / 10) / max(float(np.sum(tail ** 2)), 1e-12))
    tail[0] = 1.0
    y = fftconvolve(x, tail)[: len(x)]
    rms_x, rms_y = np.sqrt(np.mean(x.astype(np.float64) ** 2)), np.sqrt(np.mean(y ** 2))
    return (y * (rms_x / rms_y if rms_y > 0 else 1.0)).astype(np.float32)


def apply_gain(audio: np.ndarray, gain_db: float, peak: float = PEAK) -> np.ndarray:
    """Scale by ``gain_db``; if the result would exceed ``peak``, scale to ``peak`` instead."""
    x = np.asarray(audio, dtype=np.float32)
    top = float(np.abs(x).max()) if x.size else 0.0
    g = 10 ** (gain_db / 20)
    if top * g > peak:
        g = peak / top
    return (x * g).astype(np.float32)


def normalize_loudness(audio: np.ndarray, target_dbfs: float = -26.0, sr: int = TARGET_SR) -> np.ndarray:
    """Scale so the speech frames' RMS is ``target_dbfs`` (voices differ in loudness)."""
    x = np.asarray(audio, dtype=np.float32)
    mask = speech_mask(x, sr)
    if not mask.any():
        return x.copy()
    rms = float(np.sqrt(np.mean(x[mask].astype(np.float64) ** 2)))
    return apply_gain(x, target_dbfs - 20 * np.log10(rms))


@dataclass(frozen=True)
class AugmentPolicy:
    """Distribution an :class:`AugmentSpec` is drawn from."""

    speeds: tuple[float, ...] = (1.0,)
    p_noise: float = 0.0
    snr_db: tuple[float, float] = (20.0, 40.0)
    p_pink: float = 0.5
    p_telephone: float = 0.0
    gain_db: tuple[float, float] = (0.0, 0.0)


POLICIES: dict[str, AugmentPolicy] = {
    "none": AugmentPolicy(),
    "light": AugmentPolicy(speeds=SPEEDS, p_noise=0.5, snr_db=(15.0, 30.0), gain_db=(-3.0, 3.0)),
    "full": AugmentPolicy(speeds=SPEEDS, p_noise=0.8, snr_db=(5.0, 25.0), p_telephone=0.3,
                          gain_db=(-6.0, 6.0)),
    # every utterance through the 8 kHz mu-law line, nothing else: the telephone test copy
    "telephone": AugmentPolicy(p_telephone=1.0),
    # the unseen-voice benchmark: about half through the phone line, about half with noise
    # at 10-20 dB SNR, levels -6..+3 dB; no speed change (the voices' own rates differ)
    "benchmark": AugmentPolicy(p_noise=0.5, snr_db=(10.0, 20.0), p_telephone=0.5, gain_db=(-6.0, 3.0)),
}


@dataclass(frozen=True)
class AugmentSpec:
    """One augmentation: speed factor, noise (``snr_db`` None = none), phone line, gain.

    ``noise`` is the colour and ``noise_seed`` seeds the noise, so :meth:`apply` is a
    pure function of the spec and its input.
    """

    speed: float = 1.0
    snr_db: float | None = None
    noise: str = "white"
    telephone: bool = False
    gain_db: float = 0.0
    noise_seed: int = 0

    def __post_init__(self) -> None:
        if self.noise not in NOISE_COLOURS:
            raise ValueError(f"noise must be one of {', '.join(NOISE_COLOURS)}, got {self.noise!r}")
        if not 0.5 <= self.speed <= 2.0:
            raise ValueError(f"speed must be in 0.5..2, got {self.speed}")

    @classmethod
    def sample(cls, rng: np.random.Generator, level: str = "full") -> AugmentSpec:
        """Draw a spec from ``POLICIES[level]`` (``none``, ``light``, ``full``, ``telephone``)."""
        if level not in POLICIES:
            raise ValueError(f"augment level must be one of {', '.join(POLICIES)}, got {level!r}")
        pol = POLICIES[level]
        speed = float(pol.speeds[int(rng.integers(len(pol.speeds)))])
        noisy = bool(rng.random() < pol.p_noise)
        snr = round(float(rng.uniform(*pol.snr_db)), 1)
        pink = bool(rng.random() < pol.p_pink)
        phone = bool(rng.random() < pol.p_telephone)
        gain = round(float(rng.uniform(*pol.gain_db)), 1)
        seed = int(rng.integers(2**31))
        return cls(speed=speed, snr_db=snr if noisy else None,
                   noise="pink" if noisy and pink else "white", telephone=phone,
                   gain_db=gain, noise_seed=seed if noisy else 0)

    @classmethod
    def phone_call(cls, rng: np.random.Generator, gain_db: float = 0.0) -> AugmentSpec:
        """The unseen-voice benchmark's telephone calls' channel: pink noise at 10-20 dB SNR
        (drawn from ``rng``, then the noise's seed), then the 8 kHz phone line."""
        return cls(snr_db=round(float(rng.uniform(10, 20)), 1), noise="pink", telephone=True,
                   gain_db=gain_db, noise_seed=int(rng.integers(2**31)))

    def apply(self, audio: np.ndarray, spans: Sequence[Span] = ()) -> tuple[np.ndarray, list[Span]]:
        """Augment 16 kHz mono ``audio``; return it with ``spans`` re-timed to match."""
        x = np.asarray(audio, dtype=np.float32).reshape(-1)
        out = list(spans)
        if self.speed != 1.0:
            x, factor = speed_perturb(x, self.speed)
            out = scale_spans(out, factor)
        if self.snr_db is not None:
            x = add_noise(x, self.snr_db, np.random.default_rng(self.noise_seed), self.noise)
        if self.telephone:
            x = telephone(x)
        return apply_gain(x, self.gain_db), out

    def to_dict(self) -> dict:
        """Plain dict for the manifest."""
        return asdict(self)
