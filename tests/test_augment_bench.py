"""bench/augment_bench.py --report: the job's rounds summed from its folder, printed, and
written only where --out says (it loads no model, so it has no model to name a file after)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "augment_bench.py"


def _job(work: Path) -> None:
    work.mkdir()
    sentences = ["my IC is S one two three four five six seven A lah", "call me at nine one two three four ok"]
    (work / "similar0.3.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in sentences))
    round_ = {"arm": "similar0.3", "time": 0.0, "accepted": 2, "new": 2, "lines": 8, "requests": 2,
              "complete": False, "wall_s": 60.0, "rejected": {"unbalanced": 5, "meta": 1},
              "repairs": {"bullet": 8}, "repaired_accepted": 2}
    (work / "rounds.jsonl").write_text(json.dumps(round_) + "\n")


def _report(work: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--backend", "llamacpp", "--work", str(work), "--report", *extra],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)


def test_report_prints_the_rounds_and_writes_no_file_without_out(tmp_path: Path) -> None:
    work = tmp_path / "job"
    _job(work)
    before = set((ROOT / "bench" / "results").iterdir())
    r = _report(work)
    assert r.returncode == 0, r.stderr
    assert "similar0.3 : accepted 2/8 lines (25.0%) in 2 requests" in r.stdout
    assert "'unbalanced': 5" in r.stdout
    assert set((ROOT / "bench" / "results").iterdir()) == before  # no augment-llamacpp-None.json


def test_report_is_written_where_out_says(tmp_path: Path) -> None:
    work, out = tmp_path / "job", tmp_path / "report.json"
    _job(work)
    r = _report(work, "--out", str(out))
    assert r.returncode == 0, r.stderr
    arms = json.loads(out.read_text())["arms"]
    assert arms["similar0.3"]["new"] == 2 and arms["similar0.3"]["rejected"] == {"unbalanced": 5, "meta": 1}
    assert arms["diverse0.6"]["new"] == 0
