"""``deid-speech train asr``: fine-tune Whisper on voiced manifests (the trainer is
:mod:`deid_speech.asr.trainer`)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from deid_speech.asr.export import QUANTIZATIONS
from deid_speech.asr.hf import base_folder, torch_device
from deid_speech.asr.train_data import load_records
from deid_speech.asr.trainer import FinetuneOptions, finetune
from deid_speech.errors import DeidError


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "asr", help="fine-tune Whisper on voiced manifests (HF folder + CTranslate2 copy in --out)",
        description="Fine-tunes Whisper on `deid-speech tts` manifests. Writes the best model (by dev WER) "
                    "as a Hugging Face folder in OUT, a CTranslate2 copy in OUT/ct2 (use either with "
                    "--asr-model), checkpoints in OUT/checkpoint (a rerun resumes) and OUT/training.json.")
    d = FinetuneOptions(out=Path("."))
    p.add_argument("--train", type=Path, required=True, help="training manifest.jsonl (or its folder)")
    p.add_argument("--dev", type=Path, required=True, help="dev manifest.jsonl (or its folder)")
    p.add_argument("--base", default=d.base, help="tiny.en, base, or a Whisper model folder (default %(default)s)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--device", default=d.device, help="cpu or cuda (default %(default)s)")
    p.add_argument("--epochs", type=int, default=d.epochs)
    p.add_argument("--max-steps", type=int, default=None, help="optimizer steps (overrides --epochs)")
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--grad-accum", type=int, default=d.grad_accum)
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--warmup-steps", type=int, default=d.warmup_steps)
    p.add_argument("--weight-decay", type=float, default=d.weight_decay)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--eval-every", type=int, default=d.eval_every, help="optimizer steps between dev evaluations")
    p.add_argument("--patience", type=int, default=d.patience, help="evaluations without improvement (0: off)")
    p.add_argument("--freeze-encoder", action="store_true",
                   help="train the decoder only; the encoder's outputs are computed once (much faster on CPU)")
    p.add_argument("--log-every", type=int, default=d.log_every, help="print the training loss every N steps (0: off)")
    p.add_argument("--limit", type=int, default=None, help="use only the first N training (and dev) records")
    p.add_argument("--no-resume", dest="resume", action="store_false", help="start over, dropping a checkpoint")
    p.add_argument("--no-ct2", dest="ct2", action="store_false", help="skip the CTranslate2 export")
    p.add_argument("--ct2-quantization", choices=QUANTIZATIONS, default=d.ct2_quantization)
    p.add_argument("--progress", choices=("auto", "on", "off"), default="auto")
    return p


def train_dev_records(args: argparse.Namespace) -> tuple[list[dict], list[dict]]:
    """The ``--train`` and ``--dev`` manifests' records (first ``--limit``), or a one-line
    error for a missing or empty manifest (``train asr`` and ``train e2e`` share this)."""
    for name in ("train", "dev"):
        path = getattr(args, name)
        if not (path.is_file() or (path.is_dir() and (path / "manifest.jsonl").is_file())):
            raise DeidError(f"--{name} {path}: no such manifest")
    if args.limit is not None and args.limit < 1:
        raise DeidError("--limit must be >= 1")
    train, dev = load_records(args.train, args.limit), load_records(args.dev, args.limit)
    for name, recs in (("train", train), ("dev", dev)):
        if not recs:
            raise DeidError(f"--{name} {getattr(args, name)}: manifest has no records")
    return train, dev


def run(args: argparse.Namespace) -> int:
    train, dev = train_dev_records(args)
    try:
        opts = FinetuneOptions(out=args.out, base=args.base, device=args.device, epochs=args.epochs,
                               max_steps=args.max_steps, batch_size=args.batch_size, grad_accum=args.grad_accum,
                               lr=args.lr, warmup_steps=args.warmup_steps, weight_decay=args.weight_decay,
                               seed=args.seed, eval_every=args.eval_every, patience=args.patience,
                               freeze_encoder=args.freeze_encoder, resume=args.resume, ct2=args.ct2,
                               log_every=args.log_every,
                               ct2_quantization=args.ct2_quantization)
    except ValueError as e:
        raise DeidError(str(e)) from None
    base_folder(opts.base)  # unknown base: fail before anything heavy
    torch_device(opts.device)
    bar = None
    if args.progress == "on" or (args.progress == "auto" and sys.stderr.isatty()):
        from tqdm import tqdm

        bar = tqdm(unit="step", file=sys.stderr, desc="train asr", dynamic_ncols=True)

    def progress(done: int, total: int) -> None:
        if bar is not None:
            bar.total = total
            bar.n = done
            bar.refresh()

    try:
        summary = finetune(train, dev, opts, progress=progress)
    finally:
        if bar is not None:
            bar.close()
    first = summary["evals"][0]["dev_score"] if summary["evals"] else None
    print(json.dumps({"out": summary["out"], "steps": summary["steps"], "best_step": summary["best_step"],
                      "dev_wer_first": None if first is None else round(-first, 4),
                      "dev_wer_best": None if summary["best_dev_score"] is None else round(-summary["best_dev_score"], 4),
                      "stopped_early": summary["stopped_early"], "train_wall_s": summary["train_wall_s"],
                      "ct2": summary["ct2"]["path"] if summary["ct2"] else None}, indent=2))
    return 0
