"""Benchmark of `deid-speech redact` (cascade): entity recall/precision and real-time factor.

    .venv/bin/python bench/redact_bench.py [--n 30] [--seed 7] [--voice piper] [--out bench/results/redact.json]

1. The shipped example (data/examples/call.wav + call.truth.json).
2. N synthetic utterances: sentences of a seed corpus split (``--split``, default test), tags refilled with
   fresh generated values (augment/replace.py), voiced with an offline voice (tts/),
   entity times exact from per-segment synthesis.
3. RTF on a >= 60 s clip made of synthetic utterances: in-process (models loaded) and the
   whole CLI run (`deid-speech redact`, model loading included).

Recall: true entities whose time span overlaps a detected span; precision: detected spans
that overlap a true entity (the paper's timestamp-overlap rule, label-agnostic; the
label-exact figures are reported too).
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf

from deid_speech import models as shipped
from deid_speech.systems import RECOGNISER

ROOT = Path(__file__).resolve().parents[1]


def truth_spans(entities: list[dict]):
    from deid_speech.types import Span

    return [Span(e["start"], e["end"], e["label"], text=e.get("text", "")) for e in entities]


def score(pairs):
    from deid_speech.eval.overlap import OverlapScore

    agnostic, exact = OverlapScore(), OverlapScore()
    for truth, pred in pairs:
        agnostic.add(truth, pred)
        exact.add(truth, pred, label_exact=True)
    return {"label_agnostic": agnostic.as_dict(), "label_exact": exact.as_dict()["overall"]}


def synth_utterances(n: int, seed: int, voice: str, split: str = "test"):
    from deid_speech.augment.replace import fill_tags
    from deid_speech.augment.seed import load_split
    from deid_speech.tts.base import get_synthesizer, voice_tagged

    rows = [r for r in load_split(shipped.path("seed") / f"{split}.jsonl") if r["entities"]]
    rng = random.Random(seed)
    rng.shuffle(rows)
    synth = get_synthesizer(voice)
    nrng = np.random.default_rng(seed)
    out = []
    for r in rows[:n]:
        tagged, _ = fill_tags(r["tagged"], rng)
        out.append(voice_tagged(tagged, synth, nrng))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--voice", default="piper")
    ap.add_argument("--split", default="test", choices=("train", "dev", "test"),
                    help="seed split the synthetic sentences come from (tune on dev, report test)")
    ap.add_argument("--asr-model", default=RECOGNISER, help="default: the cascade's (%(default)s)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/redact.json")
    args = ap.parse_args()

    from deid_speech.audio import Audio, load
    from deid_speech.pipeline import RedactConfig, Redactor

    t0 = time.perf_counter()
    redactor = Redactor(RedactConfig(asr_model=args.asr_model))
    load_s = time.perf_counter() - t0
    results: dict = {"asr_model": args.asr_model, "model_load_s": round(load_s, 2)}

    # 1. the shipped example
    truth = json.loads((shipped.path("example-truth")).read_text())
    res = redactor.redact(load(shipped.path("example")))
    ex_truth = truth_spans(truth["entities"])
    results["example"] = score([(ex_truth, res.spans)])
    results["example"]["missed"] = [t.to_dict() for t in ex_truth if not any(t.overlaps(p) for p in res.spans)]
    results["example"]["false_positives"] = [p.to_dict() for p in res.spans
                                             if not any(p.overlaps(t) for t in ex_truth)]

    # 2. synthetic utterances
    utts = synth_utterances(args.n, args.seed, args.voice, args.split)
    pairs, misses, false_pos = [], [], []
    for u in utts:
        r = redactor.redact(Audio(u.audio[:, None], u.sample_rate))
        pairs.append((u.entities, r.spans))
        for t in u.entities:
            if not any(t.overlaps(p) for p in r.spans):
                misses.append({"label": t.label, "text": t.text, "asr": r.transcript.text})
        for p in r.spans:
            if not any(p.overlaps(t) for t in u.entities):
                false_pos.append({"label": p.label, "text": p.text, "source": p.source, "asr": r.transcript.text})
    results["synthetic"] = score(pairs)
    results["synthetic"].update({"n_utterances": len(utts), "voice": args.voice, "split": args.split,
                                 "audio_s": round(sum(u.duration for u in utts), 1), "missed": misses,
                                 "false_positives": false_pos})

    # 3. RTF on a >= 60 s clip
    clip, t_off = [], 0.0
    gap = np.zeros(8000, np.float32)
    for u in utts * 4:
        clip += [u.audio, gap]
        t_off += u.duration + 0.5
        if t_off >= 60:
            break
    audio = np.concatenate(clip)
    dur = len(audio) / 16000
    runs = []
    for _ in range(3):
        t = time.perf_counter()
        redactor.redact(Audio(audio[:, None], 16000))
        runs.append(time.perf_counter() - t)
    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "clip60.wav"
        sf.write(wav, audio, 16000, subtype="PCM_16")
        t = time.perf_counter()
        cli = subprocess.run([str(Path(sys.executable).parent / "deid-speech"), "redact", str(wav),
                              "--out-dir", tmp, "--progress", "off"], capture_output=True, text=True)
        cli_s = time.perf_counter() - t
        if cli.returncode != 0:
            print(cli.stderr, file=sys.stderr)
    results["rtf"] = {"clip_s": round(dur, 1), "in_process_s": round(float(np.median(runs)), 2),
                      "rtf_without_loading": round(float(np.median(runs)) / dur, 3),
                      "cli_wall_s": round(cli_s, 2), "rtf_with_loading": round(cli_s / dur, 3),
                      "cli_ok": cli.returncode == 0}

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    ex, sy, rt = results["example"]["label_agnostic"]["overall"], results["synthetic"]["label_agnostic"], results["rtf"]
    print(f"example:   recall {ex['recall']:.3f} precision {ex['precision']:.3f} "
          f"({ex['tp_true']}/{ex['n_true']} entities, {ex['n_pred']} spans)")
    print(f"synthetic: recall {sy['overall']['recall']:.3f} precision {sy['overall']['precision']:.3f} "
          f"({sy['overall']['tp_true']}/{sy['overall']['n_true']} entities in {len(utts)} utterances, {args.voice})")
    for lab, c in sy["per_label"].items():
        print(f"  {lab:<13} recall {c['recall']:.3f} (n={c['n_true']})  precision {c['precision']:.3f} (n={c['n_pred']})")
    print(f"RTF on {rt['clip_s']} s: {rt['rtf_without_loading']} without loading, "
          f"{rt['rtf_with_loading']} with loading (CLI {rt['cli_wall_s']} s)")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
