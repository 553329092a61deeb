"""The public API: ``from deid_speech import Redactor, RedactConfig, load_audio, save_audio``,
with ``import deid_speech`` free of numpy, torch and every model."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

import deid_speech


def test_import_loads_no_heavy_module() -> None:
    code = ("import sys, json, deid_speech; "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('numpy', 'torch', 'spacy', 'faster_whisper', 'ctranslate2', 'transformers', 'scipy', 'deid_speech'))))")
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert loaded == ["deid_speech"]


def test_public_names_resolve_lazily_to_the_library_objects() -> None:
    from deid_speech.audio import load, save
    from deid_speech.pipeline import RedactConfig, Redactor

    assert deid_speech.Redactor is Redactor and deid_speech.RedactConfig is RedactConfig
    assert deid_speech.load_audio is load and deid_speech.save_audio is save
    assert set(deid_speech.__all__) == set(deid_speech._LAZY) and set(deid_speech.__all__) <= set(dir(deid_speech))
    with pytest.raises(AttributeError, match="no attribute 'Redacter'"):
        deid_speech.Redacter  # noqa: B018


def test_bad_config_is_a_deid_error() -> None:
    from deid_speech import DeidError, RedactConfig

    with pytest.raises(DeidError, match="unknown system"):
        RedactConfig(system="magic")


@pytest.mark.model
def test_readme_example_redacts_the_shipped_call(tmp_path) -> None:
    from deid_speech import RedactConfig, Redactor, load_audio, models, save_audio

    audio = load_audio(models.path("example"))
    result = Redactor(RedactConfig()).redact(audio)
    save_audio(result.audio, tmp_path / "call.redacted.wav")
    back = load_audio(tmp_path / "call.redacted.wav")
    assert back.duration == pytest.approx(audio.duration, abs=0.01)
    assert {s.label for s in result.spans} >= {"PERSON", "NRIC", "PHONE", "EMAIL"}
    assert "[NRIC_1]" in result.redacted_transcript
