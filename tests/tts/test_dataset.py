"""voice_manifest / `deid-speech tts`: determinism across workers, resume, held-out voices,
entity spans on speech in the written FLAC, clear errors. Uses espeak-ng and flite (fast)."""
from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from deid_speech.errors import DeidError
from deid_speech.tts import cli
from deid_speech.tts.base import TARGET_SR, frame_rms
from deid_speech.tts.dataset import voice_manifest
from deid_speech.tts.voices import (
    DEFAULT_HELD_OUT,
    HeldOutVoiceError,
    UnknownVoice,
    parse_voice,
    speaker,
    split_voice_list,
    split_voices,
    voices_for_split,
)
from deid_speech.types import parse_tagged

needs_tts = pytest.mark.skipif(shutil.which("espeak-ng") is None or shutil.which("flite") is None,
                               reason="needs espeak-ng and flite: apt-get install -y espeak-ng flite")

TAGGED = [
    "call me at [PHONE] nine one two three [PHONE] ok",
    "my name is [PERSON] Tan Ah Kow [PERSON]",
    "[NRIC] S one two three D [NRIC] is my I C",
    "email me at [EMAIL] tan at gmail dot com [EMAIL] thanks",
    "on [DATE] the fifth of May [DATE] lah",
]
VOICES = ["espeak:en-us+m3@s170", "flite:slt"]


@pytest.fixture(scope="module")
def in_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("in") / "aug.jsonl"
    p.write_text("".join(json.dumps({"id": f"r{i}", "tagged": t}) + "\n" for i, t in enumerate(TAGGED)))
    return p


def _run(in_file: Path, out: Path, **kw) -> dict:
    opts = {"voices": VOICES, "augment": "full", "seed": 11, "workers": 1, "progress": False} | kw
    return voice_manifest(in_file, out, **opts)


@pytest.fixture(scope="module")
def reference(in_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One uninterrupted single-process run with full augmentation."""
    out = tmp_path_factory.mktemp("ref")
    summary = _run(in_file, out)
    assert summary["n"] == summary["new"] == len(TAGGED) and not summary["failed"]
    return out


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(x.astype(np.float64) ** 2)))


def _lines(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]


@needs_tts
def test_manifest_records(reference: Path) -> None:
    rows = _lines(reference)
    assert [r["id"] for r in rows] == [f"r{i}" for i in range(len(TAGGED))]
    for r in rows:
        text, ents = parse_tagged(r["tagged"])
        info = sf.info(str(reference / r["audio"]))
        assert (info.samplerate, info.channels, info.format) == (TARGET_SR, 1, "FLAC")
        assert info.frames / TARGET_SR == pytest.approx(r["duration"], abs=1e-3)
        assert r["text"] == text and r["voice"] in VOICES and r["words"]
        assert [(e["label"], e["char_start"], e["char_end"]) for e in r["entities"]] == \
            [(e.label, e.char_start, e.char_end) for e in ents]
        assert all(0 <= e["start"] < e["end"] <= r["duration"] for e in r["entities"])
        assert set(r["augment"]) >= {"speed", "snr_db", "telephone", "gain_db"}


@needs_tts
def test_manifest_words_tile_the_text_and_sit_in_their_segments(reference: Path) -> None:
    for r in _lines(reference):
        ws = r["words"]
        assert [r["text"][w["char_start"]:w["char_end"]] for w in ws] == r["text"].split()
        assert [w["text"] for w in ws] == r["text"].split()
        assert all(0 <= w["start"] <= w["end"] <= r["duration"] + 1e-3 for w in ws)
        assert all(a["end"] <= b["start"] + 1e-3 for a, b in zip(ws, ws[1:]))  # in order, no overlap
        assert r["word_times"] in ("pocketsphinx", "pocketsphinx+proportional")
        for e in r["entities"]:  # an entity's words are exactly its span
            inside = [w for w in ws if e["char_start"] <= w["char_start"] and w["char_end"] <= e["char_end"]]
            assert inside[0]["start"] == pytest.approx(e["start"], abs=2e-3)
            assert inside[-1]["end"] == pytest.approx(e["end"], abs=2e-3)
            others = [w for w in ws if w not in inside]
            assert not any(w["start"] < e["end"] - 1e-3 and e["start"] + 1e-3 < w["end"] for w in others)


@needs_tts
def test_workers_do_not_change_output(in_file: Path, reference: Path, tmp_path: Path) -> None:
    _run(in_file, tmp_path, workers=2)
    assert (tmp_path / "manifest.jsonl").read_bytes() == (reference / "manifest.jsonl").read_bytes()
    for r in _lines(reference):
        assert (tmp_path / r["audio"]).read_bytes() == (reference / r["audio"]).read_bytes()


@needs_tts
def test_resume_after_interruption(in_file: Path, reference: Path, tmp_path: Path) -> None:
    first = _run(in_file, tmp_path, limit=2)
    assert first["n"] == 2
    with open(tmp_path / "manifest.jsonl", "a") as fh:  # a line cut by a kill
        fh.write('{"id": "r2", "audio": "audio/r2.fl')
    again = _run(in_file, tmp_path)
    assert (again["new"], again["skipped"], again["n"]) == (3, 2, len(TAGGED))
    assert (tmp_path / "manifest.jsonl").read_bytes() == (reference / "manifest.jsonl").read_bytes()
    assert _run(in_file, tmp_path)["new"] == 0
    with pytest.raises(DeidError, match="other settings"):
        _run(in_file, tmp_path, seed=12)


@needs_tts
def test_entity_spans_hold_speech_in_flac(in_file: Path, reference: Path, tmp_path: Path) -> None:
    assert len(_run(in_file, tmp_path, augment="none")["per_voice"]) == len(VOICES)
    clean = {r["id"]: r for r in _lines(tmp_path)}
    for r in clean.values():
        audio, sr = sf.read(str(tmp_path / r["audio"]), dtype="float32")
        peak = float(frame_rms(audio, sr).max())
        assert np.abs(audio[:int(0.08 * sr)]).max() < 1e-3  # lead-in pause is silent
        for e in r["entities"]:
            a, b = int(e["start"] * sr), int(e["end"] * sr)
            assert _rms(audio[a:b]) > 0.1 * peak, e
            # trimming keeps 15 ms past the last frame within 40 dB of the segment's peak
            floor = 0.005 * float(frame_rms(audio[a:b], sr).max())
            assert _rms(audio[a:a + int(0.03 * sr)]) > floor, f"silent onset {e}"
            assert _rms(audio[b - int(0.03 * sr):b]) > floor, f"silent offset {e}"
            assert np.abs(audio[max(0, a - int(0.1 * sr)):a - int(0.02 * sr)]).max() < 1e-3  # pause before
    # same seed, other augmentation: same voice and pauses, times scaled by 1/speed
    for r in _lines(reference):
        c, speed = clean[r["id"]], r["augment"]["speed"]
        assert r["voice"] == c["voice"]
        assert r["duration"] == pytest.approx(c["duration"] / speed, abs=2e-3)
        for e, ce in zip(r["entities"], c["entities"]):
            assert e["start"] == pytest.approx(ce["start"] / speed, abs=2e-3)
            assert e["end"] == pytest.approx(ce["end"] / speed, abs=2e-3)


def test_held_out_voice_never_voices_train(in_file: Path, tmp_path: Path) -> None:
    with pytest.raises(HeldOutVoiceError, match="held out"):
        _run(in_file, tmp_path, voices=["flite:slt", "espeak:en-us+m3@s170"], held_out=["flite:slt"])
    with pytest.raises(HeldOutVoiceError, match="dev/test"):
        voices_for_split(["flite:rms"], "test", held_out=["flite:awb"])
    assert voices_for_split(["flite:awb@1"], "test", held_out=["flite:awb"]) == ["flite:awb"]
    train = voices_for_split(None, "train")
    assert train and not set(train) & set(DEFAULT_HELD_OUT)
    assert voices_for_split(None, "dev") == list(DEFAULT_HELD_OUT)


@pytest.mark.parametrize("voice", ["festival:ked@1.1", "espeak:en-gb-x-rp+f2@s150,p65",
                                   "flite:awb@0.9", "espeak:en-029+m1@s160", "flite:awb@f130"])
def test_a_rate_or_pitch_variant_of_a_reserved_speaker_never_voices_train(voice: str) -> None:
    with pytest.raises(HeldOutVoiceError, match="benchmark|held out"):
        voices_for_split([voice], "train")
    train, held = split_voices(["flite:awb@0.9", "flite:awb", "flite:rms"], ["flite:awb"])
    assert (train, held) == (["flite:rms"], ["flite:awb@0.9", "flite:awb"])
    assert speaker("piper:joe@1.1,p0.9") == "piper:joe@p0.9" != speaker("piper:joe@0.9")  # the defaults hold


def test_voice_names() -> None:
    assert parse_voice("piper:joe@1").name == "piper:joe"
    assert parse_voice("espeak:en-us+m3@150,p40").name == "espeak:en-us+m3@s150,p40"
    assert parse_voice("flite:slt@1.1").options == (("stretch", 1.1),)
    assert split_voice_list("flite:rms,espeak:en-gb+f3@s150,p60, piper:joe@0.9") == \
        ["flite:rms", "espeak:en-gb+f3@s150,p60", "piper:joe@0.9"]
    for bad in ("nope:voice", "piper:amy", "espeak:en-us@q3", "flite"):
        with pytest.raises(UnknownVoice):
            parse_voice(bad)


def _cli(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers(dest="command"))
    return cli.run(parser.parse_args(["tts", *argv]))


@needs_tts
@pytest.mark.parametrize("voice, message", [("espeak:xx-nowhere", "no language 'xx-nowhere'"),
                                            ("flite:nobody", "flite voice 'nobody' not available"),
                                            ("festival:kal", "festival voice 'kal' not installed|text2wave binary not found"),
                                                ("mbrola:us1", "unknown voice 'mbrola:us1'")])
def test_unknown_voice_is_a_clear_error(in_file: Path, tmp_path: Path, voice: str, message: str) -> None:
    with pytest.raises(DeidError, match=message) as info:
        _cli("--in", str(in_file), "--out-dir", str(tmp_path), "--voices", voice)
    assert "\n" not in str(info.value)
    assert not (tmp_path / "manifest.jsonl").exists()


@needs_tts
def test_cli_runs_and_reports(in_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(DeidError, match="no such input file"):
        _cli("--in", str(tmp_path / "missing.jsonl"), "--out-dir", str(tmp_path))
    assert _cli("--in", str(in_file), "--out-dir", str(tmp_path), "--voices", "flite:rms",
                "--limit", "1", "--augment", "none", "--progress", "off") == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["n"] == 1 and summary["per_voice"] == {"flite:rms": 1}


@needs_tts
def test_bad_records(tmp_path: Path) -> None:
    p = tmp_path / "in.jsonl"
    rows = [{"id": "bad", "tagged": "call me at [PHONE] nine one"}, {"id": "ok", "tagged": TAGGED[1]}]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = _run(p, tmp_path / "out", voices=["flite:rms"], augment="none")
    assert list(summary["failed"]) == ["bad"] and "unclosed [PHONE]" in summary["failed"]["bad"]
    assert [r["id"] for r in _lines(tmp_path / "out")] == ["ok"]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows[1:] * 2))
    with pytest.raises(DeidError, match="'ok' is repeated"):
        _run(p, tmp_path / "out2", voices=["flite:rms"])


def test_an_empty_input_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(DeidError, match="empty.jsonl: no records"):
        _cli("--in", str(tmp_path / "empty.jsonl"), "--out-dir", str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


@needs_tts
def test_a_rerun_revoices_missing_audio_and_refuses_changed_text(tmp_path: Path) -> None:
    p, out = tmp_path / "in.jsonl", tmp_path / "out"
    p.write_text("".join(json.dumps({"id": f"r{i}", "tagged": t}) + "\n" for i, t in enumerate(TAGGED[:2])))
    _run(p, out, voices=["flite:rms"], augment="none")
    before = (out / "manifest.jsonl").read_bytes()
    (out / "audio" / "r0.flac").unlink()
    again = _run(p, out, voices=["flite:rms"], augment="none")
    assert (again["new"], again["skipped"], again["n"]) == (1, 1, 2) and (out / "audio" / "r0.flac").is_file()
    assert sorted((out / "manifest.jsonl").read_bytes().splitlines()) == sorted(before.splitlines())
    p.write_text(json.dumps({"id": "r0", "tagged": TAGGED[2]}) + "\n")
    with pytest.raises(DeidError, match="tagged text of r0 differs from what was voiced"):
        _run(p, out, voices=["flite:rms"], augment="none")


@needs_tts
def test_bad_tags_ask_for_the_input_to_be_fixed(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    p = tmp_path / "in.jsonl"
    p.write_text(json.dumps({"id": "bad", "tagged": "call me at [PHONE] nine [NRIC] one"}) + "\n")
    assert _cli("--in", str(p), "--out-dir", str(tmp_path / "out"), "--voices", "flite:rms",
                "--progress", "off") == 1
    cap = capsys.readouterr()
    summary = json.loads(cap.out)
    assert "fix it in the input" in summary["failed"]["bad"] and summary["skipped"] == 0
    assert "1 have bad tagged text: fix the input" in cap.err and "rerun" not in cap.err
