"""bench/pad_grid.py: the rule (no more leak than now, then the least over-redaction) and its
scoring of the same predictions under other pads."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from deid_speech.eval.run import Item, Prediction
from deid_speech.types import Span, Transcript

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("pad_grid", ROOT / "bench" / "pad_grid.py")
pad_grid = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pad_grid)


def cell(part, before, after, leak, over, reach=0.3):
    return {"part": part, "reach_after": reach, "pad_before": before, "pad_after": after, "recall": 1.0,
            "leaked_duration": leak, "leaky_entities": 0.0, "over_redaction": over}


def test_the_least_over_redaction_among_settings_that_leak_no_more_than_now() -> None:
    cells = [cell("utterances", 0.2, 0.15, 4 / 64, 0.28), cell("calls", 0.2, 0.15, 4 / 64, 0.18),
             # beeps least, but leaks more of the calls: not allowed
             cell("utterances", 0.1, 0.0, 3 / 64, 0.20), cell("calls", 0.1, 0.0, 5 / 64, 0.12),
             # no more leak on either part, less over-redaction: chosen
             cell("utterances", 0.25, 0.1, 4 / 64, 0.25, reach=0.0), cell("calls", 0.25, 0.1, 3 / 64, 0.16, reach=0.0),
             # the same mean over-redaction, but more leak: the tie goes to the setting above
             cell("utterances", 0.3, 0.05, 4 / 64, 0.24), cell("calls", 0.3, 0.05, 4 / 64, 0.17)]
    rec = pad_grid.choose(cells, (0.3, 0.2, 0.15))
    assert (rec["reach_after"], rec["pad_before"], rec["pad_after"]) == (0.0, 0.25, 0.1)
    assert rec["parts"]["calls"]["leaked_duration"] == 3 / 64
    # nothing beats the current setting: it stays
    rec = pad_grid.choose(cells[:4], (0.3, 0.2, 0.15))
    assert (rec["reach_after"], rec["pad_before"], rec["pad_after"]) == (0.3, 0.2, 0.15)


def test_the_forward_reach_is_set_for_detection_and_restored(monkeypatch) -> None:
    from deid_speech import redact
    from deid_speech.eval import run

    seen = []
    monkeypatch.setattr(run, "load_manifest", lambda manifest: [])
    def lazily(*a, **k):  # system_predictions detects as it is iterated
        seen.append(redact.GAP_REACH_AFTER)
        yield from ()

    monkeypatch.setattr(run, "system_predictions", lambda *a, **k: lazily())
    default = redact.GAP_REACH_AFTER
    pad_grid.predictions(Path("m.jsonl"), None, 0.07)
    assert seen == [0.07] and redact.GAP_REACH_AFTER == default
    monkeypatch.setattr(run, "system_predictions", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        pad_grid.predictions(Path("m.jsonl"), None, 0.07)
    assert redact.GAP_REACH_AFTER == default


def test_each_pair_rescores_the_same_spans_with_its_own_padding() -> None:
    # one entity 1.0-2.0 s, detected 1.3-2.2 s; other speech 0.0-1.0 and 2.0-3.0 s
    words = Transcript.from_words([("a", 0.0, 1.0), ("Tan", 1.0, 2.0), ("b", 2.0, 3.0)])
    item = Item(id="x", audio=Path("x.wav"), text="a Tan b", entities=[Span(1.0, 2.0, "PERSON")],
                entity_chars=[], words=list(words.words))
    pred = Prediction([Span(1.3, 2.2, "PERSON")], words, "a [PERSON_1] b")
    no_pad = pad_grid.score([(item, pred, 3.0)], 0.0, 0.0)
    assert no_pad["leaked_duration"] == pytest.approx(0.3) and no_pad["over_redaction"] == pytest.approx(0.1)
    padded = pad_grid.score([(item, pred, 3.0)], 0.35, 0.0)
    assert padded["leaked_duration"] == 0.0 and padded["over_redaction"] == pytest.approx(0.25 / 2)


def test_labels_take_the_grids_padding_and_the_others_keep_theirs() -> None:
    # a name 1.0-2.0 s found at 1.3-2.0 s, a phone 4.0-5.0 s found at 4.3-5.0 s; other speech between
    words = Transcript.from_words([("a", 0.0, 1.0), ("Tan", 1.0, 2.0), ("b", 2.0, 4.0), ("81", 4.0, 5.0)])
    item = Item(id="x", audio=Path("x.wav"), text="a Tan b 81", entities=[Span(1.0, 2.0, "PERSON"),
                Span(4.0, 5.0, "PHONE")], entity_chars=[], words=list(words.words))
    pred = Prediction([Span(1.3, 2.0, "PERSON"), Span(4.3, 5.0, "PHONE")], words, "a [PERSON_1] b [PHONE_1]")
    phone_only = pad_grid.score([(item, pred, 5.0)], 0.0, 0.0, ("PHONE",))
    # the name keeps the default's 0.2 s before it (0.1 s of it left audible), the phone has none (0.3 s)
    assert phone_only["leaked_duration"] == pytest.approx((0.1 + 0.3) / 2.0)
    assert pad_grid.score([(item, pred, 5.0)], 0.0, 0.0)["leaked_duration"] == pytest.approx(0.6 / 2.0)


def test_the_test_part_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="tuning data only"):
        pad_grid.main(["--bench", str(tmp_path / "benchmark" / "test"), "--out", str(tmp_path / "g.json")])
