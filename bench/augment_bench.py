"""Augmentation benchmark: acceptance rate per strategy and temperature, diversity of the
accepted sentences (distinct-2, self-BLEU), and time per 100 accepted sentences.

    .venv/bin/python bench/augment_bench.py [--backend llamacpp] [--model FILE.gguf] [--n 40]
        [--max-requests 6] [--out bench/results/augment-<backend>.json]

Runs the four arms Similar/Diverse x 0.3/0.6 from data/seed/train.jsonl into a temporary
folder (each from scratch), so numbers are per arm on equal footing.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path

from deid_speech import models as shipped

ROOT = Path(__file__).resolve().parents[1]


def distinct_n(texts: list[str], n: int = 2) -> float:
    grams = [tuple(t.split()[i:i + n]) for t in texts for i in range(len(t.split()) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 0.0


def _bleu(hyp: list[str], refs: list[list[str]], max_n: int = 4) -> float:
    """Sentence BLEU-4 with add-one smoothing (Lin & Och 2004) against several references."""
    if not hyp:
        return 0.0
    logs = 0.0
    for n in range(1, max_n + 1):
        h = Counter(tuple(hyp[i:i + n]) for i in range(len(hyp) - n + 1))
        best: Counter = Counter()
        for r in refs:
            for g, c in Counter(tuple(r[i:i + n]) for i in range(len(r) - n + 1)).items():
                best[g] = max(best[g], c)
        match = sum(min(c, best[g]) for g, c in h.items())
        total = max(sum(h.values()), 0)
        logs += math.log((match + 1) / (total + 1))
    ref_len = min((abs(len(r) - len(hyp)), len(r)) for r in refs)[1]
    bp = 1.0 if len(hyp) > ref_len else math.exp(1 - ref_len / max(len(hyp), 1))
    return bp * math.exp(logs / max_n)


def self_bleu(texts: list[str], sample: int = 100, seed: int = 0) -> float:
    """Mean BLEU of each sentence against all the others (higher = less diverse)."""
    toks = [t.lower().split() for t in texts]
    if len(toks) < 2:
        return float("nan")
    idx = random.Random(seed).sample(range(len(toks)), min(sample, len(toks)))
    return sum(_bleu(toks[i], toks[:i] + toks[i + 1:]) for i in idx) / len(idx)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="llamacpp", choices=("llamacpp", "ollama", "template"))
    ap.add_argument("--model", default=None)
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--max-requests", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--completions", type=int, default=None, help="completions per prompt (default: the job's)")
    ap.add_argument("--repeat-penalty", type=float, default=None)
    ap.add_argument("--presence-penalty", type=float, default=None)
    ap.add_argument("--no-repair", action="store_true", help="validate raw lines (no safe repairs)")
    ap.add_argument("--keep-rejected", type=int, default=10, help="rejected raw lines kept per arm in the JSON")
    args = ap.parse_args()

    from deid_speech.augment.llm import LlamaCppBackend, OllamaBackend, TemplateBackend
    from deid_speech.augment.run import AugmentOptions, augment
    from deid_speech.augment.seed import load_split

    seed_file = shipped.path("seed") / "train.jsonl"
    if args.backend == "llamacpp":
        backend = LlamaCppBackend(model=args.model)
    elif args.backend == "ollama":
        backend = OllamaBackend(model=args.model or "llama3.1")
    else:
        backend = TemplateBackend([r["tagged"] for r in load_split(seed_file)])
    seed_texts = [r["text"] for r in load_split(seed_file)]
    sampling = {k: v for k, v in (("completions", args.completions), ("repeat_penalty", args.repeat_penalty),
                                  ("presence_penalty", args.presence_penalty)) if v is not None}
    results = {"backend": backend.name, "model": backend.model, "n_target": args.n,
               "max_requests": args.max_requests, "repair": not args.no_repair,
               "sampling": {k: getattr(AugmentOptions(**sampling), k)
                            for k in ("completions", "repeat_penalty", "presence_penalty")},
               "seed_corpus": {"distinct_2": round(distinct_n(seed_texts), 4),
                               "self_bleu": round(self_bleu(seed_texts), 4)}, "arms": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for strategy in ("similar", "diverse"):
            for temp in (0.3, 0.6):
                out = Path(tmp) / f"{strategy}-{temp}.jsonl"
                s = augment(seed_file, out, AugmentOptions(strategy=strategy, temperature=temp, n=args.n,
                                                           seed=args.seed, max_requests=args.max_requests,
                                                           repair=not args.no_repair, keep_rejected=args.keep_rejected,
                                                           **sampling), backend)
                texts = [json.loads(x)["text"] for x in out.read_text().splitlines() if x.strip()]
                s.update({"distinct_2": round(distinct_n(texts), 4) if texts else None,
                          "self_bleu": round(self_bleu(texts), 4) if len(texts) > 1 else None,
                          "sentences_per_hour": round(3600 * s["new"] / s["wall_s"], 1) if s["wall_s"] else None,
                          "examples": texts[:5]})
                s.pop("out")
                results["arms"][f"{strategy}{temp}"] = s
                print(f"{strategy:<8} t={temp}: accepted {s['accepted']}/{s['lines']} lines "
                      f"({s['acceptance_rate']:.1%}) in {s['requests']} requests, {s['wall_s']} s; "
                      f"distinct-2 {s['distinct_2']}, self-BLEU {s['self_bleu']}, "
                      f"s/100 accepted {s['s_per_100_accepted']}; rejected {s['rejected']}; repairs {s['repairs']} "
                      f"({s['repaired_accepted']} repaired lines accepted)", flush=True)
    out = args.out or ROOT / f"bench/results/augment-{backend.name}-{Path(str(backend.model)).stem}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"seed corpus: distinct-2 {results['seed_corpus']['distinct_2']}, self-BLEU {results['seed_corpus']['self_bleu']}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
