"""Start-up cost: ``import deid_speech`` and building the CLI parser, each in a fresh
interpreter, median of ``--runs``; which modules each loads (deid_speech's own, and the
heavy ones: numpy, torch, spaCy, faster-whisper, CTranslate2, transformers).

    .venv/bin/python bench/startup.py --runs 7 --out bench/results/startup.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from common import report

HEAVY = ("numpy", "scipy", "torch", "spacy", "faster_whisper", "ctranslate2", "transformers", "soundfile")
PROBE = """
import sys, time, json
t = time.perf_counter()
{stmt}
dt = time.perf_counter() - t
mods = sorted(sys.modules)
print(json.dumps({{"ms": dt * 1000, "deid": [m for m in mods if m.startswith("deid_speech")],
                  "heavy": [h for h in {heavy!r} if h in sys.modules], "n_modules": len(mods)}}))
"""
CASES = {"import deid_speech": "import deid_speech",
         "public API names": "from deid_speech import Redactor, RedactConfig, load_audio, save_audio",
         "CLI parser": "from deid_speech.cli import build_parser; build_parser()"}


def measure(stmt: str, runs: int) -> dict:
    rows = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", PROBE.format(stmt=stmt, heavy=HEAVY)], capture_output=True,
                             text=True, check=True).stdout
        rows.append(json.loads(out))
    return {"median_ms": round(statistics.median(r["ms"] for r in rows), 1),
            "min_ms": round(min(r["ms"] for r in rows), 1), "max_ms": round(max(r["ms"] for r in rows), 1),
            "deid_speech_modules": len(rows[-1]["deid"]), "heavy_modules": rows[-1]["heavy"],
            "all_modules": rows[-1]["n_modules"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    result = {name: measure(stmt, args.runs) for name, stmt in CASES.items()}
    report({"runs": args.runs, "python": sys.version.split()[0], "results": result}, args.out)


if __name__ == "__main__":
    main()
