"""bench/arm_diversity.py: each arm's sentences as the matrix takes them (n, in turn over the
jobs' files), scored for diversity next to seed-corpus draws of the same size."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "arm_diversity.py"


def _rows(texts: list[str], arm: str) -> str:
    strategy, temp = arm[:-3], float(arm[-3:])
    return "".join(json.dumps({"text": t, "tagged": t, "entities": [], "strategy": strategy, "temperature": temp}) + "\n"
                   for t in texts)


def _run(tmp_path: Path, arms: dict[str, list[list[str]]], n: int, seed: list[str]) -> subprocess.CompletedProcess:
    (tmp_path / "seed.jsonl").write_text("".join(json.dumps({"text": t, "tagged": t, "entities": []}) + "\n" for t in seed))
    toml = ""
    for arm, shards in arms.items():
        files = []
        for k, texts in enumerate(shards):
            f = tmp_path / f"{arm}-{k}.jsonl"
            f.write_text(_rows(texts, arm))
            files.append(f.name)
        toml += (f'[[arm]]\nstrategy = "{arm[:-3]}"\ntemperature = {arm[-3:]}\nn = {n}\n'
                 f"sentences = {json.dumps(files)}\n\n")
    (tmp_path / "cfg.toml").write_text(toml)
    return subprocess.run([sys.executable, str(SCRIPT), "--config", str(tmp_path / "cfg.toml"), "--seed-file",
                           str(tmp_path / "seed.jsonl"), "--draws", "3", "--out", str(tmp_path / "out.json")],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)


SEED = [f"my account number {w} is with {b} bank since {y}" for w, b, y in
        zip("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split(),
            "dbs ocbc uob posb hsbc citi maybank rhb sc boc icbc cimb".split(),
            "one two three four five six seven eight nine ten eleven twelve".split())]


def test_a_repetitive_arm_scores_less_diverse_than_a_copy_of_the_seed(tmp_path: Path) -> None:
    same = ["call me at the office later ok lah"] * 3 + ["call me at the office later ok"] * 3
    got = _run(tmp_path, {"similar0.3": [SEED[:3], SEED[3:6]], "diverse0.6": [same[:3], same[3:]]}, 6, SEED)
    assert got.returncode == 0, got.stderr
    res = json.loads((tmp_path / "out.json").read_text())
    copy, rep = res["arms"]["similar0.3"], res["arms"]["diverse0.6"]
    assert copy["n"] == rep["n"] == 6
    assert rep["distinct_2"] < copy["distinct_2"] and rep["self_bleu"] > copy["self_bleu"]
    assert copy["bleu_to_seed"] > 0.9 > 0.2 > rep["bleu_to_seed"]  # a copy of the seed scores BLEU 1 against it
    assert set(res["seed_corpus_n6"]["distinct_2"]) == {"mean", "sd"}


def test_an_arm_short_of_n_is_an_error(tmp_path: Path) -> None:
    got = _run(tmp_path, {"similar0.3": [SEED[:2], SEED[:2]]}, 3, SEED)  # the second job repeats the first's frames
    assert got.returncode == 1 and "2 sentences, n = 3" in got.stderr
    assert not (tmp_path / "out.json").exists()
