"""A long call joined from a manifest's calls in a chosen order, with its labelled manifest,
for ``bench/dither.py`` or ``deid-speech eval`` to score beside the same calls scored alone
(issue 14: calls as good as utterances, long calls included).

    .venv/bin/python bench/joined_call.py --calls out/benchmark/dev/calls/manifest.jsonl \\
        --order reversed --out out/joined/dev7-reversed
    .venv/bin/python bench/dither.py --manifest out/joined/dev7-reversed/manifest.jsonl --draws 4 ...

The calls are joined as ``bench/speed.py`` joins its ten-minute call (:data:`speed.GAP_S` of
digital silence after each; entity and word times shifted: :func:`speed.long_call_manifest`).
``--order``: ``manifest`` (as listed), ``reversed``, or ids separated by commas (a call may come
twice). Refuses to write over an existing output.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from speed import join_audio, long_call_manifest  # noqa: E402


def call_order(ids: list[str], order: str) -> list[str]:
    """The calls of the joined call: ``manifest``, ``reversed`` or ``id,id,...`` (ids of ``ids``)."""
    if order == "manifest":
        return list(ids)
    if order == "reversed":
        return list(ids)[::-1]
    chosen = [k.strip() for k in order.split(",") if k.strip()]
    if unknown := [k for k in chosen if k not in ids]:
        raise ValueError(f"no call {', '.join(unknown)} in the manifest")
    if not chosen:
        raise ValueError("--order names no call")
    return chosen


def main(argv: list[str] | None = None) -> dict:
    import soundfile as sf

    from deid_speech.audio import MODEL_RATE, load

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=Path, required=True, help="a manifest of calls (benchmark calls)")
    p.add_argument("--order", default="reversed", help="manifest, reversed, or ids separated by commas")
    p.add_argument("--out", type=Path, required=True, help="a new folder: joined.flac and manifest.jsonl")
    args = p.parse_args(argv)
    if not args.calls.is_file():
        sys.exit(f"{args.calls}: no such manifest")
    calls = [json.loads(line) for line in args.calls.open() if line.strip()]
    try:
        order = call_order([d["id"] for d in calls], args.order)
    except ValueError as exc:
        sys.exit(f"joined_call: {exc}")
    audio_path, manifest = args.out / "joined.flac", args.out / "manifest.jsonl"
    if audio_path.exists() or manifest.exists():
        sys.exit(f"{args.out}: holds a joined call already; give a new folder")
    audio = {d["id"]: load(args.calls.parent / d["audio"]).mono16k() for d in calls if d["id"] in order}
    args.out.mkdir(parents=True, exist_ok=True)
    sf.write(audio_path, join_audio(audio, order, MODEL_RATE), MODEL_RATE)
    record = long_call_manifest(calls, order, audio_path, {k: len(x) / MODEL_RATE for k, x in audio.items()})
    record["id"] = f"{args.out.name}-joined"
    manifest.write_text(json.dumps(record) + "\n")
    summary = {"audio": str(audio_path), "manifest": str(manifest), "order": order,
               "seconds": record["duration"], "entities": len(record["entities"])}
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
