"""Whisper transcription: windowing for long calls (unit) and on real speech (model)."""
import json
from pathlib import Path

import numpy as np
import pytest

from deid_speech.asr.whisper import AsrOptions, cut_points

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "data/examples/call.wav"


def test_cut_points_land_in_silence_and_cover_the_whole_call():
    sr = 16000
    rng = np.random.default_rng(0)
    x = (0.3 * rng.standard_normal(sr * 700)).astype(np.float32)
    for quiet in (290.0, 585.5):  # quiet stretches just before the nominal 300 s cuts
        x[int(quiet * sr): int((quiet + 0.5) * sr)] = 0.0
    cuts = cut_points(x, sr, window_s=300)
    assert cuts[0] == 0 and cuts[-1] == pytest.approx(700)
    assert 290.0 <= cuts[1] <= 290.5
    assert all(b > a for a, b in zip(cuts, cuts[1:]))


def test_short_audio_is_one_window():
    assert cut_points(np.zeros(16000 * 20, np.float32), 16000, 300) == [0.0, 20.0]


def test_window_options_are_validated():
    with pytest.raises(ValueError):
        AsrOptions(window_s=3)
    with pytest.raises(ValueError):
        AsrOptions(window_s=60, overlap_s=30)


@pytest.mark.model
def test_windowed_transcription_neither_loses_nor_duplicates_words():
    from deid_speech.asr.whisper import Transcriber
    from deid_speech.audio import load

    audio = load(EXAMPLE).mono16k()
    assert len(audio) / 16000 > 40
    whole = Transcriber(AsrOptions()).transcribe(audio)
    windowed = Transcriber(AsrOptions(window_s=12, overlap_s=2)).transcribe(audio)
    starts = [w.start for w in windowed.words]
    assert starts == sorted(starts)
    # nothing duplicated: no two words overlap by more than half of the shorter one
    for x, y in zip(windowed.words, windowed.words[1:]):
        assert min(x.end, y.end) - max(x.start, y.start) <= 0.5 * min(x.end - x.start, y.end - y.start) + 1e-6
    # nothing lost: all speech is covered by words, and the ordinary words agree with the
    # whole-window pass (digits are left out: Whisper writes them as words or figures
    # depending on context, "nine one" vs "91")
    from deid_speech.asr.whisper import uncovered_speech

    assert uncovered_speech(audio, 16000, windowed.words) == []
    import difflib
    import re

    def words(t):
        return [w for w in re.findall(r"[a-z']+", t.text.lower()) if len(w) > 2]

    a, b = words(whole), words(windowed)
    ratio = difflib.SequenceMatcher(a=a, b=b).ratio()
    assert ratio > 0.75, (ratio, " ".join(a), " ".join(b))  # 12 s windows lose some context


@pytest.mark.model
def test_tiny_en_transcribes_the_example_with_word_times():
    from deid_speech.asr.whisper import Transcriber
    from deid_speech.audio import load

    truth = json.loads((EXAMPLE.parent / "call.truth.json").read_text())
    t = Transcriber().transcribe(load(EXAMPLE).mono16k())
    assert len(t.words) > 50
    for w in t.words:
        assert t.text[w.char_start:w.char_end] == w.text
        assert 0 <= w.start <= w.end <= truth["duration"] + 0.5
    import jiwer

    wer = jiwer.wer(truth["text"].lower(), t.text.lower())
    assert wer < 0.5
