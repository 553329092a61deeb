"""The `deid-speech` command as a user runs it (real models for the redact runs)."""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from deid_speech import models as shipped

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = shipped.path("example")


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "deid_speech", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=600)


def test_usage_errors_exit_2_with_a_message():
    r = run("redact", "x.wav", "--labels", "PHONE,SSN")
    assert r.returncode == 2 and "unknown label(s) SSN" in r.stderr
    r = run("redact", "x.wav", "--padding", "-1")
    assert r.returncode == 2 and "padding must be between 0 and 2 seconds" in r.stderr
    r = run("redact", "x.wav", "--merge-gap", "-5")  # its own name and the bound a config file has too
    assert r.returncode == 2 and "--merge-gap: merge gap must be between 0 and 5 seconds" in r.stderr
    r = run("redact", "x.wav", "--verify-passes", "0")
    assert r.returncode == 2 and "--verify-passes: must be a whole number from 1 to 4, not '0'" in r.stderr
    r = run("redact", "x.wav", "--no-verify", "--verify-passes", "2")
    assert r.returncode == 1
    assert r.stderr.strip() == "deid-speech: error: --verify-passes sets how often --verify decodes, which is off here"
    r = run("redact")
    assert r.returncode == 2


def test_e2e_with_a_missing_model_is_a_one_line_error(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    r = run("redact", EXAMPLE, "--system", "e2e", "--model", tmp_path / "no-such-model", "--out-dir", out)
    assert r.returncode == 1 and "Traceback" not in r.stderr and "no-such-model" in r.stderr
    assert list(out.iterdir()) == []


@pytest.mark.model
def test_redacting_the_example_covers_every_known_pii_span(tmp_path):
    src = tmp_path / "call.wav"
    shutil.copy(EXAMPLE, src)
    before = src.read_bytes()
    r = run("redact", src)
    assert r.returncode == 0, r.stderr
    assert src.read_bytes() == before  # input untouched
    out_wav, out_json = tmp_path / "call.redacted.wav", tmp_path / "call.redacted.json"
    d = json.loads(out_json.read_text())
    truth = json.loads((EXAMPLE.parent / "call.truth.json").read_text())
    spans = d["spans"]
    for e in truth["entities"]:
        assert any(s["start"] < e["end"] and e["start"] < s["end"] for s in spans), (e, spans)
    # the beeped audio: same length/rate/channels, and each entity region really changed
    x, sr = sf.read(src)
    y, sr2 = sf.read(out_wav)
    assert sr == sr2 and x.shape == y.shape
    for e in truth["entities"]:
        a, b = int(e["start"] * sr), int(e["end"] * sr)
        changed = np.mean(np.abs(y[a:b] - x[a:b]) > 1e-3)
        assert changed > 0.5, e
    # placeholders in the transcript, none of the raw values
    assert "[PHONE_1]" in d["redacted_transcript"] and "[NRIC_1]" in d["redacted_transcript"]
    # the cascade's recogniser and its second opinion are the documented defaults
    from deid_speech.systems import RECOGNISER, VERIFIER

    assert (d["asr_model"], d["verified"]["by"]) == (RECOGNISER, VERIFIER) == ("tiny.en", "tiny.en-sg,base-sg")


@pytest.mark.model
def test_a_folder_with_a_bad_file_is_processed_and_exit_is_non_zero(tmp_path):
    calls = tmp_path / "calls"
    calls.mkdir()
    # stereo 44.1 kHz flac made from the example: every channel is redacted
    x, sr = sf.read(EXAMPLE)
    x = x[: sr * 20]
    from deid_speech.audio import resample

    st = np.stack([resample(x, sr, 44100), 0.5 * resample(x, sr, 44100)], axis=1)
    sf.write(calls / "stereo.flac", st, 44100, format="FLAC")
    (calls / "empty.wav").write_bytes(b"")
    sf.write(calls / "zero.wav", np.zeros((0, 1)), 16000)
    out = tmp_path / "out"
    r = run("redact", calls, "--out-dir", out, "--mode", "silence")
    assert r.returncode == 1
    assert "3 file(s): 1 redacted, 2 failed" in r.stdout
    assert "empty file" in r.stderr and "zero length" in r.stderr and "Traceback" not in r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["stereo.redacted.flac", "stereo.redacted.json"]
    info = sf.info(out / "stereo.redacted.flac")
    assert (info.samplerate, info.channels, info.frames) == (44100, 2, st.shape[0])
    d = json.loads((out / "stereo.redacted.json").read_text())
    y, _ = sf.read(out / "stereo.redacted.flac")
    for s in d["spans"]:
        a, b = int((s["start"] + 0.02) * 44100), int((s["end"] - 0.02) * 44100)
        assert np.all(y[a:b] == 0), s  # silence mode, both channels


@pytest.mark.model
def test_missing_file_is_a_one_line_error(tmp_path):
    r = run("redact", tmp_path / "nope.wav")
    assert r.returncode == 1 and "no such file" in r.stderr and "Traceback" not in r.stderr


def test_augment_cli_with_the_template_backend_resumes_and_summarises(tmp_path):
    out = tmp_path / "aug.jsonl"
    seed = shipped.path("seed") / "train.jsonl"
    r = run("augment", "--backend", "template", "--n", "30", "--seed", "4", "--in", seed, "--out", out)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["accepted"] == 30 and summary["complete"] and sum(summary["labels"].values()) > 0
    r = run("augment", "--backend", "template", "--n", "45", "--seed", "4", "--in", seed, "--out", out)
    assert json.loads(r.stdout)["new"] == 15
    assert len(out.read_text().splitlines()) == 45


def test_augment_cli_errors_are_one_line(tmp_path):
    r = run("augment", "--backend", "ollama", "--host", "http://127.0.0.1:9", "--out", tmp_path / "x.jsonl")
    assert r.returncode == 1 and "not reachable" in r.stderr and "Traceback" not in r.stderr
    r = run("augment", "--backend", "template", "--in", tmp_path / "none.jsonl", "--out", tmp_path / "x.jsonl")
    assert r.returncode == 1 and "no such seed file" in r.stderr


def test_a_model_path_that_does_not_exist_is_a_one_line_error_not_a_download(tmp_path):
    out = tmp_path / "out"
    r = run("redact", EXAMPLE, "--asr-model", "./models/my-finetune", "--out-dir", out)
    assert r.returncode == 1 and "no such model folder or file" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = run("redact", EXAMPLE, "--asr-model", "openai/whisper-small", "--out-dir", out)
    assert r.returncode == 1 and "--allow-download" in r.stderr
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.model
@pytest.mark.skipif(shutil.which("unshare") is None or subprocess.run(["unshare", "-n", "true"]).returncode != 0,
                    reason="needs `unshare -n` (a network namespace) to cut the network off")
@pytest.mark.parametrize("system", ["cascade", "e2e+patterns"])
def test_redact_works_with_no_network_at_all(tmp_path, system):
    out = tmp_path / "out"
    r = subprocess.run(["unshare", "-n", sys.executable, "-m", "deid_speech", "redact", str(EXAMPLE),
                        "--system", system, "--out-dir", str(out), "--progress", "off"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr
    d = json.loads((out / "call.redacted.json").read_text())
    assert len(d["spans"]) >= 5


@pytest.mark.model
def test_the_same_noisy_input_gives_the_same_redaction_on_every_run(tmp_path):
    """faster-whisper's temperature fallback samples; its seed comes from the audio, so two
    separate processes write the same transcript and spans."""
    x, sr = sf.read(EXAMPLE, dtype="float32")
    x = x[: 30 * sr]
    noise = np.random.default_rng(0).normal(0, 1, x.shape).astype(np.float32)
    noise *= np.sqrt(np.mean(x**2) / np.mean(noise**2)) / 10 ** (3 / 20)  # 3 dB SNR
    sf.write(tmp_path / "noisy.wav", np.clip(x + noise, -1, 1), sr)
    outs = []
    for k in range(2):
        r = run("redact", tmp_path / "noisy.wav", "--out-dir", tmp_path / f"o{k}", "--progress", "off")
        assert r.returncode == 0, r.stderr
        d = json.loads((tmp_path / f"o{k}" / "noisy.redacted.json").read_text())
        outs.append((d["redacted_transcript"], d["words"], d["spans"]))
    assert outs[0] == outs[1]


@pytest.mark.model
@pytest.mark.parametrize("sig,code", [("SIGTERM", 143), ("SIGINT", 130)])
def test_a_killed_run_leaves_no_temporary_or_half_output(tmp_path, sig, code):
    import signal
    import time

    out = tmp_path / "out"
    # a test run started in the background inherits an ignored SIGINT: give the child the default
    p = subprocess.Popen([sys.executable, "-m", "deid_speech", "redact", str(EXAMPLE), "--out-dir", str(out),
                          "--progress", "off"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(4.0)  # models loaded, decoding under way
    p.send_signal(getattr(signal, sig))
    _, err = p.communicate(timeout=120)
    assert p.returncode == code and "Traceback" not in err
    left = sorted(f.name for f in out.iterdir()) if out.exists() else []
    assert not any(n.startswith(".tmp-") for n in left)
    assert ("call.redacted.json" in left) == ("call.redacted.wav" in left)  # both or neither


def test_an_out_dir_that_is_a_file_is_refused_before_any_work(tmp_path):
    (tmp_path / "out").write_text("x")
    r = run("redact", EXAMPLE, "--out-dir", tmp_path / "out")
    assert r.returncode == 1 and "is a file, not a folder" in r.stderr and "Traceback" not in r.stderr
    assert (tmp_path / "out").read_text() == "x"


@pytest.mark.model
def test_no_clear_pii_in_any_default_output_of_a_real_redaction(tmp_path):
    """The strings the redaction hid, as the recogniser wrote them (from the opt-in clear
    report) and as they were spoken (the example's ground truth), appear in no default output."""
    import re

    r = run("redact", EXAMPLE, "--out-dir", tmp_path / "d", "--progress", "off")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["call.redacted.json", "call.redacted.wav"]
    r = run("redact", EXAMPLE, "--out-dir", tmp_path / "p", "--unredacted-report", "--progress", "off")
    hidden = [s["text"] for s in json.loads((tmp_path / "p" / "call.pii.json").read_text())["spans"]]
    truth = [e["text"] for e in json.loads((shipped.path("example-truth")).read_text())["entities"]]
    shared = (tmp_path / "d" / "call.redacted.json").read_text() + r.stdout + r.stderr
    import jsonschema

    from deid_speech.schema import schemas

    jsonschema.validate(json.loads((tmp_path / "d" / "call.redacted.json").read_text()), schemas()["redacted.schema.json"])
    jsonschema.validate(json.loads((tmp_path / "p" / "call.pii.json").read_text()), schemas()["pii.schema.json"])
    for value in hidden + truth:
        for part in value.split(" | "):
            digits = re.sub(r"\D", "", part)
            assert part not in shared and (len(digits) < 4 or digits not in re.sub(r"\D", "", shared))


@pytest.mark.model
def test_no_pii_in_any_shared_output_of_a_real_redaction(tmp_path):
    """Every output but X.pii.json is grepped for what the redaction found (the clear
    report's span texts) and for the example's true names: none may appear, with
    placeholders (default) or surrogates."""
    src = tmp_path / "call.wav"
    shutil.copy(EXAMPLE, src)
    truth = json.loads((EXAMPLE.parent / "call.truth.json").read_text())
    names = [e["text"] for e in truth["entities"] if e["label"] == "PERSON"]
    for extra in ([], ["--text-op", "surrogate", "--overwrite"]):
        r = run("redact", src, "--format", "json,srt,vtt,txt", "--unredacted-report", *extra)
        assert r.returncode == 0, r.stderr
        pii = json.loads((tmp_path / "call.pii.json").read_text())
        assert (tmp_path / "call.pii.json").stat().st_mode & 0o077 == 0
        found = [s["text"] for s in pii["spans"]]
        assert len(found) >= 9 and names
        shared = {p.name: " ".join(p.read_text().lower().split()) for p in tmp_path.glob("call.redacted.*")
                  if p.suffix != ".wav"}
        assert set(shared) == {"call.redacted.json", "call.redacted.srt", "call.redacted.vtt", "call.redacted.txt"}
        for name, text in shared.items():
            for value in found + names:  # as whole words: "eye" is not in "keyed"
                v = " ".join(value.lower().split())
                assert not re.search(r"(?<![0-9a-z])" + re.escape(v) + r"(?![0-9a-z])", text), (extra, name, value)


def test_workers_flag_is_a_count_or_auto():
    from deid_speech.cli import parse_workers

    assert parse_workers("3") == 3 and parse_workers("auto") >= 1
    r = run("redact", "x.wav", "--workers", "0")
    assert r.returncode == 2 and "must be at least 1" in r.stderr
    r = run("redact", "x.wav", "--workers", "many")
    assert r.returncode == 2 and "expected a number or auto" in r.stderr


def _clips(tmp_path, spans):
    x, sr = sf.read(EXAMPLE, dtype="float32")
    out = []
    for i, (a, b) in enumerate(spans):
        p = tmp_path / "in" / f"clip{i}.wav"
        p.parent.mkdir(exist_ok=True)
        sf.write(p, x[int(a * sr):int(b * sr)], sr)
        out.append(p)
    return out


@pytest.mark.model
def test_workers_give_the_serial_outputs_in_the_serial_order(tmp_path):
    clips = _clips(tmp_path, [(0, 20), (20, 40), (40, 58)])
    serial = run("redact", *clips, "--out-dir", tmp_path / "serial", "--progress", "off")
    pooled = run("redact", *clips, "--out-dir", tmp_path / "pooled", "--workers", "2", "--progress", "off")
    assert serial.returncode == pooled.returncode == 0
    order = [ln.split(":")[0] for ln in serial.stdout.splitlines()]
    assert [ln.split(":")[0] for ln in pooled.stdout.splitlines()] == order and len(order) == 4
    for f in sorted((tmp_path / "serial").iterdir()):
        assert f.read_bytes() == (tmp_path / "pooled" / f.name).read_bytes(), f.name


@pytest.mark.model
def test_a_worker_that_cannot_load_its_models_fails_each_file_in_one_line(tmp_path):
    clips = _clips(tmp_path, [(0, 3), (3, 6)])
    r = run("redact", *clips, "--out-dir", tmp_path / "o", "--workers", "2", "--ner-model", tmp_path,
            "--progress", "off")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 2 and all("not a trained NER folder" in e for e in errors)
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())
