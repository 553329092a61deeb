"""What inference with an HF Whisper model needs (the e2e tagger, dev scores, the trainer).

Loading a base model (:func:`load_base`: ``tiny.en`` / ``base`` are converted from the
shipped CTranslate2 weights once, see :func:`deid_speech.asr.models.provision`; any HF
Whisper folder loads directly), adding special tokens (:func:`add_tokens`), decoder labels
(:func:`label_ids`), log-mel features and greedy decoding (:func:`greedy_decode`,
:func:`transcribe_hf`).

This module imports no training module (checked by tests/asr/test_layering.py). Only
the standard library and numpy load at import: torch and transformers load inside functions.
"""
from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from deid_speech.errors import DeidError

MODEL_RATE = 16000
MAX_AUDIO_S = 30.0  # one Whisper window


def load_audio(path: str) -> np.ndarray:
    """16 kHz mono float32 samples of an audio file."""
    from deid_speech.audio import load

    return load(path).mono16k()


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


def label_ids(processor, text: str, leading_space: bool = True, timestamps: bool = False) -> list[int]:
    """Decoder labels for ``text``: prefix tokens, text, end-of-text; without the leading
    ``<|startoftranscript|>`` (the model prepends the decoder start token itself).
    ``timestamps``: ``text`` is in Whisper's timestamp format (``<|0.00|> words<|1.20|>...``,
    :func:`deid_speech.asr.windows.timed_target`) and the prefix has no ``<|notimestamps|>``."""
    tok = processor.tokenizer
    sot = tok.convert_tokens_to_ids("<|startoftranscript|>")
    if timestamps:
        nts = tok.convert_tokens_to_ids("<|notimestamps|>")
        prefix = [t for t in tok.prefix_tokens if t not in (sot, nts)]
        return prefix + tok(text, add_special_tokens=False).input_ids + [tok.convert_tokens_to_ids("<|endoftext|>")]
    if leading_space and text and not text.startswith(" "):
        text = " " + text
    ids = tok(text).input_ids
    return ids[1:] if ids and ids[0] == sot else ids


def features(processor, clips: Sequence[np.ndarray]):
    """Log-mel input features ``(batch, n_mels, 3000)`` (each clip padded to 30 s)."""
    return processor.feature_extractor(list(clips), sampling_rate=MODEL_RATE, return_tensors="pt").input_features


def transcribe_hf(model, processor, records: Sequence[dict], batch_size: int = 8,
                  audio: Callable[[str], np.ndarray] = load_audio, max_new_tokens: int = 200,
                  skip_special_tokens: bool = True,
                  encoder: Callable[[Sequence[dict]], Any] | None = None) -> list[str]:
    """Greedy transcripts of ``records`` (their ``audio``) with an HF Whisper model
    (:func:`greedy_decode`); ``encoder`` (records -> encoder states, e.g. a frozen encoder's
    cached outputs, :class:`deid_speech.asr.trainer.EncoderCache`) skips the encoder."""
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
                with torch.no_grad(), autocast(dev):
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
    with torch.no_grad(), autocast(dev):
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


def autocast(dev):
    """bf16 autocast on CUDA, nothing on the CPU."""
    import torch

    if dev.type == "cuda":
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()

