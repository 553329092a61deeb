"""The cascade's trained NER: the shipped model by default, off with "none", and a missing
shipped model is an error rather than a quietly weaker cascade."""
from __future__ import annotations

import pytest

from deid_speech.errors import DeidError
from deid_speech.ner import trained
from deid_speech.pipeline import RedactConfig


def test_default_is_the_shipped_model_and_none_turns_it_off() -> None:
    assert RedactConfig().ner_model == "default"
    from deid_speech import models

    assert trained.resolve_ner_model("default") == str(models.path("ner"))
    assert (models.path("ner") / "meta.json").is_file()
    assert trained.resolve_ner_model("none") is None and trained.resolve_ner_model(None) is None
    assert trained.resolve_ner_model("/some/folder") == "/some/folder"


def test_missing_shipped_model_is_an_error(monkeypatch, tmp_path) -> None:
    from deid_speech import models

    monkeypatch.setitem(models.SHIPPED, "ner", tmp_path / "gone")
    monkeypatch.setattr(models, "_verified", {})
    with pytest.raises(DeidError, match="not in this installation"):
        trained.resolve_ner_model("default")


@pytest.mark.parametrize("label,text,ok", [
    ("DATE", "10 of clubs", False), ("DATE", "seven of hearts", False),
    ("DATE", "twelfth of March", True), ("DATE", "1987", True), ("DATE", "3/12/1987", True),
    ("BANK_ACCOUNT", "33 -4 -692", True), ("PHONE", "nine one", False),
])
def test_trained_ner_hits_must_be_plausible_for_their_label(label, text, ok):
    from deid_speech.ner.trained import plausible

    assert plausible(label, text) is ok
