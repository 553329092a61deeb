"""`deid-speech train e2e`: fine-tune Whisper to write entity tags (the paper's E2E model).

Targets are the manifest records' tagged transcripts (:func:`deid_speech.e2e.tokens.target_text`);
the nine tags become special tokens whose embeddings start from their label's word
pieces (:func:`deid_speech.e2e.tokens.init_tag_embedding`). Training is the shared
Whisper trainer (:func:`deid_speech.asr.trainer.finetune`); the best checkpoint is
chosen by the dev split's timestamp-overlap F1 of this package's own inference
(:func:`dev_score`), the paper's metric.

    deid-speech train e2e --train DIR/train/manifest.jsonl --dev DIR/dev/manifest.jsonl --out runs/e2e

Options are the fields of :class:`deid_speech.asr.train_cli.TrainInputs`,
:class:`deid_speech.asr.trainer.FinetuneOptions` (with the defaults in :data:`DEFAULTS`)
and :class:`E2EInputs`; ``--config FILE`` (TOML) sets them too.
"""
from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deid_speech import options
from deid_speech.errors import DeidError

# FinetuneOptions defaults that differ for tagging (a new task: more epochs, a higher learning rate)
DEFAULTS = {"epochs": 5, "lr": 1e-4, "warmup_steps": 20, "eval_every": 30}


@dataclass(frozen=True)
class E2EInputs:
    """Options of ``train e2e`` only."""

    lora: bool = field(default=False, metadata={"help": "LoRA adapters (needs peft; not available yet)"})


def entity_spans(record: dict) -> list:
    """The reference entity Spans (seconds) of a manifest record."""
    from deid_speech.types import Span

    try:
        return [Span(float(e["start"]), float(e["end"]), e["label"]) for e in record.get("entities", [])]
    except (KeyError, TypeError, ValueError):
        raise DeidError(f"record {record.get('id')}: entities need start and end times "
                        "(a `deid-speech tts` manifest)") from None


def score_tagger(tagger: Any, records: list[dict]) -> dict:
    """Timestamp-overlap scores (label-agnostic and label-exact) of a tagger's entities
    in ``records`` against their entity times."""
    from deid_speech.asr.hf import load_audio
    from deid_speech.eval.overlap import OverlapScore

    agnostic, exact = OverlapScore(), OverlapScore()
    for r, (_, spans) in zip(records, tagger.run_many([load_audio(r["audio"]) for r in records])):
        truth = entity_spans(r)
        agnostic.add(truth, spans)
        exact.add(truth, spans, label_exact=True)
    return {"agnostic": agnostic, "exact": exact}


def score_model(model: Any, processor: Any, records: list[dict], backend: str = "ct2") -> dict:
    """:func:`score_tagger` for an in-memory model. ``ct2`` (default) scores what
    ``redact --system e2e`` runs: the model is saved and converted to CTranslate2 int8
    in a temporary folder (seconds), then decoded there (tens of times faster than HF
    generate on a CPU); ``hf`` decodes with the model itself."""
    from deid_speech.e2e.infer import E2EOptions, E2ETagger

    was_training = model.training
    model.eval()
    try:
        if backend == "hf":
            return score_tagger(E2ETagger(E2EOptions(model="(in training)", backend="hf"), model, processor), records)
        from deid_speech.asr.export import export_ct2

        with tempfile.TemporaryDirectory(prefix="e2e-dev-") as tmp:
            model.save_pretrained(tmp, safe_serialization=True)
            processor.save_pretrained(tmp)
            export_ct2(tmp, Path(tmp) / "ct2", "int8")
            return score_tagger(E2ETagger(E2EOptions(model=tmp, backend="ct2")), records)
    finally:
        model.train(was_training)


def dev_score(model: Any, processor: Any, records: list[dict]) -> float:
    """Early-stopping score: label-agnostic timestamp F1 (the paper's metric), plus a
    hundredth of the label-exact F1 to break ties. On a GPU the model decodes itself
    (``hf``); on the CPU its CTranslate2 int8 copy does (what ``redact`` runs)."""
    on_gpu = next(model.parameters()).device.type == "cuda"
    s = score_model(model, processor, records, backend="hf" if on_gpu else "ct2")
    return s["agnostic"].overall.f1 + 0.01 * s["exact"].overall.f1


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from deid_speech.asr.train_cli import TrainInputs
    from deid_speech.asr.trainer import FinetuneOptions

    p = subparsers.add_parser(
        "e2e", help="fine-tune Whisper to write entity tags (end-to-end de-identification)",
        description="Fine-tunes Whisper on `deid-speech tts` manifests whose tagged transcripts "
                    "([PHONE] nine eight ... [PHONE]) become the targets, the tags special tokens. "
                    "Keeps the checkpoint with the best dev timestamp F1 as an HF folder in OUT "
                    "(use it with `deid-speech redact --system e2e --model OUT`), checkpoints in "
                    "OUT/checkpoint (a rerun resumes) and OUT/training.json. "
                    "Options can also come from a TOML --config file (keys: the option names with _).")
    options.add_options(p, TrainInputs)
    options.add_options(p, FinetuneOptions, defaults=DEFAULTS, exclude=("drop_fillers",))  # targets are tagged texts
    options.add_options(p, E2EInputs)
    return p


def run(args: argparse.Namespace) -> int:
    from deid_speech.asr.hf import base_folder
    from deid_speech.asr.train_cli import TrainInputs, progress_bar, train_dev_records
    from deid_speech.asr.trainer import FinetuneOptions, finetune
    from deid_speech.e2e.tags import TAG_TEXTS
    from deid_speech.e2e.tokens import init_tag_embedding, target_text

    if options.build(args, E2EInputs).lora:
        raise DeidError("--lora needs the peft package, which this installation does not include; "
                        "train without --lora")
    inputs = options.build(args, TrainInputs)
    train, dev = train_dev_records(inputs)
    for name, recs in (("train", train), ("dev", dev)):
        bad = [r.get("id") for r in recs if not isinstance(r.get("tagged"), str)]
        if bad:
            raise DeidError(f"--{name}: record {bad[0]} has no 'tagged' transcript (a `deid-speech tts` manifest has)")
    for r in dev:
        entity_spans(r)
    opts = options.build(args, FinetuneOptions)
    base_folder(opts.base)  # an unknown base fails before anything heavy
    with progress_bar(inputs.progress, "train e2e") as progress:
        summary = finetune(train, dev, opts, target_fn=target_text, extra_tokens=TAG_TEXTS,
                           init_token=init_tag_embedding, dev_score=dev_score, progress=progress)
    evals = summary["evals"]
    print(json.dumps({"out": summary["out"], "steps": summary["steps"], "best_step": summary["best_step"],
                      "dev_f1_first": evals[0]["dev_score"] if evals else None,
                      "dev_f1_best": summary["best_dev_score"], "stopped_early": summary["stopped_early"],
                      "train_wall_s": summary["train_wall_s"],
                      "ct2": summary["ct2"]["path"] if summary.get("ct2") else None}, indent=2))
    return 0
