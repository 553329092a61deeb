"""Throughput of `deid-speech redact` over a batch: serial vs --workers N, in audio hours
per wall hour, with the peak memory of the largest process (GNU time's max RSS of the
command and its children). The batch is cut from the shipped example call (clips of
``--clip`` seconds, ``--n`` of them), written to a temporary folder; model loading is
included, as a user pays it.

    .venv/bin/python bench/throughput.py --n 8 --clip 18 --workers 1,2 --ray 2 --out bench/results/throughput.json
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import soundfile as sf

from common import report
from deid_speech import models


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--clip", type=float, default=18.0)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--ray", default="", help="also `ingest --engine ray` with these worker counts, e.g. 2")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    x, sr = sf.read(models.path("example"), dtype="float32")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        step = max(1, int((len(x) - args.clip * sr) // max(1, args.n - 1)))
        for i in range(args.n):
            a = min(i * step, len(x) - int(args.clip * sr))
            p = Path(tmp, "in", f"clip{i:03d}.wav")
            p.parent.mkdir(exist_ok=True)
            sf.write(p, x[a:a + int(args.clip * sr)], sr)
            files.append(str(p))
        audio_s = args.n * args.clip
        exe = str(Path(sys.executable).with_name("deid-speech"))
        runs = [("redact", int(v)) for v in args.workers.split(",") if v] + \
            [("ingest-ray", int(v)) for v in args.ray.split(",") if v]
        for mode, w in runs:
            for rep in range(args.repeats):
                out = Path(tmp, f"out-{mode}-{w}-{rep}")
                cmd = ([exe, "redact", *files, "--out-dir", str(out), "--workers", str(w), "--progress", "off"]
                       if mode == "redact" else
                       [exe, "ingest", str(Path(files[0]).parent), "--out-dir", str(out), "--engine", "ray",
                        "--workers", str(w)])
                t0 = time.perf_counter()
                r = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True)
                wall = time.perf_counter() - t0
                if r.returncode:
                    raise SystemExit(r.stderr[-2000:])
                rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr).group(1))
                rows.append({"mode": mode, "workers": w, "repeat": rep, "wall_s": round(wall, 2),
                             "audio_h_per_wall_h": round(audio_s / wall, 2), "peak_rss_mb": round(rss / 1024)})
                print(rows[-1], flush=True)
    result = {"cpus": os.cpu_count(), "files": args.n, "clip_s": args.clip, "audio_s": audio_s, "runs": rows}
    report(result, args.out)


if __name__ == "__main__":
    main()
