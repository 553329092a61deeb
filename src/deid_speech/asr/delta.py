"""A fine-tuned recogniser stored small: a quantised delta over the PyPI tiny.en, in
CTranslate2 space, rebuilt with numpy alone (no torch, no transformers).

:func:`make_delta` compares the fine-tuned CTranslate2 folder (``train asr`` writes
``OUT/ct2``, float16) with the base model's ``model.bin`` variable by variable. A variable
that training did not change (the frozen encoder, the conv front end) is not stored; a
changed matrix is stored as ``finetuned - base`` quantised to int8 with one float16 scale per
row, a changed vector as a float16 delta. It writes ``delta.npz`` and ``asr_delta.json``
(base model name and the SHA-256 of its ``model.bin``, the stored variables, the largest
quantisation error).

:func:`materialize` rebuilds the CTranslate2 folder once into the cache: the base
``model.bin``'s variables in their order, with each stored delta added and cast back to the
base's dtype, written with the base's header and aliases (:func:`~deid_speech.asr.convert.write_model_bin`),
plus the base's config, tokenizer and vocabulary. The result is read back before it is
marked done, so an interrupted build is redone rather than trusted.

The shared encoding (:func:`pack`, :func:`unpack`, :func:`quantize`) serves the e2e delta
(:mod:`deid_speech.e2e.shipped`) too. Imports no training module.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np

from deid_speech.errors import DeidError

META = "asr_delta.json"
DELTA = "delta.npz"


def quantize(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A 2-D float array as int8 with one float16 scale per row."""
    scale = np.abs(d).max(axis=1, keepdims=True) / 127.0
    scale = np.where(scale > 0, scale, 1.0).astype(np.float16)
    return np.clip(np.round(d / scale.astype(np.float32)), -127, 127).astype(np.int8), scale


def dequantize(q: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return q.astype(np.float32) * scale.astype(np.float32)


def pack(name: str, d: np.ndarray, arrays: dict[str, np.ndarray]) -> float:
    """Store the float32 delta ``d`` of variable ``name`` in ``arrays``: a vector as float16
    (``name:d16``), anything larger as int8 rows with float16 scales (``name:q``, ``name:s``).
    Returns the largest error of what is stored."""
    if d.ndim <= 1:
        arrays[f"{name}:d16"] = d.astype(np.float16)
        return float(np.abs(d.astype(np.float16).astype(np.float32) - d).max())
    q, s = quantize(d.reshape(d.shape[0], -1))
    arrays[f"{name}:q"], arrays[f"{name}:s"] = q.reshape(d.shape), s
    return float(np.abs(dequantize(q, s).reshape(d.shape) - d).max())


def unpack(name: str, z, shape: tuple[int, ...]) -> np.ndarray | None:
    """The float32 delta :func:`pack` stored for ``name`` in ``z``, or None when none is."""
    if f"{name}:d16" in z:
        return z[f"{name}:d16"].astype(np.float32)
    if f"{name}:q" in z:
        q = z[f"{name}:q"]
        return dequantize(q.reshape(q.shape[0], -1), z[f"{name}:s"]).reshape(shape)
    return None


def _base_dir(base: str) -> Path:
    from deid_speech.asr.models import resolve_model

    resolved = resolve_model(base)
    if resolved.kind != "ct2":
        raise DeidError(f"{base}: the base of an ASR delta must be a CTranslate2 model")
    return resolved.path


def _sha256(path: Path) -> str:
    from deid_speech.models import sha256

    return sha256(path)


def make_delta(finetuned_ct2: str | Path, out_dir: str | Path, base: str = "tiny.en") -> dict:
    """Write the delta of the CTranslate2 folder ``finetuned_ct2`` over ``base`` into ``out_dir``."""
    from deid_speech.asr.convert import read_model_bin

    finetuned_ct2, out_dir = Path(finetuned_ct2), Path(out_dir)
    base_bin = _base_dir(base) / "model.bin"
    ft = read_model_bin(finetuned_ct2 / "model.bin")["variables"]
    bs = read_model_bin(base_bin)["variables"]
    arrays: dict[str, np.ndarray] = {}
    err: dict[str, float] = {}
    for name, b in bs.items():
        if name not in ft:
            raise DeidError(f"{finetuned_ct2}: variable {name} of the base model {base} is missing")
        w = ft[name]
        if w.shape != b.shape:
            raise DeidError(f"{finetuned_ct2}: {name} has shape {w.shape}, the base {b.shape}")
        if np.array_equal(w, b):
            continue
        if b.dtype.kind != "f":
            raise DeidError(f"{finetuned_ct2}: {name} ({b.dtype}) differs from the base; only float weights may")
        err[name] = pack(name, w.astype(np.float32) - b.astype(np.float32), arrays)
    out_dir.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out_dir / DELTA, **arrays)
    meta = {"format": 1, "base": base, "base_sha256": _sha256(base_bin),
            "variables": sorted(err), "max_abs_error": max(err.values(), default=0.0),
            "bytes": (out_dir / DELTA).stat().st_size}
    (out_dir / META).write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def cached_build(folder: Path, meta_name: str, prefix: str, what: str) -> tuple[dict, Path]:
    """A delta folder's metadata, and the cache folder its model is (or will be) built in,
    named by the hash of its ``delta.npz``; an unreadable delta is the one-line error ``what``."""
    from deid_speech.asr.models import cache_dir

    try:
        meta = json.loads((folder / meta_name).read_text())
        key = hashlib.sha1((folder / DELTA).read_bytes()).hexdigest()[:12]
    except (OSError, json.JSONDecodeError) as e:
        raise DeidError(f"{what} ({e})") from None
    return meta, cache_dir() / f"{prefix}-{key}"


def is_delta(folder: str | Path) -> bool:
    return (Path(folder) / META).is_file()


def materialize(folder: str | Path) -> Path:
    """The CTranslate2 folder that the ASR delta in ``folder`` stands for, built once into the cache."""
    from deid_speech.asr.convert import CT2FormatError, read_model_bin, write_model_bin

    folder = Path(folder)
    meta, out = cached_build(folder, META, "asr", f"{folder}: unreadable ASR delta")
    if (out / ".verified").is_file():
        return out
    base_dir = _base_dir(meta["base"])
    if _sha256(base_dir / "model.bin") != meta["base_sha256"]:
        raise DeidError(f"{folder}: made over another {meta['base']} model.bin than the installed one")
    model = read_model_bin(base_dir / "model.bin")
    z = np.load(folder / DELTA)
    variables = model["variables"]
    for name in meta["variables"]:
        if name not in variables:
            raise DeidError(f"{folder}: variable {name} is not in the base model")
        w = variables[name]
        d = unpack(name, z, w.shape)
        if d is None:
            raise DeidError(f"{folder}: no delta stored for {name}")
        variables[name] = (w.astype(np.float32) + d).astype(w.dtype)
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    write_model_bin(tmp / "model.bin", model)
    for f in base_dir.iterdir():
        if f.is_file() and f.name != "model.bin":
            shutil.copy(f, tmp / f.name)
    try:
        read_model_bin(tmp / "model.bin")
    except CT2FormatError as e:
        raise DeidError(f"{folder}: the rebuilt model does not read back ({e})") from None
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)
    (out / ".verified").write_text("ok\n")
    return out
