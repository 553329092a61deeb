"""bench/memory_parts.py: each part of a process's memory, measured in a fresh process."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("memory_parts", ROOT / "bench" / "memory_parts.py")
memory_parts = importlib.util.module_from_spec(spec)
spec.loader.exec_module(memory_parts)


@pytest.mark.model
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="Linux /proc only")
def test_the_encoding_of_one_window_is_measured_apart_from_the_weights(tmp_path):
    out = tmp_path / "parts.json"
    r = memory_parts.main(["--models", "tiny.en", "--threads", "1", "--out", str(out)])
    row = r["models"]["tiny.en threads=1"]
    assert json.loads(out.read_text())["models"]["tiny.en threads=1"] == row
    # tiny.en int8: tens of MB of weights; its encoder's attention (6 heads, 1500 x 1500 floats,
    # 54 MB a buffer) makes one window's encoding cost more than that for a moment
    assert 30 <= row["weights_mb"] <= 200
    assert row["encode_extra_mb"] >= 50 and row["encode_peak"] >= row["after_encode"] >= row["after_give_back"]
    assert row["imports"] < row["released"] < row["loaded"]
    assert r["cascade_loaded_mb"] > row["loaded"]  # NER and VAD on top of one model
    assert r["track_mb_per_minute"] == pytest.approx(3.66, abs=0.01)
