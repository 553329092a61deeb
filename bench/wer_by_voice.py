"""WER and leak per voice and channel, from `deid-speech eval` results: one table for several recognisers.

    .venv/bin/python bench/wer_by_voice.py --manifest out/benchmark/dev/utterances/manifest.jsonl \\
        --results stock=out/eval/stock-dev-utterances/results.json \\
        --results tiny.en-sg=out/eval/ft-dev-utterances/results.json [--system cascade] [--out FILE]

Groups the files of the manifest by voice (the voice name without its rate and pitch
settings: ``espeak:en-us+klatt4@s145`` counts as ``espeak:en-us+klatt4``) and by channel
(``telephone`` when the record went through the telephone line, else ``clean``), and
reports for each group and each named result: corpus WER (word errors over reference
words, from the per-file counts `eval` writes), the share of entity audio leaked, and the
number of files. Rows with one voice and all channels, one channel and all voices, and
all files.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from deid_speech.manifest import iter_objects

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import report  # noqa: E402


def groups(record: dict) -> list[str]:
    voice = str(record.get("voice", "?")).split("@")[0]
    channel = "telephone" if (record.get("augment") or {}).get("telephone") else "clean"
    return [f"voice {voice}", f"channel {channel}", "all"]


def table(manifest: list[dict], per_file: list[dict], entity_s: dict[str, float]) -> dict[str, dict]:
    by_id = {r["id"]: r for r in manifest}
    acc: dict[str, dict] = defaultdict(lambda: {"files": 0, "ref_words": 0, "word_errors": 0, "leaked_s": 0.0,
                                                "entity_s": 0.0})
    for f in per_file:
        if "ref_words" not in f:
            raise SystemExit("error: these results have no per-file word counts; rerun `deid-speech eval`")
        for g in groups(by_id[f["id"]]):
            a = acc[g]
            a["files"] += 1
            a["ref_words"] += f["ref_words"]
            a["word_errors"] += f["word_errors"]
            a["leaked_s"] += f["leaked_s"]
            a["entity_s"] += entity_s[f["id"]]
    return {g: {"files": a["files"], "wer_pct": round(100 * a["word_errors"] / max(1, a["ref_words"]), 1),
                "leak_pct": round(100 * a["leaked_s"] / a["entity_s"], 1) if a["entity_s"] else None}
            for g, a in sorted(acc.items())}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--manifest", type=Path, required=True)
    p.add_argument("--results", action="append", required=True, help="NAME=results.json (repeatable)")
    p.add_argument("--system", default="cascade")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    manifest = [obj for _, obj in iter_objects(args.manifest)]
    entity_s = {r["id"]: sum(e["end"] - e["start"] for e in r.get("entities", [])) for r in manifest}
    result = {"manifest": str(args.manifest), "system": args.system, "tables": {}}
    for spec in args.results:
        name, _, path = spec.partition("=")
        per_file = json.loads(Path(path).read_text())["per_file"][args.system]
        result["tables"][name] = table(manifest, per_file, entity_s)
    names = list(result["tables"])
    print("| group | files | " + " | ".join(f"WER % {n} | leak % {n}" for n in names) + " |", file=sys.stderr)
    for g in result["tables"][names[0]]:
        cells = [f"{result['tables'][n][g]['wer_pct']} | {result['tables'][n][g]['leak_pct']}" for n in names]
        print(f"| {g} | {result['tables'][names[0]][g]['files']} | " + " | ".join(cells) + " |", file=sys.stderr)
    report(result, args.out)


if __name__ == "__main__":
    main()
