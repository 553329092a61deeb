"""``deid-speech tts``: voice tagged JSONL into FLAC + manifest (see :mod:`deid_speech.tts.dataset`).

Wiring, in ``deid_speech/cli.py``::

    from deid_speech.tts import cli as tts_cli
    tts_cli.add_parser(sub)            # in build_parser()
    COMMANDS["tts"] = tts_cli.run
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from deid_speech.errors import DeidError

SPLITS = ("train", "dev", "test")


def _positive(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return n


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``tts`` subcommand to ``subparsers``; return its parser."""
    from deid_speech.tts.channel import POLICIES
    from deid_speech.tts.voices import DEFAULT_HELD_OUT

    p = subparsers.add_parser(
        "tts", help="voice tagged sentences into FLAC + a manifest with entity time spans",
        description="Writes OUT_DIR/audio/<id>.flac (16 kHz mono) and OUT_DIR/manifest.jsonl; "
                    "resumable (ids already in the manifest are skipped). Voices: "
                    "piper:joe[@LENGTH_SCALE,pPITCH], espeak:LANG+VARIANT[@sSPEED,pPITCH], "
                    "flite:NAME[@STRETCH].")
    p.add_argument("--in", dest="in_file", type=Path, required=True,
                   help="JSONL with a 'tagged' field per line (seed split or augmentation output)")
    p.add_argument("--out-dir", type=Path, required=True)
    p.add_argument("--voices", default="default",
                   help="comma-separated voice names, or 'default' (the catalogue's voices allowed "
                        "for the split)")
    p.add_argument("--held-out", default=",".join(DEFAULT_HELD_OUT),
                   help="voices reserved for dev/test, never used for train (default: %(default)s)")
    p.add_argument("--split", choices=SPLITS, default=None,
                   help="which split this is (default: the input file's name if train/dev/test, else train)")
    p.add_argument("--augment", choices=tuple(POLICIES), default="light")
    p.add_argument("--workers", type=_positive, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--limit", type=_positive, default=None, help="voice only the first N records")
    p.add_argument("--progress", choices=("auto", "on", "off"), default="auto")
    return p


def infer_split(path: Path) -> str:
    """``dev`` for ``.../dev.jsonl`` (likewise train/test); ``train`` otherwise."""
    return path.stem if path.stem in SPLITS else "train"


def run(args: argparse.Namespace) -> int:
    """Run the ``tts`` subcommand; print the summary as JSON. DeidError for user errors."""
    from deid_speech.tts.base import BackendUnavailable
    from deid_speech.tts.dataset import voice_manifest
    from deid_speech.tts.voices import split_voice_list

    if not args.in_file.is_file():
        raise DeidError(f"{args.in_file}: no such input file")
    voices = None if args.voices.strip() == "default" else split_voice_list(args.voices)
    if voices == []:
        raise DeidError("--voices is empty")
    progress = {"auto": None, "on": True, "off": False}[args.progress]
    try:
        summary = voice_manifest(args.in_file, args.out_dir, voices, augment=args.augment,
                                 seed=args.seed, workers=args.workers,
                                 held_out=split_voice_list(args.held_out),
                                 split=args.split or infer_split(args.in_file), limit=args.limit,
                                 progress=progress)
    except BackendUnavailable as exc:
        raise DeidError(str(exc)) from None
    print(json.dumps(summary, indent=2))
    if summary["failed"]:
        print(f"deid-speech: warning: {len(summary['failed'])} record(s) could not be voiced "
              "(see 'failed'); a rerun retries them", file=sys.stderr)
        return 1
    return 0
