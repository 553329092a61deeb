"""bench/conditions.py: each condition keeps the recording's length and times, does what it
says to the level, and the sets are built from a dev manifest's clean records only."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("conditions", ROOT / "bench" / "conditions.py")
conditions = importlib.util.module_from_spec(spec)
spec.loader.exec_module(conditions)


def _speech(seconds: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = int(seconds * 16000)
    envelope = np.resize(np.hanning(3200), n) * 0.1
    return (rng.standard_normal(n) * envelope).astype(np.float32)


def _db(x: np.ndarray) -> float:
    return 10 * np.log10(float(np.mean(np.asarray(x, np.float64) ** 2)))


def test_each_condition_keeps_the_length_and_changes_the_level_as_it_says() -> None:
    x = _speech(3.0, 0)
    others = [_speech(2.0, k) for k in range(1, 6)]
    names = [c for c in conditions.CONDITIONS if not c.startswith("caller-")]
    out = {name: conditions.condition(x, name, np.random.default_rng(1), others) for name in names}
    assert all(len(y) == len(x) and y.dtype == np.float32 for y in out.values())
    assert out["clean"] is x
    assert abs(_db(out["quiet"]) - (_db(x) - 30)) < 0.1
    assert np.abs(out["clipped"]).max() <= 1.0 and (np.abs(out["clipped"]) == 1.0).mean() > 0.01
    assert abs(_db(out["room"]) - _db(x)) < 0.5 and not np.allclose(out["room"], x)
    music = out["music"] - x  # mixed in 10 dB under the speech frames, so a little under 10 dB over all
    assert 8 < _db(x) - _db(music) < 14
    babble = out["babble"] - x
    assert 3 < _db(x) - _db(babble) < 8
    assert not np.allclose(out["amr"], x) and abs(_db(out["amr"]) - _db(x)) < 10  # 8 kHz band: noise loses its top half


def test_a_far_caller_is_turned_down_in_the_callers_turns_only() -> None:
    x = _speech(4.0, 0)
    turns = [{"speaker": "agent", "start": 0.1, "end": 1.5}, {"speaker": "caller", "start": 2.0, "end": 3.5}]
    y = conditions.condition(x, "caller-20", np.random.default_rng(0), [], turns)
    assert np.array_equal(y[:int(1.9 * 16000)], x[:int(1.9 * 16000)])
    part = slice(int(2.0 * 16000), int(3.5 * 16000))
    assert abs(_db(y[part]) - (_db(x[part]) - 20)) < 0.1
    with pytest.raises(ValueError, match="turns"):
        conditions.condition(x, "caller-28", np.random.default_rng(0), [])


def _manifest(tmp_path: Path, part: str) -> Path:
    d = tmp_path / part / "utterances"
    (d / "audio").mkdir(parents=True)
    rows = []
    for k in range(4):
        sf.write(d / "audio" / f"u{k}.flac", _speech(1.0, k), 16000, subtype="PCM_16")
        rows.append({"id": f"u{k}", "audio": f"audio/u{k}.flac", "duration": 1.0, "text": "x", "words": [],
                     "entities": [{"label": "PHONE", "start": 0.2, "end": 0.6}],
                     "augment": {"telephone": k % 2 == 1}})
    (d / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d / "manifest.jsonl"


def test_sets_are_built_from_the_clean_records_with_their_times(tmp_path) -> None:
    sets = conditions.build(_manifest(tmp_path, "dev"), tmp_path / "work", ["clipped", "quiet"], 1)
    for name, m in sets.items():
        rows = [json.loads(line) for line in m.read_text().splitlines()]
        assert [r["id"] for r in rows] == ["u0", "u2"]  # the telephone records are left out
        assert all(r["condition"] == name and r["entities"][0]["start"] == 0.2 for r in rows)
        assert all(sf.info(m.parent / r["audio"]).frames == 16000 for r in rows)


def test_a_test_part_is_refused() -> None:
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "conditions.py"), "--manifest",
                        "out/benchmark/test3/utterances/manifest.jsonl", "--work", "/tmp/nowhere"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "tuning data only" in r.stderr and "Traceback" not in r.stderr
