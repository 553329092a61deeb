"""The default system's leak and over-redaction on the unseen-voice benchmark's dev part under
a grid of (forward reach, pad_before, pad_after), and the setting that beeps least without
letting more through.

    .venv/bin/python bench/pad_grid.py --bench out/benchmark/dev --asr-cache out/asr-cache.jsonl \\
        --out bench/results/pad_grid.json

Each file is decoded once, as ``deid-speech eval --system cascade+verify`` does it
(:func:`deid_speech.eval.run.system_predictions`: the first decoder, the verifier's passes,
their transcripts kept in ``--asr-cache``), and detected once per forward reach
(:data:`deid_speech.redact.GAP_REACH_AFTER`: how far a span may grow into the pause after it,
applied where spans are placed); only the padding changes between the other cells, and each
cell is scored by eval's own :class:`~deid_speech.eval.run.SystemScore`.

The rule: among the settings whose leaked entity time is no higher than the current setting's
on every part (utterances and calls), the one with the least over-redaction, averaged over the
parts; ties go to the lesser mean leak. (Session 27's rule was the reverse, the least leak
among settings that beep no more: it chose 0.35 / 0 s, whose dev gain of 0.1-0.5 points of
leak did not carry to the test part; docs/results.md §0z. The default leaks near issue 14's
3 % and beeps far above its 12 %.)

Tuning data only: ``--bench`` is the dev part; a ``test`` folder is refused.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from common import SYSTEM, default_predictions, dev_manifests, refuse_test_part  # noqa: E402


def predictions(manifest: Path, cache: Path | None, reach_after: float | None = None) -> list[tuple]:
    """(item, prediction, duration) of every file of ``manifest``, as eval makes them; spans
    reach ``reach_after`` s into the pause after them (None: the default)."""
    from deid_speech import redact

    default = redact.GAP_REACH_AFTER
    if reach_after is not None:
        redact.GAP_REACH_AFTER = reach_after
    try:
        return default_predictions(manifest, cache)
    finally:
        redact.GAP_REACH_AFTER = default


def score(preds: list[tuple], before: float, after: float, labels: tuple[str, ...] = ()) -> dict:
    """Eval's audio-leak figures of ``preds`` with every span padded by (before, after), or only
    the spans of ``labels`` (the others, and speech no word covered, keep their padding)."""
    from deid_speech.eval.run import SystemScore

    s = SystemScore()
    for item, pred, duration in preds:
        if labels:
            kept = tuple((k, op) for k, op in pred.options.labels if k not in labels)
            padded = tuple((k, replace(pred.options.operator(k), pad_before=before, pad_after=after)) for k in labels)
            opts = replace(pred.options, labels=kept + padded)
        else:
            opts = replace(pred.options, default=replace(pred.options.default, pad_before=before, pad_after=after))
        s.add(item, replace(pred, options=opts), duration)
    d = s.as_dict()
    leak = d["audio_leak"]
    return {"pad_before": before, "pad_after": after, "recall": d["timestamp_overlap"]["overall"]["recall"],
            "leaked_duration": leak["leaked_duration"], "leaky_entities": leak["leaky_entities"],
            "over_redaction": leak["over_redaction"]}


def choose(cells: list[dict], current: tuple[float, float, float]) -> dict:
    """The rule of the module doc over ``cells`` (one row per setting and part); a setting is
    (reach_after, pad_before, pad_after)."""
    by_setting: dict[tuple[float, float, float], dict[str, dict]] = {}
    for c in cells:
        by_setting.setdefault((c["reach_after"], c["pad_before"], c["pad_after"]), {})[c["part"]] = c
    base = by_setting[current]
    safe = [k for k, parts in by_setting.items()
            if all(parts[p]["leaked_duration"] <= base[p]["leaked_duration"] for p in base)]

    def key(k):
        parts = by_setting[k].values()
        return (sum(c["over_redaction"] for c in parts) / len(parts),
                sum(c["leaked_duration"] for c in parts) / len(parts))

    best = min(safe, key=key)
    return {"reach_after": best[0], "pad_before": best[1], "pad_after": best[2],
            "current": dict(zip(("reach_after", "pad_before", "pad_after"), current)),
            "rule": "least mean over-redaction over the parts, among the settings whose leaked entity time is "
                    "no higher than the current setting's on every part",
            "parts": by_setting[best], "current_parts": base}


def main(argv: list[str] | None = None) -> int:
    from deid_speech.redact import GAP_REACH_AFTER, PAD_AFTER, PAD_BEFORE

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bench", type=Path, required=True, help="the benchmark's dev part (utterances/, calls/)")
    p.add_argument("--asr-cache", type=Path, default=None, metavar="FILE")
    p.add_argument("--reach-after", default="0,0.05,0.1,0.3", help="forward reach values (s), comma-separated")
    p.add_argument("--before", default="0.1,0.15,0.2,0.25,0.3,0.35,0.4", help="pad_before values, comma-separated")
    p.add_argument("--after", default="0,0.05,0.1,0.15,0.2,0.25", help="pad_after values, comma-separated")
    p.add_argument("--current", default=f"{GAP_REACH_AFTER},{PAD_BEFORE},{PAD_AFTER}",
                   help="the setting to beat: reach_after,pad_before,pad_after (default: redact's)")
    p.add_argument("--labels", default="", help="pad only these labels' spans (comma-separated; default: every span)")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    refuse_test_part(args.bench, "pad_grid")
    from deid_speech.types import LABELS

    labels = tuple(x.strip() for x in args.labels.split(",") if x.strip())
    if bad := [x for x in labels if x not in LABELS]:
        sys.exit(f"pad_grid: unknown label(s) {', '.join(bad)}; choose from {', '.join(LABELS)}")
    current = tuple(float(x) for x in args.current.split(","))
    if len(current) != 3:
        sys.exit("pad_grid: --current takes three numbers: reach_after,pad_before,pad_after")
    reaches = sorted({float(x) for x in args.reach_after.split(",")} | {current[0]})
    befores = sorted({float(x) for x in args.before.split(",")} | {current[1]})
    afters = sorted({float(x) for x in args.after.split(",")} | {current[2]})
    t0 = time.perf_counter()
    cells = []
    for part, manifest in dev_manifests(args.bench, "pad_grid"):
        for r in reaches:
            preds = predictions(manifest, args.asr_cache, r)
            for b in befores:
                for a in afters:
                    cells.append({"part": part, "reach_after": r, **score(preds, b, a, labels)})
    result = {"command": " ".join(["bench/pad_grid.py", *(argv if argv is not None else sys.argv[1:])]),
              "system": SYSTEM, "bench": str(args.bench), "asr_cache": str(args.asr_cache), "labels": list(labels),
              "grid": cells, "recommendation": choose(cells, current),
              "wall_s": round(time.perf_counter() - t0, 1)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    rec = result["recommendation"]
    chosen = (rec["reach_after"], rec["pad_before"], rec["pad_after"])
    print(f"{'part':10s} {'reach':>6s} {'before':>6s} {'after':>6s} {'recall':>6s} {'leak %':>7s} {'leaky %':>7s} "
          f"{'over %':>7s}")
    for c in cells:
        k = (c["reach_after"], c["pad_before"], c["pad_after"])
        mark = " <- chosen" if k == chosen else (" <- current" if k == current else "")
        print(f"{c['part']:10s} {c['reach_after']:6.2f} {c['pad_before']:6.2f} {c['pad_after']:6.2f} {c['recall']:6.3f} "
              f"{100 * c['leaked_duration']:7.2f} {100 * c['leaky_entities']:7.1f} {100 * c['over_redaction']:7.2f}{mark}")
    print(f"chosen: reach_after {chosen[0]}, pad_before {chosen[1]}, pad_after {chosen[2]} (written: {args.out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
