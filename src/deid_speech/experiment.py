"""``deid-speech experiment --config FILE``: the paper's experiment matrix (Tables 2 and 3).

One fixed dev/test split voiced with held-out voices (plus a telephone-channel copy of
test); training arms Baseline (seed only) and Baseline + one augmentation arm each
(Similar/Diverse x temperature, equal size); per arm and seed a cascade NER
(``deid-speech train ner``) and an end-to-end model (``deid-speech train e2e``); every
model scored by ``deid-speech eval`` on the same test sets. The config is TOML (see
``configs/experiments/small.toml``)::

    out_dir = "../../out/experiments/small"   # relative to the config file
    seeds = [0]                                # training seeds; mean and spread when several
    systems = ["cascade", "e2e"]               # which models to train and score
    asr_model = "tiny.en"                      # the cascade's ASR
    device = "cpu"                             # where the e2e model trains and is scored (cuda)

    [data]                                     # as in make-dataset (no [[augment]] here)
    seed = 0
    limit = { train = 160, dev = 40, test = 75 }

    [tts]                                      # as in make-dataset
    voices = "default"
    train_augment = "light"
    telephone_test = true
    workers = 2

    [[arm]]                                    # Baseline is always built; these add to it
    strategy = "similar"
    temperature = 0.3
    n = 80
    backend = "template"                       # or ollama / llamacpp with model = ...

    [tests]                                    # optional: more test manifests, scored like test
    unseen_utterances = "../../out/benchmark/test/utterances/manifest.jsonl"

    [train]                                    # extra command-line options per trainer
    ner = ["--max-epochs", "10"]
    e2e = ["--max-steps", "300"]

Every step records its result and is skipped on a rerun, so an interrupted experiment
resumes where it stopped; a rerun with a config that changes what a finished step was made of
is refused (``accept_out_dir``). Output: ``OUT/results.json``, ``OUT/results.md`` (the paper's
table form: P/R/F1 per arm for pipeline and E2E, on test and test_telephone, then per
label), ``OUT/results.png`` and each step's own folder. Every cell has the leak (share of
entity audio still audible) and the over-redaction (share of other speech beeped) next to F1.

An arm may take its sentences from an earlier ``augment`` run instead of generating them
(``sentences = "path.jsonl"``: its first ``n`` rows), so the slow LLM arms can be written by a
resumable job (``bench/augment_bench.py --work``) and the matrix run on them later.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from deid_speech.audio import write_text_atomic
from deid_speech.errors import DeidError
from deid_speech.make_dataset import Arm, DatasetConfig, checked, config_record, parse_arms, read_config
from deid_speech.systems import RECOGNISER, TABLE, TRAINABLE
from deid_speech.types import PAPER_LABELS

SYSTEMS = TRAINABLE  # the systems whose model the matrix trains (cascade: its NER; e2e)
TEST_SETS = ("test", "test_telephone")


@dataclass(frozen=True)
class ExperimentConfig:
    out_dir: Path
    data: DatasetConfig  # no augmentation: the Baseline arm's data and the fixed dev/test
    arms: tuple[Arm, ...] = ()
    seeds: tuple[int, ...] = (0,)
    systems: tuple[str, ...] = SYSTEMS
    asr_model: str = RECOGNISER
    device: str = "cpu"  # the e2e model's training and scoring device
    train_args: dict = field(default_factory=dict)  # trainer name -> extra CLI options
    extra_tests: dict = field(default_factory=dict)  # name -> manifest, scored like test
    record: dict = field(default_factory=dict, compare=False)  # what its steps are made of (accept_out_dir)

    @classmethod
    def load(cls, path: Path) -> ExperimentConfig:
        return cls.from_dict(read_config(path)[0], Path(path).resolve().parent)

    @classmethod
    def from_dict(cls, raw: dict, base: Path) -> ExperimentConfig:
        """The config of a TOML table; a one-line DeidError naming the first bad key (every key is
        checked here, before any step runs)."""
        checked(raw, {"out_dir": str, "seeds": list, "systems": list, "asr_model": str, "device": str,
                      "data": dict, "tts": dict, "arm": list, "train": dict, "tests": dict}, "")
        if "out_dir" not in raw:
            raise DeidError("the config needs out_dir")
        out = (base / raw["out_dir"]).resolve()
        data = dict(raw.get("data", {}))
        if "augment" in data or "out_dir" in data:
            raise DeidError("[data] takes no augment or out_dir: arms are [[arm]] tables")
        data_cfg = DatasetConfig.from_dict({**data, "out_dir": str(out / "data"), "tts": raw.get("tts", {})}, base)
        arms = parse_arms(raw.get("arm", []), base, "[[arm]]")
        if len({a.name for a in arms}) != len(arms):
            raise DeidError("two [[arm]] tables have the same strategy and temperature")
        if len({a.n for a in arms}) > 1:
            raise DeidError("every [[arm]] must add the same number of sentences (n), as in the paper")
        systems = tuple(raw.get("systems", SYSTEMS))
        if bad := [s for s in systems if s not in SYSTEMS] or not systems:
            raise DeidError(f"systems: choose from {', '.join(SYSTEMS)} (got {bad or 'none'})")
        seeds = tuple(raw.get("seeds", [0]))
        if not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
            raise DeidError(f"seeds: a list of integers expected (got {raw['seeds']!r})")
        device = raw.get("device", "cpu")
        if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
            raise DeidError(f"device: cpu or cuda (got {device!r})")
        train = raw.get("train", {})
        if set(train) - {"ner", "e2e"} or not all(isinstance(v, list) for v in train.values()):
            raise DeidError("[train] takes ner = [...] and e2e = [...] (extra command-line options)")
        tests = raw.get("tests", {})
        if not all(isinstance(v, str) for v in tests.values()) or set(tests) & set(TEST_SETS):
            raise DeidError("[tests] takes name = \"manifest.jsonl\" pairs (names other than "
                            f"{', '.join(TEST_SETS)})")
        extra = {k: (base / v).resolve() for k, v in tests.items()}
        train_args = {k: [str(x) for x in v] for k, v in train.items()}
        # what the recorded steps are made of (seeds, systems and the device are not: a step is
        # one seed's and one system's), paths as the config writes them, so that the folder may move
        record = {"[data]": {**data_cfg.to_dict(), "out_dir": None, "seed_dir": data.get("seed_dir")},
                  "asr_model": raw.get("asr_model", RECOGNISER), "[train]": train_args}
        for k, (a, table) in enumerate(zip(arms, raw.get("arm", []))):
            record[f"[[arm]] {a.name}"] = {**asdict(a), "sentences": table.get("sentences"), "index": k}
        record |= {f"[tests] {k}": v for k, v in tests.items()}
        return cls(out, data_cfg, arms, seeds or (0,), systems, raw.get("asr_model", RECOGNISER), device,
                   train_args, extra, json.loads(json.dumps(record)))

    def check_tests(self) -> None:
        """A one-line error when a [tests] manifest is missing. Checked when the matrix runs, not
        when the config is read: a config names manifests another job builds (`make benchmark`)."""
        if missing := [str(v) for v in self.extra_tests.values() if not v.is_file()]:
            raise DeidError(f"[tests]: no such manifest: {missing[0]} (build it first: the unseen-voice "
                            "benchmark's with `make benchmark`, the real recordings' with `python -m "
                            "deid_speech.eval.real_speech --out out/real-more --more`)")

    def arm_names(self) -> list[str]:
        return ["baseline"] + [f"baseline+{a.name}" for a in self.arms]


class Steps:
    """Runs named steps once: each success is recorded in OUT/steps.json. Several processes
    may record steps in one file (``--jobs``: one process per cell): each write takes a lock,
    reads what the others recorded and adds its own step to it."""

    def __init__(self, out: Path, log=print):
        self.path = out / "steps.json"
        self.done: dict = json.loads(self.path.read_text()) if self.path.exists() else {}
        self.log = log

    def run(self, name: str, fn) -> dict:
        if name in self.done:
            self.log(f"[skip] {name}: done earlier")
            return self.done[name]
        self.log(f"[run ] {name}")
        t0 = time.perf_counter()
        result = fn() or {}
        result["wall_s"] = round(time.perf_counter() - t0, 1)
        self._record(name, result)
        self.log(f"[done] {name} in {result['wall_s']:.0f}s")
        return result

    def _record(self, name: str, result: dict) -> None:
        import fcntl

        with open(self.path.with_name(self.path.name + ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self.path.exists():
                self.done = {**json.loads(self.path.read_text()), **self.done}
            self.done[name] = result
            write_text_atomic(self.path, json.dumps(self.done, indent=2) + "\n")


def _cli(argv: list[str]) -> None:
    """Run one deid-speech sub-command in this process; a failure stops the experiment."""
    from deid_speech.cli import main

    code = main(argv)
    if code != 0:
        raise DeidError(f"step failed (exit {code}): deid-speech {' '.join(argv)}")


def _combine(manifests: list[Path], out: Path) -> int:
    """One manifest of several, audio paths relative to ``out``'s folder (manifests resolve
    them relative to their own folder), so the experiment's folder can move to another
    machine (a GPU) and still work."""
    import os

    from deid_speech import manifest

    rows = [r for m in manifests for r in manifest.read(m, need=("text", "audio"), check_audio=False, line_ids=False)]
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = [{**r.to_dict(), "audio": os.path.relpath(r.audio, out.parent.resolve())} for r in rows]
    manifest.write(out, rows)
    return len(rows)


def build_data(cfg: ExperimentConfig, steps: Steps, progress: bool | None = None) -> dict[str, Path]:
    """The Baseline data (seed train, dev, test, test_telephone) and one train manifest per arm."""
    from deid_speech.augment.run import AugmentOptions
    from deid_speech.augment.seed import load_split
    from deid_speech.make_dataset import arm_sentences, make_dataset, voice_pools
    from deid_speech.tts.dataset import voice_manifest

    data = cfg.data.out_dir
    steps.run("data", lambda: {"summary": _short(make_dataset(cfg.data, progress=progress))})
    trains = {"baseline": data / "train" / "manifest.jsonl"}
    seed_train = cfg.data.seed_dir / "train.jsonl"
    pool = [r["tagged"] for r in load_split(seed_train)]
    for k, arm in enumerate(cfg.arms):
        name = f"baseline+{arm.name}"
        arm_dir = cfg.out_dir / "arms" / arm.name
        # each arm its own sampling stream, so arms are independent draws even when a
        # backend ignores strategy and temperature (the template backend does)
        opts = AugmentOptions(strategy=arm.strategy, temperature=arm.temperature, n=arm.n,
                              seed=cfg.data.seed * 1000 + k + 1, per_request=arm.per_request,
                              max_requests=arm.max_requests)

        def run_arm(arm=arm, arm_dir=arm_dir, opts=opts) -> dict:
            summary = arm_sentences(arm, seed_train, arm_dir / "augmented.jsonl", opts, pool)
            if not summary["complete"]:
                raise DeidError(f"arm {arm.name}: only {summary['accepted']} of {arm.n} sentences accepted")
            held, pools = voice_pools(cfg.data.tts)
            voiced = voice_manifest(arm_dir / "augmented.jsonl", arm_dir / "voiced", pools["train"],
                                    augment=cfg.data.tts.train_augment, seed=cfg.data.seed,
                                    workers=cfg.data.tts.workers, held_out=held, split="train",
                                    progress=progress)
            if voiced["failed"]:
                raise DeidError(f"arm {arm.name}: {len(voiced['failed'])} sentence(s) not voiced; rerun")
            n = _combine([data / "train" / "manifest.jsonl", arm_dir / "voiced" / "manifest.jsonl"],
                         arm_dir / "train.jsonl")
            return {"augment": {k: summary[k] for k in ("accepted", "requests", "backend", "model")
                                if k in summary}, "train_records": n, "audio_s": voiced["audio_s"]}

        steps.run(f"arm {arm.name}", run_arm)
        trains[name] = arm_dir / "train.jsonl"
    return trains


def _short(summary: dict) -> dict:
    return {"sentences": summary["sentences"],
            "manifests": {k: {"n": v["n"], "audio_s": v["audio_s"]} for k, v in summary["tts"].items()}}


def parse_cells(cfg: ExperimentConfig, specs: list[str]) -> list[tuple[str, int]]:
    """``ARM:SEED`` strings (``baseline:0``, ``baseline+diverse0.3:1`` or ``diverse0.3:1``) as
    (arm, seed) cells of ``cfg``, or a one-line DeidError."""
    cells = []
    for spec in specs:
        arm, _, seed = spec.rpartition(":")
        arm = arm if arm in ("baseline", "") or arm.startswith("baseline+") else f"baseline+{arm}"
        if arm not in cfg.arm_names() or not seed.lstrip("-").isdigit() or int(seed) not in cfg.seeds:
            raise DeidError(f"--cell {spec!r}: not an ARM:SEED of this config (arms: "
                            f"{', '.join(cfg.arm_names())}; seeds: {', '.join(map(str, cfg.seeds))})")
        cells.append((arm, int(seed)))
    return cells


def core_slots(cores: list[int], jobs: int) -> list[list[int]]:
    """``jobs`` sets of the ``cores``, one per parallel cell: each its own share (taken in turn
    when there are more jobs than cores)."""
    share = max(1, len(cores) // jobs)
    return [[cores[(i * share + k) % len(cores)] for k in range(share)] for i in range(jobs)]


def _run_cells(config: Path, cells: list[tuple[str, int]], systems: tuple[str, ...], jobs: int, out: Path,
               log=print) -> list[str]:
    """Each cell's trainings and evaluations in a process of its own (``deid-speech experiment
    --cell``), at most ``jobs`` at a time, each pinned to its share of the cores (``--cores``:
    every library in it, torch, CTranslate2 and OpenMP, then sizes its threads to them; the
    E2E trainer's two threads per cell on two cores ran at 20-34 s a step instead of 5-9,
    docs/results.md §0z); its output is added to OUT/logs/ARM_seedN.log. Returns the cells that failed."""
    import os
    import queue
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    from deid_speech.asr.whisper import cpu_threads

    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    try:
        cores = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = list(range(cpu_threads()))
    free: queue.Queue = queue.Queue()
    for slot in core_slots(cores, jobs):
        free.put(slot)

    def one(cell: tuple[str, int]) -> str | None:
        arm, seed = cell
        name = f"{arm.replace('+', '_')}_seed{seed}"
        mine = free.get()
        try:
            pin = ["--cores", ",".join(map(str, mine))] if hasattr(os, "sched_setaffinity") else []  # Linux
            argv = [sys.executable, "-m", "deid_speech", "experiment", "--config", str(config), "--cell",
                    f"{arm}:{seed}", "--progress", "off", *pin, *[x for s in systems for x in ("--system", s)]]
            log(f"[cell] {arm} seed {seed}: started on core(s) {','.join(map(str, mine))}, log {logs / name}.log")
            with open(logs / f"{name}.log", "a") as f:  # a rerun that only scores keeps the training's log
                f.write(f"== {time.strftime('%Y-%m-%d %H:%M:%S')}: {' '.join(argv[2:])}\n")
                f.flush()
                threads = str(len(mine))
                env = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads,
                       "OPENBLAS_NUM_THREADS": threads}
                code = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, env=env).returncode
        finally:
            free.put(mine)
        log(f"[cell] {arm} seed {seed}: " + ("done" if code == 0 else f"failed (exit {code}), see {logs / name}.log"))
        return None if code == 0 else f"{arm}:{seed}"

    with ThreadPoolExecutor(jobs) as pool:
        return [c for c in pool.map(one, cells) if c]


def run_experiment(cfg: ExperimentConfig, config_text: str | None = None, progress: bool | None = None,
                   log=print, systems: tuple[str, ...] | None = None, cells: list[tuple[str, int]] | None = None,
                   jobs: int = 1, config: Path | None = None, report_only: bool = False) -> dict:
    """The matrix, or part of it: only ``systems`` and only ``cells`` (arm, seed) when given
    (the report then says it is incomplete). With ``jobs`` > 1 the cells run in parallel
    processes (``config`` is the file they read), and this one writes the report;
    ``report_only``: the report of the finished steps, nothing run (not even the data)."""
    cfg.check_tests()  # before anything is built, trained or written
    if bad := [s for s in systems or () if s not in cfg.systems]:
        raise DeidError(f"--system {bad[0]}: not among this config's systems ({', '.join(cfg.systems)})")
    out = cfg.out_dir
    steps = Steps(out, log)  # what is done (it writes nothing yet)
    if report_only and not steps.done:
        raise DeidError(f"{out}: no step of this experiment is done yet, nothing to report")
    if not report_only:
        from deid_speech.make_dataset import check_arm_files

        check_arm_files(tuple(a for a in cfg.arms if f"arm {a.name}" not in steps.done), cfg.data.seed_dir)
    accept_out_dir(cfg, config_text)
    trains = build_data(cfg, steps, progress) if not report_only else dict.fromkeys(cfg.arm_names())
    todo = [(arm, seed) for arm in trains for seed in cfg.seeds if cells is None or (arm, seed) in cells]
    systems = tuple(s for s in cfg.systems if s in (systems or cfg.systems))
    failed: list[str] = []
    if jobs > 1 and len(todo) > 1 and not report_only:
        if config is None:
            raise DeidError("running cells in parallel needs the config file")
        failed = _run_cells(config, todo, systems, jobs, out, log)
        steps = Steps(out, log)  # what the cells recorded
    tests = _tests(cfg)
    if not tests:
        raise DeidError(f"{cfg.data.out_dir}: no test manifest there, and no [tests]: nothing to score or report")
    rows = _run_cells_here(cfg, trains, tests, todo, systems, steps, progress,
                           only_done=bool(failed) or jobs > 1 or report_only)
    complete = not failed and cells is None and systems == cfg.systems and (not report_only or all(
        f"eval {s} {a} seed {k} {t}" in steps.done for a, k in todo for s in systems for t in tests))
    if cells is not None or systems != cfg.systems:  # a part of the matrix (a --jobs cell among them):
        steps = Steps(out, lambda m: None if m.startswith("[skip]") else log(m))  # its report holds
        # every finished step, other processes' too
        every = [(arm, seed) for arm in trains for seed in cfg.seeds]
        rows = _run_cells_here(cfg, trains, tests, every, cfg.systems, steps, progress, only_done=True)
        complete = not failed and len(rows) == len(every) * len(cfg.systems) * len(tests)
    results = write_report(cfg, trains, tests, rows, steps, complete=complete)
    if failed:
        raise DeidError(f"{len(failed)} cell(s) failed: {', '.join(failed)} (logs in {out / 'logs'}); "
                        "the report holds the finished ones, and a rerun resumes")
    return results


def accept_out_dir(cfg: ExperimentConfig, config_text: str | None) -> None:
    """Refuse an out_dir whose steps were made from another config (a rerun would skip them and
    report them under this one): ``cfg.record`` is kept in OUT/experiment.json, and every part of
    it that a step depends on must be the same (arms and [tests] added later are new steps). Then
    record this config, and its text in OUT/experiment_config.toml. A folder from before the
    record: its experiment_config.toml must be this config's text."""
    out = cfg.out_dir
    path = out / "experiment.json"
    earlier = json.loads(path.read_text())["config"] if path.is_file() else {}
    if other := [k for k in cfg.record if k in earlier and earlier[k] != cfg.record[k]]:
        raise DeidError(f"{out} was run with another config ({other[0]} differs); use a new out_dir")
    old_text = out / "experiment_config.toml"
    if (not earlier and config_text is not None and (out / "steps.json").is_file() and old_text.is_file()
            and old_text.read_text(encoding="utf-8") != config_text):
        raise DeidError(f"{out} was run with another config (its experiment_config.toml differs); use a new out_dir")
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps({"config": {**earlier, **cfg.record}}, indent=2) + "\n")
    if config_text is not None:
        write_text_atomic(old_text, config_text)


def _tests(cfg: ExperimentConfig) -> dict[str, Path]:
    tests = {t: cfg.data.out_dir / t / "manifest.jsonl" for t in TEST_SETS}
    return {t: p for t, p in tests.items() if p.is_file()} | cfg.extra_tests


def _run_cells_here(cfg: ExperimentConfig, trains: dict, tests: dict[str, Path], todo: list[tuple[str, int]],
                    systems: tuple[str, ...], steps: Steps, progress: bool | None, only_done: bool = False) -> list[dict]:
    """Trains and scores each cell's models in this process (``only_done``: reads the steps
    that other processes finished and runs nothing), and returns the table's rows."""
    out = cfg.out_dir
    dev = cfg.data.out_dir / "dev" / "manifest.jsonl"
    prog = ["--progress", "on" if progress else "off"]
    # one Whisper transcript per audio file for every NER training and cascade evaluation
    asr_cache = ["--asr-cache", str(out / "cache" / "asr-transcripts.jsonl")]
    trainer_args = {"ner": ["--asr-model", cfg.asr_model, *asr_cache], "e2e": ["--device", cfg.device]}
    rows: list[dict] = []
    for arm, seed in todo:
        train = trains[arm]
        run_dir = out / "runs" / arm.replace("+", "_") / f"seed{seed}"
        for system in systems:
            target = TABLE[system].trains  # what `deid-speech train` makes for this system
            model = run_dir / target
            name = f"train {target} {arm} seed {seed}"
            if only_done and name not in steps.done:
                continue

            def train_model(t=target, m=model, train=train, seed=seed) -> dict:
                _cli(["train", t, "--train", str(train), "--dev", str(dev), "--out", str(m),
                      "--seed", str(seed), *trainer_args[t], *cfg.train_args.get(t, [])])
                return _training_record(m)

            steps.run(name, train_model)
            for test, manifest in tests.items():
                ev = run_dir / f"eval-{system}-{test}"
                flag = (["--ner-model", str(model), *asr_cache] if system == "cascade"
                        else ["--model", str(model), "--device", cfg.device])
                # --overwrite: the step's own folder, which a run killed before recording the step may have filled
                argv = ["eval", "--manifest", str(manifest), "--system", system, *flag,
                        "--asr-model", cfg.asr_model, "--out-dir", str(ev), "--overwrite", *prog]
                name = f"eval {system} {arm} seed {seed} {test}"
                if only_done and name not in steps.done:
                    continue
                steps.run(name, lambda argv=argv: _cli(argv))
                try:
                    res = json.loads((ev / "results.json").read_text())["systems"][system]
                except (OSError, ValueError, KeyError):
                    if not only_done:
                        raise
                    steps.log(f"[miss] {name}: recorded as done, but {ev / 'results.json'} is missing or unreadable")
                    continue  # a report of what others finished leaves out what it cannot read
                leak = res["audio_leak"]
                rows.append({"arm": arm, "seed": seed, "system": system, "test": test,
                             "overall": res["timestamp_overlap"]["overall"],
                             "leak": leak["leaked_duration"], "over_redaction": leak["over_redaction"],
                             "per_label": res["timestamp_overlap_label_exact"]["per_label"]})
                if not only_done:  # a stopped run still has its table
                    write_report(cfg, trains, tests, rows, steps, complete=False)
    return rows


def write_report(cfg: ExperimentConfig, trains: dict, tests: dict, rows: list[dict], steps: Steps,
                 complete: bool) -> dict:
    out = cfg.out_dir
    results = {"config": str(out / "experiment_config.toml"), "complete": complete, "arms": list(trains),
               "arm_sources": arm_sources(cfg),
               "seeds": list(cfg.seeds), "systems": list(cfg.systems), "tests": list(tests), "rows": rows,
               "table": summarise(rows), "steps": steps.done,
               "wall_s": round(sum(v.get("wall_s", 0) for v in steps.done.values()), 1)}
    write_text_atomic(out / "results.json", json.dumps(results, indent=2) + "\n")
    write_text_atomic(out / "results.md", markdown(results))
    plot(results, out / "results.png")
    return results


def arm_sources(cfg: ExperimentConfig) -> dict[str, str]:
    """What each arm adds to the Baseline, for the report: an arm is named by its prompt and
    temperature alone, whether an LLM wrote its sentences, an earlier run did, or templates."""
    sources = {}
    for name, a in zip(cfg.arm_names()[1:], cfg.arms):
        if a.sentence_files:
            what = "from " + ", ".join(f"{Path(f).parent.name}/{Path(f).name}" for f in a.sentence_files)
        elif a.backend == "template":
            what = "drawn from the seed corpus's templates (the template backend ignores prompt and temperature)"
        else:
            what = f"written by {a.backend}" + (f" ({a.model})" if a.model else "")
        sources[name] = f"{a.n} sentences {what}"
    return sources


def _training_record(model_dir: Path) -> dict:
    p = model_dir / "training.json"
    if not p.is_file():
        return {}
    t = json.loads(p.read_text())
    return {k: t[k] for k in ("wall_s", "train_wall_s", "best_score", "best_dev_score", "best_step", "steps")
            if k in t}


def _mean_sd(xs: list[float]) -> tuple[float, float | None]:
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else None)


def summarise(rows: list[dict]) -> list[dict]:
    """Mean (and spread over seeds) of P/R/F1 per system, test set and arm."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["system"], r["test"], r["arm"]), []).append(r)
    table = []
    for (system, test, arm), rs in groups.items():
        entry = {"system": system, "test": test, "arm": arm, "n_seeds": len(rs)}
        for m in ("precision", "recall", "f1", "leak", "over_redaction"):
            xs = [r["overall"][m] if m in r["overall"] else r.get(m) for r in rs]
            if any(x is None for x in xs):  # a row from before leak was recorded
                entry[m], entry[m + "_sd"] = None, None
                continue
            mean, sd = _mean_sd(xs)
            entry[m], entry[m + "_sd"] = round(mean, 4), (round(sd, 4) if sd is not None else None)
        entry["per_label_f1"] = {lab: _label_f1(rs, lab) for lab in PAPER_LABELS}
        table.append(entry)
    return table


def _label_f1(rows: list[dict], label: str) -> float | None:
    """Mean label-exact F1 of ``label`` over the seeds; None where the test set has no entity of
    it (its F1 would measure nothing; a row from before n_true was recorded counts when it
    names the label)."""
    xs = [r["per_label"][label]["f1"] for r in rows if r["per_label"].get(label, {"n_true": 0}).get("n_true", 1)]
    return round(statistics.fmean(xs), 4) if xs else None


def _cell(e: dict, m: str) -> str:
    if e[m] is None:
        return "-"
    s = f"{100 * e[m]:.1f}"
    return s + (f" ± {100 * e[m + '_sd']:.1f}" if e.get(m + "_sd") is not None else "")


def markdown(results: dict) -> str:
    name = {"cascade": "Pipeline (cascade: Whisper + patterns + spaCy + trained NER)",
            "e2e": "End-to-end (Whisper writing entity tags)"}
    out = ["# Experiment: augmentation arms x systems", ""]
    if not results.get("complete", True):
        out += ["**Incomplete: not every step has run (a run stopped, or only some cells or systems "
                "were asked for); the tables show the finished cells only.**", ""]
    if sources := results.get("arm_sources"):  # results from before it was recorded have none
        out += ["Arms: " + "; ".join(f"{arm}: {what}" for arm, what in sources.items()) + ".", ""]
    out += [f"Seeds {results['seeds']}; timestamp-overlap precision/recall/F1 (label-agnostic, the "
            "paper's metric), leak (share of entity audio still audible) and over-redaction (share of "
            "the other speech beeped), in %; mean ± std over seeds where there are several.", ""]
    for system in results["systems"]:
        for test in results["tests"]:
            out += [f"## {name[system]}: {test}", "", "| training data | P | R | F1 | leak | over-redaction |",
                    "|---|---:|---:|---:|---:|---:|"]
            for e in results["table"]:
                if e["system"] == system and e["test"] == test:
                    out.append(f"| {e['arm']} | {_cell(e, 'precision')} | {_cell(e, 'recall')} | "
                               f"**{_cell(e, 'f1')}** | {_cell(e, 'leak')} | {_cell(e, 'over_redaction')} |")
            out.append("")
    out += ["## Per label (label-exact F1 %, mean over seeds; —: no entity of the label in the test set)", "",
            "| system | test | training data | " + " | ".join(PAPER_LABELS) + " |",
            "|---|---|---|" + "---:|" * len(PAPER_LABELS)]
    for e in results["table"]:
        out.append(f"| {e['system']} | {e['test']} | {e['arm']} | "
                   + " | ".join("—" if (f1 := e["per_label_f1"][lab]) is None else f"{100 * f1:.0f}"
                                for lab in PAPER_LABELS) + " |")
    out += ["", f"Total wall time of the steps: {results['wall_s'] / 60:.1f} min."]
    return "\n".join(out) + "\n"


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    panels = [(s, t) for s in results["systems"] for t in results["tests"]]
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    for ax, (system, test) in zip(axes[0], panels):
        es = [e for e in results["table"] if e["system"] == system and e["test"] == test]
        x = np.arange(len(es))
        for k, (m, colour) in enumerate((("precision", "#4c72b0"), ("recall", "#dd8452"), ("f1", "#55a868"))):
            ax.bar(x + (k - 1) * 0.27, [e[m] for e in es], 0.27, label=m, color=colour,
                   yerr=[e[m + "_sd"] or 0 for e in es])
        ax.set_xticks(x, [e["arm"].replace("baseline+", "+") for e in es], rotation=20, fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{system} on {test}", fontsize=10)
    axes[0][0].legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    import os
    import tempfile

    from deid_speech.audio import umask_mode

    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".png", dir=path.parent)  # cells in parallel write it too
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=100)
        os.chmod(tmp, umask_mode())  # mkstemp makes 0600; the report gets the usual permissions
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        Path(tmp).unlink(missing_ok=True)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("experiment", help="the paper's matrix: augmentation arms x (cascade, e2e)",
                              description="Builds the arms, trains the cascade NER and the end-to-end "
                                          "model on each, scores all on one held-out-voice test split "
                                          "(and its telephone copy); resumable. See "
                                          "configs/experiments/small.toml.")
    p.add_argument("--config", type=Path, required=True)
    p.add_argument("--progress", choices=("auto", "on", "off"), default="auto")
    p.add_argument("--system", action="append", default=None, metavar="S",
                   help="only this system's models (repeatable; default: the config's systems)")
    p.add_argument("--cell", action="append", default=None, metavar="ARM:SEED",
                   help="only this arm and seed (repeatable), e.g. baseline:0 or diverse0.3:1")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="run N cells at a time, each in a process of its own with its share of the "
                        "cores (a GPU machine: the e2e trainings share the GPU); default 1")
    p.add_argument("--cores", default=None, help=argparse.SUPPRESS)  # a --jobs cell: the cores it may use
    p.add_argument("--report", action="store_true",
                   help="only write the report of the steps finished so far; run nothing")


def run(args) -> int:
    if args.cores is not None:  # a cell of a --jobs run, pinned to its share of the cores before any library starts threads
        import os

        try:
            os.sched_setaffinity(0, {int(c) for c in args.cores.split(",")})
        except (AttributeError, OSError, ValueError) as e:
            raise DeidError(f"--cores {args.cores}: {e}") from None
    cfg = ExperimentConfig.load(args.config)
    progress = {"auto": sys.stderr.isatty(), "on": True, "off": False}[args.progress]
    if args.jobs < 1:
        raise DeidError("--jobs must be at least 1")
    cells = parse_cells(cfg, args.cell) if args.cell else None
    results = run_experiment(cfg, config_record(read_config(args.config)[1]), progress=progress,
                             systems=tuple(args.system) if args.system else None, cells=cells,
                             jobs=args.jobs, config=args.config.resolve(), report_only=args.report)
    print(markdown(results))
    print(f"written: {cfg.out_dir / 'results.md'}, results.json, results.png")
    return 0

