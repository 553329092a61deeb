"""Long-call check: the shipped example repeated to 10+ minutes, redacted in one go.

    .venv/bin/python bench/long_call.py [--repeat 9] [--out bench/results/long_call.json]

Every copy's ground-truth entities must be covered (nothing lost at window boundaries),
and no word may be duplicated. Reports recall, RTF and peak memory.
"""
from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

from deid_speech import models as shipped

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/long_call.json")
    args = ap.parse_args()

    from deid_speech.audio import Audio, load
    from deid_speech.eval.overlap import OverlapScore
    from deid_speech.pipeline import RedactConfig, Redactor
    from deid_speech.types import Span

    ex = load(shipped.path("example"))
    truth = json.loads((shipped.path("example-truth")).read_text())
    gap = np.zeros((ex.sample_rate, 1), np.float32)  # 1 s between copies
    step = ex.duration + 1.0
    audio = Audio(np.concatenate([np.concatenate([ex.samples, gap])] * args.repeat), ex.sample_rate)
    spans_true = [Span(e["start"] + k * step, e["end"] + k * step, e["label"])
                  for k in range(args.repeat) for e in truth["entities"]]
    redactor = Redactor(RedactConfig())
    t = time.perf_counter()
    res = redactor.redact(audio)
    wall = time.perf_counter() - t
    sc = OverlapScore()
    sc.add(spans_true, res.spans)
    words = res.transcript.words
    dup = sum(1 for a, b in zip(words, words[1:])
              if min(a.end, b.end) - max(a.start, b.start) > 0.5 * min(a.end - a.start, b.end - b.start) > 0)
    out = {"audio_s": round(audio.duration, 1), "wall_s": round(wall, 1), "rtf": round(wall / audio.duration, 3),
           "recall": round(sc.overall.recall, 4), "precision": round(sc.overall.precision, 4),
           "entities": sc.overall.n_true, "spans": len(res.spans), "words": len(words),
           "duplicated_words": dup, "uncovered_speech_s": round(sum(b - a for a, b in res.uncovered), 2),
           "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
