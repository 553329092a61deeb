"""Factories for the e2e tests: a random tiny Whisper folder with tiny.en's tokenizer,
short training clips cut from the shipped example call."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from deid_speech import models as shipped

ROOT = Path(__file__).resolve().parents[2]
CALL = shipped.path("example")
# (start s, end s, tagged transcript) of stretches of the example call
CLIPS = [
    (34.5, 40.8, "Can call me at [PHONE] nine one seven three, four four eight two [PHONE]. Anytime can lah."),
    (13.1, 15.7, "My name is [PERSON] Jason Lim [PERSON]."),
]


@pytest.fixture(scope="session")
def tokenizer_dir() -> Path:
    return tokenizer_source()


def tokenizer_source() -> Path:
    """An HF folder with tiny.en's tokenizer and preprocessor (skips without the package)."""
    pytest.importorskip("transformers")
    from deid_speech.asr.models import provision
    from deid_speech.errors import DeidError

    try:
        return Path(provision("tiny.en", "hf"))
    except DeidError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def tiny_whisper_dir(tmp_path_factory) -> Path:
    """A randomly initialised 1-layer Whisper (d_model 64) with tiny.en's vocabulary."""
    import torch
    from transformers import GenerationConfig, WhisperConfig, WhisperForConditionalGeneration

    src = tokenizer_source()
    out = tmp_path_factory.mktemp("tiny-whisper")
    cfg = WhisperConfig.from_pretrained(src)
    for k, v in dict(d_model=64, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                     decoder_attention_heads=2, encoder_ffn_dim=128, decoder_ffn_dim=128).items():
        setattr(cfg, k, v)
    torch.manual_seed(0)
    model = WhisperForConditionalGeneration(cfg)
    gen = GenerationConfig.from_pretrained(src)
    gen.alignment_heads = [[0, 0], [0, 1]]
    model.generation_config = gen
    model.save_pretrained(out)
    for f in src.iterdir():
        if f.is_file() and f.name.startswith(("tokenizer", "preprocessor", "processor", "special_tokens",
                                               "vocab", "merges", "added_tokens", "normalizer")):
            shutil.copy(f, out / f.name)
    return out


@pytest.fixture(scope="session")
def clip_records(tmp_path_factory) -> list[dict]:
    """Manifest-like records (audio, text, tagged, entities) of short example clips."""
    import soundfile as sf

    from deid_speech.audio import load
    from deid_speech.types import parse_tagged

    audio = load(CALL).mono16k()
    out = tmp_path_factory.mktemp("clips")
    recs = []
    for i, (a, b, tagged) in enumerate(CLIPS):
        path = out / f"clip{i}.wav"
        sf.write(path, audio[int(a * 16000): int(b * 16000)], 16000)
        text, _ = parse_tagged(tagged)
        recs.append({"id": f"clip{i}", "audio": str(path), "duration": round(b - a, 3), "text": text,
                     "tagged": tagged, "entities": []})
    (out / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return recs
