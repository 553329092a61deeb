"""bench/speed.py: the MemorySampler (the largest memory a process tree holds at one moment,
resident sets summed and proportional set sizes summed: a page two processes share counts
once in the second sum, twice in the first), and the manifest of the long call it joins."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("speed", ROOT / "bench" / "speed.py")
speed = importlib.util.module_from_spec(spec)
spec.loader.exec_module(speed)

linux_only = pytest.mark.skipif(not Path("/proc/self/smaps_rollup").exists(), reason="Linux /proc only")

# a child that maps FILE shared, touches every page, starts a grandchild that does the same, and
# holds both for a while: 64 MiB of the same file pages resident in two processes
SHARER = r"""
import mmap, subprocess, sys, time
with open(sys.argv[1], "rb") as fh:
    m = mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ)
total = sum(m[i] for i in range(0, len(m), 4096))
if len(sys.argv) > 2:
    kid = subprocess.Popen([sys.executable, "-c", sys.argv[2], sys.argv[1]])
    time.sleep(1.5)
    kid.wait()
else:
    time.sleep(1.2)
"""


@linux_only
def test_shared_pages_count_once_in_the_pss_sum_and_twice_in_the_rss_sum(tmp_path: Path) -> None:
    data = tmp_path / "shared.bin"
    data.write_bytes(b"\1" * (64 << 20))
    proc = subprocess.Popen([sys.executable, "-c", SHARER, str(data), SHARER])
    sampler = speed.MemorySampler(proc.pid, every=0.05)
    proc.wait()
    got = sampler.stop()
    assert got["largest_rss_sum_mb"] >= 2 * 64  # both processes hold the 64 MiB of file pages
    assert got["largest_pss_sum_mb"] >= 64  # ... which the machine holds once
    assert got["largest_rss_sum_mb"] - got["largest_pss_sum_mb"] >= 50


@linux_only
def test_a_process_that_is_gone_at_once_gives_nothing_not_zero() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    sampler = speed.MemorySampler(proc.pid, every=0.05)
    got = sampler.stop()
    # a finished (reaped) process has no /proc entry: no sample, rather than one of 0 MB, which
    # would read as "no memory"
    assert got == {}


def test_the_joined_call_keeps_every_entity_at_its_text_and_its_time(tmp_path: Path) -> None:
    def call(cid, text, ents):
        entities = [{"label": lab, "text": t, "char_start": text.index(t), "char_end": text.index(t) + len(t),
                     "start": a, "end": b} for lab, t, a, b in ents]
        words = [{"text": "Hi", "start": 0.1, "end": 0.3, "char_start": 0, "char_end": 2}]
        return {"id": cid, "text": text, "entities": entities, "words": words}

    calls = [call("a", "Hi, I'm Tan Wei Ming.", [("PERSON", "Tan Wei Ming", 0.8, 1.9)]),
             call("b", "Hi, call 9123 4567 lah.", [("PHONE", "9123 4567", 1.0, 2.5)])]
    rec = speed.long_call_manifest(calls, ["a", "b", "a"], tmp_path / "long.flac", {"a": 3.0, "b": 4.5})
    assert rec["duration"] == pytest.approx(3.0 + 1 + 4.5 + 1 + 3.0 + 1)
    assert [(e["label"], e["start"], e["end"]) for e in rec["entities"]] == [
        ("PERSON", 0.8, 1.9), ("PHONE", pytest.approx(5.0), pytest.approx(6.5)),
        ("PERSON", pytest.approx(10.3), pytest.approx(11.4))]
    for e in rec["entities"]:  # the characters still point at the value in the joined text
        assert rec["text"][e["char_start"]:e["char_end"]] == e["text"]
    assert [w["start"] for w in rec["words"]] == [0.1, pytest.approx(4.1), pytest.approx(9.6)]
    assert all(rec["text"][w["char_start"]:w["char_end"]] == "Hi" for w in rec["words"])


def test_the_speed_audio_is_the_first_four_dev_calls_and_an_utterance_of_the_first_hundred() -> None:
    utts = [{"id": "u-dev-024", "duration": 9.9}, {"id": "u-dev-150", "duration": 10.0},
            {"id": "u-dev-100", "duration": 12.0}]
    calls = [{"id": cid} for cid in (*speed.SPEED_CALLS[:2], "c-dev-gym-membership", *speed.SPEED_CALLS[2:])]
    best, chosen = speed.speed_sources(utts, calls)
    assert best["id"] == "u-dev-024"  # a later dev line nearer 10 s is not taken: the audio stays the same
    assert [d["id"] for d in chosen] == list(speed.SPEED_CALLS)
    with pytest.raises(SystemExit, match="make benchmark"):
        speed.speed_sources(utts, calls[:2])
