"""voice_tagged: entity spans sit on speech, pauses are silent, timing adds up, runs repeat.

A tone-burst fake synthesizer checks the bookkeeping exactly; the real backends
(espeak-ng, flite, Piper) are then checked for energy alignment and determinism and
are skipped, with the install command as reason, where missing.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from deid_speech import models as shipped
from deid_speech.tts import make_example
from deid_speech.tts.base import (
    TARGET_SR,
    BackendUnavailable,
    Synthesizer,
    frame_rms,
    get_synthesizer,
    resample,
    trim_silence,
    voice_tagged,
)
from deid_speech.types import parse_tagged

TAGGED = ("ok my number is [PHONE] nine one seven three, four four eight two [PHONE] lah, "
          "and my I C is [NRIC] S one two three four five six seven D [NRIC].")


class ToneSynth(Synthesizer):
    """Silence, a 220 Hz tone of 40 ms per character, silence; at 8 kHz (so it resamples)."""

    name = "tone"
    sample_rate = 8000

    def synthesize(self, text: str) -> np.ndarray:
        n = int(0.04 * len(text) * self.sample_rate)
        tone = 0.5 * np.sin(2 * np.pi * 220 * np.arange(n) / self.sample_rate)
        lead, tail = np.zeros(int(0.2 * self.sample_rate)), np.zeros(int(0.15 * self.sample_rate))
        return np.concatenate([lead, tone, tail]).astype(np.float32)


def _rms(audio: np.ndarray, start: float, end: float) -> float:
    seg = audio[int(round(start * TARGET_SR)):int(round(end * TARGET_SR))]
    return float(np.sqrt(np.mean(seg.astype(np.float64) ** 2))) if seg.size else 0.0


def _check_alignment(utt, edge: float = 0.03) -> None:
    """Entity spans hold speech right up to their edges; every pause is silent."""
    _, ents = parse_tagged(utt.tagged)
    assert [s.label for s in utt.entities] == [e.label for e in ents]
    assert [s.text for s in utt.entities] == [utt.text[e.char_start:e.char_end] for e in ents]
    peak = max(frame_rms(utt.audio, TARGET_SR))
    for span in utt.entities:
        assert _rms(utt.audio, span.start, span.end) > 0.05 * peak, span
        assert _rms(utt.audio, span.start, span.start + edge) > 1e-3, f"silent onset {span}"
        assert _rms(utt.audio, span.end - edge, span.end) > 1e-3, f"silent offset {span}"
    pauses = [p for p in utt.parts if p.source == "pause"]
    assert len(pauses) >= 2 * len(utt.entities)
    for p in pauses:
        assert _rms(utt.audio, p.start, p.end) == 0.0, p


def _check_timing(utt) -> None:
    """Parts tile the audio without gaps; their durations add up to the whole."""
    assert utt.parts[0].start == 0.0
    for a, b in zip(utt.parts, utt.parts[1:]):
        assert b.start == pytest.approx(a.end, abs=1e-9)
    assert sum(p.duration for p in utt.parts) == pytest.approx(utt.duration, abs=1e-6)
    assert utt.parts[-1].end == pytest.approx(utt.duration, abs=1e-9)


# --- bookkeeping with the fake synthesizer ----------------------------------------------


def test_tone_spans_align_with_audio() -> None:
    utt = voice_tagged(TAGGED, ToneSynth(), np.random.default_rng(0))
    assert utt.sample_rate == TARGET_SR and utt.audio.dtype == np.float32
    _check_alignment(utt)
    # the trimmed tone lasts 40 ms per character (+ up to 2 x 15 ms trim margin)
    for span in utt.entities:
        assert 0.04 * len(span.text) <= span.duration <= 0.04 * len(span.text) + 0.04


def test_duration_is_sum_of_parts() -> None:
    synth, rng = ToneSynth(), np.random.default_rng(1)
    utt = voice_tagged(TAGGED, synth, rng, pause_range=(0.12, 0.3), edge_pause=0.1)
    _check_timing(utt)
    speech = [p for p in utt.parts if p.source == "speech"]
    assert [p.text for p in speech] == ["ok my number is", "nine one seven three, four four eight two",
                                        "lah, and my I C is", "S one two three four five six seven D"]
    expect = sum(len(trim_silence(resample(synth.synthesize(p.text), 8000, TARGET_SR), TARGET_SR))
                 for p in speech)
    pauses = [p.duration for p in utt.parts if p.source == "pause"]
    assert len(pauses) == len(speech) + 1  # edge, between each segment, edge (last '.' is silent)
    assert all(0.12 - 1e-4 <= d <= 0.3 + 1e-4 for d in pauses[1:-1])
    assert len(utt.audio) == expect + sum(int(round(d * TARGET_SR)) for d in pauses)


def test_char_offsets_match_parse_tagged() -> None:
    utt = voice_tagged(TAGGED, ToneSynth(), np.random.default_rng(0))
    text, ents = parse_tagged(TAGGED)
    assert utt.text == text and utt.entity_chars == ents


def test_deterministic_for_fixed_seed() -> None:
    a = voice_tagged(TAGGED, ToneSynth(), np.random.default_rng(42))
    b = voice_tagged(TAGGED, ToneSynth(), np.random.default_rng(42))
    c = voice_tagged(TAGGED, ToneSynth(), np.random.default_rng(43))
    assert np.array_equal(a.audio, b.audio) and a.entities == b.entities and a.parts == b.parts
    assert a.parts != c.parts


@pytest.mark.parametrize("bad", [
    "call me at [PHONE] nine eight seven six",
    "call me at nine eight [PHONE] seven six [NRIC]",
    "[PHONE] nine [NRIC] S one [NRIC] eight [PHONE]",
    "[PHONE] [PHONE] empty",
])
def test_unbalanced_tags_raise(bad: str) -> None:
    with pytest.raises(ValueError):
        voice_tagged(bad, ToneSynth(), np.random.default_rng(0))


def test_missing_binary_names_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    monkeypatch.setattr(shutil, "which", lambda _name: None)
    for backend, package in (("espeak", "espeak-ng"), ("flite", "flite")):
        with pytest.raises(BackendUnavailable, match=f"apt-get install -y {package}"):
            get_synthesizer(backend)


def test_example_truth_is_consistent(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setattr(make_example, "make_voice", lambda spec: ToneSynth())
    make_example.write_call(tmp_path, seed=3)
    truth = json.loads((tmp_path / "call.truth.json").read_text())
    assert truth["sample_rate"] == TARGET_SR and truth["file"] == "call.wav"
    labels = {e["label"] for e in truth["entities"]}
    assert len(truth["entities"]) >= 8 and len(labels) >= 6
    for e in truth["entities"]:
        assert truth["text"][e["char_start"]:e["char_end"]] == e["text"]
        assert 0 <= e["start"] < e["end"] <= truth["duration"]
    starts = [t["start"] for t in truth["turns"]]
    assert starts == sorted(starts) and {t["speaker"] for t in truth["turns"]} == {"agent", "caller"}
    row = json.loads((tmp_path / "call.manifest.jsonl").read_text())
    assert row["audio"] == "call.wav" and row["entities"] == truth["entities"] and row["text"] == truth["text"]


def test_shipped_example_manifest_matches_its_truth() -> None:
    root = shipped.path("example").parent
    truth = json.loads((root / "call.truth.json").read_text())
    assert json.loads((root / "call.manifest.jsonl").read_text()) == make_example.manifest_row(truth)


# --- real backends --------------------------------------------------------------------

BACKENDS = [
    pytest.param("espeak", {"voice": "en-us", "variant": "m3"}, id="espeak"),
    pytest.param("flite", {"voice": "rms"}, id="flite"),
    pytest.param("piper", {}, id="piper", marks=pytest.mark.model),
]


def _backend(name: str, kwargs: dict) -> Synthesizer:
    try:
        return get_synthesizer(name, **kwargs)
    except BackendUnavailable as exc:
        pytest.skip(str(exc))


@pytest.mark.parametrize("name, kwargs", BACKENDS)
def test_backend_spans_sit_on_speech(name: str, kwargs: dict) -> None:
    synth = _backend(name, kwargs)
    utt = voice_tagged(TAGGED, synth, np.random.default_rng(0))
    _check_alignment(utt)
    _check_timing(utt)
    assert 2.0 < utt.duration < 20.0


@pytest.mark.parametrize("name, kwargs", BACKENDS)
def test_backend_is_deterministic(name: str, kwargs: dict) -> None:
    synth = _backend(name, kwargs)
    a = voice_tagged(TAGGED, synth, np.random.default_rng(5))
    b = voice_tagged(TAGGED, synth, np.random.default_rng(5))
    assert np.array_equal(a.audio, b.audio) and a.entities == b.entities
