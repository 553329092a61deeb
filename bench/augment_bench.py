"""Augmentation benchmark: acceptance rate per strategy and temperature, diversity of the
accepted sentences (distinct-2, self-BLEU), and time per 100 accepted sentences.

    .venv/bin/python bench/augment_bench.py [--backend llamacpp] [--model FILE.gguf] [--n 40]
        [--max-requests 6] [--threads N] [--grammar] [--out bench/results/augment-<backend>.json]
        [--work DIR [--round-requests 2] [--arms diverse0.3,diverse0.6] [--report]]

Runs the four arms Similar/Diverse x 0.3/0.6 from data/seed/train.jsonl into a temporary
folder (each from scratch), so numbers are per arm on equal footing.

With ``--work DIR`` it is the long, resumable job instead: each arm's accepted sentences
stay in ``DIR/<arm>.jsonl``, the arms take turns (``--round-requests`` requests each per
round, so all four grow together), every finished round's summary is appended to
``DIR/rounds.jsonl`` (and the first ``--keep-rejected`` rejected lines of each round, with the
reason, to ``DIR/rejected.jsonl``), and a stopped job continues where it stopped when started again with
the same command (``augment`` resumes from the JSONL). An arm stops at ``--n`` sentences or
``--max-requests`` requests; the report sums the rounds (a round cut by a kill loses its
counts, never its sentences). ``--report`` prints the report of the rounds so far (and
writes it to ``--out`` when given) and generates nothing (``kept``: the sentences in each
file now). ``--arms`` gives the requests
to some arms only (the lagging ones, once the others have their sentences across jobs).
"""
from __future__ import annotations

import argparse
import json
import math
import random
import sys
import tempfile
import time
from collections import Counter
from dataclasses import replace
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


ARMS = (("similar", 0.3), ("similar", 0.6), ("diverse", 0.3), ("diverse", 0.6))


def describe(s: dict, out: Path) -> dict:
    """Add the accepted sentences' diversity and the rate per hour to an arm's summary."""
    texts = [json.loads(x)["text"] for x in out.read_text().splitlines() if x.strip()] if out.is_file() else []
    s.update({"distinct_2": round(distinct_n(texts), 4) if texts else None,
              "self_bleu": round(self_bleu(texts), 4) if len(texts) > 1 else None,
              "sentences_per_hour": round(3600 * s["new"] / s["wall_s"], 1) if s["wall_s"] else None,
              "kept": len(texts),  # in the file now (a later, stricter rule may have removed some)
              "examples": texts[:5]})
    return s


def sum_rounds(rounds: list[dict]) -> dict:
    """One arm's summary over its finished rounds."""
    total: dict = {"new": 0, "lines": 0, "wall_s": 0.0, "rejected": Counter(), "repairs": Counter(),
                   "repaired_accepted": 0, "rounds": len(rounds), "requests": 0, "accepted": 0}
    for r in rounds:
        for k in ("new", "lines", "wall_s", "repaired_accepted"):
            total[k] += r[k]
        total["rejected"].update(r["rejected"])
        total["repairs"].update(r["repairs"])
        total["requests"], total["accepted"] = r["requests"], r["accepted"]
    total["wall_s"] = round(total["wall_s"], 1)
    total["acceptance_rate"] = round(total["new"] / total["lines"], 4) if total["lines"] else 0.0
    total["s_per_100_accepted"] = round(100 * total["wall_s"] / total["new"], 1) if total["new"] else None
    total["rejected"], total["repairs"] = dict(total["rejected"]), dict(total["repairs"])
    return total


def run_rounds(work: Path, seed_file: Path, backend, arm_options, max_requests: int, per_round: int,
               generate: bool = True, arms: tuple[str, ...] | None = None) -> dict:
    """The resumable job: the arms take turns, ``per_round`` requests each, until every arm has
    its sentences or has used ``max_requests``; each finished round is appended to rounds.jsonl.
    ``generate=False`` only reports the rounds so far; ``arms``: only these arms get requests."""
    from deid_speech.augment.run import augment

    work.mkdir(parents=True, exist_ok=True)
    log = work / "rounds.jsonl"

    def done_rounds() -> dict[str, list[dict]]:
        rows = [json.loads(x) for x in log.read_text().splitlines() if x.strip()] if log.is_file() else []
        return {f"{s}{t}": [r for r in rows if r["arm"] == f"{s}{t}"] for s, t in ARMS}

    while generate:
        rounds = done_rounds()
        todo = [(s, t) for s, t in ARMS if (arms is None or f"{s}{t}" in arms) and (not rounds[f"{s}{t}"] or (
            not rounds[f"{s}{t}"][-1]["complete"] and rounds[f"{s}{t}"][-1]["requests"] < max_requests))]
        if not todo:
            break
        for strategy, temp in todo:
            arm = f"{strategy}{temp}"
            made = rounds[arm][-1]["requests"] if rounds[arm] else 0
            s = augment(seed_file, work / f"{arm}.jsonl",
                        replace(arm_options(strategy, temp, min(made + per_round, max_requests)), first_request=made),
                        backend)
            s.pop("out")
            rejected = s.pop("rejected_lines", [])
            with (work / "rejected.jsonl").open("a") as f:  # what validation turned down, to improve prompts and repairs
                f.writelines(json.dumps({"arm": arm, "request": made, **r}) + "\n" for r in rejected)
            with log.open("a") as f:
                f.write(json.dumps({"arm": arm, "time": time.time(), **s}) + "\n")
            print(f"{arm}: {s['accepted']} accepted after {s['requests']} requests", flush=True)
    return {arm: describe(sum_rounds(rs), work / f"{arm}.jsonl") for arm, rs in done_rounds().items()}


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
    ap.add_argument("--grammar", action="store_true", help="llama.cpp: grammar-constrained decoding (augment --grammar)")
    ap.add_argument("--keep-rejected", type=int, default=10, help="rejected raw lines kept per arm in the JSON")
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp CPU threads")
    ap.add_argument("--work", type=Path, default=None, help="resumable job folder (see the module docstring)")
    ap.add_argument("--round-requests", type=int, default=2, help="with --work: requests per arm per round")
    ap.add_argument("--report", action="store_true", help="with --work: report the rounds so far, generate nothing")
    ap.add_argument("--arms", default=None, help="with --work: comma-separated arms that get requests (default: all)")
    args = ap.parse_args()
    known = [f"{s}{t}" for s, t in ARMS]
    arms = tuple(args.arms.split(",")) if args.arms else None
    if arms and (unknown := set(arms) - set(known)):
        ap.error(f"no arm named {', '.join(sorted(unknown))} (known: {', '.join(known)})")

    from deid_speech.augment.llm import LlamaCppBackend, OllamaBackend, TemplateBackend
    from deid_speech.augment.run import AugmentOptions, augment
    from deid_speech.augment.seed import load_split

    seed_file = shipped.path("seed") / "train.jsonl"
    if args.report and not args.work:
        ap.error("--report needs --work")
    if args.report:  # no model is loaded: the report reads the job's files only
        backend = argparse.Namespace(name=args.backend, model=args.model)
    elif args.backend == "llamacpp":
        backend = LlamaCppBackend(model=args.model, threads=args.threads)
    elif args.backend == "ollama":
        backend = OllamaBackend(model=args.model or "llama3.1")
    else:
        backend = TemplateBackend([r["tagged"] for r in load_split(seed_file)])
    seed_texts = [r["text"] for r in load_split(seed_file)]
    sampling = {k: v for k, v in (("completions", args.completions), ("repeat_penalty", args.repeat_penalty),
                                  ("presence_penalty", args.presence_penalty)) if v is not None}
    results = {"backend": backend.name, "model": backend.model, "n_target": args.n,
               "max_requests": args.max_requests, "repair": not args.no_repair, "grammar": args.grammar,
               "sampling": {k: getattr(AugmentOptions(**sampling), k)
                            for k in ("completions", "repeat_penalty", "presence_penalty")},
               "seed_corpus": {"distinct_2": round(distinct_n(seed_texts), 4),
                               "self_bleu": round(self_bleu(seed_texts), 4)}, "arms": {}}

    def arm_options(strategy: str, temp: float, max_requests: int) -> AugmentOptions:
        return AugmentOptions(strategy=strategy, temperature=temp, n=args.n, seed=args.seed,
                              max_requests=max_requests, repair=not args.no_repair,
                              keep_rejected=args.keep_rejected, grammar=args.grammar, **sampling)

    if args.work:
        results["arms"] = run_rounds(args.work, seed_file, backend, arm_options, args.max_requests,
                                     args.round_requests, generate=not args.report, arms=arms)
        results["work"] = str(args.work)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            for strategy, temp in ARMS:
                out = Path(tmp) / f"{strategy}-{temp}.jsonl"
                s = augment(seed_file, out, arm_options(strategy, temp, args.max_requests), backend)
                s.pop("out")
                results["arms"][f"{strategy}{temp}"] = describe(s, out)
    for arm, s in results["arms"].items():
        print(f"{arm:<11}: accepted {s['new']}/{s['lines']} lines "
              f"({s['acceptance_rate']:.1%}) in {s['requests']} requests, {s['wall_s']} s; "
              f"distinct-2 {s['distinct_2']}, self-BLEU {s['self_bleu']}, "
              f"s/100 accepted {s['s_per_100_accepted']}; rejected {s['rejected']}; repairs {s['repairs']} "
              f"({s['repaired_accepted']} repaired lines accepted)", flush=True)
    print(f"seed corpus: distinct-2 {results['seed_corpus']['distinct_2']}, self-BLEU {results['seed_corpus']['self_bleu']}")
    if args.report and not args.out:
        return 0  # a report of a job's files is printed; it names no model to file it under
    out = args.out or ROOT / f"bench/results/augment-{backend.name}-{Path(str(backend.model)).stem}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
