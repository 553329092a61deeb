"""A passage far quieter than the rest of a call: is its PII still beeped, and does the
level check raise anything in ordinary recordings?

    .venv/bin/python bench/quiet_passage.py --out bench/results/quiet-passage.json

**Turned down.** Each entity of the shipped example call (``models.path("example")``, nine
entities, clean 16 kHz speech) is turned down in turn, from 0.3 s before it to 0.3 s after it,
by each of ``--db`` (default 40, 50, 60 dB), and the call is redacted by the default
``Redactor`` (``--no-verify``: without the second opinion). Reported per entity and level: the
share of the entity's time that the redaction covers (spans and blanks, padded as ``redact``
pads them) and the labels of the spans over it.

**Raised by mistake.** Over the given manifests (default: every part of the unseen-voice
benchmark and the real-speech sets that are built), the recordings in which
:func:`deid_speech.audio.quiet_stretches` finds a passage to raise, and its seconds. A passage
raised in ordinary speech is decoded again at the call's level: more decoding, and whatever
the recogniser makes of a breath or a far-off voice.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from common import report  # noqa: E402
from deid_speech import manifest, models  # noqa: E402
from deid_speech.audio import Audio, load, quiet_stretches  # noqa: E402
from deid_speech.intervals import covered, union  # noqa: E402
from deid_speech.redact import redaction_regions  # noqa: E402

SETS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "out" / "benchmark").glob("*/*/manifest.jsonl")) + [
    "out/real-more/manifest.jsonl", "out/real-more-phone/manifest.jsonl"]


def turned_down(args) -> list[dict]:
    from deid_speech.pipeline import RedactConfig, Redactor

    call = load(models.path("example"))
    (record,) = manifest.read(models.path("example").with_name("call.manifest.jsonl"), need=("entities",),
                              check_audio=False, line_ids=False)
    redactor = Redactor(RedactConfig(verify=args.verify))
    sr, rows = call.sample_rate, []
    for db in args.db:
        for e in record.entities:
            x = call.samples.copy()
            a, b = max(0, int((e.start - 0.3) * sr)), min(len(x), int((e.end + 0.3) * sr))
            x[a:b] *= np.float32(10 ** (-db / 20))
            t0 = time.time()
            found = redactor.redact(Audio(x, sr))
            spans = found.spans + found.blanks
            regions = union([(s, t) for s, t, _ in redaction_regions(spans, redactor.config.redact)])
            share = covered(e.start, e.end, regions) / (e.end - e.start)
            rows.append({"db_down": db, "label": e.label, "start": e.start, "end": e.end, "beeped": round(share, 3),
                         "labels_over_it": sorted({s.label or s.source for s in spans if s.start < e.end and s.end > e.start}),
                         "seconds": round(time.time() - t0, 1)})
            print(f"-{db} dB {e.label:13s} beeped {share:6.1%} {rows[-1]['labels_over_it']}", file=sys.stderr)
    return rows


def raised(sets: list[str]) -> dict:
    out = {}
    for m in sets:
        path = ROOT / m
        if not path.is_file():
            continue
        records = manifest.read(path, need=("audio",), check_audio=False, line_ids=False)
        hits = []
        for r in records:
            x = load(r.audio).mono16k()
            found = quiet_stretches(x)
            if found:
                hits.append({"id": r.id, "seconds": round(sum(b - a for a, b, _ in found) / 16000, 2)})
        out[m] = {"recordings": len(records), "with_a_raised_passage": hits}
        print(f"{m}: {len(hits)} of {len(records)} with a passage raised", file=sys.stderr)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", type=float, nargs="+", default=[40.0, 50.0, 60.0], help="how far each entity is turned down")
    ap.add_argument("--no-verify", dest="verify", action="store_false", help="without the second opinion (faster)")
    ap.add_argument("--sets", nargs="*", default=SETS, help="manifests checked for passages raised by mistake")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if any(not 0 < d <= 90 for d in args.db):
        sys.exit("quiet_passage: --db must be over 0 and at most 90")
    rows = turned_down(args)
    by_db = {str(d): round(float(np.mean([r["beeped"] for r in rows if r["db_down"] == d])), 3) for d in args.db}
    report({"command": " ".join(["bench/quiet_passage.py", *sys.argv[1:]]), "verify": args.verify,
            "mean_share_beeped_by_db_down": by_db, "entities": rows, "raised_by_mistake": raised(args.sets)}, args.out)


if __name__ == "__main__":
    main()
