"""Convert CTranslate2 Whisper models (as used by faster-whisper) to other formats.

CTranslate2 ``model.bin`` layout (little-endian, see ctranslate2/specs/model_spec.py)::

    u32 binary_version | str spec_name | u32 spec_revision | u32 num_variables
    per variable: str name | u8 rank | u32 dims[rank] | u8 dtype_id | u32 num_bytes | raw
    u32 num_aliases | per alias: str alias | str target

where ``str`` is a u16 length (including a trailing NUL) followed by UTF-8 bytes.
Whisper attention projections are stored fused: ``q|k|v`` for self-attention and
``k|v`` for cross-attention (key bias is zero: the original model has none).

Public API: :func:`read_ct2`, :func:`read_model_bin`, :func:`write_model_bin`, :func:`as_loaded_int8`,
:func:`ct2_to_hf`, :func:`ct2_to_openai`, :func:`load_openai_model`, :func:`join_parts`.  torch/transformers are only
imported inside the functions that need them.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import shutil
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CT2FormatError", "read_ct2", "read_model_bin", "write_model_bin", "as_loaded_int8", "ct2_to_hf", "ct2_to_openai",
           "load_openai_model", "join_parts"]

SUPPORTED_BINARY_VERSIONS = (4, 5, 6)
# Order of the DataType enum in CTranslate2 (include/ctranslate2/types.h).
_DTYPES: dict[int, str] = {0: "float32", 1: "int8", 2: "int16", 3: "int32", 4: "float16", 5: "bfloat16"}
_SPECIAL = ("<|endoftext|>", "<|startoftranscript|>", "<|translate|>", "<|transcribe|>",
            "<|startoflm|>", "<|startofprev|>", "<|notimestamps|>")
_FLOAT = {"float32": np.float32, "float16": np.float16}


class CT2FormatError(ValueError):
    """Raised when a CTranslate2 model folder or model.bin is missing or malformed."""


# --------------------------------------------------------------------------- reading
def _parse_model_bin(path: Path, load: bool = True) -> tuple[dict, dict[str, np.ndarray], dict[str, str]]:
    """Parse model.bin; returns (header: ``version``, ``spec`` name, ``revision``; raw variables in
    file order; aliases). ``load=False`` only validates."""
    buf = np.memmap(path, dtype=np.uint8, mode="r") if path.stat().st_size else np.zeros(0, np.uint8)
    pos = 0

    def take(n: int, what: str) -> np.ndarray:
        nonlocal pos
        if pos + n > len(buf):
            raise CT2FormatError(f"{path}: truncated while reading {what} (offset {pos}, need {n} bytes, file has {len(buf)})")
        pos += n
        return buf[pos - n:pos]

    def num(fmt: str, what: str) -> int:
        return struct.unpack("<" + fmt, take(struct.calcsize(fmt), what).tobytes())[0]

    def string(what: str) -> str:
        raw = take(num("H", what), what).tobytes()
        if not raw or raw[-1] != 0:
            raise CT2FormatError(f"{path}: corrupt string for {what} at offset {pos}")
        return raw[:-1].decode("utf-8", errors="strict")

    version = num("I", "binary version")
    if version not in SUPPORTED_BINARY_VERSIONS:
        raise CT2FormatError(f"{path}: unsupported/invalid CTranslate2 binary version {version} "
                             f"(supported: {SUPPORTED_BINARY_VERSIONS}); not a CTranslate2 model.bin?")
    spec, revision = string("spec name"), num("I", "spec revision")
    variables: dict[str, np.ndarray] = {}
    for i in range(num("I", "variable count")):
        name = string(f"variable #{i} name")
        dims = tuple(num("I", f"{name} dims") for _ in range(num("B", f"{name} rank")))
        dtype_id = num("B", f"{name} dtype")
        if dtype_id not in _DTYPES:
            raise CT2FormatError(f"{path}: variable {name!r} has unknown dtype id {dtype_id}")
        nbytes = num("I", f"{name} size")
        itemsize = 1 if dtype_id == 1 else 4 if dtype_id in (0, 3) else 2
        if nbytes != itemsize * int(np.prod(dims, dtype=np.int64)):
            raise CT2FormatError(f"{path}: variable {name!r} shape {dims} ({_DTYPES[dtype_id]}) does not match {nbytes} bytes")
        raw = take(nbytes, f"{name} data")
        if load:
            np_dtype = np.uint16 if dtype_id == 5 else np.dtype(_DTYPES[dtype_id])  # bfloat16: raw bits
            arr = raw.view(np_dtype).reshape(dims).copy()
            variables[name] = _bf16_to_f32(arr) if dtype_id == 5 else arr
    aliases = {string("alias"): string("alias target") for _ in range(num("I", "alias count"))}
    if pos != len(buf):
        raise CT2FormatError(f"{path}: {len(buf) - pos} unexpected trailing bytes (corrupt or badly joined file)")
    if load:
        missing = {a: t for a, t in aliases.items() if t not in variables}
        if missing:
            raise CT2FormatError(f"{path}: aliases point to missing variables: {missing}")
    return {"version": version, "spec": spec, "revision": revision}, variables, aliases


def read_model_bin(path: str | Path) -> dict:
    """A model.bin as stored: ``{"version", "spec", "revision", "variables", "aliases"}``,
    the variables in file order with their stored dtypes (bfloat16 as float32), for
    :func:`write_model_bin`."""
    header, variables, aliases = _parse_model_bin(Path(path))
    return {**header, "variables": variables, "aliases": aliases}


def write_model_bin(path: str | Path, model: dict) -> None:
    """Write ``model`` (the shape :func:`read_model_bin` returns) as a CTranslate2 model.bin."""
    def string(s: str) -> bytes:
        raw = s.encode("utf-8") + b"\0"
        return struct.pack("<H", len(raw)) + raw

    codes = {np.dtype(v): k for k, v in _DTYPES.items() if k != 5}
    with open(path, "wb") as f:
        f.write(struct.pack("<I", model["version"]) + string(model["spec"]) + struct.pack("<I", model["revision"]))
        f.write(struct.pack("<I", len(model["variables"])))
        for name, arr in model["variables"].items():
            arr = np.asarray(arr)  # (not ascontiguousarray: it turns a scalar into a vector)
            if arr.dtype not in codes:
                raise CT2FormatError(f"{name}: cannot store dtype {arr.dtype} in model.bin")
            f.write(string(name) + struct.pack("<B", arr.ndim) + struct.pack(f"<{arr.ndim}I", *arr.shape))
            f.write(struct.pack("<BI", codes[arr.dtype], arr.nbytes))
            f.write(arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes())
        f.write(struct.pack("<I", len(model["aliases"])))
        for alias, target in model["aliases"].items():
            f.write(string(alias) + string(target))


def as_loaded_int8(model: dict) -> dict:
    """``model`` (as :func:`read_model_bin` gives it) with its variables stored as CTranslate2
    turns a float model into when it loads it with ``compute_type="int8"`` on a CPU
    (``Model::set_compute_type``, binary version >= 5), so that loading the copy does no
    conversion and gives the same weights:

    * a 2-D variable whose name ends in ``weight`` (linear layers, the embeddings; an alias
      shares its target's) becomes int8 row by row: ``scale = 127 / max|row|`` (1 for a zero
      row) in float32, ``round-half-even(row * scale)``, and ``<name>_scale`` holds the scales;
    * a convolution's weight becomes float32: CTranslate2 keeps it in float32 on a CPU build
      with oneDNN and quantizes it from float32 on one without, the same either way;
    * every other float variable becomes float32 (the float type of int8 compute on a CPU);
    * variables already quantized, and integer ones, stay as they are."""
    if model["version"] < 5:
        raise CT2FormatError(f"binary version {model['version']}: CTranslate2 truncates when it quantizes it")
    out: dict[str, np.ndarray] = {}
    for name, v in model["variables"].items():
        if v.dtype.kind != "f" or name.endswith("_scale"):
            out[name] = v
            continue
        x = v.astype(np.float32)
        if name.endswith("weight") and x.ndim == 2:
            amax = np.abs(x).max(axis=1)
            scale = np.where(amax != 0, np.float32(127.0) / np.where(amax != 0, amax, 1), np.float32(1.0)).astype(np.float32)
            out[name] = np.clip(np.rint(x * scale[:, None]), -128, 127).astype(np.int8)
            out[name + "_scale"] = scale
        else:
            out[name] = x
    return {**model, "variables": out}


def _bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def read_ct2(model_dir: str | Path, dequantize: bool = True) -> tuple[dict[str, np.ndarray], dict]:
    """Read a CTranslate2 model folder; returns ``(variables, config)``.

    Variables keep CTranslate2 names (``encoder/layer_0/ffn/linear_0/weight``) and
    aliases are resolved (e.g. ``decoder/projection/weight``).  bfloat16 is returned
    as float32 (numpy has no bfloat16).  With ``dequantize`` (default) int8 / int16
    weights are divided by their ``*_scale`` variables (CTranslate2 stores
    ``round(w * scale)``) into float32 and the scale variables are dropped;
    otherwise they are returned as stored.  ``config`` is config.json plus
    ``"_spec"`` (the spec name from the model.bin header, e.g. ``"WhisperSpec"``).
    Raises :class:`CT2FormatError` on a missing file or malformed model.bin.
    """
    model_dir = Path(model_dir)
    bin_path, cfg_path = model_dir / "model.bin", model_dir / "config.json"
    for p in (bin_path, cfg_path):
        if not p.is_file():
            raise CT2FormatError(f"{model_dir}: not a CTranslate2 model folder ({p.name} missing)")
    try:
        config = json.loads(cfg_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CT2FormatError(f"{cfg_path}: invalid JSON ({exc})") from exc
    header, variables, aliases = _parse_model_bin(bin_path)
    if dequantize:
        for name in [n for n in variables if n.endswith("_scale") and n[:-6] in variables]:
            base, scale = variables[name[:-6]], variables.pop(name).astype(np.float32)
            if base.dtype == np.int8:  # per output row (conv weights: per output channel)
                scale = scale.reshape((-1,) + (1,) * (base.ndim - 1))
            elif base.dtype != np.int16:
                raise CT2FormatError(f"{bin_path}: scale {name!r} for non-quantized {base.dtype} variable")
            variables[name[:-6]] = base.astype(np.float32) / scale
    for alias, target in aliases.items():
        variables[alias] = variables[target]
    config["_spec"] = header["spec"]
    return variables, config


# --------------------------------------------------------------------------- mapping
def _whisper_tensors(v: dict[str, np.ndarray], cfg: dict) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Un-fuse a Whisper CT2 model into HF-named tensors; returns (tensors, openai-style dims)."""
    if cfg.get("_spec") != "WhisperSpec":
        raise CT2FormatError(f"not a Whisper model (spec {cfg.get('_spec')!r})")
    n_enc = sum(1 for k in v if re.fullmatch(r"encoder/layer_\d+/ffn/linear_0/weight", k))
    n_dec = sum(1 for k in v if re.fullmatch(r"decoder/layer_\d+/ffn/linear_0/weight", k))
    try:
        dims = dict(n_mels=v["encoder/conv1/weight"].shape[1], n_vocab=v["decoder/embeddings/weight"].shape[0],
                    n_audio_ctx=v["encoder/position_encodings/encodings"].shape[0],
                    n_audio_state=v["encoder/position_encodings/encodings"].shape[1],
                    n_audio_head=int(v["encoder/num_heads"]), n_audio_layer=n_enc,
                    n_text_ctx=v["decoder/position_encodings/encodings"].shape[0],
                    n_text_state=v["decoder/position_encodings/encodings"].shape[1],
                    n_text_head=int(v["decoder/num_heads"]), n_text_layer=n_dec)
        d = dims["n_text_state"]
        out = {"model.encoder.conv1.weight": v["encoder/conv1/weight"], "model.encoder.conv1.bias": v["encoder/conv1/bias"],
               "model.encoder.conv2.weight": v["encoder/conv2/weight"], "model.encoder.conv2.bias": v["encoder/conv2/bias"],
               "model.encoder.embed_positions.weight": v["encoder/position_encodings/encodings"],
               "model.decoder.embed_positions.weight": v["decoder/position_encodings/encodings"],
               "model.decoder.embed_tokens.weight": v["decoder/embeddings/weight"],
               "proj_out.weight": v.get("decoder/projection/weight", v["decoder/embeddings/weight"])}

        def norm(dst: str, src: str) -> None:
            out[dst + ".weight"], out[dst + ".bias"] = v[src + "/gamma"], v[src + "/beta"]

        def linear(dst: str, src: str) -> None:
            out[dst + ".weight"], out[dst + ".bias"] = v[src + "/weight"], v[src + "/bias"]

        def fused(dst: str, src: str, names: Sequence[str]) -> None:
            w, b = v[src + "/weight"], v[src + "/bias"]
            for i, proj in enumerate(names):  # k_proj has no bias: CT2 stores zeros (any key bias
                # only adds q.b, constant over keys, so softmax ignores it)
                out[f"{dst}.{proj}.weight"] = w[i * d:(i + 1) * d]
                if proj != "k_proj":
                    out[f"{dst}.{proj}.bias"] = b[i * d:(i + 1) * d]

        for side, n in (("encoder", n_enc), ("decoder", n_dec)):
            norm(f"model.{side}.layer_norm", f"{side}/layer_norm")
            for i in range(n):
                hf, ct = f"model.{side}.layers.{i}", f"{side}/layer_{i}"
                fused(f"{hf}.self_attn", f"{ct}/self_attention/linear_0", ("q_proj", "k_proj", "v_proj"))
                linear(f"{hf}.self_attn.out_proj", f"{ct}/self_attention/linear_1")
                norm(f"{hf}.self_attn_layer_norm", f"{ct}/self_attention/layer_norm")
                if side == "decoder":
                    fused(f"{hf}.encoder_attn", f"{ct}/attention/linear_0", ("q_proj",))
                    fused(f"{hf}.encoder_attn", f"{ct}/attention/linear_1", ("k_proj", "v_proj"))
                    linear(f"{hf}.encoder_attn.out_proj", f"{ct}/attention/linear_2")
                    norm(f"{hf}.encoder_attn_layer_norm", f"{ct}/attention/layer_norm")
                linear(f"{hf}.fc1", f"{ct}/ffn/linear_0")
                linear(f"{hf}.fc2", f"{ct}/ffn/linear_1")
                norm(f"{hf}.final_layer_norm", f"{ct}/ffn/layer_norm")
    except KeyError as exc:
        raise CT2FormatError(f"Whisper model is missing variable {exc}") from exc
    if n_enc == 0 or n_dec == 0 or dims["n_audio_state"] != d:
        raise CT2FormatError(f"inconsistent Whisper dims {dims}")
    return out, {k: int(x) for k, x in dims.items()}


# HF name -> openai-whisper name, applied in order.
_OPENAI_RENAMES = [
    (r"^model\.", ""), (r"\.layers\.", ".blocks."),
    (r"encoder\.embed_positions\.weight$", "encoder.positional_embedding"),
    (r"decoder\.embed_positions\.weight$", "decoder.positional_embedding"),
    (r"embed_tokens", "token_embedding"), (r"encoder\.layer_norm", "encoder.ln_post"), (r"decoder\.layer_norm", "decoder.ln"),
    (r"self_attn_layer_norm", "attn_ln"), (r"encoder_attn_layer_norm", "cross_attn_ln"),
    (r"self_attn\.", "attn."), (r"encoder_attn\.", "cross_attn."),
    (r"q_proj", "query"), (r"k_proj", "key"), (r"v_proj", "value"), (r"out_proj", "out"),
    (r"fc1", "mlp.0"), (r"fc2", "mlp.2"), (r"final_layer_norm", "mlp_ln"),
]


def _special_ids(model_dir: Path) -> tuple[dict[str, int], list[tuple[str, int]], dict]:
    """Special-token ids (and language tokens) from the model's tokenizer.json."""
    path = model_dir / "tokenizer.json"
    if not path.is_file():
        raise CT2FormatError(f"{model_dir}: tokenizer.json missing (needed for the HF tokenizer)")
    tok = json.loads(path.read_text(encoding="utf-8"))
    added = {t["content"]: t["id"] for t in tok.get("added_tokens", [])}
    missing = [s for s in _SPECIAL if s not in added]
    if missing:
        raise CT2FormatError(f"{path}: special tokens missing: {missing}")
    ids = {s: added[s] for s in _SPECIAL}
    langs = sorted(((t, i) for t, i in added.items()
                    if ids["<|startoftranscript|>"] < i < ids["<|translate|>"]), key=lambda x: x[1])
    return ids, langs, tok


def _check(written: dict[str, tuple[int, ...]], expected: dict[str, tuple[int, ...]], where: str) -> None:
    if written != expected:
        diff = sorted(set(written.items()) ^ set(expected.items()))[:5]
        raise RuntimeError(f"{where}: wrote {len(written)} tensors, expected {len(expected)}; first differences: {diff}")


# --------------------------------------------------------------------------- writers
def ct2_to_hf(model_dir: str | Path, out_dir: str | Path, dtype: str = "float32") -> Path:
    """Write a Hugging Face ``WhisperForConditionalGeneration`` folder from a CTranslate2 Whisper folder.

    Writes config.json, generation_config.json (special-token ids for .en or multilingual
    vocabularies, suppress tokens, alignment heads, language/task ids), model.safetensors
    (``dtype`` float32 or float16), tokenizer.json/tokenizer_config.json (special and
    timestamp tokens, so ``len(tokenizer) == vocab_size``) and preprocessor_config.json
    (WhisperFeatureExtractor, n_mels from the model, 16 kHz).  Loadable offline with
    ``WhisperForConditionalGeneration.from_pretrained`` / ``WhisperProcessor.from_pretrained``.
    Returns ``out_dir``; raises CT2FormatError on a bad input and RuntimeError if the
    written tensors/tokenizer do not match the model.
    """
    model_dir, out_dir = Path(model_dir), Path(out_dir)
    if dtype not in _FLOAT:
        raise ValueError(f"dtype must be one of {sorted(_FLOAT)}, got {dtype!r}")
    variables, cfg = read_ct2(model_dir)
    tensors, dims = _whisper_tensors(variables, cfg)
    ids, langs, tok_json = _special_ids(model_dir)

    import torch
    from safetensors import safe_open
    from tokenizers import AddedToken
    from transformers import (
        GenerationConfig,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperTokenizer,
    )

    eot, sot = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
    multilingual = dims["n_vocab"] >= 51865  # same rule as openai-whisper (.en models have 51864)
    tied = np.array_equal(tensors["proj_out.weight"], tensors["model.decoder.embed_tokens.weight"])
    ffn = tensors["model.encoder.layers.0.fc1.weight"].shape[0]
    config = WhisperConfig(
        vocab_size=dims["n_vocab"], num_mel_bins=dims["n_mels"], d_model=dims["n_audio_state"],
        encoder_layers=dims["n_audio_layer"], encoder_attention_heads=dims["n_audio_head"],
        decoder_layers=dims["n_text_layer"], decoder_attention_heads=dims["n_text_head"],
        encoder_ffn_dim=ffn, decoder_ffn_dim=tensors["model.decoder.layers.0.fc1.weight"].shape[0],
        max_source_positions=dims["n_audio_ctx"], max_target_positions=dims["n_text_ctx"],
        bos_token_id=eot, eos_token_id=eot, pad_token_id=eot, decoder_start_token_id=sot,
        suppress_tokens=cfg.get("suppress_ids", []), begin_suppress_tokens=cfg.get("suppress_ids_begin", [220, eot]),
        tie_word_embeddings=tied, median_filter_width=7, dtype=dtype)
    state = {k: torch.from_numpy(np.ascontiguousarray(a, dtype=_FLOAT[dtype])) for k, a in tensors.items()
             if not (tied and k == "proj_out.weight")}
    with torch.device("meta"):  # no random init: every parameter is assigned from the CT2 weights
        model = WhisperForConditionalGeneration(config)
    result = model.load_state_dict(state, strict=False, assign=True)
    if result.unexpected_keys or set(result.missing_keys) != ({"proj_out.weight"} if tied else set()):
        raise RuntimeError(f"HF Whisper state mismatch: missing={result.missing_keys[:5]} "
                           f"unexpected={result.unexpected_keys[:5]}")
    model.tie_weights()
    if any(t.is_meta for t in model.state_dict().values()):
        raise RuntimeError("HF Whisper model has uninitialised (meta) tensors after loading the CT2 weights")
    gen = GenerationConfig(
        decoder_start_token_id=sot, bos_token_id=eot, eos_token_id=eot, pad_token_id=eot, max_length=dims["n_text_ctx"],
        suppress_tokens=cfg.get("suppress_ids", []), begin_suppress_tokens=cfg.get("suppress_ids_begin", [220, eot]),
        alignment_heads=[list(h) for h in cfg.get("alignment_heads") or _default_heads(dims)],
        no_timestamps_token_id=ids["<|notimestamps|>"], prev_sot_token_id=ids["<|startofprev|>"],
        is_multilingual=multilingual, max_initial_timestamp_index=50, return_timestamps=False)
    if multilingual:
        gen.lang_to_id = dict(langs)
        gen.task_to_id = {"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]}
    model.generation_config = gen
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)

    specials = [t["content"] for t in tok_json["added_tokens"] if t.get("special") and t["content"] != "<|endoftext|>"]
    tokenizer = WhisperTokenizer(tokenizer_file=str(model_dir / "tokenizer.json"), pad_token="<|endoftext|>",
                                 extra_special_tokens=specials, model_max_length=dims["n_text_ctx"])
    n_ts = dims["n_vocab"] - len(tokenizer)  # timestamp tokens <|0.00|> ... complete the model vocabulary
    tokenizer.add_tokens([AddedToken("<|%.2f|>" % (i * 0.02), lstrip=False, rstrip=False, normalized=False)
                          for i in range(max(n_ts, 0))])
    tokenizer.save_pretrained(out_dir)
    WhisperFeatureExtractor(feature_size=dims["n_mels"], sampling_rate=16000).save_pretrained(out_dir)

    written: dict[str, tuple[int, ...]] = {}
    for shard in sorted(out_dir.glob("*.safetensors")):  # verify what was written (model.safetensors or shards)
        with safe_open(str(shard), "pt") as f:
            written.update({k: tuple(f.get_slice(k).get_shape()) for k in f.keys()})
    expected = {k: tuple(a.shape) for k, a in tensors.items() if not (tied and k == "proj_out.weight")}
    _check(written, expected, f"{out_dir}/*.safetensors")
    if len(tokenizer) != dims["n_vocab"] or tokenizer.convert_tokens_to_ids("<|startoftranscript|>") != sot:
        raise RuntimeError(f"tokenizer size {len(tokenizer)} / ids do not match the model vocabulary {dims['n_vocab']}")
    return out_dir


def _default_heads(dims: dict[str, int]) -> list[tuple[int, int]]:
    """Default alignment heads (last half of decoder layers, all heads), as CTranslate2/openai use."""
    n = dims["n_text_layer"]
    return [(layer, h) for layer in range(n // 2, n) for h in range(dims["n_text_head"])]


def _heads_dump(heads: Sequence[Sequence[int]], dims: dict[str, int]) -> bytes:
    """Encode alignment heads as openai-whisper's ``set_alignment_heads`` expects (base85 of gzip of bool array)."""
    mask = np.zeros((dims["n_text_layer"], dims["n_text_head"]), dtype=bool)
    for layer, head in heads:
        mask[layer, head] = True
    return base64.b85encode(gzip.compress(mask.tobytes(), mtime=0))


def ct2_to_openai(model_dir: str | Path, out_path: str | Path, dtype: str = "float32") -> Path:
    """Write an openai-whisper checkpoint ``{"dims", "model_state_dict", "alignment_heads"}``.

    ``whisper.load_model(out_path)`` loads it (it ignores the extra key and falls back
    to default alignment heads); :func:`load_openai_model` also applies the stored heads.
    """
    if dtype not in _FLOAT:
        raise ValueError(f"dtype must be one of {sorted(_FLOAT)}, got {dtype!r}")
    variables, cfg = read_ct2(model_dir)
    tensors, dims = _whisper_tensors(variables, cfg)
    if not np.array_equal(tensors["proj_out.weight"], tensors["model.decoder.embed_tokens.weight"]):
        raise CT2FormatError("output projection is not tied to the token embedding; openai-whisper cannot represent it")

    import torch

    state: dict[str, Any] = {}
    for name, arr in tensors.items():
        if name == "proj_out.weight":
            continue  # openai-whisper always ties the output projection to token_embedding
        for pattern, repl in _OPENAI_RENAMES:
            name = re.sub(pattern, repl, name)
        state[name] = torch.from_numpy(np.ascontiguousarray(arr, dtype=_FLOAT[dtype]))
    heads = cfg.get("alignment_heads") or _default_heads(dims)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"dims": dims, "model_state_dict": state, "alignment_heads": _heads_dump(heads, dims)}, out_path)

    back = torch.load(out_path, map_location="cpu", weights_only=True)  # verify what was written
    _check({k: tuple(t.shape) for k, t in back["model_state_dict"].items()},
           {k: tuple(t.shape) for k, t in state.items()}, str(out_path))
    if back["dims"] != dims:
        raise RuntimeError(f"{out_path}: dims mismatch {back['dims']} != {dims}")
    return out_path


def load_openai_model(path: str | Path, device: str = "cpu") -> Any:
    """``whisper.load_model`` plus the alignment heads stored by :func:`ct2_to_openai`."""
    import torch
    import whisper

    model = whisper.load_model(str(path), device=device)
    heads = torch.load(path, map_location="cpu", weights_only=True).get("alignment_heads")
    if heads is not None:
        model.set_alignment_heads(heads)
    return model


# --------------------------------------------------------------------------- helpers
def join_parts(part_files: Sequence[str | Path], out_file: str | Path) -> Path:
    """Concatenate split ``model.bin`` parts (in the given order) and validate the result."""
    parts, out_file = [Path(p) for p in part_files], Path(out_file)
    if not parts:
        raise ValueError("join_parts: no part files given")
    for p in parts:
        if not p.is_file() or p.stat().st_size == 0:
            raise FileNotFoundError(f"join_parts: missing or empty part {p}")
        if p.resolve() == out_file.resolve():
            raise ValueError(f"join_parts: output {out_file} is also an input part")
    out_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_file.with_name(out_file.name + ".partial")
    with open(tmp, "wb") as dst:
        for p in parts:
            with open(p, "rb") as src:
                shutil.copyfileobj(src, dst, 16 << 20)
    expected = sum(p.stat().st_size for p in parts)
    try:
        if tmp.stat().st_size != expected:
            raise CT2FormatError(f"join_parts: wrote {tmp.stat().st_size} bytes, expected {expected}")
        _parse_model_bin(tmp, load=False)  # full structural check (catches wrong order / missing part)
    except CT2FormatError as exc:
        tmp.unlink(missing_ok=True)
        raise CT2FormatError(f"join_parts: joined file is not a valid model.bin ({exc}); check part order") from exc
    tmp.replace(out_file)
    return out_file
