"""Outputs safe to share, measured on real redactions: PII strings in the shared outputs,
surrogate validity per label, and the time the transcript writers add.

    .venv/bin/python bench/outputs.py --utterances out/benchmark/dev/utterances/manifest.jsonl \\
        --limit 60 --asr-cache /tmp/outputs-asr.jsonl --out bench/results/outputs.json

For the shipped example call and the first ``--limit`` utterances of a voiced manifest, each
text operator in ``--ops`` redacts through the same path as ``deid-speech redact``
(:func:`deid_speech.pipeline.redact_file`, every format and ``--unredacted-report``) into a
scratch folder. Then:

* **found values in shared outputs**: each span text of ``X.pii.json`` (what the redaction
  found) is looked for, case- and space-insensitively, in every other output
  (``X.redacted.{json,srt,vtt,txt}``). Must be 0.
* **true values readable in shared outputs**: each true entity of the manifest, as its
  symbols (``value_key``: "nine one two" -> "912") or, for names and emails, its words,
  looked for in the shared transcript's letters and digits. These are the entities the
  detectors missed in the text: the transcript's leak, reported as it is.
* **surrogate validity**: every surrogate written for a found span, read back to its
  written value and checked with :mod:`deid_speech.validators` (NRIC/FIN check letter,
  Luhn, plate check letter, SG phone, passport and account shapes, email syntax, a real
  date, a name of letters), and against the original (never equal), per label.
* **writer time**: rendering every format of a finished redaction, against the redaction's
  own wall time.

A transcript cache (``--asr-cache``) lets the second operator reuse the first's ASR.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from deid_speech import models as shipped

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = shipped.path("example")
KEY = b"bench-outputs-key-not-secret"


def squash(text: str) -> str:
    return " ".join(text.lower().split())


def said_in(value: str, text: str) -> bool:
    """``value`` occurs in ``text`` as whole words (case and spacing aside): "eye" is not
    in "keyed"."""
    v = squash(value)
    return bool(v) and re.search(r"(?<![0-9a-z])" + re.escape(v) + r"(?![0-9a-z])", squash(text)) is not None


def alnum(text: str) -> str:
    return re.sub(r"[^0-9a-z]", "", text.lower())


def written(label: str, text: str) -> str:
    """A surrogate's written value (spoken forms read back through the shared normaliser)."""
    from deid_speech.redact import value_key

    if label == "EMAIL":
        return value_key(label, text)
    if label in ("PERSON", "DATE"):
        return text
    return value_key(label, text).upper()


def valid(label: str, value: str) -> bool:
    import datetime

    from deid_speech import validators as V

    if label == "NRIC":
        return V.is_valid_nric(value)
    if label == "CREDIT_CARD":
        return V.is_valid_card(value)
    if label == "CAR_PLATE":
        return V.is_valid_plate(value)
    if label == "PHONE":
        return V.is_valid_sg_phone(value)
    if label == "PASSPORT_NUM":
        return V.is_valid_passport(value)
    if label == "BANK_ACCOUNT":
        return V.is_plausible_bank_account(value)
    if label == "EMAIL":
        return V.is_valid_email(value)
    if label == "PERSON":  # the span's own trailing punctuation is kept
        return bool(re.fullmatch(r"[A-Za-z][A-Za-z'/-]*( [A-Za-z][A-Za-z'/-]*)*", value.strip(" .,!?;:")))
    if label == "DATE":  # a real calendar date in a written format, or spoken with a month name
        t = re.sub(r"(\d+)(st|nd|rd|th)\b", r"\1", value.strip())
        t = " ".join(re.sub(r"\b(of|the)\b", " ", t).split())
        if not re.search(r"\d", t):
            return any(m in t.lower() for m in ("january", "february", "march", "april", "may", "june", "july",
                                                "august", "september", "october", "november", "december"))
        for fmt in ("%d %B %Y", "%B %d, %Y", "%B %d %Y", "%d/%m/%Y", "%m/%d/%Y", "%d/%m/%y", "%Y-%m-%d",
                    "%d %b %Y", "%d-%m-%Y", "%d.%m.%Y"):
            yearless = fmt.replace(", %Y", "").replace(" %Y", "")
            for text, f in [(t, fmt)] + [(f"{t} 2000", yearless + " %Y")] * (yearless != fmt):
                try:
                    datetime.datetime.strptime(text, f)
                    return True
                except ValueError:
                    pass
        return False
    raise ValueError(label)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--utterances", type=Path, required=True, help="a voiced manifest (JSONL)")
    p.add_argument("--limit", type=int, default=60)
    p.add_argument("--ops", default="placeholder,surrogate", help="text operators to run")
    p.add_argument("--asr-cache", type=Path, default=None)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)

    from deid_speech.asr.whisper import AsrOptions, CachedTranscriber
    from deid_speech.manifest import read_resumable
    from deid_speech.pipeline import RedactConfig, Redactor, redact_file
    from deid_speech.redact import Operator, RedactOptions, TextRedactor, value_key
    from deid_speech.types import Span
    from deid_speech.writers import FORMATS, WRITERS

    rows = list(read_resumable(args.utterances))[: args.limit]
    files = [(EXAMPLE, json.loads((EXAMPLE.parent / "call.truth.json").read_text())["entities"])]
    files += [(args.utterances.parent / r["audio"], r.get("entities", [])) for r in rows]
    texts = {str(args.utterances.parent / r["audio"]): r["text"] for r in rows}
    texts[str(EXAMPLE)] = json.loads((EXAMPLE.parent / "call.truth.json").read_text())["text"]
    asr = CachedTranscriber(AsrOptions(), args.asr_cache) if args.asr_cache else None
    results = {"command": "python bench/outputs.py " + " ".join(sys.argv[1:] if argv is None else argv),
               "files": len(files), "utterances": str(args.utterances), "ops": {}}
    for op in [o.strip() for o in args.ops.split(",") if o.strip()]:
        # a key makes surrogates a function of the value, so the check below re-derives exactly
        # what the writers wrote
        options = RedactOptions(Operator(text=op), key=KEY if op in ("surrogate", "hash") else None)
        redactor = Redactor(RedactConfig(redact=options), asr=asr)
        asr = redactor.asr
        found_hits, truth_hits, n_found, n_truth = [], [], 0, 0
        validity: dict[str, Counter] = defaultdict(Counter)
        invalid: list[dict] = []
        redact_s = write_s = 0.0
        with tempfile.TemporaryDirectory() as tmp:
            for i, (src, entities) in enumerate(files):
                out = Path(tmp) / f"{i:03d}"
                t0 = time.perf_counter()
                _, json_out, result = redact_file(redactor, src, out, {src.resolve()}, unredacted_report=True,
                                                  formats=FORMATS)
                redact_s += time.perf_counter() - t0
                t0 = time.perf_counter()
                for f in FORMATS:
                    WRITERS[f].render(result, src.name, redactor.config, redactor.asr.name)
                write_s += time.perf_counter() - t0
                pii = json.loads(next(out.glob("*.pii.json")).read_text())
                shared = {q.name: q.read_text(encoding="utf-8") for q in out.iterdir()
                          if ".redacted." in q.name and q.suffix in (".json", ".srt", ".vtt", ".txt")}
                for s in pii["spans"]:
                    n_found += 1
                    for name, text in shared.items():
                        if said_in(s["text"], text):
                            found_hits.append({"file": src.name, "output": name, "label": s["label"]})
                joined = alnum(" ".join(w["text"] for w in json.loads(json_out.read_text())["words"]))
                full = texts[str(src)]
                for e in entities:
                    n_truth += 1
                    said = full[e["char_start"]:e["char_end"]] if "char_start" in e else e.get("text", "")
                    key = alnum(said) if e["label"] in ("PERSON", "EMAIL", "DATE") else \
                        alnum(value_key(e["label"], said))
                    if len(key) >= 4 and key in joined:
                        truth_hits.append({"file": src.name, "label": e["label"]})
                if op == "surrogate":  # what the writers wrote for each found span, read back
                    text_op = TextRedactor(options)
                    for s in pii["spans"]:
                        new = text_op.replacement(Span.from_dict(s))
                        assert new in shared[json_out.name], (new, s)
                        ok = valid(s["label"], written(s["label"], new))
                        same = value_key(s["label"], new) == value_key(s["label"], s["text"])
                        validity[s["label"]]["n"] += 1
                        validity[s["label"]]["valid"] += ok and not same
                        if not ok or same:
                            invalid.append({"label": s["label"], "surrogate": new, "same": same})
        results["ops"][op] = {
            "found_spans": n_found, "found_values_in_shared_outputs": len(found_hits), "hits": found_hits[:20],
            "true_entities": n_truth, "true_values_readable_in_shared_transcript": len(truth_hits),
            "readable_by_label": dict(Counter(h["label"] for h in truth_hits)),
            "redact_s": round(redact_s, 2), "writers_s": round(write_s, 3),
            "writers_share": round(write_s / redact_s, 4) if redact_s else None,
            "surrogate_validity": {k: {"n": v["n"], "valid": v["valid"], "rate": round(v["valid"] / v["n"], 3)}
                                   for k, v in sorted(validity.items())} or None,
            "invalid_surrogates": invalid}
        print(op, json.dumps({k: v for k, v in results["ops"][op].items() if k != "hits"}), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
