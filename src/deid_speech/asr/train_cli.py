"""`deid-speech train asr`: fine-tune Whisper on voiced manifests (:func:`deid_speech.asr.trainer.finetune`).

Every option is a field of :class:`TrainInputs` or :class:`~deid_speech.asr.trainer.FinetuneOptions`,
turned into flags and ``--config FILE`` keys by :mod:`deid_speech.options`; ``train e2e``
shares :class:`TrainInputs`, :func:`train_dev_records` and :func:`progress_bar`. Progress goes
to ``logging``; the CLI shows it on stderr.

    deid-speech train asr --train DIR/train --dev DIR/dev --out runs/asr --max-steps 200
    deid-speech train asr --config configs/asr.toml --device cuda
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from deid_speech import options
from deid_speech.errors import DeidError


@dataclass(frozen=True)
class TrainInputs:
    """The manifests a training command reads, and how it shows progress."""

    train: Path = field(metadata={"help": "training manifest.jsonl (or its folder)"})
    dev: Path = field(metadata={"help": "dev manifest.jsonl (or its folder)"})
    limit: int | None = field(default=None, metadata={"help": "use only the first N training (and dev) records"})
    progress: str = field(default="auto", metadata={"help": "progress bar on stderr (auto: when it is a terminal)",
                                                    "choices": ("auto", "on", "off")})


def train_dev_records(inputs: TrainInputs) -> tuple[list[dict], list[dict]]:
    """The ``--train`` and ``--dev`` manifests' records (first ``--limit``), or a one-line
    error for a missing or empty manifest, or a dev set sharing records with the training
    set (``train asr`` and ``train e2e`` share this)."""
    from deid_speech.asr.train_data import load_records
    from deid_speech.asr.trainer import shared_records

    for name in ("train", "dev"):
        path = getattr(inputs, name)
        if not (path.is_file() or (path.is_dir() and (path / "manifest.jsonl").is_file())):
            raise DeidError(f"--{name} {path}: no such manifest")
    if inputs.limit is not None and inputs.limit < 1:
        raise DeidError("--limit must be >= 1")
    train, dev = load_records(inputs.train, inputs.limit), load_records(inputs.dev, inputs.limit)
    for name, recs in (("train", train), ("dev", dev)):
        if not recs:
            raise DeidError(f"--{name} {getattr(inputs, name)}: manifest has no records")
    shared_records(train, dev)
    return train, dev


@contextlib.contextmanager
def progress_bar(mode: str, desc: str) -> Iterator[Callable[[int, int], None]]:
    """A ``progress(done, total)`` callback drawing a tqdm bar on stderr (``mode`` on, or
    auto on a terminal) or doing nothing."""
    bar = None
    if mode == "on" or (mode == "auto" and sys.stderr.isatty()):
        from tqdm import tqdm

        bar = tqdm(unit="step", file=sys.stderr, desc=desc, dynamic_ncols=True)

    def progress(done: int, total: int) -> None:
        if bar is not None:
            bar.total, bar.n = total, done
            bar.refresh()

    try:
        yield progress
    finally:
        if bar is not None:
            bar.close()


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from deid_speech.asr.trainer import FinetuneOptions

    p = subparsers.add_parser(
        "asr", help="fine-tune Whisper on voiced manifests (HF folder + CTranslate2 copy in --out)",
        description="Fine-tunes Whisper on `deid-speech tts` manifests. Writes the best model (by dev WER) "
                    "as a Hugging Face folder in OUT, a CTranslate2 copy in OUT/ct2 (use either with "
                    "--asr-model), checkpoints in OUT/checkpoint (a rerun resumes) and OUT/training.json. "
                    "Options can also come from a TOML --config file (keys: the option names with _).")
    options.add_options(p, TrainInputs)
    options.add_options(p, FinetuneOptions, exclude=("extra_tokens_lstrip",))  # no added tokens here
    return p


def run(args: argparse.Namespace) -> int:
    from deid_speech.asr.hf import base_folder, torch_device
    from deid_speech.asr.trainer import FinetuneOptions, finetune

    inputs = options.build(args, TrainInputs)
    train, dev = train_dev_records(inputs)
    opts = options.build(args, FinetuneOptions)
    base_folder(opts.base)  # unknown base: fail before anything heavy
    torch_device(opts.device)
    with progress_bar(inputs.progress, "train asr") as progress:
        summary = finetune(train, dev, opts, progress=progress)
    first = summary["evals"][0]["dev_score"] if summary["evals"] else None
    print(json.dumps({"out": summary["out"], "steps": summary["steps"], "best_step": summary["best_step"],
                      "dev_wer_first": None if first is None else round(-first, 4),
                      "dev_wer_best": None if summary["best_dev_score"] is None else round(-summary["best_dev_score"], 4),
                      "stopped_early": summary["stopped_early"], "train_wall_s": summary["train_wall_s"],
                      "ct2": summary["ct2"]["path"] if summary["ct2"] else None}, indent=2))
    return 0
