import numpy as np
import pytest
from faster_whisper.feature_extractor import FeatureExtractor

from deid_speech import models as shipped
from deid_speech.asr import features


@pytest.fixture(scope="module")
def speech():
    from deid_speech.audio import load

    return load(shipped.path("example")).mono16k()


@pytest.mark.parametrize("block", [1, 7, 3000])
def test_the_features_are_faster_whispers_bit_for_bit_in_blocks_of_frames(speech, block, monkeypatch):
    monkeypatch.setattr(features, "FRAMES_PER_BLOCK", block)
    theirs, ours = FeatureExtractor(feature_size=80), features.FrugalFeatureExtractor(feature_size=80)
    lengths = (len(speech), 16000 * 30, 16000 * 30 + 7, 401, 200) if block == 3000 else (16000 * 3 + 5, 1601)
    for n in lengths:
        clip = speech[1000: 1000 + n]
        want = theirs(clip)
        got = ours(clip)
        assert got.dtype == want.dtype == np.float32 and got.shape == want.shape
        assert np.array_equal(got, want), n
    clip = speech[: 16000 * 4]
    assert np.array_equal(ours(clip, padding=0), theirs(clip, padding=0))
    assert np.array_equal(ours(clip.astype(np.float64), chunk_length=30), theirs(clip.astype(np.float64), chunk_length=30))
    silence = np.zeros(16000, np.float32)  # the floor: every value at the loudest minus 8 decades
    assert np.array_equal(ours(silence), theirs(silence))


@pytest.mark.model
def test_each_whisper_model_computes_its_features_in_blocks():
    from deid_speech.asr.whisper import AsrOptions, Transcriber

    t = Transcriber(AsrOptions(model="tiny.en"))
    assert isinstance(t._model.feature_extractor, features.FrugalFeatureExtractor)
    assert t._model.feature_extractor.mel_filters.shape == (80, 201)
