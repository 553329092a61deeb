"""Diversity of the sentences an experiment's LLM arms train on, next to the seed corpus at
the same size (issue 21: distinct-2 and self-BLEU per arm against the seed corpus).

    .venv/bin/python bench/arm_diversity.py --config configs/experiments/small-llm.toml
        [--draws 5] [--out bench/results/arm-diversity-n300.json]

For each ``[[arm]]`` with ``sentences`` files: the first ``n`` sentences exactly as the matrix
takes them (``make_dataset.arm_shards`` and ``take_in_turn``), their distinct-2, self-BLEU, and BLEU against the
seed corpus (how closely they copy it: each sampled sentence against every seed sentence).
distinct-2 falls as a set grows, so the seed corpus is scored on random draws of the same
size (mean and sd over ``--draws`` draws) rather than whole.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from augment_bench import _bleu, distinct_n, self_bleu  # noqa: E402
from deid_speech import models as shipped  # noqa: E402
from deid_speech.augment.run import AugmentOptions  # noqa: E402
from deid_speech.augment.seed import load_split  # noqa: E402
from deid_speech.errors import DeidError  # noqa: E402
from deid_speech.make_dataset import arm_shards, parse_arms, read_config, take_in_turn  # noqa: E402


def bleu_to(texts: list[str], refs: list[str], sample: int = 100, seed: int = 0) -> float:
    """Mean BLEU of a sample of ``texts`` against all of ``refs``."""
    toks = [r.lower().split() for r in refs]
    pick = random.Random(seed).sample(texts, min(sample, len(texts)))
    return sum(_bleu(t.lower().split(), toks) for t in pick) / len(pick)


def describe(texts: list[str], seed_texts: list[str] | None) -> dict:
    out = {"n": len(texts), "distinct_2": round(distinct_n(texts), 4), "self_bleu": round(self_bleu(texts), 4)}
    if seed_texts is not None:
        out["bleu_to_seed"] = round(bleu_to(texts, seed_texts), 4)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, required=True)
    p.add_argument("--seed-file", type=Path, default=None, help="default: the shipped seed corpus's train split")
    p.add_argument("--draws", type=int, default=5)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    cfg = read_config(args.config)[0]
    if args.seed_file is None:
        args.seed_file = shipped.path("seed") / "train.jsonl"
    seed_texts = [r["text"] for r in load_split(args.seed_file)]
    results: dict = {"config": str(args.config), "seed_file": str(args.seed_file),
                     "seed_corpus_size": len(seed_texts), "arms": {}}
    sizes = set()
    for arm in parse_arms(cfg.get("arm", []), args.config.parent):
        if not arm.sentences:
            continue
        try:
            _, shards = arm_shards(arm, AugmentOptions(arm.strategy, arm.temperature).temp)
        except DeidError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        rows, _ = take_in_turn(shards, arm.n)
        if len(rows) < arm.n:
            print(f"error: arm {arm.name}: {len(rows)} sentences, n = {arm.n}", file=sys.stderr)
            return 1
        results["arms"][arm.name] = describe([r["text"] for r in rows], seed_texts)
        sizes.add(len(rows))
    for n in sorted(sizes):
        if n > len(seed_texts):
            continue
        draws = [describe(random.Random(k).sample(seed_texts, n), None) for k in range(args.draws)]
        results[f"seed_corpus_n{n}"] = {
            key: {"mean": round(statistics.mean(d[key] for d in draws), 4),
                  "sd": round(statistics.stdev(d[key] for d in draws), 4) if len(draws) > 1 else None}
            for key in ("distinct_2", "self_bleu")}
    for name, d in results["arms"].items():
        print(f"{name:<11} n {d['n']}: distinct-2 {d['distinct_2']}, self-BLEU {d['self_bleu']}, "
              f"BLEU to the seed corpus {d['bleu_to_seed']}")
    for key, d in results.items():
        if key.startswith("seed_corpus_n"):
            print(f"seed corpus, {args.draws} draws of {key[len('seed_corpus_n'):]}: "
                  f"distinct-2 {d['distinct_2']['mean']} ± {d['distinct_2']['sd']}, "
                  f"self-BLEU {d['self_bleu']['mean']} ± {d['self_bleu']['sd']}")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
