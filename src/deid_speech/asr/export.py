"""An HF Whisper folder to CTranslate2 (faster-whisper): :func:`export_ct2`.

Added special tokens and the exported CTranslate2 model (checked with ctranslate2 4.8.5 and
faster-whisper 1.2.1): the tokens are in ``OUT/ct2/vocabulary.json`` and ``tokenizer.json``
after the timestamp tokens (tiny.en: ids 51864, 51865, ...); CTranslate2 still treats tiny.en
+ tags as English-only (``lang_ids`` is empty). But faster-whisper's ``Tokenizer.decode``
keeps only ids below ``<|endoftext|>`` (50256), so tags vanish from its segment text and
words, and in its default timestamp mode every id >= ``<|notimestamps|>`` + 1 counts as a
timestamp, so a tag would split segments at a bogus "30.00 s". To read tags, decode with
``without_timestamps=True`` and the HF tokenizer (``model.hf_tokenizer.decode(ids)``), or call
``model.model.generate`` (CTranslate2) directly.

Used by inference (:mod:`deid_speech.e2e.shipped`) and training; imports no training module.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from deid_speech.errors import DeidError

QUANTIZATIONS = ("float16", "int8", "int8_float16", "float32")


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

