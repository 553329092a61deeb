"""`deid-speech serve`: a real uvicorn server on a loopback port, a real HTTP client, a
fake recogniser (a canned transcript) so the tests need no model."""
from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
import soundfile as sf

from factories import make_transcript, tone

httpx = pytest.importorskip("httpx")
uvicorn = pytest.importorskip("uvicorn")

from deid_speech.ner.patterns import PatternDetector  # noqa: E402
from deid_speech.pipeline import RedactConfig, Redactor  # noqa: E402
from deid_speech.serve import Service, create_app, read_token  # noqa: E402
from deid_speech.types import Recognition  # noqa: E402

TEXT = "hello my number is nine one two three four five six seven thank you"
TOKEN = "a-token-of-sixteen-chars"


class SlowAsr:
    name = "fake"

    def __init__(self, delay=0.0):
        self.delay = delay

    def recognize(self, audio, progress=None):
        time.sleep(self.delay)
        return Recognition(make_transcript(TEXT, word_dur=0.2, gap=0.05, t0=0.5))


def _wav(seconds=5.0) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, tone(seconds), 16000, format="WAV")
    return buf.getvalue()


class Server:
    def __init__(self, tmp_path: Path, delay=0.0, queue_size=8, max_upload_bytes=5 << 20, retention_s=3600.0, asr=None):
        redactor = Redactor(RedactConfig(verify=False), asr=asr or SlowAsr(delay), detectors=[PatternDetector()])
        self.work = tmp_path / "work"
        self.service = Service(redactor, self.work, queue_size, retention_s)
        app = create_app(self.service, TOKEN, max_upload_bytes, sync_timeout_s=30)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        for _ in range(100):
            if self.server.started:
                break
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{self.port}"
        self.auth = {"Authorization": f"Bearer {TOKEN}"}

    def post(self, data=None, files=None, params=None, headers=None, **kw):
        return httpx.post(f"{self.url}/v1/redact", data=data, files=files, params=params,
                          headers=self.auth if headers is None else headers, timeout=60, **kw)

    def stop(self):
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.service.close()


@pytest.fixture
def server(tmp_path):
    s = Server(tmp_path)
    yield s
    s.stop()


def test_sync_redaction_returns_outputs_without_the_pii(server):
    r = server.post(files={"file": ("john_tan_call.wav", _wav(), "audio/wav")}, data={"format": "srt"},
                    params={"sync": "true"})
    assert r.status_code == 200, r.text
    job = r.json()
    assert job["state"] == "done" and job["outputs"] == ["audio", "report", "srt"]
    report = httpx.get(f"{server.url}/v1/jobs/{job['id']}/report", headers=server.auth).json()
    assert [s["label"] for s in report["spans"]] == ["PHONE"] and "nine" not in report["redacted_transcript"]
    assert report["file"] != "john_tan_call.wav" and "john" not in json.dumps(report)
    audio = httpx.get(f"{server.url}/v1/jobs/{job['id']}/audio", headers=server.auth)
    assert audio.status_code == 200 and audio.content[:4] == b"RIFF"
    srt = httpx.get(f"{server.url}/v1/jobs/{job['id']}/srt", headers=server.auth).text
    assert "[PHONE_1]" in srt and "nine" not in srt
    assert not list(server.work.glob("*/input.*"))  # the upload is gone once read
    assert httpx.get(f"{server.url}/healthz").json()["ok"] is True


def test_auth_is_required_and_checked(server):
    files = {"file": ("a.wav", _wav(1.0), "audio/wav")}
    assert server.post(files=files, headers={}).status_code == 401
    assert server.post(files=files, headers={"Authorization": "Bearer wrong-token-xxxxxxxx"}).status_code == 401
    assert httpx.get(f"{server.url}/v1/jobs/abc").status_code == 401


def test_bad_uploads_are_refused_with_nothing_left_behind(tmp_path):
    s = Server(tmp_path, max_upload_bytes=100_000)
    try:
        assert s.post(files={"file": ("big.wav", _wav(10.0), "audio/wav")}).status_code == 413
        assert s.post(files={"file": ("a.exe", b"MZ...", "application/octet-stream")}).status_code == 400
        assert s.post(files={"file": ("a.wav", _wav(1.0), "audio/wav")}, data={"format": "pdf"}).status_code == 400
        assert s.post(content=b"not multipart", headers={**s.auth, "content-type": "audio/wav"}).status_code == 400
        bad = s.post(content=b"--xx\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\nRIFF",
                     headers={**s.auth, "content-type": "multipart/form-data; boundary=xx"})
        assert bad.status_code in (400, 202)
        assert s.post(files={"other": ("a.wav", b"x", "audio/wav")}).status_code == 400
        r = s.post(files={"file": ("broken.wav", b"RIFF not audio at all", "audio/wav")}, params={"sync": "true"})
        job = r.json()
        assert r.status_code == 422 and job["state"] == "failed" and job["error"] and "broken" not in job["error"]
        assert httpx.get(f"{s.url}/v1/jobs/{job['id']}/audio", headers=s.auth).status_code == 409
        time.sleep(0.3)
        leftovers = [p for p in s.work.rglob("*") if p.is_file()]
        assert leftovers == [], leftovers
    finally:
        s.stop()


def test_concurrent_jobs_and_a_full_queue(tmp_path):
    s = Server(tmp_path, delay=0.4, queue_size=2)
    try:
        codes = []

        def send():
            codes.append(s.post(files={"file": ("a.wav", _wav(2.0), "audio/wav")}).status_code)

        threads = [threading.Thread(target=send) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert codes.count(429) >= 1 and codes.count(202) >= 2
        ids = list(s.service.jobs)
        deadline = time.time() + 30
        while time.time() < deadline and any(s.service.jobs[i].state != "done" for i in ids):
            time.sleep(0.1)
        assert all(httpx.get(f"{s.url}/v1/jobs/{i}", headers=s.auth).json()["state"] == "done" for i in ids)
    finally:
        s.stop()


def test_a_client_that_disconnects_mid_upload_leaves_nothing(server):
    body = _wav(4.0)
    head = (b"--bb\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n"
            b"Content-Type: audio/wav\r\n\r\n")
    with socket.create_connection(("127.0.0.1", server.port)) as c:
        c.sendall(b"POST /v1/redact HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode()
                  + b"\r\nContent-Type: multipart/form-data; boundary=bb\r\nContent-Length: "
                  + str(len(head) + len(body) + 10).encode() + b"\r\n\r\n" + head + body[: len(body) // 2])
        time.sleep(0.3)
    time.sleep(0.5)
    assert [p for p in server.work.rglob("*")] == [] and server.service.jobs == {}


def test_finished_jobs_expire(tmp_path):
    s = Server(tmp_path, retention_s=0.0)
    try:
        first = s.post(files={"file": ("a.wav", _wav(1.0), "audio/wav")}, params={"sync": "true"}).json()
        s.post(files={"file": ("b.wav", _wav(1.0), "audio/wav")}, params={"sync": "true"})
        assert httpx.get(f"{s.url}/v1/jobs/{first['id']}", headers=s.auth).status_code == 404
        assert not (s.work / first["id"]).exists()
    finally:
        s.stop()


def test_token_rules(tmp_path, monkeypatch):
    from deid_speech.errors import DeidError

    monkeypatch.setenv("DEID_SPEECH_TOKEN", "short")
    with pytest.raises(DeidError, match="at least 16"):
        read_token(None)
    (tmp_path / "t").write_text(TOKEN + "\n")
    assert read_token(tmp_path / "t") == TOKEN
    monkeypatch.delenv("DEID_SPEECH_TOKEN")
    from deid_speech.cli import main

    assert main(["serve", "--host", "0.0.0.0", "--work-dir", str(tmp_path / "w")]) == 1


def test_requests_may_set_the_operators_and_labels(server, caplog):
    import logging

    caplog.set_level(logging.INFO, logger="deid_speech")
    r = server.post(files={"file": ("jane_doe_0412.wav", _wav(), "audio/wav")}, params={"sync": "true"},
                    data={"mode": "silence", "text_op": "mask", "labels": "PHONE,NRIC", "padding": "0.1"})
    job = r.json()
    assert r.status_code == 200 and job["state"] == "done", r.text
    report = httpx.get(f"{server.url}/v1/jobs/{job['id']}/report", headers=server.auth).json()
    assert report["labels"] == ["PHONE", "NRIC"] and report["operators"]["default"]["audio"] == "silence"
    assert "****" in report["redacted_transcript"] and "nine" not in report["redacted_transcript"]
    plain = server.post(files={"file": ("a.wav", _wav(), "audio/wav")}, params={"sync": "true"}).json()
    report = httpx.get(f"{server.url}/v1/jobs/{plain['id']}/report", headers=server.auth).json()
    assert "[PHONE_1]" in report["redacted_transcript"]  # the next request is back to the server's options
    for bad in ({"mode": "scream"}, {"labels": "PHONE,SSN"}, {"padding": "9"}, {"label_op": "PHONE=louder"}):
        assert server.post(files={"file": ("a.wav", _wav(1.0), "audio/wav")}, data=bad).status_code == 400, bad
    logged = " ".join(rec.getMessage() for rec in caplog.records)
    assert job["id"] in logged and "jane" not in logged and "nine" not in logged  # ids and states only


@pytest.mark.parametrize("flags, says", [
    (["--port", "99999"], "--port"), (["--port", "-1"], "--port"),
    (["--max-upload-mb", "-1"], "--max-upload-mb"), (["--max-upload-mb", "0"], "--max-upload-mb"),
    (["--queue-size", "0"], "--queue-size"), (["--queue-size", "-2"], "--queue-size"),
    (["--retention", "-1"], "--retention"), (["--retention", "nan"], "--retention"),
    (["--sync-timeout", "-1"], "--sync-timeout"),
    (["--work-dir", "{file}"], "not a folder"), (["--token-file", "{latin1}"], "not UTF-8"),
])
def test_bad_serve_flags_are_one_line_errors(tmp_path, monkeypatch, capsys, flags, says):
    import deid_speech
    from deid_speech.cli import main

    def started(*a, **k):
        raise AssertionError("the server started (or loaded its models) with a bad flag")

    monkeypatch.setattr(deid_speech, "Redactor", started)
    monkeypatch.setattr(uvicorn, "run", started)
    monkeypatch.setattr(uvicorn.Server, "run", started)
    (tmp_path / "file").write_text("a user's file\n")
    (tmp_path / "latin1").write_bytes(b"\xe9t\xe9-a-token-of-sixteen-chars\n")
    names = {"{file}": str(tmp_path / "file"), "{latin1}": str(tmp_path / "latin1")}
    flags = [names.get(f, f) for f in flags]
    work = [] if "--work-dir" in flags else ["--work-dir", str(tmp_path / "w")]
    assert main(["serve", *work, *flags]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("deid-speech: error:") and says in err[0], err
    assert (tmp_path / "file").read_text() == "a user's file\n"


def test_two_file_parts_are_refused_with_nothing_left_behind(server):
    for second in ("b.flac", "b.wav"):
        r = server.post(files=[("file", ("a.wav", _wav(1.0), "audio/wav")), ("file", (second, _wav(1.0), "audio/wav"))],
                        params={"sync": "true"})
        assert r.status_code == 400 and "one 'file'" in r.json()["detail"], r.text
    assert [p for p in server.work.rglob("*")] == [] and server.service.jobs == {}


class BrokenAsr:
    name = "broken"

    def recognize(self, audio, progress=None):
        raise RuntimeError("a bug, not the input's fault")


def test_a_sync_job_that_fails_inside_is_a_500(tmp_path):
    s = Server(tmp_path, asr=BrokenAsr())
    try:
        r = s.post(files={"file": ("a.wav", _wav(1.0), "audio/wav")}, params={"sync": "true"})
        job = r.json()
        assert r.status_code == 500 and job["state"] == "failed" and job["error"] == "RuntimeError", r.text
        assert httpx.get(f"{s.url}/v1/jobs/{job['id']}", headers=s.auth).json()["state"] == "failed"
    finally:
        s.stop()


def test_finished_jobs_expire_on_time_with_no_new_job(tmp_path):
    s = Server(tmp_path, retention_s=1.0)
    try:
        job = s.post(files={"file": ("a.wav", _wav(1.0), "audio/wav")}, params={"sync": "true"}).json()
        assert job["state"] == "done" and (s.work / job["id"]).exists()
        time.sleep(2.5)
        assert not (s.work / job["id"]).exists()  # deleted with no request at all
        assert httpx.get(f"{s.url}/v1/jobs/{job['id']}", headers=s.auth).status_code == 404
    finally:
        s.stop()


def test_start_up_removes_the_job_folders_an_earlier_server_left(tmp_path):
    work = tmp_path / "work"
    killed = work / uuid.uuid4().hex  # a server killed mid-job: the raw upload and a partial output
    (killed / "out").mkdir(parents=True)
    (killed / "input.wav").write_bytes(_wav(1.0))
    (killed / "out" / "input.redacted.wav").write_bytes(b"RIFF")
    (work / uuid.uuid4().hex).mkdir()  # an upload that had just begun
    (work / "notes.txt").write_text("mine")  # not the server's: kept
    (work / "recordings").mkdir()
    (work / "recordings" / "input.wav").write_bytes(b"RIFF")
    (work / ("f" * 32)).mkdir()
    (work / ("f" * 32) / "input.wav").write_bytes(b"RIFF")
    (work / ("f" * 32) / "thesis.tex").write_text("mine")
    s = Server(tmp_path)
    try:
        left = sorted(str(p.relative_to(work)) for p in work.rglob("*"))
        assert left == ["f" * 32, f"{'f' * 32}/input.wav", f"{'f' * 32}/thesis.tex", "notes.txt",
                        "recordings", "recordings/input.wav"]
    finally:
        s.stop()


SERVE = """
import sys, time
import deid_speech
from factories import make_transcript
from deid_speech.cli import main
from deid_speech.ner.patterns import PatternDetector
from deid_speech.pipeline import RedactConfig, Redactor
from deid_speech.types import Recognition


class WindowedAsr:  # a long decoding, window after window, as Whisper's
    name = "fake"

    def recognize(self, audio, progress=None):
        for i in range(200):
            time.sleep(0.05)
            if progress:
                progress(i, 200)
        return Recognition(make_transcript("hello there", word_dur=0.2, gap=0.05, t0=0.5))


deid_speech.Redactor = lambda config: Redactor(RedactConfig(verify=False), asr=WindowedAsr(),
                                               detectors=[PatternDetector()])
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_server_cleanly_and_deletes_every_job(tmp_path, sig):
    import deid_speech

    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("mine")
    (tmp_path / "serve.py").write_text(SERVE)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    paths = [str(Path(deid_speech.__file__).parents[1]), str(Path(__file__).parent)]
    proc = subprocess.Popen([sys.executable, str(tmp_path / "serve.py"), "serve", "--port", str(port),
                             "--work-dir", str(work), "--no-verify"], stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": ":".join(paths)})
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                httpx.get(f"{url}/healthz", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        ids = [httpx.post(f"{url}/v1/redact", files={"file": ("a.wav", _wav(2.0), "audio/wav")}).json()["id"]
               for _ in range(3)]
        waited = []
        waiter = threading.Thread(target=lambda: waited.append(httpx.post(
            f"{url}/v1/redact", params={"sync": "true"}, files={"file": ("b.wav", _wav(2.0), "audio/wav")}, timeout=30)))
        waiter.start()
        deadline = time.time() + 10
        while time.time() < deadline and (httpx.get(f"{url}/healthz").json()["queued"] < 3 or httpx.get(
                f"{url}/v1/jobs/{ids[0]}").json()["state"] != "running"):
            time.sleep(0.05)
        assert len(list(work.glob("*/input.wav"))) == 4  # one running, three waiting (one of them synchronously)
        proc.send_signal(sig)
        assert proc.wait(timeout=15) == 0  # the running job is cut short at its next window
        waiter.join(timeout=5)
    finally:
        proc.kill()
        err = proc.stderr.read()
    assert "Traceback" not in err and "terminate called" not in err, err
    assert waited and waited[0].status_code == 503 and waited[0].json()["state"] == "failed", waited
    assert [str(p.relative_to(work)) for p in work.rglob("*")] == ["notes.txt"]
