"""How much earlier the true entity audio starts, and how much later it ends, than the
cascade's detected span; and what separate before/after redaction padding would leak.

    .venv/bin/python bench/onset_offsets.py --bench out/benchmark/dev \\
        --asr-cache out/asr-cache.jsonl --merge-gap 0.3 --out bench/results/onset_offsets.json
    # optionally also the project's own dev split, reported on its own:
    #   --dataset-dev out/datasets/small/dev/manifest.jsonl

Tuning data only: ``--bench`` is the benchmark's dev part (its ``utterances/`` and
``calls/`` manifests); a test part (``test``, ``test2``) is refused.

The detected spans are the cascade's as ``deid-speech eval`` scores them: one Whisper
transcript per file (read from ``--asr-cache`` when it holds it), the Redactor's detectors,
``merge_spans`` and ``place_spans`` (which widens mistimed spans and lets each span reach up
up to ``GAP_REACH_BEFORE`` / ``GAP_REACH_AFTER`` s into the pause before/after it), and no padding: padding is applied
only when the audio is overwritten (``redact_audio``) or scored (``eval``).

For each true entity (manifest times, exact by construction of the voiced benchmark) that
overlaps at least one detected span (any label), over the union of the detected spans
overlapping it:

* ``early`` = max(0, pred_start - true_start): entity audio before the detection;
* ``late``  = max(0, true_end - pred_end): entity audio after it;
* ``onset_signed`` = true_start - pred_start (< 0: the entity starts before the detection);
  ``offset_signed`` = true_end - pred_end (> 0: the entity ends after it).

``within_edge_words`` repeats early/late without the partial detections: entities whose
detection starts after their first reference word has ended (or ends before their last
word began), where the gap is missed words, not word timing. The same figures are given
for the spans before ``place_spans`` (what the detectors and ``merge_spans`` alone give),
to show what ``reach_gaps`` already covers.

Then, on a grid of (pad_before, pad_after), the leak metrics of :mod:`deid_speech.eval.leak`
(``LeakCounts``, over the regions the redactor overwrites: ``redaction_regions``, padding
per side, gaps under ``--merge-gap`` joined): leaked share of entity time (all entities, and only the detected
ones, where padding can help), leaky entities and over-redaction of other speech. The
recommended pads are the smallest grid values at or above the chosen quantile (0.9) of
``early`` / ``late`` over the pooled dev part's detections that hold the entity's first /
last word (the recogniser's timing; missed words are a detection failure that padding of
this size cannot mend), capped at the grid's maximum.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from common import refuse_test_part  # noqa: E402

PARTS = ("utterances", "calls")


def detect_part(manifest: Path, redactor, asr) -> list[dict]:
    """Per file of ``manifest``: its item, duration, detected spans (placed, unpadded), the
    spans before ``place_spans``, and the transcript (for the speech of files without
    reference words)."""
    from deid_speech.audio import load
    from deid_speech.errors import DeidError
    from deid_speech.eval.run import load_manifest
    from deid_speech.ner.base import merge_spans
    from deid_speech.redact import place_spans

    cfg = redactor.config
    out = []
    for item in load_manifest(manifest):
        audio = load(item.audio)
        tr = asr.transcribe(audio.mono16k())  # as eval.run.system_predictions does
        spans = redactor.detect(tr)  # what eval scores and redact_audio overwrites (plus padding)
        found = []
        for d in redactor.detectors:
            try:
                found.extend(d.detect(tr))
            except Exception as e:  # noqa: BLE001
                raise DeidError(f"detector {d.name} failed: {e}") from e
        raw = merge_spans([s for s in found if s.label in cfg.labels and s.score >= cfg.min_score])
        out.append({"item": item, "duration": audio.duration, "spans": spans, "raw": raw,
                    "placed_matches": place_spans(raw, tr) == spans, "transcript": tr})
    return out


def edges(records: list[dict], key: str = "spans") -> list[dict]:
    """One row per true entity that overlaps a detected span: its signed onset/offset
    differences against the union of the overlapping spans, and whether the detection
    starts after the entity's first reference word has ended (``missed_first_word``: a
    partial detection, not a timing offset) or ends before its last word began."""
    rows = []
    for r in records:
        item = r["item"]
        for t, c in zip(item.entities, item.entity_chars):
            over = [s for s in r[key] if s.start < t.end and t.start < s.end]
            if not over:
                continue
            ps, pe = min(s.start for s in over), max(s.end for s in over)
            ws = [w for w in item.words if c.char_start <= w.char_start and w.char_end <= c.char_end]
            rows.append({"id": item.id, "label": t.label, "onset_signed": t.start - ps,
                         "offset_signed": t.end - pe, "early": max(0.0, ps - t.start),
                         "late": max(0.0, t.end - pe),
                         "missed_first_word": bool(ws) and ps >= ws[0].end,
                         "missed_last_word": bool(ws) and pe <= ws[-1].start})
    return rows


def dist(x: list[float]) -> dict:
    a = np.asarray(x, dtype=float)
    if a.size == 0:
        return {"n": 0}
    q = {f"p{p}": round(float(np.percentile(a, p)), 3) for p in (5, 10, 25, 50, 75, 90, 95)}
    return {"n": int(a.size), "mean": round(float(a.mean()), 3), "median": q["p50"], **q,
            "min": round(float(a.min()), 3), "max": round(float(a.max()), 3)}


def edge_summary(rows: list[dict], n_entities: int) -> dict:
    early = [r["early"] for r in rows]
    late = [r["late"] for r in rows]

    def share(x, c):
        return round(sum(v > c for v in x) / len(x), 3) if x else None

    bins = np.round(np.arange(-0.5, 0.55, 0.05), 2)
    hist = {}
    for name in ("onset_signed", "offset_signed"):
        v = np.clip([r[name] for r in rows], -0.5 + 1e-9, 0.5 - 1e-9)
        counts, _ = np.histogram(v, bins=bins)
        hist[name] = {f"{a:+.2f}..{b:+.2f}": int(c) for a, b, c in zip(bins[:-1], bins[1:], counts)}
    return {"n_entities": n_entities, "n_detected": len(rows),
            "early": dist(early), "late": dist(late),
            "early_over": {f"{c}": share(early, c) for c in (0.1, 0.2, 0.3)},
            "late_over": {f"{c}": share(late, c) for c in (0.1, 0.2, 0.3)},
            "within_edge_words": {  # the partial detections left out: what is timing alone
                "n_missed_first_word": sum(r["missed_first_word"] for r in rows),
                "n_missed_last_word": sum(r["missed_last_word"] for r in rows),
                "early": dist([r["early"] for r in rows if not r["missed_first_word"]]),
                "late": dist([r["late"] for r in rows if not r["missed_last_word"]])},
            "onset_signed": dist([r["onset_signed"] for r in rows]),
            "offset_signed": dist([r["offset_signed"] for r in rows]),
            "histogram_clipped_to_0.5": hist}


def by_label(rows: list[dict], q: float) -> dict:
    out = {}
    for label in sorted({r["label"] for r in rows}):
        mine = [r for r in rows if r["label"] == label]
        out[label] = {"n": len(mine),
                      f"early_p{round(q * 100)}": round(float(np.percentile([r["early"] for r in mine], q * 100)), 3),
                      f"late_p{round(q * 100)}": round(float(np.percentile([r["late"] for r in mine], q * 100)), 3)}
    return out


def leak(records: list[dict], pad_before: float, pad_after: float, merge_gap: float = 0.0) -> dict:
    """``eval``'s audio-leak metrics (SystemScore.add) over the regions the redactor would
    overwrite (:func:`deid_speech.redact.redaction_regions`: padding per side, gaps under
    ``merge_gap`` joined); ``leaked_duration_detected``: the same over the detected entities only."""
    from deid_speech.eval.leak import LeakCounts
    from deid_speech.redact import Operator, RedactOptions, redaction_regions

    options = RedactOptions(Operator(pad_before=pad_before, pad_after=pad_after), merge_gap=merge_gap)

    allc, det = LeakCounts(), LeakCounts()
    for r in records:
        item, dur = r["item"], r["duration"]
        regions = [(a, min(dur, b)) for a, b, _ in redaction_regions(r["spans"], options)]
        speech = [(w.start, w.end) for w in (item.words or r["transcript"].words)]
        allc.add(item.entities, regions, speech)
        found = [t for t in item.entities if any(s.start < t.end and t.start < s.end for s in r["spans"])]
        det.add(found, regions, speech)
    d = allc.as_dict()
    return {"pad_before": round(pad_before, 3), "pad_after": round(pad_after, 3), "merge_gap": merge_gap,
            "leaked_duration": d["leaked_duration"], "leaky_entities": d["leaky_entities"],
            "over_redaction": d["over_redaction"], "leaked_duration_detected": round(det.leaked_duration, 4),
            "leaky_detected": round(det.leaky_entities, 4)}


def cover(x: list[float], q: float, step: float, cap: float) -> float:
    """The smallest grid value (multiple of ``step``) at or above the q-quantile, capped."""
    v = float(np.percentile(x, q * 100)) if x else 0.0
    return round(min(cap, math.ceil(v / step - 1e-9) * step), 3)


def _git_head() -> str | None:
    import subprocess

    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bench", type=Path, required=True, help="the benchmark's dev part (utterances/, calls/)")
    p.add_argument("--dataset-dev", type=Path, default=None, metavar="MANIFEST",
                   help="also measure this dev manifest (the project's own split), reported apart")
    p.add_argument("--asr-cache", type=Path, default=None, metavar="FILE")
    p.add_argument("--asr-model", default="tiny.en")
    p.add_argument("--ner-model", default="default")
    p.add_argument("--current", type=float, default=0.1, help="the current symmetric padding (0.1)")
    p.add_argument("--merge-gap", type=float, default=0.0,
                   help="join redactions closer than this (0: padding alone; redact's default is 0.3)")
    p.add_argument("--quantile", type=float, default=0.9)
    p.add_argument("--grid-max", type=float, default=0.5)
    p.add_argument("--grid-step", type=float, default=0.05)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    refuse_test_part(args.bench, "onset_offsets")

    from deid_speech.asr.whisper import AsrOptions, CachedTranscriber, transcriber
    from deid_speech.pipeline import RedactConfig, Redactor
    from deid_speech.redact import GAP_REACH_AFTER, GAP_REACH_BEFORE

    t0 = time.perf_counter()
    opts = AsrOptions(model=args.asr_model)
    asr = transcriber(opts, args.asr_cache)
    # the cascade as eval.run.system_predictions builds it (min_score 0.5); the redaction
    # options (padding) play no part in detect()
    redactor = Redactor(RedactConfig(asr_model=args.asr_model, min_score=0.5, ner_model=args.ner_model), asr=asr)
    sets: dict[str, list[dict]] = {}
    for part in PARTS:
        m = args.bench / part / "manifest.jsonl"
        if m.is_file():
            sets[part] = detect_part(m, redactor, asr)
    if not sets:
        p.error(f"--bench: no {'/ '.join(PARTS)}/manifest.jsonl under {args.bench}")
    sets["pooled"] = [r for part in PARTS for r in sets.get(part, [])]
    if args.dataset_dev:
        sets["dataset_dev"] = detect_part(args.dataset_dev, redactor, asr)

    grid = [round(i * args.grid_step, 3) for i in range(int(round(args.grid_max / args.grid_step)) + 1)]
    q = args.quantile
    results: dict = {"command": "python bench/onset_offsets.py " + " ".join(sys.argv[1:] if argv is None else argv),
                     "git_head": _git_head(), "bench": str(args.bench), "asr_model": args.asr_model,
                     "ner_model": args.ner_model,
                     "system": "cascade", "gap_reach": [GAP_REACH_BEFORE, GAP_REACH_AFTER], "current_padding": args.current,
                     "quantile": q, "grid": grid, "parts": {}}
    for name, recs in sets.items():
        rows, raw_rows = edges(recs), edges(recs, "raw")
        n = sum(len(r["item"].entities) for r in recs)
        results["parts"][name] = {
            "n_files": len(recs), "detect_is_place_spans_of_merged": all(r["placed_matches"] for r in recs),
            "edges": edge_summary(rows, n), "by_label": by_label(rows, q),
            "edges_before_place_spans": {k: v for k, v in edge_summary(raw_rows, n).items()
                                         if k != "histogram_clipped_to_0.5"},
            "grid": [leak(recs, b, a, args.merge_gap) for b in grid for a in grid]}

    pooled = edges(sets["pooled"])
    # padding is for the recogniser's timing: detections that missed a whole first/last word
    # are a detection failure no padding of this size can mend, so they are left out here
    rec_b = cover([r["early"] for r in pooled if not r["missed_first_word"]], q, args.grid_step, args.grid_max)
    rec_a = cover([r["late"] for r in pooled if not r["missed_last_word"]], q, args.grid_step, args.grid_max)
    results["recommendation"] = {
        "pad_before": rec_b, "pad_after": rec_a,
        "rule": f"smallest grid value >= p{round(q * 100)} of early / late over the pooled dev part's "
                f"detections that include the entity's first / last word, capped at {args.grid_max}",
        "compare": {name: {"current": leak(recs, args.current, args.current, args.merge_gap),
                            "recommended": leak(recs, rec_b, rec_a, args.merge_gap)}
                    for name, recs in sets.items()}}
    if isinstance(asr, CachedTranscriber):
        results["asr_cache"] = {"path": str(args.asr_cache), "hits": asr.hits, "decoded": asr.misses}
    results["wall_s"] = round(time.perf_counter() - t0, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")

    for name in results["parts"]:
        e = results["parts"][name]["edges"]
        print(f"{name}: {e['n_detected']}/{e['n_entities']} entities detected; early p50/p90/p95 "
              f"{e['early']['p50']}/{e['early']['p90']}/{e['early']['p95']} s, late p50/p90/p95 "
              f"{e['late']['p50']}/{e['late']['p90']}/{e['late']['p95']} s")
    print(f"recommended pad_before {rec_b} s, pad_after {rec_a} s")
    for name, c in results["recommendation"]["compare"].items():
        for k, v in c.items():
            print(f"  {name} {k} ({v['pad_before']}/{v['pad_after']}): leak {v['leaked_duration']:.4f} "
                  f"(detected {v['leaked_duration_detected']:.4f}), over-redaction {v['over_redaction']:.4f}")
    print(f"wrote {args.out} ({results['wall_s']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
