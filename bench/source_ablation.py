"""What each detector source of the default system buys and costs on the unseen-voice
benchmark's dev part: the leak and over-redaction with that source's spans left out.

    .venv/bin/python bench/source_ablation.py --bench out/benchmark/dev --asr-cache out/asr-cache.jsonl \\
        --out bench/results/source_ablation.json
    .venv/bin/python bench/source_ablation.py --manifest out/real-more/manifest.jsonl --variants name-list \\
        --asr-cache out/asr-cache-real.jsonl --out /tmp/ablation-real.json   # any non-test manifest

A span's source names the rule that found it (``patterns``, ``cue-runs``, ``ner``, ``spacy``,
``propn``, ``name-list``, ``name-slot``, ``spelled``, ``cue``, ``date-grammar``, ``title-doubt``, ``opening``,
``rare-word``; see the detectors). Each
variant drops the spans of one source before they are merged (:meth:`Redactor.detect`), either
everywhere or only in the verifier's transcripts (``verify:SOURCE``); ``verify:*`` drops the
verifier's second opinion whole and ``repeat`` the other mentions of a found value
(:func:`deid_speech.redact.repeat_mentions`), ``widen`` the widening of spans too short for their
text (:func:`deid_speech.redact.place_spans`; the reach across pauses stays). A variant may join
several of these with ``&`` (``verify:ner&spacy``). Transcripts come from ``--asr-cache`` as in
``deid-speech eval --system cascade+verify``, so only detection runs again; each variant is
scored by eval's own :class:`~deid_speech.eval.run.SystemScore`.

Read a row as: leaving this source out would let ``d_leak`` more entity audio through and beep
``-d_over`` less of the other speech. A source that costs over-redaction and buys no leak on
either part is a candidate to drop or to tighten; the dev part chooses, the test part is scored
once after.

Tuning data only: ``--bench`` is the dev part, ``--manifest`` any other set (dev-fast, real speech);
a path in a test part (``test``, ``test2``) is refused.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import SYSTEM, default_predictions, dev_manifests, refuse_test_part  # noqa: E402

SOURCES = ("patterns", "cue-runs", "ner", "spacy", "propn", "name-list", "name-slot", "spelled", "cue", "date-grammar",
           "title-doubt", "opening", "rare-word")

_state = {"everywhere": frozenset(), "in_verifier": frozenset(), "in_verify": False}


class Dropping:
    """A detector whose spans of the dropped sources are left out (those of
    ``_state["in_verifier"]`` only in the verifier's transcripts)."""

    def __init__(self, detector):
        self.detector = detector
        self.name = detector.name

    def detect(self, transcript):
        spans = self.detector.detect(transcript)
        drop = _state["everywhere"] | (_state["in_verifier"] if _state["in_verify"] else frozenset())
        return [s for s in spans if not set(s.source.split("+")) <= drop] if drop else spans


def parts(variant: str) -> list[str]:
    """The changes of a variant: "" none; several are joined with ``&``."""
    return [v for v in variant.split("&") if v]


def known(part: str) -> bool:
    return part in (*SOURCES, "repeat", "widen") or (part.startswith("verify:")
                                                      and part[len("verify:"):] in (*SOURCES, "*"))


@contextlib.contextmanager
def patched(variant: str):
    """Run the evaluation with ``variant`` in force: "" (nothing dropped), a source, ``verify:SOURCE``,
    ``verify:*``, ``repeat`` or ``widen``, or several of these joined with ``&``."""
    from deid_speech import pipeline
    from deid_speech.redact import reach_gaps

    changes = parts(variant)
    init, verify = pipeline.Redactor.__init__, pipeline.Redactor.verify
    repeat, place = pipeline.repeat_mentions, pipeline.place_spans

    def init2(self, *a, **k):
        init(self, *a, **k)
        self.detectors = [Dropping(d) for d in self.detectors]

    def verify2(self, mono, spans, heard=None, transcript=None):
        if "verify:*" in changes:
            for pending in heard or ():
                pending.result()  # read the cache as the default does; add nothing
            return pipeline.SecondOpinion([], [])
        _state["in_verify"] = True
        try:
            return verify(self, mono, spans, heard, transcript)
        finally:
            _state["in_verify"] = False

    _state.update(everywhere=frozenset(c for c in changes if c in SOURCES),
                  in_verifier=frozenset(c[len("verify:"):] for c in changes if c.startswith("verify:")) - {"*"})
    pipeline.Redactor.__init__, pipeline.Redactor.verify = init2, verify2
    if "repeat" in changes:
        pipeline.repeat_mentions = lambda spans, transcript: []
    if "widen" in changes:
        pipeline.place_spans = reach_gaps
    try:
        yield
    finally:
        pipeline.Redactor.__init__, pipeline.Redactor.verify = init, verify
        pipeline.repeat_mentions, pipeline.place_spans = repeat, place
        _state.update(everywhere=frozenset(), in_verifier=frozenset(), in_verify=False)


def score(manifest: Path, cache: Path | None, variant: str) -> dict:
    """Eval's figures for the default system on ``manifest`` with ``variant`` in force."""
    from deid_speech.eval.run import SystemScore

    s = SystemScore()
    with patched(variant):
        preds = default_predictions(manifest, cache)
    for item, pred, duration in preds:
        s.add(item, pred, duration)
    d = s.as_dict()
    leak = d["audio_leak"]
    return {"recall": d["timestamp_overlap"]["overall"]["recall"], "leaked_duration": leak["leaked_duration"],
            "leaky_entities": leak["leaky_entities"], "over_redaction": leak["over_redaction"],
            "by_cause": leak.get("over_redaction_by_cause", {})}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--bench", type=Path, help="the benchmark's dev part (utterances/, calls/)")
    where.add_argument("--manifest", type=Path, action="append",
                       help="a manifest to score instead (repeatable): dev-fast's calls, the real-speech set")
    p.add_argument("--asr-cache", type=Path, default=None, metavar="FILE")
    p.add_argument("--variants", default=None,
                   help="comma-separated; one variant's changes joined with & (default: every source, "
                        "everywhere and in the verifier only; verify:*; repeat; widen)")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    for path in [args.bench] if args.bench else args.manifest:
        refuse_test_part(path, "source_ablation")
    variants = args.variants.split(",") if args.variants else [
        *SOURCES, *(f"verify:{s}" for s in SOURCES), "verify:*", "repeat", "widen"]
    unknown = [c for v in variants for c in parts(v) if not known(c)]
    if unknown:
        sys.exit(f"source_ablation: unknown variant {unknown[0]!r} (a source, verify:SOURCE, verify:*, repeat, "
                 f"widen, or several joined with &; sources: {', '.join(SOURCES)})")
    if args.manifest:
        for m in args.manifest:
            if not m.is_file():
                sys.exit(f"source_ablation: no {m}")
        manifests = [("/".join(m.parent.parts[-2:]), m) for m in args.manifest]
    else:
        manifests = dev_manifests(args.bench, "source_ablation")
    t0 = time.perf_counter()
    rows = []
    for part, manifest in manifests:
        base = score(manifest, args.asr_cache, "")
        rows.append({"part": part, "variant": "", **base})
        for v in variants:
            r = score(manifest, args.asr_cache, v)
            rows.append({"part": part, "variant": v, **r,
                         "d_leak": round(r["leaked_duration"] - base["leaked_duration"], 5),
                         "d_over": round(r["over_redaction"] - base["over_redaction"], 5)})
            print(f"{part:10s} {v:20s} recall {r['recall']:.3f} leak {100 * r['leaked_duration']:6.2f} "
                  f"(d {100 * rows[-1]['d_leak']:+6.2f}) over {100 * r['over_redaction']:6.2f} "
                  f"(d {100 * rows[-1]['d_over']:+6.2f})", flush=True)
    result = {"command": " ".join(["bench/source_ablation.py", *(argv if argv is not None else sys.argv[1:])]),
              "system": SYSTEM, "bench": str(args.bench) if args.bench else None,
              "manifests": [str(m) for _, m in manifests], "asr_cache": str(args.asr_cache), "rows": rows,
              "wall_s": round(time.perf_counter() - t0, 1)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
