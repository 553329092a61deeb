"""The voice activity detector: regions from probabilities (unit), Silero on real speech (model)."""
import json

import numpy as np
import pytest

from deid_speech import models as shipped
from deid_speech.asr.vad import FRAME_S, VadOptions, regions_from_probs


def test_regions_are_padded_joined_and_clicks_dropped():
    p = np.zeros(200, np.float32)
    p[10:40] = 0.9  # 0.32-1.28 s
    p[45:60] = 0.5  # a gap of 5 frames (0.16 s) before it: joined
    p[100:102] = 0.9  # 64 ms: a click, dropped
    p[150:180] = 0.2  # below the threshold
    r = regions_from_probs(p, 200 * FRAME_S, VadOptions(threshold=0.3, pad_s=0.1, min_gap_s=0.3, min_speech_s=0.1))
    assert r == [pytest.approx((10 * FRAME_S - 0.1, 60 * FRAME_S + 0.1))]


def test_regions_stay_inside_the_audio():
    p = np.full(20, 0.9, np.float32)
    assert regions_from_probs(p, 20 * FRAME_S, VadOptions(pad_s=0.5)) == [(0.0, 20 * FRAME_S)]


@pytest.mark.model
def test_silero_hears_every_entity_of_the_example_and_nothing_in_silence():
    from deid_speech.asr.vad import SileroVad
    from deid_speech.audio import load
    from deid_speech.intervals import covered

    vad = SileroVad()
    audio = load(shipped.path("example")).mono16k()
    truth = json.loads(shipped.path("example-truth").read_text())
    regions = vad.regions(audio)
    for e in truth["entities"]:
        assert covered(e["start"], e["end"], regions) == pytest.approx(e["end"] - e["start"], abs=0.01), e
    paused = np.concatenate([audio[: 16000 * 20], np.zeros(16000 * 3, np.float32), audio[16000 * 20:]])
    assert not any(a < 21.5 < b for a, b in vad.regions(paused))  # a pause is found
    assert vad.regions(np.zeros(16000 * 5, np.float32)) == []
    hum = (0.01 * np.sin(2 * np.pi * 50 * np.arange(16000 * 5) / 16000)).astype(np.float32)
    assert vad.regions(hum) == []
    # a block at a time: a call three times as long gives the same frames as its parts
    long = np.concatenate([audio] * 3)
    p = vad.probs(long)
    assert len(p) == -(-len(long) // 512) and np.allclose(p[: len(p) // 3 - 1], vad.probs(audio)[: len(p) // 3 - 1],
                                                           atol=0.05)



class _Tiring:
    """Stands in for Silero's ONNX session: a frame's probability falls with the frames heard
    since the state began (1 / (1 + n)), the state counting them."""

    def run(self, _outputs, feed):
        n = int(feed["h"][0, 0, 0])
        k = len(feed["input"])
        p = 1.0 / (1.0 + n + np.arange(k, dtype=np.float32))
        h = np.full((1, 1, 128), n + k, np.float32)
        return p.reshape(-1, 1), h, feed["c"]


def test_the_state_begins_afresh_every_block_on_two_grids_and_each_frame_takes_the_larger():
    from types import SimpleNamespace

    from deid_speech.asr.vad import FRAME, SileroVad

    vad = object.__new__(SileroVad)  # no weights: the session is stood in for
    import threading

    vad.options, vad._lock = VadOptions(block_s=10 * FRAME_S), threading.Lock()
    vad._model = SimpleNamespace(session=_Tiring())
    p = vad.probs(np.ones(47 * FRAME, np.float32))
    n = np.arange(47)
    since = np.where(n < 5, n, np.minimum(n % 10, (n - 5) % 10))  # frames since the nearer fresh start
    assert np.allclose(p, 1.0 / (1.0 + since))
    with pytest.raises(ValueError, match="block_s"):
        VadOptions(block_s=0.01)


@pytest.mark.model
def test_speech_after_a_change_of_channel_is_heard():
    """Silero's state carried over minutes stops hearing speech after a change of channel: the
    example call, then the same call through a noisy phone line (5 dB), lost half the second
    copy's speech with one state for the whole file; begun afresh every 10 s, none of its PII."""
    from deid_speech.asr.vad import SileroVad
    from deid_speech.audio import load
    from deid_speech.intervals import covered, union
    from deid_speech.tts.channel import AugmentSpec

    clean = load(shipped.path("example")).mono16k()
    noisy, _ = AugmentSpec(snr_db=5, telephone=True, noise="pink", noise_seed=1).apply(clean)
    truth = json.loads(shipped.path("example-truth").read_text())
    audio = np.concatenate([clean, np.zeros(16000, np.float32), noisy]).astype(np.float32)
    off = len(clean) / 16000 + 1.0

    def missed(options, key):
        regions = union(SileroVad(options).regions(audio))
        return sum(e["end"] - e["start"] - covered(e["start"] + off, e["end"] + off, regions) for e in truth[key])

    assert missed(VadOptions(), "entities") == pytest.approx(0.0, abs=0.05)
    assert missed(VadOptions(), "turns") < 4.0  # of 65 s of speech
    assert missed(VadOptions(block_s=600.0), "turns") > 15.0  # one state for the whole file


@pytest.mark.model
def test_silero_runs_a_few_hundred_frames_at_a_time_with_the_probabilities_of_one_call(monkeypatch):
    from deid_speech.asr import vad as vad_module
    from deid_speech.audio import load

    vad = vad_module.SileroVad()
    audio = load(shipped.path("example")).mono16k()
    for frames in (700, 64, 1):  # more than one call, exactly one, a single frame
        block = audio[16000: 16000 + 512 * frames].copy()
        whole = np.asarray(vad._model(block.copy())).reshape(-1)  # faster-whisper's own call
        monkeypatch.setattr(vad_module, "SUB_FRAMES", 64)
        assert np.array_equal(vad._block_probs(block.copy()), whole)
        assert whole.max() > 0.5 or frames == 1


def test_stage_timings_nest_and_absorb():
    import time

    from deid_speech import timing

    with timing.collect() as t:
        with timing.stage("decoding"):
            time.sleep(0.02)
            with timing.stage("vad"):
                time.sleep(0.02)
        with timing.stage("verification", absorb=True):
            with timing.stage("decoding"):
                time.sleep(0.03)
    assert set(t.seconds) == {"decoding", "vad", "verification"}
    assert 0.018 < t.seconds["vad"] < 0.05 and 0.018 < t.seconds["decoding"] < 0.05  # counted once each
    assert t.seconds["verification"] >= 0.028  # its nested decoding is verification
    with timing.stage("decoding"):  # no collector: nothing kept, nothing fails
        pass


def test_a_dithered_track_is_heard_a_block_at_a_time_never_made_whole(monkeypatch):
    """The verifier's dithered pass: the VAD reads the track by slices, gives the very
    probabilities of the dithered array, and remembers them under the track's own key."""
    import threading
    from types import SimpleNamespace

    from deid_speech.asr.vad import FRAME, CachedVad, SileroVad
    from deid_speech.audio import DitheredTrack, dither

    class _Loud:  # a frame's probability is its loudness: any change of a sample shows
        def run(self, _outputs, feed):
            x = feed["input"][:, -FRAME:]
            return np.abs(x).mean(axis=1, keepdims=True).astype(np.float32), feed["h"], feed["c"]

    vad = object.__new__(SileroVad)
    vad.options, vad._lock = VadOptions(block_s=10 * FRAME_S), threading.Lock()
    vad._model = SimpleNamespace(session=_Loud())
    x = np.random.default_rng(0).standard_normal(47 * FRAME + 100).astype(np.float32) * 0.1
    want = vad.probs(dither(x, 3))
    track = DitheredTrack(x, 3, block=1000)  # blocks of the dither smaller than the VAD's
    monkeypatch.setattr(DitheredTrack, "__array__", lambda *a, **k: pytest.fail("made whole"))
    assert np.array_equal(vad.probs(track), want)
    assert not np.array_equal(vad.probs(DitheredTrack(x, 4)), want)  # another seed is heard as other audio

    calls = []
    cached = CachedVad(vad)
    monkeypatch.setattr(vad, "regions", lambda audio: calls.append(audio) or [(0.0, 1.0)])
    cached.regions(track), cached.regions(DitheredTrack(x, 3))  # the same track again: remembered
    cached.regions(DitheredTrack(x, 4))
    cached.regions(dither(x, 3))  # an array is keyed by its samples
    assert len(calls) == 3
