"""`deid-speech make-dataset --config`: seed -> augment -> tts into split manifests."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from deid_speech import models as shipped
from deid_speech.cli import main
from deid_speech.errors import DeidError
from deid_speech.make_dataset import DatasetConfig

ROOT = Path(__file__).resolve().parents[1]
needs_flite = pytest.mark.skipif(shutil.which("flite") is None, reason="needs flite")

CONFIG = f"""
out_dir = "ds"
seed = 5
seed_dir = "{shipped.path('seed')}"
limit = {{ train = 3, dev = 2, test = 2 }}

[[augment]]
strategy = "diverse"
n = 2
backend = "template"

[tts]
voices = ["flite:rms", "flite:slt", "flite:awb"]
held_out = ["flite:awb"]
telephone_test = true
workers = 1
"""


def _rows(p: Path) -> list[dict]:
    return [json.loads(x) for x in p.read_text().splitlines()]


@needs_flite
def test_builds_all_splits_and_resumes(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    cfg = tmp_path / "ds.toml"
    cfg.write_text(CONFIG)
    assert main(["make-dataset", "--config", str(cfg), "--progress", "off"]) == 0
    out = tmp_path / "ds"
    assert (out / "dataset_config.toml").read_text() == CONFIG
    train, dev, test, tel = (_rows(out / s / "manifest.jsonl") for s in ("train", "dev", "test", "test_telephone"))
    assert (len(train), len(dev), len(test)) == (3 + 2, 2, 2)
    assert sum(r["id"].startswith("diverse") for r in train) == 2  # the augmentation arm joined train
    assert {r["voice"] for r in train} <= {"flite:rms", "flite:slt"}
    assert {r["voice"] for r in dev + test + tel} == {"flite:awb"}
    # the telephone copy: same sentences, voice and entity times, every one through the line
    assert [(r["id"], r["text"], r["voice"]) for r in tel] == [(r["id"], r["text"], r["voice"]) for r in test]
    assert all(r["augment"]["telephone"] for r in tel) and not any(r["augment"]["telephone"] for r in test)
    assert [r["entities"] for r in tel] == [r["entities"] for r in test]
    # fresh values: the seed's own values are replaced, tags kept
    seed_test = {r["id"]: r for r in _rows(shipped.path("seed") / "test.jsonl")}
    for r in test:
        s = seed_test[r["id"]]
        assert [e["label"] for e in r["entities"]] == [e["label"] for e in s["entities"]]
        if s["entities"]:
            assert r["tagged"] != s["tagged"]
    record = json.loads((out / "dataset.json").read_text())
    assert record["sentences"] == {"train": 5, "dev": 2, "test": 2}
    assert record["augment"]["diverse0.6"]["accepted"] == 2
    capsys.readouterr()
    # a rerun finds everything done; another config into the same folder is refused
    assert main(["make-dataset", "--config", str(cfg), "--progress", "off"]) == 0
    assert all(v["new"] == 0 for v in json.loads((out / "dataset.json").read_text())["tts"].values())
    cfg.write_text(CONFIG.replace("seed = 5", "seed = 6"))
    assert main(["make-dataset", "--config", str(cfg)]) == 1
    assert "another config" in capsys.readouterr().err


@pytest.mark.parametrize("text, message", [
    ('seed = 1', "needs out_dir"),
    ('out_dir = "x"\ncolour = 1', "unknown config key"),
    ('out_dir = "x"\n[tts]\nvoice = "flite:rms"', "bad config"),
    ('out_dir = "x"\nlimit = { train = 0 }', "positive integers"),
    ('out_dir = "x"\n[[augment]]\nstrategy = "similar"\n[[augment]]\nstrategy = "similar"', "same strategy"),
    ('out_dir = = 1', "not valid TOML"),
    # a value of the wrong type is named, not a traceback
    ('out_dir = 5', "out_dir: a string expected"),
    ('out_dir = "x"\nseed = "abc"', "seed: an integer expected"),
    ('out_dir = "x"\nseed = true', "seed: an integer expected"),
    ('out_dir = "x"\nlimit = 3', "limit: a table expected"),
    ('out_dir = "x"\n[[augment]]\nn = "x"', r"\[\[augment\]\] n: an integer expected"),
    ('out_dir = "x"\n[[augment]]\nn = 0', r"n must be at least 1"),
    ('out_dir = "x"\n[[augment]]\ntemperature = "hot"', "temperature: a number expected"),
    ('out_dir = "x"\n[[augment]]\nbackend = "gpt"', "backend: one of"),
    ('out_dir = "x"\naugment = { n = 3 }', "augment: a list expected"),
    # a string where a list of voices is expected is an error, not a list of its letters
    ('out_dir = "x"\n[tts]\nvoices = "flite:slt"', "voices: a list of voices"),
    ('out_dir = "x"\n[tts]\ntrain_augment = "lihgt"', "train_augment: one of none, light"),
    ('out_dir = "x"\n[tts]\nworkers = 0', "workers must be at least 1"),
])
def test_bad_configs_are_named(tmp_path: Path, text: str, message: str) -> None:
    p = tmp_path / "c.toml"
    p.write_text(text)
    with pytest.raises(DeidError, match=message):
        DatasetConfig.load(p)


def test_voice_list_needs_both_kinds(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    p = tmp_path / "c.toml"
    p.write_text(f'out_dir = "x"\nseed_dir = "{shipped.path("seed")}"\n[tts]\nvoices = ["flite:rms"]\n'
                 'held_out = ["flite:awb"]\n')
    assert main(["make-dataset", "--config", str(p)]) == 1
    assert "held-out voices" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    assert main(["make-dataset", "--config", str(tmp_path / "missing.toml")]) == 1


def test_shipped_config_parses() -> None:
    cfg = DatasetConfig.load(ROOT / "configs" / "datasets" / "small.toml")
    assert cfg.out_dir == ROOT / "out" / "datasets" / "small" and cfg.seed_dir == shipped.path("seed")
    assert cfg.tts.telephone_test and [a.name for a in cfg.augment] == ["similar0.3"]


def test_limit_samples_across_the_file_not_its_head() -> None:
    from collections import Counter

    from deid_speech.augment.seed import load_split
    from deid_speech.make_dataset import limit_rows

    rows = load_split(shipped.path("seed") / "train.jsonl")
    head = Counter(e["label"] for r in rows[:160] for e in r["entities"])
    picked = limit_rows(rows, 160, "0-train")
    got = Counter(e["label"] for r in picked for e in r["entities"])
    assert head["CREDIT_CARD"] == 0  # why the head is wrong: the seed files are grouped by label
    assert len(picked) == 160 and all(got[label] >= 5 for label in
                                      ("PERSON", "NRIC", "PHONE", "EMAIL", "CREDIT_CARD", "BANK_ACCOUNT", "DATE"))
    assert [r["id"] for r in picked] == sorted((r["id"] for r in picked), key=[x["id"] for x in rows].index)
    assert picked == limit_rows(rows, 160, "0-train") != limit_rows(rows, 160, "1-train")
    assert limit_rows(rows, None, "x") == rows and limit_rows(rows[:3], 10, "x") == rows[:3]


def test_a_dataset_config_may_have_a_base(tmp_path: Path) -> None:
    """The same ``base`` rule as an experiment's: tables key by key, lists whole, an own out_dir."""
    (tmp_path / "a.toml").write_text('out_dir = "a"\nseed = 4\n[tts]\nworkers = 1\ntelephone_test = true\n'
                                     '[[augment]]\nstrategy = "similar"\nn = 5\nbackend = "template"\n')
    (tmp_path / "b.toml").write_text('base = "a.toml"\nout_dir = "b"\naugment = []\n[tts]\nworkers = 2\n')
    cfg = DatasetConfig.load(tmp_path / "b.toml")
    assert cfg.out_dir == tmp_path / "b" and cfg.seed == 4 and cfg.augment == ()
    assert cfg.tts.workers == 2 and cfg.tts.telephone_test
    (tmp_path / "c.toml").write_text('base = "a.toml"\nseed = 5\n')
    with pytest.raises(DeidError, match="out_dir of its own"):
        DatasetConfig.load(tmp_path / "c.toml")


def test_a_typo_in_the_config_is_refused_before_anything_is_written(tmp_path: Path, capsys) -> None:
    """A bad [tts] value used to fail after dataset.json was written, and then the corrected
    config was refused as "another config"."""
    p = tmp_path / "c.toml"
    p.write_text(CONFIG.replace("workers = 1", 'workers = 1\ntrain_augment = "lihgt"'))
    assert main(["make-dataset", "--config", str(p)]) == 1
    assert "train_augment: one of" in capsys.readouterr().err
    assert not (tmp_path / "ds").exists()


def test_an_arm_made_of_test_sentences_is_refused(tmp_path: Path, capsys) -> None:
    """Train/test mixing: an arm's sentences file written from the test split (a test sentence
    with an opener added, other values) is refused before anything is built, naming one."""
    from deid_speech.augment.seed import load_split
    from deid_speech.types import parse_tagged

    rows = []
    for k, r in enumerate(load_split(shipped.path("seed") / "train.jsonl")[:1] +
                          load_split(shipped.path("seed") / "test.jsonl")[:1]):
        tagged = "so, " + r["tagged"]
        text, ents = parse_tagged(tagged)
        rows.append({"id": f"diverse-r{k}", "text": text, "tagged": tagged, "entities": [e.to_dict() for e in ents]})
    (tmp_path / "arm.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    p = tmp_path / "c.toml"
    p.write_text(CONFIG.replace('backend = "template"', 'sentences = "arm.jsonl"'))
    assert main(["make-dataset", "--config", str(p)]) == 1
    err = capsys.readouterr().err
    assert "diverse-r1 repeats test sentence" in err and "must not come from dev or test" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "ds").exists()
    # the seed's train sentences, an opener added, are fine
    from deid_speech.make_dataset import check_arm_files

    (tmp_path / "arm.jsonl").write_text("".join(json.dumps({**r, "id": f"{r['id']}{k}"}) + "\n"
                                            for r in rows[:1] for k in range(2)))
    check_arm_files(DatasetConfig.load(p).augment, shipped.path("seed"))
