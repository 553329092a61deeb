"""`deid-speech train ner`: written-form copies, projection of reference entities onto a
Whisper transcript by time, CLI errors, a tiny end-to-end training run, and the shipped
model's recorded dev score."""
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from deid_speech import models as shipped
from deid_speech.errors import DeidError
from deid_speech.ner import train as T
from deid_speech.types import LABELS, EntitySpan, Span, Transcript, parse_tagged
from factories import make_transcript

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = shipped.path("ner")


def texts(hyp: Transcript, ents: list[EntitySpan]) -> list[tuple[str, str]]:
    return [(e.label, hyp.text[e.char_start:e.char_end]) for e in ents]


# --- projection by time -----------------------------------------------------------------

def test_entity_maps_to_the_hypothesis_words_it_overlaps_in_time():
    # words at 0.0, 0.5, 1.0, ... (0.4 s each): "my IC is S1234567D thanks"
    hyp = make_transcript("my IC is S1234567D, thanks")
    got = T.project_entities([Span(1.45, 1.95, "NRIC")], hyp)
    assert texts(hyp, got) == [("NRIC", "S1234567D")]  # trailing comma left out


def test_entity_the_asr_split_into_more_words_covers_all_of_them():
    hyp = make_transcript("call me at 9123 45 67 after six")
    got = T.project_entities([Span(1.5, 2.9, "PHONE")], hyp)
    assert texts(hyp, got) == [("PHONE", "9123 45 67")]


def test_entity_the_asr_dropped_yields_nothing_and_others_survive():
    # the reference has a name at 0.5-1.0 s, but the ASR heard nothing there
    hyp = Transcript.from_words([("hello", 0.0, 0.4), ("my", 1.5, 1.8), ("number", 1.8, 2.2),
                                 ("is", 2.2, 2.4), ("91234567.", 2.5, 3.5)])
    got = T.project_entities([Span(0.5, 1.0, "PERSON"), Span(2.5, 3.4, "PHONE")], hyp)
    assert texts(hyp, got) == [("PHONE", "91234567")]


def test_filler_before_a_comma_is_cut_off_where_word_times_are_loose():
    hyp = Transcript.from_words([("number", 0.0, 0.4), ("is,", 0.4, 0.6), ("um,", 0.6, 1.3),
                                 ("S1928032G.", 1.3, 3.0), ("You", 3.1, 3.3)])
    got = T.project_entities([Span(0.9, 3.0, "NRIC")], hyp)
    assert texts(hyp, got) == [("NRIC", "S1928032G")]


def test_a_date_keeps_its_comma():
    hyp = make_transcript("born on April 14, 2005 and")
    got = T.project_entities([Span(1.0, 2.4, "DATE")], hyp)
    assert texts(hyp, got) == [("DATE", "April 14, 2005")]


def test_word_barely_touching_an_entity_is_left_out():
    hyp = make_transcript("the plate is SKB 1234 C ok")  # "is" at 1.0-1.4, "ok" at 3.0-3.4
    got = T.project_entities([Span(1.35, 2.95, "CAR_PLATE")], hyp)
    assert texts(hyp, got) == [("CAR_PLATE", "SKB 1234 C")]


def test_one_long_word_holding_a_short_entity_is_taken():
    hyp = Transcript.from_words([("email", 0.0, 0.4), ("tan@gmail.com", 0.5, 3.0)])
    got = T.project_entities([Span(0.6, 1.0, "EMAIL")], hyp)
    assert texts(hyp, got) == [("EMAIL", "tan@gmail.com")]


# --- written form -------------------------------------------------------------------------

def test_written_copy_keeps_entities_on_their_values():
    text, ents = parse_tagged("my phone is [PHONE] nine one two three four five six seven [PHONE] and "
                              "my IC [NRIC] S one two three four five six seven D [NRIC] queue number "
                              "two three five")
    ex = T.TextExample(text, tuple(ents), "spoken")
    rng = random.Random(3)
    seen_digits = False
    for _ in range(30):
        w = T.written_copy(ex, rng, keep_spoken=0.0)
        assert [e.label for e in w.entities] == ["PHONE", "NRIC"]
        for e in w.entities:
            value = w.text[e.char_start:e.char_end]
            assert value == value.strip() and any(c.isdigit() for c in value), w.text
        seen_digits |= "235" in w.text
    assert seen_digits  # context numbers are written as digits too (most of the time)


@pytest.mark.parametrize("label", LABELS)
def test_written_values_look_written(label):
    rng = random.Random(0)
    vals = [T.written_value(label, rng) for _ in range(20)]
    assert all(v and v == v.strip() for v in vals)
    if label not in ("PERSON", "EMAIL"):
        assert sum(any(c.isdigit() for c in v) for v in vals) >= 15, vals


# --- CLI errors ---------------------------------------------------------------------------

def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "deid_speech.cli", "train", "ner", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=120)


def test_missing_train_file_exits_1_with_one_line(tmp_path):
    r = cli("--train", str(tmp_path / "nope.jsonl"), "--dev", str(tmp_path / "nope.jsonl"),
            "--out", str(tmp_path / "m"))
    assert r.returncode == 1
    assert len(r.stderr.strip().splitlines()) == 1 and "nope.jsonl" in r.stderr


def test_bad_jsonl_exits_1_with_one_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok", "entities": []}\n{not json\n')
    r = cli("--train", str(bad), "--dev", str(bad), "--out", str(tmp_path / "m"))
    assert r.returncode == 1
    assert len(r.stderr.strip().splitlines()) == 1 and "bad.jsonl:2" in r.stderr


def test_entity_outside_the_text_is_a_user_error(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"text": "hi", "entities": [{"label": "PHONE", "char_start": 0,
                                                            "char_end": 9}]}) + "\n")
    with pytest.raises(DeidError, match="bad entity"):
        T.read_records(bad)


def test_asr_noise_without_manifests_is_a_user_error(tmp_path):
    ok = tmp_path / "ok.jsonl"
    ok.write_text(json.dumps({"text": "hi there", "entities": []}) + "\n")
    dev = tmp_path / "dev.jsonl"
    dev.write_text(json.dumps({"text": "bye now", "entities": []}) + "\n")
    r = cli("--train", str(ok), "--dev", str(dev), "--out", str(tmp_path / "m"), "--asr-noise")
    assert r.returncode == 1 and "voiced manifests" in r.stderr


# --- training end to end (real spaCy, no Whisper) -----------------------------------------

def _tiny_records(n: int) -> list[dict]:
    frames = ["my phone number is [PHONE] x [PHONE] can call me",
              "the IC is [NRIC] x [NRIC] ok",
              "queue number two three five please wait"]
    from deid_speech.augment.replace import fill_tags

    rng = random.Random(1)
    rows = []
    for k in range(n):
        tagged, _ = fill_tags(frames[k % len(frames)], rng)
        text, ents = parse_tagged(tagged)
        rows.append({"id": f"r{k}", "text": text, "tagged": tagged, "entities": [e.to_dict() for e in ents]})
    return rows


@pytest.mark.model
def test_training_end_to_end_saves_a_model_the_detector_loads(tmp_path):
    train, dev = tmp_path / "train.jsonl", tmp_path / "dev.jsonl"
    rows = _distinct(36)
    train.write_text("".join(json.dumps(r) + "\n" for r in rows[:30]))
    dev.write_text("".join(json.dumps(r) + "\n" for r in rows[30:]))
    out = tmp_path / "ner"
    r = cli("--train", str(train), "--dev", str(dev), "--out", str(out), "--max-epochs", "3",
            "--patience", "3", "--seed", "1", "--batch-size", "4", "--written-copies", "6")
    assert r.returncode == 0, r.stderr
    assert (out / "meta.json").is_file()
    report = json.loads((out / "training.json").read_text())
    assert report["seed"] == 1 and 1 <= len(report["epochs"]) <= 3
    assert report["data"]["train"]["spoken"] == 30 and report["data"]["train"]["written"] == 180
    assert "ents_f" in report["epochs"][0]["dev"] and report["wall_s"] > 0

    from deid_speech.ner.trained import TrainedNerDetector

    det = TrainedNerDetector(out)
    spans = det.detect(make_transcript("my phone number is 9123 4567 can call me"))
    assert any(s.label == "PHONE" for s in spans), spans


@pytest.mark.parametrize("label,text,ok", [
    ("PHONE", "9123 4567", True), ("PHONE", "8502", False), ("BANK_ACCOUNT", "3 -5 -30", False),
    ("NRIC", "S -9 -7", False), ("NRIC", "S8 538 609", True), ("CAR_PLATE", "F -12", False),
    ("CAR_PLATE", "SJ -S8, 4, 8, C", True), ("CREDIT_CARD", "four five and one", False),
    ("PERSON", "Tan", True), ("EMAIL", "tan at gmail dot com", True),
    ("PERSON", "Merlin Bank", False), ("PERSON", "okay", False), ("PERSON", "Irf and Ben", True),
])
def test_number_like_hits_too_short_for_their_label_are_not_reported(label, text, ok):
    from deid_speech.ner.trained import plausible

    assert plausible(label, text) is ok


def test_detector_refuses_a_folder_without_a_model(tmp_path):
    from deid_speech.ner.trained import TrainedNerDetector

    with pytest.raises(DeidError, match="meta.json"):
        TrainedNerDetector(tmp_path)


# --- the shipped model keeps its recorded dev score ---------------------------------------

@pytest.mark.model
@pytest.mark.skipif(not (SHIPPED / "meta.json").is_file(), reason="no model shipped in models/ner")
def test_shipped_model_reaches_its_recorded_dev_score():
    report = json.loads((SHIPPED / "training.json").read_text())
    rows = [json.loads(line) for line in (SHIPPED / report["dev_examples"]).read_text().splitlines() if line]
    got = T.evaluate_text(SHIPPED, [T.TextExample.from_dict(d) for d in rows])
    assert got["ents_f"] >= report["best_dev"]["ents_f"] - 0.02, got


def test_training_options_come_from_flags_then_a_config_file(tmp_path) -> None:
    import argparse

    from deid_speech.errors import DeidError
    from deid_speech.options import build

    sub = argparse.ArgumentParser().add_subparsers()
    p = T.add_parser(sub)
    cfg = tmp_path / "ner.toml"
    cfg.write_text('max_epochs = 4\nlearn_rate = 0.01\nasr_noise = true\nspacy_config = "my.cfg"\n')
    base = ["--train", "a.jsonl", "--dev", "b.jsonl", "--out", "o", "--config", str(cfg)]
    opts = build(p.parse_args(base + ["--max-epochs", "6"]), T.TrainOptions)
    assert (opts.max_epochs, opts.learn_rate, opts.asr_noise, opts.patience) == (6, 0.01, True, 8)
    assert opts.spacy_config == Path("my.cfg")
    cfg.write_text("epochs = 4\n")
    with pytest.raises(DeidError, match="unknown option.*epochs"):
        build(p.parse_args(base), T.TrainOptions)
    cfg.write_text('max_epochs = "many"\n')
    with pytest.raises(DeidError, match="max_epochs must be int"):
        build(p.parse_args(base), T.TrainOptions)


# --- the output folder: never replaced, never relabelled; dev apart from train -------------

def _main(*args: str) -> int:
    from deid_speech.cli import main

    return main(["train", "ner", *args])


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _distinct(n: int, first: int = 0) -> list[dict]:
    """Records ``first`` .. ``n - 1`` of :func:`_tiny_records`, each text its own."""
    return [{**r, "text": f"{r['text']} take {k}", "tagged": f"{r['tagged']} take {k}"}
            for k, r in enumerate(_tiny_records(n)) if k >= first]


def test_out_that_is_a_file_is_a_one_line_error(tmp_path, capsys):
    data = _write(tmp_path / "train.jsonl", _distinct(4))
    dev = _write(tmp_path / "dev.jsonl", _distinct(8, 4))
    assert _main("--train", str(data), "--dev", str(dev), "--out", str(data)) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "not a folder" in err
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    assert _main("--train", str(data), "--dev", str(dev), "--out", str(other)) == 1
    assert "not a `train ner` folder" in capsys.readouterr().err and (other / "notes.txt").read_text() == "mine"
    (other / "training.json").write_text("{}")  # a finished model that recorded no fingerprint: kept too
    assert _main("--train", str(data), "--dev", str(dev), "--out", str(other)) == 1
    assert "without a record of its data and options" in capsys.readouterr().err
    assert (other / "training.json").read_text() == "{}"


def test_dev_sharing_records_with_train_is_refused(tmp_path, capsys):
    rows = _distinct(6)
    data = _write(tmp_path / "train.jsonl", rows)
    assert _main("--train", str(data), "--dev", str(data), "--out", str(tmp_path / "m")) == 1
    assert "--dev shares 6 of its 6 records with --train" in capsys.readouterr().err
    dev = _write(tmp_path / "dev.jsonl", [{**rows[0], "id": "other"}, *_distinct(9, 6)])  # same text
    assert _main("--train", str(data), "--dev", str(dev), "--out", str(tmp_path / "m")) == 1
    assert "--dev shares 1 of its 4 records" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_a_finished_model_is_kept_a_rerun_of_the_same_training_does_nothing(tmp_path, capsys):
    rows = _distinct(12)
    data, dev = _write(tmp_path / "train.jsonl", rows[:8]), _write(tmp_path / "dev.jsonl", rows[8:])
    other = _write(tmp_path / "other.jsonl", _distinct(16, 12))
    out = tmp_path / "m"
    base = ["--train", str(data), "--out", str(out), "--max-epochs", "1", "--written-copies", "0"]
    assert _main(*base, "--dev", str(dev)) == 0
    report = (out / "training.json").read_bytes()
    weights = (out / "ner" / "model").read_bytes()
    assert "fingerprint" in json.loads(report)
    capsys.readouterr()
    assert _main(*base, "--dev", str(dev)) == 0  # the same training: nothing to do
    assert "best epoch 1" in capsys.readouterr().out
    assert _main(*base, "--dev", str(other)) == 1
    assert "was trained with other data/options (other --dev records); use a new --out" in capsys.readouterr().err
    assert _main(*base, "--dev", str(dev), "--learn-rate", "0.01") == 1
    assert "(learn_rate 0.001, now 0.01)" in capsys.readouterr().err
    assert (out / "training.json").read_bytes() == report and (out / "ner" / "model").read_bytes() == weights


def test_detector_refuses_a_model_whose_training_did_not_finish(tmp_path):
    from deid_speech.ner.trained import TrainedNerDetector

    (tmp_path / "meta.json").write_text("{}")
    (tmp_path / "dev_examples.jsonl").write_text("")  # written first; training.json comes last
    with pytest.raises(DeidError, match="training did not finish; rerun the same `deid-speech train ner`"):
        TrainedNerDetector(tmp_path)
