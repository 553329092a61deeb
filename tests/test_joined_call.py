"""bench/joined_call.py: calls joined in a chosen order, their entities where the joined call has them."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("joined_call", ROOT / "bench" / "joined_call.py")
joined_call = importlib.util.module_from_spec(spec)
spec.loader.exec_module(joined_call)


def test_the_order_is_the_manifests_reversed_or_named():
    ids = ["a", "b", "c"]
    assert joined_call.call_order(ids, "manifest") == ids
    assert joined_call.call_order(ids, "reversed") == ["c", "b", "a"]
    assert joined_call.call_order(ids, "b, a,b") == ["b", "a", "b"]
    with pytest.raises(ValueError, match="no call d"):
        joined_call.call_order(ids, "a,d")


def test_calls_are_joined_with_a_gap_and_their_entities_shifted(tmp_path):
    (tmp_path / "audio").mkdir()
    rows = []
    for k, seconds in (("one", 2.0), ("two", 3.0)):
        sf.write(tmp_path / "audio" / f"{k}.flac", np.full(int(seconds * 16000), 0.1 if k == "one" else -0.1), 16000)
        rows.append({"id": k, "audio": f"audio/{k}.flac", "text": f"call {k}",
                     "entities": [{"label": "PERSON", "start": 0.5, "end": 1.0, "char_start": 5,
                                   "char_end": 5 + len(k)}],
                     "words": [{"text": k, "start": 0.5, "end": 1.0, "char_start": 5, "char_end": 5 + len(k)}]})
    calls = tmp_path / "calls.jsonl"
    calls.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "j"
    r = joined_call.main(["--calls", str(calls), "--order", "reversed", "--out", str(out)])
    assert r["order"] == ["two", "one"] and r["entities"] == 2
    x, sr = sf.read(out / "joined.flac")
    from speed import GAP_S as gap  # bench/ is on the path once joined_call is loaded
    assert sr == 16000 and len(x) == int((3.0 + gap + 2.0 + gap) * 16000)
    assert x[0] < 0 and x[int((3.0 + gap + 0.1) * 16000)] > 0 and x[int(3.5 * 16000)] == 0  # two, the gap, one
    rec = json.loads((out / "manifest.jsonl").read_text())
    assert rec["text"] == "call two call one"
    assert [(e["start"], e["end"]) for e in rec["entities"]] == [(0.5, 1.0), (3.0 + gap + 0.5, 3.0 + gap + 1.0)]
    assert rec["text"][rec["entities"][1]["char_start"]:rec["entities"][1]["char_end"]] == "one"
    with pytest.raises(SystemExit, match="holds a joined call already"):
        joined_call.main(["--calls", str(calls), "--out", str(out)])
