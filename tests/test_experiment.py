"""`deid-speech experiment`: arms are built, every model trained and scored once, the table
is the mean of what the evaluations wrote, and a rerun skips finished steps."""
from __future__ import annotations

import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from deid_speech import experiment
from deid_speech import models as shipped
from deid_speech.cli import main
from deid_speech.errors import DeidError
from deid_speech.experiment import ExperimentConfig, run_experiment, summarise

ROOT = Path(__file__).resolve().parents[1]
needs_flite = pytest.mark.skipif(shutil.which("flite") is None, reason="needs flite")

CONFIG = f"""
out_dir = "exp"
seeds = [0, 1]
systems = ["cascade", "e2e"]

[data]
seed_dir = "{shipped.path('seed')}"
limit = {{ train = 3, dev = 2, test = 2 }}

[tts]
voices = ["flite:rms", "flite:slt", "flite:awb"]
held_out = ["flite:awb"]
telephone_test = true

[[arm]]
strategy = "similar"
n = 2
backend = "template"

[[arm]]
strategy = "diverse"
n = 2
sentences = "llm/diverse0.6.jsonl"

[tests]
unseen = "unseen.jsonl"

[train]
e2e = ["--max-steps", "5"]
"""


def _fake_cli(calls: list[list[str]]):
    """Stands in for `deid-speech train/eval`: records the call; eval writes a results.json
    whose F1 encodes the seed and system, so the table's means can be checked."""

    def fake(argv: list[str]) -> None:
        calls.append(argv)
        if argv[0] == "train":
            out = Path(argv[argv.index("--out") + 1])
            out.mkdir(parents=True)
            (out / "training.json").write_text(json.dumps({"wall_s": 1.0, "best_score": 0.5}))
            return
        model = Path(argv[argv.index("--ner-model" if "--ner-model" in argv else "--model") + 1])
        seed = int(model.parent.name.removeprefix("seed"))
        system = argv[argv.index("--system") + 1]
        f1 = 0.5 + 0.1 * seed + (0.2 if system == "e2e" else 0.0)
        overall = {"precision": f1, "recall": f1, "f1": f1}
        leak = {"leaked_duration": 0.1 * (seed + 1), "over_redaction": 0.3}
        res = {"systems": {system: {"timestamp_overlap": {"overall": overall}, "audio_leak": leak,
                                    "timestamp_overlap_label_exact": {"per_label": {"PHONE": {"f1": f1}}}}}}
        out = Path(argv[argv.index("--out-dir") + 1])
        out.mkdir(parents=True)
        (out / "results.json").write_text(json.dumps(res))

    return fake


@needs_flite
def _llm_arm(path: Path, n: int, strategy: str = "diverse", temperature: float = 0.6) -> None:
    """An earlier `augment` run's output: n accepted sentences of one arm."""
    from deid_speech.types import parse_tagged

    path.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    for k in range(n):
        tagged = f"eh call [PHONE] nine one two three four five six {['seven', 'eight', 'nine'][k % 3]} [PHONE] lah line {k}"
        text, ents = parse_tagged(tagged)
        rows.append({"id": f"{strategy}-r{k}", "text": text, "tagged": tagged, "entities": [e.to_dict() for e in ents],
                     "strategy": strategy, "temperature": temperature, "backend": "llamacpp", "model": "q.gguf",
                     "request": k})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_matrix_runs_every_arm_and_seed_and_resumes(tmp_path: Path, monkeypatch, capsys) -> None:
    cfg = tmp_path / "exp.toml"
    cfg.write_text(CONFIG)
    _llm_arm(tmp_path / "llm" / "diverse0.6.jsonl", 3)
    (tmp_path / "unseen.jsonl").write_text('{"id": "u", "text": "hi", "audio": "u.flac"}\n')
    calls: list[list[str]] = []
    monkeypatch.setattr(experiment, "_cli", _fake_cli(calls))
    assert main(["experiment", "--config", str(cfg), "--progress", "off"]) == 0
    out = (tmp_path / "exp").resolve()
    # 3 arms x 2 seeds x 2 systems trained; each model scored on test, test_telephone and [tests]
    trains = [c for c in calls if c[0] == "train"]
    evals = [c for c in calls if c[0] == "eval"]
    assert len(trains) == 12 and len(evals) == 36
    assert all(c[c.index("--dev") + 1].endswith("data/dev/manifest.jsonl") for c in trains)
    assert {Path(c[c.index("--manifest") + 1]).parent.name for c in evals} == {"test", "test_telephone", tmp_path.name}
    assert all(c[-2:] == ["--max-steps", "5"] for c in trains if c[1] == "e2e")
    # every NER training and cascade evaluation reads one transcript cache; the e2e model,
    # its own recogniser, none
    cached = [c for c in calls if (c[0], c[1]) == ("train", "ner") or "--ner-model" in c]
    assert len(cached) == 6 + 18
    assert {c[c.index("--asr-cache") + 1] for c in cached} == {str(out / "cache" / "asr-transcripts.jsonl")}
    assert not any("--asr-cache" in c for c in calls if c not in cached)
    # the e2e model trains and is scored on the config's device (default cpu)
    e2e_calls = [c for c in calls if c not in cached]
    assert e2e_calls and all(c[c.index("--device") + 1] == "cpu" for c in e2e_calls)
    # the arm's training manifest = the seed train + its voiced augmentation, audio paths relative
    # to the manifest (the experiment's folder can move to a GPU machine)
    arm_dir = out / "arms" / "similar0.3"
    arm_train = [json.loads(x) for x in (arm_dir / "train.jsonl").read_text().splitlines()]
    assert len(arm_train) == 3 + 2 and all(not Path(r["audio"]).is_absolute() for r in arm_train)
    assert all((arm_dir / r["audio"]).is_file() for r in arm_train)
    assert sum(r["id"].startswith("similar") for r in arm_train) == 2
    # the LLM arm: the first n sentences of the earlier run, not generated again
    llm_train = [json.loads(x) for x in (out / "arms" / "diverse0.6" / "train.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in llm_train if r["id"].startswith("diverse")) == ["diverse-r0", "diverse-r1"]
    steps = json.loads((out / "steps.json").read_text())
    assert steps["arm diverse0.6"]["augment"] == {"accepted": 2, "requests": 2, "backend": "llamacpp", "model": "q.gguf"}
    base_train = out / "data" / "train" / "manifest.jsonl"
    assert sum(1 for _ in base_train.open()) == 3
    # dev/test never voiced with a training voice
    for split in ("dev", "test", "test_telephone"):
        rows = [json.loads(x) for x in (out / "data" / split / "manifest.jsonl").read_text().splitlines()]
        assert {r["voice"] for r in rows} == {"flite:awb"}
    results = json.loads((out / "results.json").read_text())
    row = next(e for e in results["table"] if e["system"] == "e2e" and e["arm"] == "baseline+diverse0.6"
               and e["test"] == "test")
    assert row["f1"] == pytest.approx(0.75) and row["f1_sd"] == pytest.approx(0.0707, abs=1e-4)
    assert row["per_label_f1"]["PHONE"] == pytest.approx(0.75) and row["per_label_f1"]["NRIC"] is None
    assert row["leak"] == pytest.approx(0.15) and row["over_redaction"] == pytest.approx(0.3)
    assert {e["test"] for e in results["table"]} == {"test", "test_telephone", "unseen"}
    md = (out / "results.md").read_text()
    # cascade: seeds 0.5, 0.6; leak 0.1, 0.2
    assert "| baseline+similar0.3 | 55.0 ± 7.1 | 55.0 ± 7.1 | **55.0 ± 7.1** | 15.0 ± 7.1 | 30.0 ± 0.0 |" in md
    assert "## Pipeline (cascade: Whisper + patterns + spaCy + trained NER): unseen" in md
    # the report says where each arm's sentences come from: its name gives prompt and temperature only
    assert ("Arms: baseline+similar0.3: 2 sentences drawn from the seed corpus's templates (the template "
            "backend ignores prompt and temperature); baseline+diverse0.6: 2 sentences from llm/diverse0.6.jsonl.") in md
    assert (out / "results.png").stat().st_size > 1000
    assert (out / "results.png").stat().st_mode & 0o777 == (out / "results.md").stat().st_mode & 0o777
    # a rerun does nothing again
    calls.clear()
    assert main(["experiment", "--config", str(cfg), "--progress", "off"]) == 0
    assert calls == []


def _cells_config(tmp_path: Path) -> Path:
    """A built matrix (data and arm steps recorded, no audio needed by the fake trainers)."""
    cfg = tmp_path / "exp.toml"
    cfg.write_text(CONFIG.replace('[tests]\nunseen = "unseen.jsonl"\n', ""))
    out = tmp_path / "exp"
    for split in ("train", "dev", "test"):
        (out / "data" / split).mkdir(parents=True)
        (out / "data" / split / "manifest.jsonl").write_text('{"id": "a", "text": "hi", "audio": "a.wav"}\n')
    (out / "steps.json").write_text(json.dumps({"data": {}, "arm similar0.3": {}, "arm diverse0.6": {}}))
    return cfg


def test_cells_and_systems_can_be_run_alone(tmp_path: Path, monkeypatch, capsys) -> None:
    cfg = _cells_config(tmp_path)
    calls: list[list[str]] = []
    monkeypatch.setattr(experiment, "_cli", _fake_cli(calls))
    assert main(["experiment", "--config", str(cfg), "--progress", "off", "--system", "e2e",
                 "--cell", "diverse0.6:1", "--cell", "baseline:0"]) == 0
    trained = sorted((c[1], Path(c[c.index("--out") + 1]).parts[-3:-1]) for c in calls if c[0] == "train")
    assert trained == [("e2e", ("baseline", "seed0")), ("e2e", ("baseline_diverse0.6", "seed1"))]
    assert len([c for c in calls if c[0] == "eval"]) == 2 * 1  # one test set (no telephone copy here)
    results = json.loads((tmp_path / "exp" / "results.json").read_text())
    assert results["complete"] is False and {(r["arm"], r["seed"]) for r in results["rows"]} == {
        ("baseline", 0), ("baseline+diverse0.6", 1)}
    assert "Incomplete" in (tmp_path / "exp" / "results.md").read_text()
    # one more cell alone: its report holds the cells run before it too (as a --jobs cell's does)
    assert main(["experiment", "--config", str(cfg), "--progress", "off", "--system", "e2e",
                 "--cell", "baseline+similar0.3:0"]) == 0
    assert {(r["arm"], r["seed"]) for r in json.loads((tmp_path / "exp" / "results.json").read_text())["rows"]} == {
        ("baseline", 0), ("baseline+diverse0.6", 1), ("baseline+similar0.3", 0)}
    # another cell's scores gone (a folder not copied along): this cell still runs and reports the rest
    lost = tmp_path / "exp" / "runs" / "baseline" / "seed0" / "eval-e2e-test" / "results.json"
    kept = lost.read_text()
    lost.unlink()
    capsys.readouterr()
    assert main(["experiment", "--config", str(cfg), "--progress", "off", "--system", "e2e",
                 "--cell", "baseline+similar0.3:1"]) == 0
    assert "[miss] eval e2e baseline seed 0 test" in capsys.readouterr().out
    assert {(r["arm"], r["seed"]) for r in json.loads((tmp_path / "exp" / "results.json").read_text())["rows"]} == {
        ("baseline+diverse0.6", 1), ("baseline+similar0.3", 0), ("baseline+similar0.3", 1)}
    lost.write_text(kept)
    calls.clear()
    # --report: the table of what is finished, nothing run
    calls.clear()
    assert main(["experiment", "--config", str(cfg), "--progress", "off", "--report"]) == 0
    assert calls == [] and len(json.loads((tmp_path / "exp" / "results.json").read_text())["rows"]) == 4
    # the rest later: the finished cells are skipped, the table is whole
    calls.clear()
    assert main(["experiment", "--config", str(cfg), "--progress", "off"]) == 0
    assert len([c for c in calls if c[0] == "train"]) == 3 * 2 * 2 - 4
    results = json.loads((tmp_path / "exp" / "results.json").read_text())
    assert results["complete"] is True and len(results["rows"]) == 12
    # a cell run once every step is done reports the whole table, complete
    assert main(["experiment", "--config", str(cfg), "--progress", "off", "--cell", "baseline:0"]) == 0
    results = json.loads((tmp_path / "exp" / "results.json").read_text())
    assert results["complete"] is True and len(results["rows"]) == 12
    for bad, message in ((["--cell", "diverse0.9:0"], "not an ARM:SEED"), (["--cell", "baseline:7"], "not an ARM:SEED"),
                         (["--system", "cascade+verify"], "not among this config's systems"),
                         (["--jobs", "0"], "at least 1")):
        assert main(["experiment", "--config", str(cfg), "--progress", "off", *bad]) == 1
        assert message in capsys.readouterr().err


def test_a_rerun_with_another_config_is_refused_and_the_record_kept(tmp_path: Path, monkeypatch, capsys) -> None:
    """Every step is skipped on a rerun, so a changed config would report the old models under
    the new config: a change that a done step depends on is refused, before anything is written."""
    cfg = _cells_config(tmp_path)
    out = tmp_path / "exp"
    calls: list[list[str]] = []
    monkeypatch.setattr(experiment, "_cli", _fake_cli(calls))
    assert main(["experiment", "--config", str(cfg), "--progress", "off", "--cell", "baseline:0"]) == 0
    text = cfg.read_text()
    assert (out / "experiment_config.toml").read_text() == text
    capsys.readouterr()
    for old, new, what in (('e2e = ["--max-steps", "5"]', 'e2e = ["--max-steps", "6"]', "[train]"),
                           ("test = 2 }", "test = 5 }", "[data]"),
                           ("n = 2", "n = 3", "[[arm]] similar0.3"),
                           ("[tts]\n", "[tts]\nworkers = 2\n", "[data]"),
                           ("systems", 'asr_model = "base.en"\nsystems', "asr_model")):
        cfg.write_text(text.replace(old, new))
        for extra in ([], ["--report"], ["--system", "bogus"]):
            calls.clear()
            assert main(["experiment", "--config", str(cfg), "--progress", "off", *extra]) == 1
            err = capsys.readouterr().err
            assert len(err.strip().splitlines()) == 1 and calls == []
            assert f"another config ({what} differs); use a new out_dir" in err or "--system bogus" in err
            assert (out / "experiment_config.toml").read_text() == text  # not overwritten
    # what no done step depends on may change: another seed (its cells run), the systems, the device
    cfg.write_text(text.replace("seeds = [0, 1]", "seeds = [0, 1, 2]").replace('systems = ["cascade", "e2e"]',
                                                                              'systems = ["e2e"]\ndevice = "cuda"'))
    assert main(["experiment", "--config", str(cfg), "--progress", "off", "--cell", "baseline:2"]) == 0
    assert [Path(c[c.index("--out") + 1]).parts[-3:] for c in calls if c[0] == "train"] == [("baseline", "seed2", "e2e")]
    # a folder from before the record: its experiment_config.toml must be the config's text
    (out / "experiment.json").unlink()
    cfg.write_text(text.replace('"5"', '"6"'))
    assert main(["experiment", "--config", str(cfg), "--progress", "off", "--report"]) == 1
    assert "its experiment_config.toml differs" in capsys.readouterr().err
    cfg.write_text((out / "experiment_config.toml").read_text())
    assert main(["experiment", "--config", str(cfg), "--progress", "off", "--report"]) == 0
    assert (out / "experiment.json").is_file()


def test_nothing_is_written_before_the_whole_config_is_accepted(tmp_path: Path, monkeypatch, capsys) -> None:
    """--report of an experiment with no step done, and an arm whose sentences are the test
    split's: a one-line error, and no folder made."""
    from deid_speech.augment.seed import load_split
    from deid_speech.types import parse_tagged

    cfg = tmp_path / "exp.toml"
    cfg.write_text(CONFIG.replace('[tests]\nunseen = "unseen.jsonl"\n', ""))
    monkeypatch.setattr(experiment, "_cli", lambda argv: pytest.fail("ran"))
    assert main(["experiment", "--config", str(cfg), "--progress", "off", "--report"]) == 1
    err = capsys.readouterr().err
    assert "no step of this experiment is done yet, nothing to report" in err and len(err.strip().splitlines()) == 1
    rows = []
    for k, r in enumerate(load_split(shipped.path("seed") / "dev.jsonl")[3:5]):
        tagged = "ok lah " + r["tagged"] + " can"
        text, ents = parse_tagged(tagged)
        rows.append({"id": f"d{k}", "text": text, "tagged": tagged, "entities": [e.to_dict() for e in ents]})
    (tmp_path / "llm").mkdir()
    (tmp_path / "llm" / "diverse0.6.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["experiment", "--config", str(cfg), "--progress", "off"]) == 1
    err = capsys.readouterr().err
    assert "arm diverse0.6: sentence d0 repeats dev sentence" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "exp").exists()


def test_the_per_label_table_shows_no_f1_for_a_label_the_test_set_lacks() -> None:
    rows = [{"arm": "baseline", "seed": s, "system": "cascade", "test": "test", "leak": 0.1, "over_redaction": 0.1,
             "overall": {"precision": 0.5, "recall": 0.5, "f1": 0.5},
             "per_label": {"PHONE": {"f1": 0.5, "n_true": 2}, "NRIC": {"f1": 0.0, "n_true": 0, "n_pred": 1}}}
            for s in (0, 1)]
    table = summarise(rows)
    assert table[0]["per_label_f1"]["PHONE"] == 0.5
    assert table[0]["per_label_f1"]["NRIC"] is None and table[0]["per_label_f1"]["PERSON"] is None
    md = experiment.markdown({"seeds": [0, 1], "systems": ["cascade"], "tests": ["test"], "table": table,
                              "wall_s": 0})
    line = next(x for x in md.splitlines() if x.startswith("| cascade | test | baseline |"))
    cells = dict(zip(experiment.PAPER_LABELS, line.strip("| ").split(" | ")[3:]))
    assert cells["PHONE"] == "50" and cells["NRIC"] == cells["PERSON"] == "—"


def test_parallel_cells_each_run_in_a_process_and_the_report_gathers_them(tmp_path: Path, monkeypatch) -> None:
    import subprocess

    cfg = _cells_config(tmp_path)
    out = tmp_path / "exp"
    children: list[list[str]] = []

    def child(argv, stdout, stderr, env):
        """What `deid-speech experiment --cell A:S` would record (one cell fails)."""
        cell = argv[argv.index("--cell") + 1]
        if cell in {c[c.index("--cell") + 1] for c in children} and cell != "baseline+similar0.3:1":
            return subprocess.CompletedProcess(argv, 0)  # a rerun: every step of this cell is done
        children.append(argv)
        assert env["OMP_NUM_THREADS"] == str(max(1, len(__import__("os").sched_getaffinity(0)) // 4))
        arm, seed = argv[argv.index("--cell") + 1].rsplit(":", 1)
        if arm == "baseline+similar0.3" and seed == "1":
            stdout.write("error: boom\n")
            return subprocess.CompletedProcess(argv, 2)
        calls: list[list[str]] = []
        run_dir = out / "runs" / arm.replace("+", "_") / f"seed{seed}"
        for system in ("cascade", "e2e"):
            target = "ner" if system == "cascade" else "e2e"
            _fake_cli(calls)(["train", target, "--out", str(run_dir / target)])
            flag = "--ner-model" if system == "cascade" else "--model"
            _fake_cli(calls)(["eval", "--system", system, flag, str(run_dir / target), "--out-dir",
                              str(run_dir / f"eval-{system}-test")])
            steps = experiment.Steps(out, log=lambda m: None)  # a separate process's Steps
            steps.run(f"train {target} {arm} seed {seed}", dict)
            steps.run(f"eval {system} {arm} seed {seed} test", dict)
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(subprocess, "run", child)
    monkeypatch.setattr(experiment, "_cli", lambda argv: pytest.fail("the parent trained something"))
    assert main(["experiment", "--config", str(cfg), "--progress", "off", "--jobs", "4"]) == 1
    assert sorted(c[c.index("--cell") + 1] for c in children[:6]) == sorted(
        f"{a}:{s}" for a in ("baseline", "baseline+similar0.3", "baseline+diverse0.6") for s in (0, 1))
    assert all(c[1:4] == ["-m", "deid_speech", "experiment"] for c in children)
    # each child is pinned to one of the four shares of this process's cores
    import os

    slots = {",".join(map(str, s)) for s in experiment.core_slots(sorted(os.sched_getaffinity(0)), 4)}
    assert {c[c.index("--cores") + 1] for c in children} <= slots
    log = (out / "logs" / "baseline_similar0.3_seed1.log").read_text().splitlines()
    assert log[0].startswith("== ") and "--cell baseline+similar0.3:1" in log[0] and log[1:] == ["error: boom"]
    # a rerun adds to each cell's log: the failed cell's first run is still there
    assert main(["experiment", "--config", str(cfg), "--progress", "off", "--jobs", "4"]) == 1
    again = (out / "logs" / "baseline_similar0.3_seed1.log").read_text().splitlines()
    assert again[:2] == log and again[2].startswith("== ") and again[3:] == ["error: boom"]
    steps = json.loads((out / "steps.json").read_text())  # every process's steps, none lost
    assert len([k for k in steps if k.startswith("train")]) == 5 * 2
    results = json.loads((out / "results.json").read_text())
    assert results["complete"] is False and len(results["rows"]) == 5 * 2
    assert ("baseline+similar0.3", 1) not in {(r["arm"], r["seed"]) for r in results["rows"]}


def test_core_slots_share_the_cores_among_the_jobs() -> None:
    assert experiment.core_slots([0, 1], 2) == [[0], [1]]
    assert experiment.core_slots([0, 1], 1) == [[0, 1]]
    assert experiment.core_slots([0, 1], 4) == [[0], [1], [0], [1]]  # more jobs than cores: in turn
    assert experiment.core_slots(list(range(16)), 4) == [list(range(k, k + 4)) for k in (0, 4, 8, 12)]
    assert experiment.core_slots([2, 5, 7], 2) == [[2], [5]]  # the cores this process may use, not 0..n


def test_a_cell_pins_itself_to_its_cores_before_it_runs(tmp_path: Path, monkeypatch, capsys) -> None:
    import os

    pinned = []
    monkeypatch.setattr(os, "sched_setaffinity", lambda pid, cores: pinned.append(set(cores)))
    monkeypatch.setattr(experiment, "run_experiment", lambda *a, **k: pytest.fail("ran") if not pinned else {})
    monkeypatch.setattr(experiment, "markdown", lambda results: "")
    cfg = _cells_config(tmp_path)
    assert main(["experiment", "--config", str(cfg), "--progress", "off", "--cell", "baseline:0", "--cores", "1"]) == 0
    assert pinned == [{1}]
    assert main(["experiment", "--config", str(cfg), "--progress", "off", "--cores", "x"]) == 1
    err = capsys.readouterr().err
    assert "--cores x" in err and len(err.strip().splitlines()) == 1


def test_steps_from_two_processes_are_both_kept(tmp_path: Path) -> None:
    one, two = experiment.Steps(tmp_path, log=lambda m: None), experiment.Steps(tmp_path, log=lambda m: None)
    one.run("a", lambda: {"x": 1})
    two.run("b", lambda: {"x": 2})  # two read the file before one wrote a
    one.run("c", dict)
    assert set(json.loads((tmp_path / "steps.json").read_text())) == {"a", "b", "c"}
    assert experiment.Steps(tmp_path, log=lambda m: None).run("b", lambda: pytest.fail("ran again"))["x"] == 2


def test_failed_step_stops_and_is_not_recorded(tmp_path: Path, monkeypatch) -> None:
    steps = experiment.Steps(tmp_path, log=lambda m: None)
    steps.run("one", lambda: {"x": 1})
    with pytest.raises(DeidError):
        steps.run("two", lambda: experiment._cli(["eval", "--manifest", str(tmp_path / "missing.jsonl"),
                                                  "--out-dir", str(tmp_path / "e")]))
    again = experiment.Steps(tmp_path, log=lambda m: None)
    assert set(again.done) == {"one"}


@pytest.mark.parametrize("text, message", [
    ("seeds = [0]", "needs out_dir"),
    ('out_dir = "x"\nsystems = ["presidio"]', "systems"),
    ('out_dir = "x"\n[[arm]]\nn = 5\n[[arm]]\nstrategy = "diverse"\nn = 6', "same number"),
    ('out_dir = "x"\n[[arm]]\nn = 5\n[[arm]]\nn = 5', "same strategy"),
    ('out_dir = "x"\n[data]\naugment = []', "no augment"),
    ('out_dir = "x"\n[train]\nner = "--fast"', "[train]"),
    ('out_dir = "x"\nbogus = 1', "unknown config key"),
    ('out_dir = "x"\ndevice = "tpu"', "device: cpu or cuda"),
    ('out_dir = "x"\n[tests]\ntest = "a.jsonl"', "names other than"),
    # a value of the wrong type is named before any step runs, not a traceback
    ('out_dir = "x"\nseeds = ["a"]', "seeds: a list of integers expected"),
    ('out_dir = "x"\nseeds = 5', "seeds: a list expected"),
    ('out_dir = "x"\n[data]\nseed = "abc"', "seed: an integer expected"),
    ('out_dir = "x"\n[[arm]]\nn = "x"', "[[arm]] n: an integer expected"),
    ('out_dir = "x"\n[[arm]]\nbogus = 1', "unknown key.s. in [[arm]]: bogus"),
    ('out_dir = "x"\ntrain = 5', "train: a table expected"),
    ('out_dir = "x"\nasr_model = 1', "asr_model: a string expected"),
    # a string where a list is expected is an error, not a list of its letters
    ('out_dir = "x"\nsystems = "cascade"', "systems: a list expected"),
    ('out_dir = "x"\n[tts]\nvoices = "flite:slt"', "voices: a list of voices"),
])
def test_bad_configs_are_named(tmp_path: Path, text: str, message: str) -> None:
    p = tmp_path / "e.toml"
    p.write_text(text)
    with pytest.raises(DeidError, match=message.replace("[", r"\[").replace("]", r"\]")):
        ExperimentConfig.load(p)


def test_a_config_overrides_its_base(tmp_path: Path) -> None:
    """Tables merge key by key, lists and values are replaced whole, a base may have a base,
    and the record written beside the outputs holds every file's text."""
    from deid_speech.make_dataset import config_record, read_config

    (tmp_path / "a.toml").write_text('out_dir = "out/a"\nseeds = [0, 1]\n[data]\nseed = 3\n'
                                     '[train]\nner = ["--asr-noise"]\ne2e = ["--max-steps", "60"]\n'
                                     '[[arm]]\nstrategy = "similar"\nn = 5\n[[arm]]\nstrategy = "diverse"\nn = 5\n')
    (tmp_path / "b.toml").write_text('base = "a.toml"\nout_dir = "out/b"\n[train]\ne2e = ["--epochs", "3"]\n'
                                     '[[arm]]\nstrategy = "diverse"\ntemperature = 0.3\nn = 7\n')
    (tmp_path / "c.toml").write_text('base = "b.toml"\nout_dir = "out/c"\nsystems = ["e2e"]\n')
    c = ExperimentConfig.load(tmp_path / "c.toml")
    assert c.out_dir == tmp_path / "out" / "c" and c.seeds == (0, 1) and c.systems == ("e2e",)
    assert c.data.seed == 3 and c.data.out_dir == tmp_path / "out" / "c" / "data"
    assert c.train_args == {"ner": ["--asr-noise"], "e2e": ["--epochs", "3"]}
    assert [(a.strategy, a.temperature, a.n) for a in c.arms] == [("diverse", 0.3, 7)]  # b's list, whole
    raw, files = read_config(tmp_path / "c.toml")
    assert "base" not in raw and files == [tmp_path / f for f in ("c.toml", "b.toml", "a.toml")]
    record = config_record(files)
    assert record.startswith('base = "b.toml"') and "# ---- its base, a.toml ----\n# out_dir = \"out/a\"" in record
    assert ExperimentConfig.load(tmp_path / "a.toml").train_args["e2e"] == ["--max-steps", "60"]  # the base alone


@pytest.mark.parametrize("text, message", [
    ('base = "e.toml"\nout_dir = "x"', "form a loop"),
    ('base = "../a.toml"\nout_dir = "x"', "in the same folder"),
    ('base = 3\nout_dir = "x"', "in the same folder"),
    ('base = "nowhere.toml"\nout_dir = "x"', "no such config file"),
    ('base = "a.toml"', "an out_dir of its own"),
])
def test_bad_bases_are_named(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "a.toml").write_text('out_dir = "a"\n')
    p = tmp_path / "e.toml"
    p.write_text(text)
    with pytest.raises(DeidError, match=message):
        ExperimentConfig.load(p)


def test_a_missing_test_manifest_is_named_before_anything_runs(tmp_path: Path) -> None:
    # a config may name manifests another job builds later (`make benchmark`): it loads, and the
    # matrix stops with a one-line error before it builds or writes anything
    p = tmp_path / "e.toml"
    p.write_text('out_dir = "x"\n[tests]\nunseen = "nowhere.jsonl"\n')
    cfg = ExperimentConfig.load(p)
    assert cfg.extra_tests == {"unseen": tmp_path / "nowhere.jsonl"}
    with pytest.raises(DeidError, match=r"\[tests\]: no such manifest: .*nowhere.jsonl .*make benchmark"):
        run_experiment(cfg)
    assert not (tmp_path / "x").exists()
    (tmp_path / "nowhere.jsonl").write_text("")
    cfg.check_tests()  # there now


def test_shipped_configs_parse() -> None:
    small = ExperimentConfig.load(ROOT / "configs" / "experiments" / "small.toml")
    assert small.arm_names() == ["baseline", "baseline+similar0.3", "baseline+similar0.6",
                                 "baseline+diverse0.3", "baseline+diverse0.6"]
    assert small.data.tts.telephone_test and not small.data.augment
    gpu = ExperimentConfig.load(ROOT / "configs" / "experiments" / "gpu.toml")
    assert len(gpu.seeds) == 3 and {a.backend for a in gpu.arms} == {"ollama"} and gpu.device == "cuda"
    # the LLM matrix: small.toml's data and training (its base), its arms from the job's files
    def load(name: str) -> ExperimentConfig:
        return ExperimentConfig.load(ROOT / "configs" / "experiments" / name)

    def same(cfg: ExperimentConfig, other: ExperimentConfig, **kw) -> bool:
        """``other`` is ``cfg`` with ``kw`` replaced (and its data in other's out_dir, which a
        machine may have linked elsewhere: the path is resolved)."""
        assert other.data.out_dir == (other.out_dir / "data").resolve()
        return replace(cfg, **kw, data=replace(cfg.data, out_dir=other.data.out_dir)) == other

    llm = load("small-llm.toml")
    assert same(small, llm, out_dir=llm.out_dir, seeds=(0, 1), arms=llm.arms, extra_tests=llm.extra_tests)
    assert {(a.strategy, a.temperature) for a in llm.arms} == {(a.strategy, a.temperature) for a in small.arms}
    assert all(f.endswith(f"/{a.strategy}{a.temperature}.jsonl") for a in llm.arms for f in a.sentences)
    assert set(llm.extra_tests) == {"unseen_utterances", "unseen_calls"}
    # its GPU twin: the same data and sentence files, both halves of the matrix, on CUDA
    llm_gpu = load("small-llm-gpu.toml")
    assert same(llm, llm_gpu, out_dir=llm_gpu.out_dir, device="cuda",
                train_args={**llm.train_args, "e2e": llm_gpu.train_args["e2e"]})
    assert "--freeze-encoder" not in llm_gpu.train_args["e2e"]
    # its E2E half with a budget in passes: everything else as small-llm.toml, and the Baseline's
    # 3 passes are exactly small-llm.toml's 60 steps (so its trainings may be copied over)
    def budget(args: list[str], flag: str) -> tuple[list[str], int]:
        """The training arguments without ``flag`` and its value, and the value."""
        i = args.index(flag)
        return args[:i] + args[i + 2:], int(args[i + 1])

    epochs, same_steps = load("small-llm-epochs.toml"), load("small-llm-steps174.toml")
    for cfg in (epochs, same_steps):
        assert cfg.out_dir not in (llm.out_dir, llm_gpu.out_dir)
        assert same(llm, cfg, out_dir=cfg.out_dir, systems=("e2e",), extra_tests=cfg.extra_tests,
                    train_args={**llm.train_args, "e2e": cfg.train_args["e2e"]})
    assert epochs.extra_tests == llm.extra_tests  # the 174-step half adds real speech to them
    real = (ROOT / "out" / "real-more" / "manifest.jsonl").resolve()
    assert same_steps.extra_tests == {**llm.extra_tests, "real_speech": real}
    assert epochs.out_dir != same_steps.out_dir
    seed2 = load("small-llm-steps174-seed2.toml")  # its third seed: all else as small-llm-steps174.toml
    assert same(same_steps, seed2, out_dir=seed2.out_dir, seeds=(2,)) and seed2.out_dir != same_steps.out_dir
    # the LLM arms' control: one arm of 300 template draws, the pipeline as small-llm.toml and the
    # E2E model as small-llm-steps174.toml, scored on the same sets (real speech too)
    template = load("small-template-n300.toml")
    (arm,) = template.arms
    assert arm.backend == "template" and not arm.sentences and {a.n for a in llm.arms} == {arm.n}
    assert same(llm, template, out_dir=template.out_dir, arms=template.arms, extra_tests=same_steps.extra_tests,
                train_args={**llm.train_args, "e2e": same_steps.train_args["e2e"]})
    template2 = load("small-template-n300-seed2.toml")  # its third E2E seed, as seed2 above
    assert same(template, template2, out_dir=template2.out_dir, seeds=(2,), systems=("e2e",))
    template_gpu = load("small-template-gpu.toml")  # the same control for the GPU configuration
    assert same(llm_gpu, template_gpu, out_dir=template_gpu.out_dir, arms=template.arms, seeds=(0, 1, 2))
    assert len({c.out_dir for c in (llm, same_steps, seed2, template, template2, llm_gpu, template_gpu)}) == 7
    rest, steps = budget(llm.train_args["e2e"], "--max-steps")
    rest_epochs, passes = budget(epochs.train_args["e2e"], "--epochs")
    assert rest_epochs == rest  # only the budget differs (and no --max-steps is left over it)
    from deid_speech.asr.trainer import FinetuneOptions

    batch = FinetuneOptions(Path("m")).batch_size
    train_n = llm.data.limit["train"]
    assert passes * math.ceil(train_n / batch) == steps
    # and with the same steps for all: an arm's steps are its passes of small-llm-epochs.toml
    rest_steps, n_steps = budget(same_steps.train_args["e2e"], "--max-steps")
    assert rest_steps == rest  # only the number of steps differs
    assert {passes * math.ceil((train_n + a.n) / batch) for a in epochs.arms} == {n_steps}
    # the small matrix's GPU half: small.toml's data and arms
    small_gpu = load("small-gpu.toml")
    assert same(small, small_gpu, out_dir=small_gpu.out_dir, systems=("e2e",), device="cuda",
                train_args={**small.train_args, "e2e": small_gpu.train_args["e2e"]})
    # the job's sentences are in the repository: each file holds its own arm's sentences only,
    # and together (taken in turn, a frame another job gave skipped) at least the n each config asks
    from deid_speech.make_dataset import take_in_turn

    for a, a_gpu in zip(llm.arms, llm_gpu.arms):
        shards = []
        for shard in a.sentences:  # one file per job (seed); a job just started may have none yet
            rows = [json.loads(x) for x in Path(shard).read_text().splitlines()]
            assert {(r["strategy"], r["temperature"]) for r in rows} <= {(a.strategy, a.temperature)}
            assert len({r["text"] for r in rows}) == len(rows)  # de-duplicated
            shards.append(rows)
        held = len(take_in_turn(shards)[0])
        assert held >= max(40, a.n, a_gpu.n), (a.strategy, a.temperature, held)


def test_summary_means_over_seeds_only_within_a_cell() -> None:
    def row(arm, seed, f1):
        return {"arm": arm, "seed": seed, "system": "cascade", "test": "test",
                "overall": {"precision": f1, "recall": f1, "f1": f1}, "per_label": {}}

    table = summarise([row("a", 0, 0.5), row("a", 1, 0.7), row("b", 0, 0.9)])
    by = {e["arm"]: e for e in table}
    assert by["a"]["f1"] == pytest.approx(0.6) and by["a"]["n_seeds"] == 2
    assert by["b"]["f1"] == pytest.approx(0.9) and by["b"]["f1_sd"] is None


def _shard(path: Path, frames: list[str], seed: int) -> None:
    """One job's sentences of Diverse 0.6: a PHONE in each of ``frames`` (words around it)."""
    from deid_speech.types import parse_tagged

    rows = []
    for k, frame in enumerate(frames):
        tagged = frame.replace("PHONE", "[PHONE] nine one two three four five six seven [PHONE]")
        text, ents = parse_tagged(tagged)
        rows.append({"id": f"diverse-t0.6-s{seed}-r{k:05d}-00", "text": text, "tagged": tagged,
                     "entities": [e.to_dict() for e in ents], "strategy": "diverse", "temperature": 0.6,
                     "backend": "llamacpp", "model": "q.gguf", "request": k})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_an_arm_takes_its_sentences_from_several_jobs_in_turn_without_repeats(tmp_path: Path) -> None:
    from deid_speech.augment.run import AugmentOptions
    from deid_speech.make_dataset import arm_sentences, parse_arms

    _shard(tmp_path / "a.jsonl", ["call PHONE lah", "my number PHONE ok", "eh PHONE can"], seed=0)
    _shard(tmp_path / "b.jsonl", ["reach me at PHONE", "Call PHONE lah!", "ring PHONE tonight"], seed=1)
    arm, = parse_arms([{"strategy": "diverse", "temperature": 0.6, "n": 5, "sentences": ["a.jsonl", "b.jsonl"]}],
                      tmp_path)
    assert arm.sentences == (str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"))  # relative to the config
    opts = AugmentOptions(strategy="diverse", temperature=0.6, n=5)
    summary = arm_sentences(arm, tmp_path / "seed.jsonl", tmp_path / "out.jsonl", opts, [])
    rows = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    # in turn (a0, b0, a1, b1: "Call ... lah!" is a0's frame again, skipped; a2, b2)
    assert [r["id"].split("-")[3] for r in rows] == ["r00000", "r00000", "r00001", "r00002", "r00002"]
    assert [r["id"].split("-")[2] for r in rows] == ["s0", "s1", "s0", "s0", "s1"]
    assert summary["accepted"] == 5 and summary["requests"] == 3 + 3  # requests 0-2 of each job were read
    with pytest.raises(DeidError, match="holds 5 sentences, the arm needs 6"):
        arm_sentences(replace(arm, n=6), tmp_path / "seed.jsonl", tmp_path / "x.jsonl",
                      AugmentOptions(strategy="diverse", temperature=0.6, n=6), [])
    with pytest.raises(DeidError, match="a path or a list of paths"):
        parse_arms([{"strategy": "diverse", "temperature": 0.6, "n": 5, "sentences": []}], tmp_path)
    with pytest.raises(DeidError, match="c.jsonl: no such sentences file"):
        arm_sentences(parse_arms([{"strategy": "diverse", "temperature": 0.6, "n": 2,
                                   "sentences": ["a.jsonl", "c.jsonl"]}], tmp_path)[0],
                      tmp_path / "seed.jsonl", tmp_path / "y.jsonl", AugmentOptions("diverse", 0.6, n=2), [])
    assert not (tmp_path / "x.jsonl").exists() and not (tmp_path / "y.jsonl").exists()


def test_an_arm_from_an_earlier_run_needs_enough_sentences_of_its_own_kind(tmp_path: Path) -> None:
    from deid_speech.augment.run import AugmentOptions
    from deid_speech.make_dataset import Arm, arm_sentences

    _llm_arm(tmp_path / "d.jsonl", 3)
    arm = Arm(strategy="diverse", temperature=0.6, n=5, sentences=str(tmp_path / "d.jsonl"))
    opts = AugmentOptions(strategy="diverse", temperature=0.6, n=5)
    with pytest.raises(DeidError, match="holds 3 sentences, the arm needs 5"):
        arm_sentences(arm, tmp_path / "seed.jsonl", tmp_path / "out.jsonl", opts, [])
    wrong = Arm(strategy="similar", temperature=0.3, n=2, sentences=str(tmp_path / "d.jsonl"))
    with pytest.raises(DeidError, match="another arm"):
        arm_sentences(wrong, tmp_path / "seed.jsonl", tmp_path / "out.jsonl",
                      AugmentOptions(strategy="similar", temperature=0.3, n=2), [])
    missing = Arm(strategy="diverse", temperature=0.6, n=2, sentences=str(tmp_path / "none.jsonl"))
    with pytest.raises(DeidError, match="no such sentences file"):
        arm_sentences(missing, tmp_path / "seed.jsonl", tmp_path / "out.jsonl", opts, [])
    assert not (tmp_path / "out.jsonl").exists()
