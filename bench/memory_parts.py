"""Where a redaction's memory goes, part by part, each part measured in a fresh process.

    .venv/bin/python bench/memory_parts.py [--models tiny.en,tiny.en-sg,base-sg] [--threads 1,2] \\
        [--out bench/results/memory-parts.json]

For each Whisper model: the resident set after the imports, after loading the model, after
letting its weights go at once (``Transcriber.release``: the difference is the weights), and
around one 30 s window's encoding (the weights built again first): the peak during ``encode``
(sampled every 10 ms), what stays after it, and what stays after ``heap.give_back`` (which
the decoder calls after every decoding). Whisper encodes 30 s whatever the audio, so the encoding's peak is the same for a 10 s
utterance as for each window of a long call. Also the cascade's whole set (first decoder,
detectors, NER, VAD) after loading, and the 16 kHz track's size per minute of audio.
MB are MiB.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from common import report  # noqa: E402

CHILD = r"""
import json, sys, threading, time
def rss():
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith('VmRSS'):
                return int(line.split()[1]) / 1024
peak = [0.0]
def watch():
    while True:
        peak[0] = max(peak[0], rss())
        time.sleep(0.01)
out = {}
import numpy as np
from deid_speech.asr.whisper import AsrOptions, Transcriber
out['imports'] = rss()
model, threads = sys.argv[1], int(sys.argv[2])
if model == 'cascade':
    from deid_speech.pipeline import RedactConfig, Redactor
    r = Redactor(RedactConfig(verify=False))
    out['loaded'] = rss()
    print(json.dumps({k: round(v) for k, v in out.items()}))
    sys.exit(0)
t = Transcriber(AsrOptions.second_opinion(model=model, threads=threads))
out['loaded'] = rss()
t.release()
out['released'] = rss()
import ctranslate2
x = (np.random.default_rng(0).standard_normal(16000 * 30) * 0.05).astype(np.float32)
features = t._model.feature_extractor(x)[:, :3000][None].astype(np.float32)
t._model.model.fresh()
threading.Thread(target=watch, daemon=True).start()
time.sleep(0.2)
out['before_encode'] = rss()
peak[0] = out['before_encode']
t0 = time.perf_counter()
t._model.model.encode(ctranslate2.StorageView.from_array(features), to_cpu=True)
out['encode_s'] = time.perf_counter() - t0
time.sleep(0.2)
out['encode_peak'] = peak[0]
out['after_encode'] = rss()
from deid_speech import heap
heap.give_back()
out['after_give_back'] = rss()
print(json.dumps({k: round(v, 2) if k.endswith('_s') else round(v) for k, v in out.items()}))
"""


def measure(model: str, threads: int) -> dict:
    p = subprocess.run([sys.executable, "-c", CHILD, model, str(threads)], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{model}: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else 'failed'}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="tiny.en,tiny.en-sg,base-sg")
    ap.add_argument("--threads", default="1,2", help="CTranslate2 threads for the encoding, comma-separated")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    rows = {}
    for m in args.models.split(","):
        for th in (int(x) for x in args.threads.split(",")):
            r = measure(m, th)
            r["weights_mb"] = r["loaded"] - r["released"]
            r["encode_extra_mb"] = r["encode_peak"] - r["before_encode"]
            r["kept_after_encode_mb"] = r["after_encode"] - r["before_encode"]
            r["kept_after_give_back_mb"] = r["after_give_back"] - r["before_encode"]
            rows[f"{m} threads={th}"] = r
            print(f"{m} threads={th}: weights {r['weights_mb']} MB, encoding +{r['encode_extra_mb']} MB at its peak, "
                  f"+{r['kept_after_encode_mb']} MB after (+{r['kept_after_give_back_mb']} after heap.give_back), "
                  f"{r['encode_s']} s", flush=True)
    cascade = measure("cascade", 0)
    print(f"the cascade (first decoder, NER, VAD) loaded: {cascade['loaded']} MB", flush=True)
    result = {"models": rows, "cascade_loaded_mb": cascade["loaded"], "imports_mb": cascade["imports"],
              "track_mb_per_minute": round(16000 * 60 * 4 / 2**20, 2),
              "command": "python bench/memory_parts.py " + " ".join(sys.argv[1:] if argv is None else argv)}
    report(result, args.out)
    return result


if __name__ == "__main__":
    main()
