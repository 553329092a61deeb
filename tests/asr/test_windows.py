"""Call-like training windows: packing plan, Whisper timestamp targets, channels, files."""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from deid_speech.asr.windows import apply_channel, draw_channel, main, pack, plan, timed_target


def test_plan_places_every_fitting_record_once_in_order_without_overlap() -> None:
    durations = [random.Random(i).uniform(1.5, 9.0) for i in range(60)] + [29.5]  # the last cannot fit
    windows = plan(durations, seed=3, max_s=28.0)
    placed = [i for w in windows for i, _ in w]
    assert sorted(placed) == list(range(60))
    for w in windows:
        ends = [off + durations[i] for i, off in w]
        assert ends[-1] <= 28.0
        for (i, off), (_j, nxt) in zip(w, w[1:]):
            assert nxt - (off + durations[i]) >= 0.2 - 1e-9  # a pause between sentences
    assert any(len(w) == 1 for w in windows) and any(len(w) >= 3 for w in windows)
    assert plan(durations, seed=3) == windows and plan(durations, seed=4) != windows


def test_timed_target_is_whispers_format_on_its_grid() -> None:
    t = timed_target([(0.381, 2.999, " my IC is S one "), (3.5, 3.5, "ok")])
    assert t == "<|0.38|> my IC is S one<|3.00|><|3.50|> ok<|3.52|>"


def test_channels_are_drawn_from_every_kind_and_keep_the_timeline() -> None:
    rng = random.Random(0)
    chans = [draw_channel(rng) for _ in range(300)]
    assert {c["line"] for c in chans} == {"none", "telephone", "amr", "g726", "opus", "mp3"}
    assert {(c["background"] or {}).get("kind") for c in chans} == {None, "noise", "babble"}
    assert any(c["room_rt60"] for c in chans) and any(not c["room_rt60"] for c in chans)
    json.dumps(chans)
    t = np.arange(32000) / 16000
    x = (0.2 * np.sin(2 * np.pi * 1000 * t) * (t > 1.0)).astype(np.float32)
    talker = (0.1 * np.random.default_rng(0).standard_normal(len(x))).astype(np.float32)
    for c in chans[:30]:
        y = apply_channel(x, c, [talker])
        assert len(y) == len(x)
        # the tone stays after 1 s (background at least 5 dB below it; a room's tail is shorter than 1 s)
        assert np.abs(y[18000:30000]).mean() > 1.5 * np.abs(y[:12000]).mean(), c


def _records(tmp_path: Path, n: int = 9) -> Path:
    (tmp_path / "audio").mkdir(parents=True)
    rows = []
    for i in range(n):
        dur = 1.0 + 0.25 * i
        t = np.arange(int(dur * 16000)) / 16000
        a = (0.2 * np.sin(2 * np.pi * (200 + 40 * i) * t) * ((t > 0.2) & (t < dur - 0.2))).astype(np.float32)
        sf.write(tmp_path / f"audio/u{i}.flac", a, 16000)
        rows.append({"id": f"u{i}", "audio": f"audio/u{i}.flac", "duration": dur, "text": f"sentence number {i}",
                     "words": [{"text": "sentence", "start": 0.2, "end": 0.6},
                               {"text": str(i), "start": 0.6, "end": dur - 0.2}]})
    (tmp_path / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path / "manifest.jsonl"


def test_pack_writes_windows_whose_targets_match_their_audio(tmp_path: Path) -> None:
    from deid_speech.asr.train_data import load_records

    src = _records(tmp_path / "src")
    out = tmp_path / "win"
    summary = pack(load_records(src), out, seed=1, max_s=6.0)
    rows = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    assert summary["windows"] == len(rows) and summary["records"] == 9
    assert sorted(p for r in rows for p in r["parts"]) == [f"u{i}" for i in range(9)]
    for r in rows:
        audio, sr = sf.read(out / r["audio"], dtype="float32")
        assert sr == 16000 and abs(len(audio) / sr - r["duration"]) < 0.01 and r["duration"] <= 6.0
        assert r["text"] == " ".join(f"sentence number {p[1:]}" for p in r["parts"])
        times = [float(x) for x in __import__("re").findall(r"<\|(\d+\.\d\d)\|>", r["timed"])]
        assert len(times) == 2 * len(r["parts"]) and times == sorted(times) and times[-1] <= r["duration"]
    # a rerun gives the same manifest and does not rewrite the audio
    first = (out / "manifest.jsonl").read_text()
    stamp = {p: p.stat().st_mtime_ns for p in (out / "audio").iterdir()}
    pack(load_records(src), out, seed=1, max_s=6.0)
    assert (out / "manifest.jsonl").read_text() == first
    assert {p: p.stat().st_mtime_ns for p in (out / "audio").iterdir()} == stamp


def test_windows_of_tagged_records_carry_the_joined_tags_and_shifted_entity_times(tmp_path: Path) -> None:
    from deid_speech.asr.train_data import load_records

    src = _records(tmp_path / "src")
    rows = [json.loads(x) for x in src.read_text().splitlines()]
    for i, r in enumerate(rows):
        r["tagged"] = f"sentence number [PHONE] {i} [PHONE]"
        r["entities"] = [{"label": "PHONE", "text": str(i), "char_start": 16, "char_end": 16 + len(str(i)),
                          "start": 0.6, "end": r["duration"] - 0.2}]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "win"
    pack(load_records(src), out, seed=1, max_s=6.0)
    wins = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    by_id = {r["id"]: r for r in rows}
    for w in wins:
        assert w["tagged"] == " ".join(by_id[p]["tagged"] for p in w["parts"])
        assert len(w["entities"]) == len(w["parts"])
        assert [w["text"][e["char_start"]:e["char_end"]] for e in w["entities"]] == [p[1:] for p in w["parts"]]
        # each entity lies inside its sentence's stretch of the timed target, in order
        times = [float(x) for x in __import__("re").findall(r"<\|(\d+\.\d\d)\|>", w["timed"])]
        for k, e in enumerate(w["entities"]):
            assert times[2 * k] - 0.5 <= e["start"] < e["end"] <= times[2 * k + 1] + 0.05 and e["end"] <= w["duration"]
    # records without tags give windows without them (train asr needs none)
    plain = tmp_path / "plain"
    pack(load_records(_records(tmp_path / "src2")), plain, seed=1, max_s=6.0)
    assert all("tagged" not in json.loads(x) for x in (plain / "manifest.jsonl").read_text().splitlines())


def test_cli_one_line_errors(tmp_path: Path, capsys) -> None:
    src = _records(tmp_path / "src", 3)
    assert main(["--manifest", str(src), "--out", str(tmp_path / "o"), "--max-seconds", "31"]) == 2
    assert capsys.readouterr().err.strip() == "error: --max-seconds must be in (1, 30]"
    assert main(["--manifest", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err
    assert main(["--manifest", str(src), "--out", str(tmp_path / "o")]) == 0
    assert json.loads(capsys.readouterr().out)["windows"] >= 1


@pytest.mark.parametrize("bad", ["", "   "])
def test_records_without_text_are_refused(tmp_path: Path, bad: str) -> None:
    from deid_speech.errors import DeidError

    with pytest.raises(DeidError, match="no records with text"):
        pack([{"id": "a", "audio": "x", "duration": 1.0, "text": bad}], tmp_path)
