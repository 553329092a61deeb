"""Channel augmentations: SNR on target, phone band, exact speed re-timing, gain, determinism.

All on synthetic tone-burst "speech" (bursts with silence between), so no TTS is needed.
"""
from __future__ import annotations

import numpy as np
import pytest

from deid_speech.tts.base import TARGET_SR
from deid_speech.tts.channel import (
    CODECS,
    PEAK,
    POLICIES,
    AugmentSpec,
    add_babble,
    add_noise,
    apply_gain,
    codec,
    mu_law_decode,
    mu_law_encode,
    normalize_loudness,
    reverb,
    speech_mask,
    speed_perturb,
    telephone,
)
from deid_speech.types import Span

BURSTS = [(0.2, 0.7, 220.0), (0.9, 1.6, 440.0), (1.9, 2.3, 1500.0)]  # start s, end s, Hz


def bursts(total: float = 2.6) -> tuple[np.ndarray, list[Span]]:
    """Harmonic bursts with silence between; one Span per burst."""
    x = np.zeros(int(total * TARGET_SR), dtype=np.float32)
    spans = []
    for k, (a, b, hz) in enumerate(BURSTS):
        t = np.arange(int(a * TARGET_SR), int(b * TARGET_SR)) / TARGET_SR
        x[int(a * TARGET_SR):int(b * TARGET_SR)] = 0.2 * (np.sin(2 * np.pi * hz * t)
                                                         + 0.5 * np.sin(2 * np.pi * 3 * hz * t))
        spans.append(Span(a, b, label=f"E{k}"))
    return x, spans


def _power(x: np.ndarray) -> float:
    return float(np.mean(x.astype(np.float64) ** 2))


def _rms_in(x: np.ndarray, start: float, end: float) -> float:
    return float(np.sqrt(_power(x[int(round(start * TARGET_SR)):int(round(end * TARGET_SR))])))


@pytest.mark.parametrize("colour", ["white", "pink"])
@pytest.mark.parametrize("snr", [0.0, 10.0, 25.0])
def test_snr_on_speech_within_half_db(colour: str, snr: float) -> None:
    x, spans = bursts()
    y = add_noise(x, snr, np.random.default_rng(3), colour)
    noise = y - x
    assert len(y) == len(x)
    on = np.zeros(len(x), dtype=bool)  # speech = the bursts themselves (independent of the mask)
    for s in spans:
        on[int(s.start * TARGET_SR):int(s.end * TARGET_SR)] = True
    measured = 10 * np.log10(_power(x[on]) / _power(noise[on]))
    assert measured == pytest.approx(snr, abs=0.5)
    if colour == "white":  # stationary: also on target against the whole file's noise
        assert 10 * np.log10(_power(x[on]) / _power(noise)) == pytest.approx(snr, abs=0.5)


def test_pink_noise_is_low_heavy() -> None:
    x, _ = bursts()
    noise = add_noise(x, 0.0, np.random.default_rng(0), "pink") - x
    spec = np.abs(np.fft.rfft(noise)) ** 2
    f = np.fft.rfftfreq(len(noise), 1 / TARGET_SR)
    octave = [spec[(f >= lo) & (f < 2 * lo)].sum() for lo in (100, 400, 1600)]
    assert max(octave) < 1.5 * min(octave)  # 1/f: equal power per octave (white: x4 per step)


def test_telephone_band_and_length() -> None:
    rng = np.random.default_rng(0)
    x = np.concatenate([bursts()[0], 0.3 * rng.standard_normal(TARGET_SR).astype(np.float32)])
    for n in (len(x), len(x) - 1):  # odd length too
        y = telephone(x[:n])
        assert len(y) == n and y.dtype == np.float32
        spec = np.abs(np.fft.rfft(y)) ** 2
        f = np.fft.rfftfreq(n, 1 / TARGET_SR)
        assert spec[f > 3600].sum() < 1e-4 * spec.sum()
        assert spec[f < 200].sum() < 1e-2 * spec.sum()
    # the speech band survives, and no delay: bursts stay where they were
    y = telephone(x)
    for a, b, _ in BURSTS[1:]:
        assert _rms_in(y, a + 0.02, b - 0.02) > 0.3 * _rms_in(x, a, b)
        assert _rms_in(y, b + 0.05, b + 0.15) < 0.05 * _rms_in(x, a, b)


def test_mu_law_round_trip() -> None:
    x = np.linspace(-1, 1, 1001, dtype=np.float32)
    q = mu_law_encode(x)
    assert q.dtype == np.uint8 and q.min() == 0 and q.max() == 255
    err = np.abs(mu_law_decode(q) - x)
    assert err.max() < 0.025 and err[np.abs(x) < 0.01].max() < 1e-3  # fine steps near zero


@pytest.mark.parametrize("factor", [0.9, 1.1])
def test_speed_scales_duration_and_spans(factor: float) -> None:
    x, spans = bursts()
    spec = AugmentSpec(speed=factor)
    y, moved = spec.apply(x, spans)
    _, used = speed_perturb(x, factor)
    assert used == pytest.approx(factor, abs=1e-12)
    assert abs(len(y) - len(x) / factor) <= 1
    for old, new in zip(spans, moved):
        assert new.start == pytest.approx(old.start / factor) and new.end == pytest.approx(old.end / factor)
        assert new.label == old.label
        inside = _rms_in(y, new.start + 0.01, new.end - 0.01)
        assert inside > 0.5 * _rms_in(x, old.start, old.end)
        assert _rms_in(y, new.start - 0.12, new.start - 0.02) < 0.02 * inside  # silence before
        assert _rms_in(y, new.end + 0.02, new.end + 0.12) < 0.02 * inside  # silence after


def test_timeline_kept_without_speed() -> None:
    x, spans = bursts()
    y, moved = AugmentSpec(snr_db=20.0, noise="pink", telephone=True, gain_db=-6.0).apply(x, spans)
    assert len(y) == len(x) and moved == spans


def test_gain_and_clipping_protection() -> None:
    x, _ = bursts()
    assert np.allclose(apply_gain(x, -6.0), x * 10 ** (-6 / 20), atol=1e-7)
    loud = apply_gain(x, 20.0)
    assert np.abs(loud).max() == pytest.approx(PEAK, abs=1e-6)
    y, _ = AugmentSpec(snr_db=0.0, gain_db=12.0).apply(x)
    assert np.abs(y).max() <= PEAK + 1e-6


def test_normalize_loudness_sets_speech_rms() -> None:
    x, _ = bursts()
    y = normalize_loudness(x * 0.05, target_dbfs=-26.0)
    mask = speech_mask(y)
    assert 20 * np.log10(np.sqrt(_power(y[mask]))) == pytest.approx(-26.0, abs=0.01)


def test_sample_is_deterministic_and_serialisable() -> None:
    a = [AugmentSpec.sample(np.random.default_rng(7), "full") for _ in range(2)]
    assert a[0] == a[1] and AugmentSpec(**a[0].to_dict()) == a[0]
    specs = [AugmentSpec.sample(np.random.default_rng(s), "full") for s in range(200)]
    assert {s.speed for s in specs} == {0.9, 1.0, 1.1}
    assert any(s.telephone for s in specs) and any(s.snr_db is None for s in specs)
    assert all(s.snr_db is None or 5 <= s.snr_db <= 25 for s in specs)
    assert AugmentSpec.sample(np.random.default_rng(0), "none") == AugmentSpec()
    assert set(POLICIES) == {"none", "light", "full", "telephone", "benchmark"}
    tel = AugmentSpec.sample(np.random.default_rng(3), "telephone")
    assert (tel.telephone, tel.speed, tel.snr_db, tel.gain_db) == (True, 1.0, None, 0.0)
    with pytest.raises(ValueError, match="augment level"):
        AugmentSpec.sample(np.random.default_rng(0), "heavy")


def test_apply_is_deterministic() -> None:
    x, spans = bursts()
    spec = AugmentSpec(speed=1.1, snr_db=10.0, noise="white", telephone=True, gain_db=2.0, noise_seed=5)
    (y1, s1), (y2, s2) = spec.apply(x, spans), spec.apply(x, spans)
    assert np.array_equal(y1, y2) and s1 == s2
    y3, _ = AugmentSpec(speed=1.1, snr_db=10.0, telephone=True, gain_db=2.0, noise_seed=6).apply(x, spans)
    assert not np.array_equal(y1, y3)


@pytest.mark.parametrize("name", sorted(CODECS))
def test_codec_round_trip_keeps_length_timeline_and_band(name: str) -> None:
    """A real codec round trip: same length, the bursts where they were (its delay
    removed), silence stays quiet; the 8 kHz codecs drop everything above 4 kHz."""
    x, _ = bursts()
    y = codec(x, name)
    assert len(y) == len(x) and y.dtype == np.float32
    for a, b, _hz in BURSTS[:2]:
        assert _rms_in(y, a + 0.03, b - 0.03) > 0.3 * _rms_in(x, a, b)
        assert _rms_in(y, b + 0.06, b + 0.15) < 0.15 * _rms_in(x, a, b)
    assert not np.allclose(y, x, atol=1e-3)  # it is lossy: something changed
    if CODECS[name][2] == 8000:
        spec = np.abs(np.fft.rfft(y)) ** 2
        f = np.fft.rfftfreq(len(y), 1 / TARGET_SR)
        assert spec[f > 4100].sum() < 1e-3 * spec.sum()
    with pytest.raises(ValueError, match="codec must be one of"):
        codec(x, "gsm-full-rate")


def test_codec_delay_is_removed() -> None:
    """A click train: the decoded clicks fall within 2 ms of the input's."""
    x = np.zeros(TARGET_SR * 2, dtype=np.float32)
    t = np.arange(800) / TARGET_SR
    for s in (0.3, 0.9, 1.5):
        x[int(s * TARGET_SR):int(s * TARGET_SR) + 800] = 0.4 * np.sin(2 * np.pi * 700 * t) * np.hanning(800)
    for name in CODECS:
        y = codec(x, name)
        env = np.abs(y).reshape(-1, 16).mean(axis=1)  # 1 ms
        peak = int(np.argmax(env[int(0.25 * 1000):int(0.45 * 1000)])) + 250
        assert abs(peak - 325) <= 6, (name, peak)  # the burst's centre is at 0.325 s


def test_reverb_keeps_timeline_and_level_and_adds_a_tail() -> None:
    x, _ = bursts()
    y = reverb(x, 0.6, np.random.default_rng(1))
    assert len(y) == len(x)
    assert np.isclose(_power(y), _power(x), rtol=1e-3)
    a, b, _hz = BURSTS[0]
    # the onset is not delayed; after the burst a decaying tail, where the dry signal is silent
    assert _rms_in(y, a, a + 0.05) > 0.5 * _rms_in(x, a, a + 0.05)
    assert _rms_in(x, b + 0.01, b + 0.1) == 0.0
    tail1, tail2 = _rms_in(y, b + 0.01, b + 0.06), _rms_in(y, b + 0.12, b + 0.17)
    assert tail1 > 0.01 * _rms_in(x, a, b) and tail2 < tail1
    assert np.array_equal(reverb(x, 0.0, np.random.default_rng(1)), x)


def test_babble_is_other_speech_at_the_snr() -> None:
    x, _ = bursts()
    other = np.roll(x, 7000)
    rng = np.random.default_rng(3)
    y = add_babble(x, [other, other[::-1]], 10.0, rng)
    mask = speech_mask(x)
    noise = y - x
    snr = 10 * np.log10(_power(x[mask]) / _power(noise[mask]))
    assert abs(snr - 10.0) < 0.5
    assert np.array_equal(add_babble(x, [], 10.0, rng), x)
    silent = np.zeros_like(x)
    assert np.array_equal(add_babble(silent, [other], 10.0, rng), silent)
