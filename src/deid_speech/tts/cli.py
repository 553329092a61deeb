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
from dataclasses import dataclass, field
from pathlib import Path

from deid_speech.errors import DeidError

SPLITS = ("train", "dev", "test")


def _held_out() -> str:
    from deid_speech.tts.voices import DEFAULT_HELD_OUT

    return ",".join(DEFAULT_HELD_OUT)


def _policies() -> tuple[str, ...]:
    from deid_speech.tts.channel import POLICIES

    return tuple(POLICIES)


@dataclass(frozen=True)
class VoiceOptions:
    """The options of ``deid-speech tts`` (flags and ``--config`` keys come from here)."""

    voices: str = field(default="default", metadata={
        "help": "comma-separated voice names, or 'default' (the catalogue's voices allowed for the split)"})
    held_out: str = field(default_factory=_held_out, metadata={
        "help": "voices reserved for dev/test, never used for train"})
    split: str | None = field(default=None, metadata={
        "choices": SPLITS, "help": "which split this is (default: the input file's name if train/dev/test, else train)"})
    augment: str = field(default="light", metadata={"choices": _policies()})
    workers: int = 1
    seed: int = 0
    limit: int | None = field(default=None, metadata={"help": "voice only the first N records"})

    def __post_init__(self) -> None:
        if self.workers < 1 or (self.limit is not None and self.limit < 1):
            raise ValueError("--workers and --limit must be at least 1")


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``tts`` subcommand to ``subparsers``; return its parser."""
    from deid_speech.options import add_options

    p = subparsers.add_parser(
        "tts", help="voice tagged sentences into FLAC + a manifest with entity time spans",
        description="Writes OUT_DIR/audio/<id>.flac (16 kHz mono) and OUT_DIR/manifest.jsonl; "
                    "resumable (ids already in the manifest are skipped, those whose FLAC is gone voiced again; "
                    "a changed text for a voiced id is refused). Voices: "
                    "piper:joe[@LENGTH_SCALE,pPITCH], espeak:LANG+VARIANT[@sSPEED,pPITCH], "
                    "flite:NAME[@STRETCH].")
    p.add_argument("--in", dest="in_file", type=Path, required=True,
                   help="JSONL with a 'tagged' field per line (seed split or augmentation output)")
    p.add_argument("--out-dir", type=Path, required=True)
    add_options(p, VoiceOptions)  # every option a flag and a --config key
    p.add_argument("--progress", choices=("auto", "on", "off"), default="auto")
    return p


def infer_split(path: Path) -> str:
    """``dev`` for ``.../dev.jsonl`` (likewise train/test); ``train`` otherwise."""
    return path.stem if path.stem in SPLITS else "train"


def run(args: argparse.Namespace) -> int:
    """Run the ``tts`` subcommand; print the summary as JSON. DeidError for user errors."""
    from deid_speech.options import build
    from deid_speech.tts.base import BackendUnavailable
    from deid_speech.tts.dataset import BAD_TAGS, voice_manifest
    from deid_speech.tts.voices import split_voice_list

    o = build(args, VoiceOptions)
    if not args.in_file.is_file():
        raise DeidError(f"{args.in_file}: no such input file")
    voices = None if o.voices.strip() == "default" else split_voice_list(o.voices)
    if voices == []:
        raise DeidError("--voices is empty")
    progress = {"auto": None, "on": True, "off": False}[args.progress]
    try:
        summary = voice_manifest(args.in_file, args.out_dir, voices, augment=o.augment,
                                 seed=o.seed, workers=o.workers,
                                 held_out=split_voice_list(o.held_out),
                                 split=o.split or infer_split(args.in_file), limit=o.limit,
                                 progress=progress)
    except BackendUnavailable as exc:
        raise DeidError(str(exc)) from None
    print(json.dumps(summary, indent=2))
    if failed := summary["failed"]:
        bad = sum(why.startswith(BAD_TAGS) for why in failed.values())
        print(f"deid-speech: warning: {len(failed)} record(s) could not be voiced (see 'failed'); "
              + "; ".join([f"{bad} have bad tagged text: fix the input"] * bool(bad)
                          + [f"a rerun retries the other {len(failed) - bad}"] * (len(failed) > bad)),
              file=sys.stderr)
        return 1
    return 0
