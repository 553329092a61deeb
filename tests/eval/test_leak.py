"""Audio leak metrics on hand-built cases with known answers."""
from __future__ import annotations

import pytest

from deid_speech.eval.leak import LeakCounts, covered, subtract, union
from deid_speech.types import Span


def test_interval_helpers() -> None:
    assert union([(3, 4), (1, 2), (2, 2.5), (5, 5)]) == [(1, 2.5), (3, 4)]  # touching joins, empty dropped
    assert covered(0, 10, union([(1, 2), (1.5, 3)])) == pytest.approx(2.0)
    assert subtract([(0, 10)], [(2, 3), (5, 6), (9, 12)]) == [(0, 2), (3, 5), (6, 9)]
    assert subtract([(0, 1)], []) == [(0, 1)] and subtract([(1, 2)], [(0, 5)]) == []


def test_full_partial_and_no_leak() -> None:
    truth = [Span(1, 2, "PHONE"), Span(3, 4, "PERSON"), Span(6, 7, "NRIC")]
    redacted = [(0.9, 2.1), (3.5, 4.2)]  # phone covered, name half covered, NRIC missed
    speech = [(0, 8)]
    lk = LeakCounts()
    lk.add(truth, redacted, speech)
    assert lk.leaked_s == pytest.approx(0.5 + 1.0)
    assert lk.leaked_duration == pytest.approx(1.5 / 3)
    assert lk.leaky_entities == pytest.approx(2 / 3)
    assert lk.fractions == [("PHONE", 0.0), ("PERSON", pytest.approx(0.5)), ("NRIC", 1.0)]
    # non-PII speech: 8 s - 3 s = 5 s, of which 0.1 + 0.1 + 0.2 s were beeped
    assert lk.other_speech_s == pytest.approx(5.0)
    assert lk.over_redaction == pytest.approx(0.4 / 5.0)


def test_one_region_covering_two_entities_and_split_regions() -> None:
    lk = LeakCounts()
    lk.add([Span(1, 2, "PHONE"), Span(2.5, 3, "EMAIL")], [(0.9, 3.1)], [(0, 4)])
    assert (lk.leaked_s, lk.n_leaky) == (0.0, 0)
    assert lk.over_redacted_s == pytest.approx(0.1 + 0.5 + 0.1)  # the gap between them is speech here
    split = LeakCounts()
    split.add([Span(1, 3, "PHONE")], [(1, 1.9), (2.1, 3)], [(1, 3)])
    assert split.leaked_s == pytest.approx(0.2) and split.n_leaky == 1 and split.over_redaction == 0.0


def test_slivers_below_tolerance_are_not_leaks_and_empty_files_are_defined() -> None:
    lk = LeakCounts()
    lk.add([Span(1, 2, "DATE")], [(1.03, 2.0)], [(0, 3)])
    assert lk.n_leaky == 0 and lk.fractions == [("DATE", 0.0)] and lk.leaked_s == pytest.approx(0.03)
    empty = LeakCounts()
    mine = empty.add([], [(0, 1)], [(0, 2)])
    assert mine.over_redaction == pytest.approx(0.5)
    assert empty.leaked_duration == 0.0 and empty.leaky_entities == 0.0
    total = LeakCounts()
    total += lk
    total += empty
    assert total.n_entities == 1 and total.other_speech_s == pytest.approx(2 + 2)


def test_leak_is_also_counted_per_label():
    from deid_speech.eval.leak import LeakCounts
    from deid_speech.types import Span

    c = LeakCounts()
    c.add([Span(0.0, 1.0, "PHONE"), Span(2.0, 4.0, "PERSON")], [(0.0, 0.5), (2.0, 4.0)], [(0.0, 5.0)])
    c.add([Span(0.0, 1.0, "PHONE")], [], [(0.0, 1.0)])
    d = c.as_dict()["per_label"]
    assert d == {"PERSON": 0.0, "PHONE": 0.75}  # 0.5 + 1.0 of 2.0 s of phone audible


def test_over_redaction_is_split_by_cause_and_the_causes_add_up() -> None:
    """Through eval's own scoring (SystemScore.add): speech no word covered is beeped with the
    default padding, as redact beeps it, and counted as such."""
    from pathlib import Path

    from deid_speech.eval.run import Item, Prediction, SystemScore
    from deid_speech.redact import Operator, RedactOptions
    from deid_speech.types import Transcript, Word

    truth = [Span(2.0, 3.0, "PHONE")]
    words = [Word(f"w{i}", i / 10, (i + 1) / 10, 0, 0) for i in range(100)]  # speech from 0 to 10 s
    item = Item("f", Path("f.flac"), "", truth, [], words)
    pred = Prediction(spans=[Span(1.5, 3.0, "PHONE"),  # hits the phone, 0.5 s early: overshoot
                             Span(6.0, 6.5, "DATE"),  # nothing there: a false alarm
                             Span(7.0, 7.2, "DATE")],  # another, close enough to merge
                      transcript=Transcript(text="", words=[]), redacted_transcript="",
                      options=RedactOptions(Operator(pad_before=0.2, pad_after=0.15), merge_gap=1.0),
                      blanked=[(9.0, 9.4)])
    score = SystemScore()
    score.add(item, pred, 10.0)
    lk = score.leak
    by = lk.by_cause
    assert by["overshoot"] == pytest.approx(0.5)
    assert by["padding"] == pytest.approx(0.2 + 0.15)
    assert by["false alarm DATE"] == pytest.approx((6.65 - 5.8) + (7.35 - 6.8))
    assert by["uncovered speech"] == pytest.approx(0.2 + 0.4 + 0.15)  # padded as redact pads it
    assert by["merge gap"] == pytest.approx(6.8 - 6.65)  # the pause between the DATE regions (the blank is too far)
    assert "other" not in by
    assert sum(by.values()) == pytest.approx(lk.over_redacted_s)
    shares = lk.as_dict()["over_redaction_by_cause"]
    assert list(shares)[0] == "false alarm DATE" and sum(shares.values()) == pytest.approx(lk.over_redaction, abs=1e-3)
    assert "over_redaction_by_cause" not in LeakCounts().as_dict()  # nothing named, nothing reported


def test_intersect_keeps_what_both_hold_and_agrees_with_the_difference_of_differences():
    import random

    from deid_speech.intervals import intersect, subtract

    assert intersect([(0, 10)], [(2, 3), (5, 6), (9, 12)]) == [(2, 3), (5, 6), (9, 10)]
    assert intersect([(0, 1), (1, 2)], [(0.5, 1.5)]) == [(0.5, 1.5)]  # touching intervals join first
    assert intersect([(0, 1)], [(1, 2)]) == [] and intersect([], [(0, 1)]) == []
    rng = random.Random(3)
    for _ in range(50):
        a = [(x, x + rng.uniform(0.01, 2)) for x in (rng.uniform(0, 20) for _ in range(15))]
        b = [(x, x + rng.uniform(0.01, 2)) for x in (rng.uniform(0, 20) for _ in range(15))]
        assert intersect(a, b) == subtract(a, subtract(a, b))
