"""Robustness benchmarks of the fail-closed issue: the same result on every run, and a long
call that does not collapse.

    .venv/bin/python bench/robustness.py repeat --manifest out/benchmark/dev/utterances/manifest.jsonl --n 100
    .venv/bin/python bench/robustness.py long-call --minutes 40 --out out/long-call

``repeat`` redacts the first N files of a manifest twice, in two separate processes, and
counts the files whose transcript or spans differ. ``long-call`` joins the dev calls of the
unseen-voice benchmark and the shipped example call (repeated) into one call of the given
length, with its entity times, redacts it with the default system, and scores the result
with ``deid-speech eval --predictions`` (leak, recall, over-redaction); wall time and peak
memory (``/usr/bin/time``-style, from ``resource``) are printed as JSON.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf

from deid_speech import models as shipped

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "deid_speech"]


def repeat(manifest: Path, n: int) -> dict:
    rows = [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()][:n]
    files = [str(manifest.parent / r["audio"]) for r in rows]
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(2):
            out = Path(tmp) / f"run{k}"
            subprocess.run(CLI + ["redact", *files, "--out-dir", str(out), "--progress", "off"], check=True,
                           capture_output=True)
            runs.append({p.name: json.loads(p.read_text()) for p in out.glob("*.redacted.json")})
    differ = [name for name in runs[0] if (runs[0][name]["redacted_transcript"], runs[0][name]["spans"])
              != (runs[1][name]["redacted_transcript"], runs[1][name]["spans"])]
    return {"files": len(runs[0]), "differing": len(differ), "examples": differ[:5]}


def long_call(minutes: float, out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    sources = [shipped.path("example-manifest")] + sorted(
        (ROOT / "out/benchmark/dev/calls").glob("manifest.jsonl"))
    recs = []
    for m in sources:
        for line in m.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                recs.append((m.parent / r["audio"], r))
    chunks, entities, words, texts, t, at = [], [], [], [], 0.0, 0
    k = 0
    while t < minutes * 60:
        path, r = recs[k % len(recs)]
        x, sr = sf.read(path, dtype="float32")
        assert sr == 16000
        for e in r["entities"]:
            entities.append({"label": e["label"], "start": round(t + e["start"], 3), "end": round(t + e["end"], 3),
                             "char_start": at + e["char_start"], "char_end": at + e["char_end"]})
        for w in r.get("words", []):
            words.append({"text": w["text"], "start": round(t + w["start"], 3), "end": round(t + w["end"], 3),
                          "char_start": at + w["char_start"], "char_end": at + w["char_end"]})
        texts.append(r["text"])
        at += len(r["text"]) + 1
        chunks += [x, np.zeros(8000, np.float32)]
        t += len(x) / sr + 0.5
        k += 1
    audio = np.concatenate(chunks)
    sf.write(out / "long.flac", audio, 16000)
    (out / "manifest.jsonl").write_text(json.dumps({"id": "long", "audio": "long.flac", "text": " ".join(texts),
                                                    "entities": entities, "words": words}) + "\n")
    t0 = time.perf_counter()
    r = subprocess.run(CLI + ["redact", str(out / "long.flac"), "--out-dir", str(out / "redacted"),
                              "--progress", "off"], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    result = {"minutes": round(len(audio) / 16000 / 60, 1), "entities": len(entities), "exit": r.returncode,
              "wall_s": round(wall, 1), "rtf": round(wall / (len(audio) / 16000), 3), "peak_rss_mb": round(peak_mb),
              "stderr_tail": r.stderr.strip().splitlines()[-2:]}
    if r.returncode == 0:
        subprocess.run(CLI + ["eval", "--manifest", str(out / "manifest.jsonl"), "--predictions",
                              str(out / "redacted"), "--out-dir", str(out / "eval")], check=True, capture_output=True)
        s = next(iter(json.loads((out / "eval/results.json").read_text())["systems"].values()))
        result.update({"recall": s["timestamp_overlap"]["overall"]["recall"],
                       "leak": s["audio_leak"]["leaked_duration"], "over_redaction": s["audio_leak"]["over_redaction"],
                       "uncovered_s": round(sum(b - a for a, b in json.loads(
                           (out / "redacted/long.redacted.json").read_text())["uncovered_speech"]), 1)})
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("repeat")
    a.add_argument("--manifest", type=Path, required=True)
    a.add_argument("--n", type=int, default=100)
    b = sub.add_parser("long-call")
    b.add_argument("--minutes", type=float, default=40.0)
    b.add_argument("--out", type=Path, default=Path("out/long-call"))
    args = ap.parse_args()
    res = repeat(args.manifest, args.n) if args.cmd == "repeat" else long_call(args.minutes, args.out)
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
