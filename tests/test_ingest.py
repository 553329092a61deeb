"""`deid-speech ingest`: a resumable batch with an SQLite ledger. The fast tests use a fake
recogniser (a canned transcript) in process; the kill test runs the real command."""
from __future__ import annotations

import json
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import soundfile as sf

from deid_speech import pipeline
from deid_speech.cli import main
from deid_speech.ingest import LEDGER, sha256
from deid_speech.ner.patterns import PatternDetector
from deid_speech.types import Recognition
from factories import make_transcript, tone

TEXT = "hello my number is nine one two three four five six seven thank you"
CALLS: list[str] = []


class FakeAsr:
    name = "fake"

    def recognize(self, audio, progress=None):
        CALLS.append("x")
        return Recognition(make_transcript(TEXT, word_dur=0.2, gap=0.05, t0=0.5))


class FakeRedactor(pipeline.Redactor):
    def __init__(self, config):
        super().__init__(config, asr=FakeAsr(), detectors=[PatternDetector()])


@pytest.fixture
def archive(tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline, "Redactor", FakeRedactor)
    CALLS.clear()
    root = tmp_path / "arch"
    for rel, hz in (("a/one.wav", 220), ("a/two.wav", 330), ("b/three.flac", 440)):
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        sf.write(p, tone(5.0, hz=hz), 16000)
    return root


def ledger_rows(out: Path) -> dict[str, tuple]:
    db = sqlite3.connect(out / LEDGER)
    rows = db.execute("SELECT source, state, attempts, outputs, error FROM files").fetchall()
    db.close()
    return {Path(r[0]).name: (r[1], r[2], json.loads(r[3] or "{}"), r[4]) for r in rows}


def test_first_run_redacts_all_and_records_output_hashes(archive, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["ingest", str(archive), "--out-dir", str(out)]) == 0
    rows = ledger_rows(out)
    assert {k: v[0] for k, v in rows.items()} == {"one.wav": "done", "two.wav": "done", "three.flac": "done"}
    for _, _, outputs, _ in rows.values():
        assert len(outputs) == 2 and all(sha256(Path(p)) == h for p, h in outputs.items())
    assert (out / "a" / "one.redacted.json").is_file() and (out / "b" / "three.redacted.flac").is_file()
    assert len(CALLS) == 3


def test_rerun_skips_done_redoes_changed_missing_and_not_touched(archive, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["ingest", str(archive), "--out-dir", str(out)]) == 0
    CALLS.clear()
    assert main(["ingest", str(archive), "--out-dir", str(out)]) == 0
    assert CALLS == [] and "0 redacted now, 3 done before" in capsys.readouterr().out
    os.utime(archive / "a/one.wav")  # touched: same bytes
    sf.write(archive / "a/two.wav", tone(4.0, hz=500), 16000)  # changed
    (out / "b" / "three.redacted.json").unlink()  # an output lost
    assert main(["ingest", str(archive), "--out-dir", str(out)]) == 0
    assert len(CALLS) == 2 and "2 redacted now, 1 done before" in capsys.readouterr().out
    rows = ledger_rows(out)
    assert rows["one.wav"][1] == 1 and rows["two.wav"][1] == 2 and rows["three.flac"][1] == 2  # attempts
    CALLS.clear()
    assert main(["ingest", str(archive), "--out-dir", str(out)]) == 0 and CALLS == []  # the touch is remembered


def test_failures_are_recorded_and_retried_only_on_request(archive, tmp_path, capsys):
    out = tmp_path / "out"
    (archive / "a" / "broken.wav").write_bytes(b"RIFF....WAVEfmt not really audio")
    assert main(["ingest", str(archive), "--out-dir", str(out)]) == 1
    rows = ledger_rows(out)
    assert rows["broken.wav"][0] == "failed" and rows["broken.wav"][3] and "\n" not in rows["broken.wav"][3]
    assert not list((out / "a").glob("broken*"))
    CALLS.clear()
    capsys.readouterr()
    assert main(["ingest", str(archive), "--out-dir", str(out)]) == 0  # nothing new failed in this run
    assert "--retry-failed" in capsys.readouterr().err and CALLS == []
    assert main(["ingest", str(archive), "--out-dir", str(out), "--retry-failed"]) == 1
    assert ledger_rows(out)["broken.wav"][1] == 2


def test_sources_may_be_csv_or_jsonl_lists(archive, tmp_path):
    (tmp_path / "list.csv").write_text("path,site\narch/a/one.wav,x\narch/b/three.flac,y\n")
    (tmp_path / "list.jsonl").write_text(json.dumps({"path": str(archive / "a/two.wav")}) + "\n")
    assert main(["ingest", str(tmp_path / "list.csv"), "--out-dir", str(tmp_path / "o1")]) == 0
    assert set(ledger_rows(tmp_path / "o1")) == {"one.wav", "three.flac"}
    assert main(["ingest", str(tmp_path / "list.jsonl"), "--out-dir", str(tmp_path / "o2")]) == 0
    assert set(ledger_rows(tmp_path / "o2")) == {"two.wav"}
    (tmp_path / "bad.jsonl").write_text('{"file": 1}\n')
    assert main(["ingest", str(tmp_path / "bad.jsonl"), "--out-dir", str(tmp_path / "o3")]) == 1


def _finished_outputs_are_complete(out: Path) -> None:
    """Every ledger row marked done has its outputs with their hashes; every JSON report
    on disk is whole and has its audio beside it."""
    if (out / LEDGER).exists():
        for _, (state, _, outputs, _) in ledger_rows(out).items():
            if state == "done":
                assert all(Path(p).is_file() and sha256(Path(p)) == h for p, h in outputs.items())
    for j in out.rglob("*.redacted.json"):
        d = json.loads(j.read_text())
        assert d["schema_version"] and j.with_name(j.name.replace(".json", ".wav")).is_file()


@pytest.mark.model
def test_killing_ingest_at_random_moments_never_leaves_a_false_finish(tmp_path):
    from deid_speech import models

    x, sr = sf.read(str(models.path("example")), dtype="float32")
    src = tmp_path / "arch"
    src.mkdir()
    for i in range(5):
        sf.write(src / f"c{i}.wav", x[int(i * 12 * sr):int((i * 12 + 8) * sr)], sr)
    cmd = [sys.executable, "-m", "deid_speech", "ingest", str(src), "--out-dir", str(tmp_path / "out")]
    rng = random.Random(7)
    for _ in range(6):  # before the models load, mid-file, between files, mid-write
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(1.0, 9.0))
        p.send_signal(signal.SIGKILL)
        p.wait()
        _finished_outputs_are_complete(tmp_path / "out")
    assert subprocess.run(cmd, capture_output=True).returncode == 0
    _finished_outputs_are_complete(tmp_path / "out")
    assert {v[0] for v in ledger_rows(tmp_path / "out").values()} == {"done"}
    clean = subprocess.run([sys.executable, "-m", "deid_speech", "redact", str(src), "--out-dir", str(tmp_path / "clean")],
                           capture_output=True)
    assert clean.returncode == 0
    for f in sorted((tmp_path / "clean").glob("*.redacted.*")):
        assert f.read_bytes() == (tmp_path / "out" / f.name).read_bytes(), f.name


def test_address_needs_the_ray_engine(archive, tmp_path, capsys):
    assert main(["ingest", str(archive), "--out-dir", str(tmp_path / "o"), "--address", "ray://x:10001"]) == 1
    assert "--engine ray" in capsys.readouterr().err


@pytest.mark.model
def test_ray_engine_survives_a_killed_worker_without_duplicate_or_lost_outputs(tmp_path):
    pytest.importorskip("ray")
    from deid_speech import models

    x, sr = sf.read(str(models.path("example")), dtype="float32")
    src = tmp_path / "arch"
    src.mkdir()
    for i in range(6):
        sf.write(src / f"c{i}.wav", x[int(i * 10 * sr):int((i * 10 + 8) * sr)], sr)
    out = tmp_path / "out"
    log = open(tmp_path / "ingest.log", "w")
    p = subprocess.Popen([sys.executable, "-m", "deid_speech", "ingest", str(src), "--out-dir", str(out),
                          "--engine", "ray", "--workers", "2"], stdout=log, stderr=subprocess.STDOUT)
    killed, seen_at, titles = None, None, set()
    deadline = time.time() + 240
    while time.time() < deadline and killed is None and p.poll() is None:
        ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout.splitlines()
        actors = [int(line.split()[0]) for line in ps if "_RedactActor" in line and "ps -eo" not in line]
        titles.update(line.split(None, 1)[1][:60] for line in ps if "ray::" in line)
        if actors and seen_at is None:
            seen_at = time.time()
        # once an actor has loaded its models and a file is done (or it has been up 6 s): kill it mid-run
        if actors and (list(out.glob("*.redacted.json")) or time.time() - seen_at > 6):
            killed = actors[0]
            os.kill(killed, signal.SIGKILL)
        time.sleep(0.1)
    p.wait(timeout=600)
    log.close()
    stderr = (tmp_path / "ingest.log").read_text()
    assert killed is not None, f"no Ray actor process was seen; ray processes: {sorted(titles)}"
    assert p.returncode == 0, stderr[-2000:]
    rows = ledger_rows(out)
    assert len(rows) == 6 and {v[0] for v in rows.values()} == {"done"}
    assert sorted(f.name for f in out.glob("*.redacted.*")) == sorted(
        f"c{i}.redacted.{e}" for i in range(6) for e in ("wav", "json"))
    clean = subprocess.run([sys.executable, "-m", "deid_speech", "redact", str(src), "--out-dir", str(tmp_path / "c")],
                           capture_output=True)
    assert clean.returncode == 0
    for f in sorted((tmp_path / "c").glob("*.redacted.*")):
        assert f.read_bytes() == (out / f.name).read_bytes(), f.name


def test_an_unreachable_ray_cluster_is_a_one_line_error(archive, tmp_path, capsys):
    pytest.importorskip("ray")
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t = time.time()
    assert main(["ingest", str(archive), "--out-dir", str(tmp_path / "o"), "--engine", "ray",
                 "--address", f"127.0.0.1:{port}"]) == 1
    assert f"cannot reach Ray at 127.0.0.1:{port}" in capsys.readouterr().err and time.time() - t < 30
    assert main(["ingest", str(archive), "--out-dir", str(tmp_path / "o"), "--engine", "ray",
                 "--address", "no-port-here"]) == 1


def test_the_ledger_is_keyed_by_the_absolute_path(archive, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    (archive / "a" / "broken.wav").write_bytes(b"RIFF....WAVEfmt not really audio")
    monkeypatch.chdir(tmp_path)
    assert main(["ingest", "arch", "--out-dir", "out"]) == 1
    CALLS.clear()
    assert main(["ingest", str(archive), "--out-dir", str(out)]) == 0  # the failure is not retried
    monkeypatch.chdir(archive)
    assert main(["ingest", ".", "--out-dir", "../out"]) == 0 and CALLS == []
    db = sqlite3.connect(out / LEDGER)
    keys = [r[0] for r in db.execute("SELECT source FROM files")]
    db.close()
    assert len(keys) == 4 and all(Path(k).is_absolute() for k in keys)
    # a ledger written with relative keys (before this was fixed) is read from the folder it was written in
    monkeypatch.chdir(tmp_path)
    db = sqlite3.connect(out / LEDGER)
    for (k, outputs) in db.execute("SELECT source, outputs FROM files").fetchall():
        rel = {os.path.relpath(p, tmp_path): h for p, h in json.loads(outputs).items()}
        db.execute("UPDATE files SET source = ?, outputs = ? WHERE source = ?",
                   (os.path.relpath(k, tmp_path), json.dumps(rel), k))
    db.execute("ALTER TABLE files DROP COLUMN options")  # nor did it record options
    db.commit()
    db.close()
    assert main(["ingest", str(archive), "--out-dir", str(out)]) == 0 and CALLS == []
    assert len(ledger_rows(out)) == 4


def test_a_file_name_that_is_not_utf8_does_not_stop_the_run(archive, tmp_path, capsys):
    odd = os.fsencode(archive / "a") + b"/odd\xffname.wav"
    with open(odd, "wb") as fh:
        fh.write((archive / "a" / "one.wav").read_bytes())
    out = tmp_path / "out"
    main(["ingest", str(archive), "--out-dir", str(out)])
    rows = ledger_rows(out)
    assert {rows[k][0] for k in ("one.wav", "two.wav", "three.flac")} == {"done"} and len(rows) == 4
    assert "Traceback" not in capsys.readouterr().err
    CALLS.clear()
    main(["ingest", str(archive), "--out-dir", str(out)])
    assert CALLS == [] and len(ledger_rows(out)) == 4  # the ledger is still valid, and still read


def test_a_list_naming_a_missing_file_fails_that_entry_only(archive, tmp_path, capsys):
    (tmp_path / "list.csv").write_text("path\narch/a/one.wav\narch/a/gone.wav\n")
    (tmp_path / "list.jsonl").write_text(json.dumps({"path": "arch/nope.wav"}) + "\n"
                                         + json.dumps({"path": "arch/a/two.wav"}) + "\n")
    for name, done in (("list.csv", "one.wav"), ("list.jsonl", "two.wav")):
        capsys.readouterr()
        assert main(["ingest", str(tmp_path / name), "--out-dir", str(tmp_path / name.replace(".", "-"))]) == 1
        err = capsys.readouterr().err
        assert "no such file" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
        assert ledger_rows(tmp_path / name.replace(".", "-"))[done][0] == "done"


def test_a_file_listed_twice_is_redacted_once_and_a_dangling_link_is_listed(archive, tmp_path, capsys):
    one = archive / "a" / "one.wav"
    (tmp_path / "list.csv").write_text(f"arch/a/one.wav\narch/a/one.wav\n./arch/a/one.wav\n{one}\n")
    assert main(["ingest", str(tmp_path / "list.csv"), "--out-dir", str(tmp_path / "o")]) == 0
    assert len(CALLS) == 1 and ledger_rows(tmp_path / "o")["one.wav"][:2] == ("done", 1)
    (archive / "b" / "gone.wav").symlink_to(tmp_path / "nowhere.wav")
    capsys.readouterr()
    assert main(["ingest", str(archive), "--out-dir", str(tmp_path / "o2")]) == 0
    assert f"skipped: {archive / 'b' / 'gone.wav'} (" in capsys.readouterr().err


def _clip(path: Path, hz: float, seconds: float = 2.0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(path, tone(seconds, hz=hz), 16000)
    return path


def test_outputs_another_archive_or_redact_wrote_are_never_replaced_without_overwrite(archive, tmp_path, capsys):
    out = tmp_path / "out"
    _clip(tmp_path / "arch2" / "a" / "one.wav", 600)  # other audio, the same name as arch/a/one.wav
    _clip(tmp_path / "arch2" / "a" / "new.wav", 700)
    assert main(["ingest", str(archive), "--out-dir", str(out)]) == 0
    before = (out / "a" / "one.redacted.wav").read_bytes()
    capsys.readouterr()
    assert main(["ingest", str(tmp_path / "arch2"), "--out-dir", str(out)]) == 1  # one.wav refused, new.wav done
    err = capsys.readouterr().err
    assert "one.redacted" in err and "already exists and is not" in err and "--overwrite" in err
    assert (out / "a" / "one.redacted.wav").read_bytes() == before and (out / "a" / "new.redacted.json").is_file()
    assert json.loads((out / "a" / "one.redacted.json").read_text())["file"].endswith("arch/a/one.wav")
    CALLS.clear()
    assert main(["ingest", str(archive), "--out-dir", str(out)]) == 0 and CALLS == []  # still arch's, still done
    # --overwrite takes them; arch's own row no longer owns them, so arch gets them back only with --overwrite
    assert main(["ingest", str(tmp_path / "arch2"), "--out-dir", str(out), "--overwrite"]) == 0
    assert json.loads((out / "a" / "one.redacted.json").read_text())["file"].endswith("arch2/a/one.wav")
    capsys.readouterr()
    assert main(["ingest", str(archive), "--out-dir", str(out)]) == 1
    assert "already exists and is not" in capsys.readouterr().err
    assert json.loads((out / "a" / "one.redacted.json").read_text())["file"].endswith("arch2/a/one.wav")
    # what `redact` wrote into the folder is not ingest's either
    o3 = tmp_path / "o3"
    _clip(tmp_path / "x" / "two.wav", 800)
    assert main(["redact", str(tmp_path / "x" / "two.wav"), "--out-dir", str(o3)]) == 0
    redacted = (o3 / "two.redacted.wav").read_bytes()
    (tmp_path / "list.csv").write_text("arch/a/two.wav\narch/a/one.wav\n")
    assert main(["ingest", str(tmp_path / "list.csv"), "--out-dir", str(o3)]) == 1
    assert (o3 / "two.redacted.wav").read_bytes() == redacted and (o3 / "one.redacted.json").is_file()
    assert ledger_rows(o3)["one.wav"][0] == "done" and "two.wav" not in ledger_rows(o3)


def test_a_file_added_later_with_the_same_stem_gets_names_of_its_own(tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline, "Redactor", FakeRedactor)
    src, out = tmp_path / "arch7", tmp_path / "out"
    _clip(src / "call.wav", 300)
    assert main(["ingest", str(src), "--out-dir", str(out)]) == 0
    _clip(src / "call.flac", 500)  # sorts before call.wav: in a fresh run it would take "call.redacted.*"
    for _ in range(2):
        assert main(["ingest", str(src), "--out-dir", str(out)]) == 0
        assert json.loads((out / "call.redacted.json").read_text())["file"].endswith("call.wav")
        assert json.loads((out / "call.flac.redacted.json").read_text())["file"].endswith("call.flac")
        assert sorted(p.name for p in out.glob("call*")) == [
            "call.flac.redacted.flac", "call.flac.redacted.json", "call.redacted.json", "call.redacted.wav"]
    assert {v[0] for v in ledger_rows(out).values()} == {"done"}


def test_a_rerun_with_other_options_redoes_the_files_with_them(archive, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["ingest", str(archive), "--out-dir", str(out)]) == 0
    CALLS.clear()
    capsys.readouterr()
    assert main(["ingest", str(archive), "--out-dir", str(out), "--format", "srt,txt"]) == 0
    assert len(CALLS) == 3 and "3 redacted now" in capsys.readouterr().out
    assert (out / "a" / "one.redacted.srt").is_file() and (out / "b" / "three.redacted.txt").is_file()
    assert all(len(v[2]) == 4 for v in ledger_rows(out).values())
    CALLS.clear()
    assert main(["ingest", str(archive), "--out-dir", str(out), "--format", "txt,srt", "--workers", "1"]) == 0
    assert CALLS == []  # the same outputs asked for: nothing to redo
    assert main(["ingest", str(archive), "--out-dir", str(out), "--mode", "silence", "--labels", "PHONE"]) == 0
    assert len(CALLS) == 3 and "--mode" not in capsys.readouterr().err
    assert not (out / "a" / "one.redacted.srt").exists()  # its own earlier outputs went with the old options
    CALLS.clear()
    assert main(["ingest", str(archive), "--out-dir", str(out), "--mode", "silence", "--labels", "PHONE"]) == 0
    assert CALLS == []
