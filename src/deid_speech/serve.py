"""``deid-speech serve``: redaction over HTTP (FastAPI + uvicorn; ``pip install 'deid-speech[server]'``).

* ``POST /v1/redact``: multipart form with one ``file`` (the audio; two are a 400) and optional ``format``
  (comma-separated srt,vtt,txt; the JSON report is always made) and the operator options
  of ``redact``: ``mode``, ``text_op``, ``label_op`` (repeatable), ``labels``, ``padding``,
  ``pad_before``, ``pad_after``, ``merge_gap``. A request that sets any of them starts from
  the built-in operator defaults, not from the server's flags; the models are the server's
  (``system``, ``asr_model`` and the rest are set when it starts, and not loaded again). Returns ``{"id", "state"}``
  (202); with ``?sync=true`` the request waits for the result (up to ``--sync-timeout``
  seconds; 202 if not done by then) and returns the job as ``GET /v1/jobs/{id}`` would,
  with 200 when done, 422 when it failed on its input, 500 on an internal failure.
* ``GET /v1/jobs/{id}``: ``{"id", "state": queued|running|done|failed, "error", "outputs"}``;
  ``GET /v1/jobs/{id}/audio|report|srt|vtt|txt``: the redacted outputs (409 until done).
* ``GET /healthz``; OpenAPI docs at ``/docs``.

The redaction options are the server's, set by the same flags as ``redact``. A bearer
token (``DEID_SPEECH_TOKEN`` or ``--token-file``) guards ``/v1``; without one the server
refuses to listen beyond loopback. Uploads are streamed into the work folder (never the
system temp folder), cut off at ``--max-upload-mb`` (413); a full queue answers 429; a
client that disconnects mid-upload leaves nothing behind; finished jobs are deleted after
``--retention`` seconds. SIGTERM or Ctrl-C cuts the running job short at its next decoding
window, fails the queued ones (503 to a client waiting with ``?sync=true``) and deletes every
job folder; a server that starts deletes those a killed one left in ``--work-dir`` (folders
of its own layout only). Logs carry job ids and states only: never file names, transcripts
or span texts.
"""
# no `from __future__ import annotations`: FastAPI reads the handlers' annotations at run time
import hmac
import logging
import math
import os
import queue
import re
import shutil
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from deid_speech.errors import DeidError

log = logging.getLogger(__name__)
FORMATS = ("srt", "vtt", "txt")
LOOPBACK = ("127.0.0.1", "::1", "localhost")
JOB_FOLDER = re.compile(r"[0-9a-f]{32}")  # a job's folder: uuid4().hex, holding input.* and out/ only
SHUT_DOWN = "the server shut down before the job finished"


class _ShutDown(Exception):
    """Raised in the worker between two decoding windows once the server is stopping."""


@dataclass
class Job:
    id: str
    folder: Path
    formats: tuple[str, ...]
    state: str = "queued"
    error: str | None = None
    status: int = 200  # what ?sync=true answers once it is over: 422 the input is not audio we can redact,
    # 500 a bug, 503 the server shut down first
    outputs: dict = field(default_factory=dict)  # kind -> path
    config: object = None  # this request's RedactConfig (operators, labels), or None: the server's
    finished: float | None = None
    done: threading.Event = field(default_factory=threading.Event)

    def as_dict(self) -> dict:
        return {"id": self.id, "state": self.state, "error": self.error, "outputs": sorted(self.outputs)}


class Service:
    """Jobs, a bounded queue, one worker thread that redacts with one Redactor and one that
    deletes finished jobs once ``retention_s`` has passed. Job folders an earlier server left
    in ``work_dir`` are deleted when it starts; :meth:`close` deletes this one's."""

    def __init__(self, redactor, work_dir: Path, queue_size: int = 8, retention_s: float = 3600.0):
        self.redactor, self.work = redactor, Path(work_dir)
        self.work.mkdir(parents=True, exist_ok=True)
        if n := self.remove_job_folders():
            log.info("removed %d job folder(s) an earlier server left in the work folder", n)
        self.jobs: dict[str, Job] = {}
        self.queue: queue.Queue[Job] = queue.Queue(maxsize=queue_size)
        self.retention_s = retention_s
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.worker = threading.Thread(target=self._run, name="deid-speech-worker", daemon=True)
        self.worker.start()
        self.sweeper = threading.Thread(target=self._sweep, name="deid-speech-sweeper", daemon=True)
        self.sweeper.start()

    def with_config(self, config):
        """A Redactor for one request's operators and labels that shares this server's
        loaded recogniser, detectors and verifier (no model is loaded again)."""
        from deid_speech.pipeline import Redactor

        r = self.redactor
        return Redactor(config, asr=r.asr, detectors=r.detectors, verifier=r.verifier)

    def request_config(self, fields: dict[str, list[str]]):
        """The server's RedactConfig with this request's operator options, or None when it
        sets none; a bad value is a DeidError (400)."""
        import argparse
        from dataclasses import replace

        from deid_speech.cli import _labels, _padding, redact_options
        from deid_speech.redact import AUDIO_OPS, TEXT_OPS

        keys = ("mode", "text_op", "label_op", "labels", "padding", "pad_before", "pad_after", "merge_gap")
        if not any(k in fields for k in keys):
            return None
        one = {k: fields[k][-1].strip() for k in keys if k in fields and k != "label_op"}
        for k, allowed in (("mode", AUDIO_OPS), ("text_op", TEXT_OPS)):
            if k in one and one[k] not in allowed:
                raise DeidError(f"{k} must be one of {', '.join(allowed)}")
        try:
            num = {k: _padding(one[k]) for k in ("padding", "pad_before", "pad_after", "merge_gap") if k in one}
            labels = _labels(one["labels"]) if "labels" in one else self.redactor.config.labels
        except argparse.ArgumentTypeError as e:
            raise DeidError(str(e)) from None
        ns = argparse.Namespace(config=None, mode=one.get("mode"), text_op=one.get("text_op"),
                                label_op=fields.get("label_op", []), padding=num.get("padding"),
                                pad_before=num.get("pad_before"), pad_after=num.get("pad_after"),
                                merge_gap=num.get("merge_gap"))
        base = self.redactor.config
        return replace(base, redact=redact_options(ns), labels=labels)

    def new_job(self, formats: tuple[str, ...]) -> Job:
        job_id = uuid.uuid4().hex
        job = Job(job_id, self.work / job_id, formats)
        job.folder.mkdir()
        return job

    def submit(self, job: Job) -> bool:
        """Queue ``job``; False when the queue is full or the server is stopping."""
        with self.lock:  # the worker empties the queue under it when stopping: nothing is queued after that
            if self.stopping.is_set():
                return False
            try:
                self.queue.put_nowait(job)
            except queue.Full:
                return False
            self.jobs[job.id] = job
        log.info("job %s queued", job.id)
        return True

    def discard(self, job: Job) -> None:
        shutil.rmtree(job.folder, ignore_errors=True)

    def remove_job_folders(self) -> int:
        """Delete every job folder in the work folder (its layout tells them from anything
        else there, which stays): how many."""
        n = 0
        for d in self.work.iterdir():
            if (JOB_FOLDER.fullmatch(d.name) and d.is_dir() and not d.is_symlink()
                    and all(f.name == "out" or f.name.startswith("input.") for f in d.iterdir())):
                shutil.rmtree(d, ignore_errors=True)
                n += 1
        return n

    def close(self) -> None:
        """Stop: the running job is stopped at its next decoding window (or finished), the
        queued ones never run, and every job's folder is deleted, uploads and results."""
        self.stopping.set()
        self.worker.join()
        self.sweeper.join()
        with self.lock:
            jobs, self.jobs = list(self.jobs.values()), {}
        for j in jobs:
            self.discard(j)
        self.remove_job_folders()  # and those of uploads still streaming in
        log.info("stopped; %d job(s) cut short; every job folder deleted", sum(j.error == SHUT_DOWN for j in jobs))

    def _check_stopping(self, *_) -> None:
        if self.stopping.is_set():
            raise _ShutDown()

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                job = self.queue.get(timeout=0.1)
            except queue.Empty:
                continue
            self._redact(job)
        with self.lock:
            while not self.queue.empty():
                job = self.queue.get_nowait()
                self.discard(job)
                job.error, job.status, job.state = SHUT_DOWN, 503, "failed"
                job.done.set()
                log.info("job %s failed (shut down)", job.id)

    def _redact(self, job: Job) -> None:
        from deid_speech.pipeline import format_path, redact_file

        job.state = "running"
        src = next(job.folder.glob("input.*"))
        try:
            redactor = self.redactor if job.config is None else self.with_config(job.config)
            audio_out, json_out, _ = redact_file(redactor, src, job.folder / "out", {src.resolve()},
                                                 progress=self._check_stopping, formats=job.formats + ("json",))
            job.outputs = {"audio": audio_out, "report": json_out,
                           **{f: format_path(json_out, f) for f in job.formats}}
            job.state = "done"
        except _ShutDown:
            job.error, job.status, job.state = SHUT_DOWN, 503, "failed"
        except Exception as e:  # one line, no traceback, no partial output (redact_file fails closed)
            job.error = str(e).replace(str(src), "input") if isinstance(e, DeidError) else type(e).__name__
            job.status = 422 if isinstance(e, DeidError) else 500
            job.state = "failed"
        finally:
            src.unlink(missing_ok=True)  # the upload holds the PII: gone once read
            job.finished = time.time()
            job.done.set()
            log.info("job %s %s", job.id, job.state)

    def _sweep(self) -> None:
        tick = min(1.0, max(self.retention_s / 2, 0.05))
        while not self.stopping.wait(tick):
            self.expire()

    def expire(self) -> None:
        """Delete the jobs finished more than ``retention_s`` ago."""
        now = time.time()
        with self.lock:
            old = [j for j in self.jobs.values() if j.finished is not None and now - j.finished > self.retention_s]
            for j in old:
                del self.jobs[j.id]
        for j in old:
            self.discard(j)
            log.info("job %s expired", j.id)


def create_app(service: Service, token: str | None = None, max_upload_bytes: int = 200 << 20,
               sync_timeout_s: float = 120.0):
    from fastapi import FastAPI, HTTPException, Request
    from fastapi.responses import FileResponse, JSONResponse
    from python_multipart.multipart import MultipartParser, parse_options_header
    from starlette.requests import ClientDisconnect

    from deid_speech.audio import EXTENSIONS, TRANSCODED

    app = FastAPI(title="deid-speech", description="Offline speech de-identification over HTTP.")

    def check_auth(request: Request) -> None:
        if token is None:
            return
        got = request.headers.get("authorization", "")
        if not hmac.compare_digest(got.encode(), f"Bearer {token}".encode()):
            raise HTTPException(401, "missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"})

    def get_job(job_id: str) -> Job:
        service.expire()  # on time, even between two sweeps
        job = service.jobs.get(job_id)
        if job is None:
            raise HTTPException(404, "no such job (unknown, or deleted after the retention time)")
        return job

    @app.get("/healthz")
    def healthz() -> dict:
        return {"ok": True, "queued": service.queue.qsize(), "jobs": len(service.jobs)}

    @app.post("/v1/redact", status_code=202)
    async def redact(request: Request, sync: bool = False):
        check_auth(request)
        ctype, params = parse_options_header(request.headers.get("content-type", ""))
        if ctype != b"multipart/form-data" or b"boundary" not in params:
            raise HTTPException(400, "send multipart/form-data with a 'file' part")
        length = request.headers.get("content-length")
        if length and length.isdigit() and int(length) > max_upload_bytes:
            raise HTTPException(413, f"upload larger than {max_upload_bytes >> 20} MB")
        job = service.new_job(())
        state: dict = {"name": None, "suffix": None, "fh": None, "fields": {}, "headers": {}, "hf": b"", "hv": b"",
                       "buf": b""}

        def on_part_begin():
            state.update(name=None, headers={}, buf=b"")

        def on_header_field(data, start, end):
            state["hf"] += data[start:end]

        def on_header_value(data, start, end):
            state["hv"] += data[start:end]

        def on_header_end():
            state["headers"][state["hf"].lower()] = state["hv"]
            state["hf"] = state["hv"] = b""

        def on_headers_finished():
            _, disp = parse_options_header(state["headers"].get(b"content-disposition", b""))
            state["name"] = disp.get(b"name", b"").decode("utf-8", "replace")
            if state["name"] == "file":
                if state["suffix"] is not None:  # a second file would replace or outlive the first
                    raise HTTPException(400, "send one 'file' part per request")
                suffix = Path(disp.get(b"filename", b"").decode("utf-8", "replace")).suffix.lower()
                state["suffix"] = suffix
                if suffix not in EXTENSIONS + TRANSCODED:
                    raise ValueError(f"unsupported audio type {suffix or '(none)'!r}")
                state["fh"] = open(job.folder / f"input{suffix}", "wb")  # never the client's name or path

        def on_part_data(data, start, end):
            if state["name"] == "file" and state["fh"] is not None:
                state["fh"].write(data[start:end])
            elif len(state["buf"]) < 1024:
                state["buf"] += data[start:end]

        def on_part_end():
            if state["name"] == "file" and state["fh"] is not None:
                state["fh"].close()
            elif state["name"]:
                state["fields"].setdefault(state["name"], []).append(state["buf"].decode("utf-8", "replace"))

        parser = MultipartParser(params[b"boundary"], {
            "on_part_begin": on_part_begin, "on_header_field": on_header_field, "on_header_value": on_header_value,
            "on_header_end": on_header_end, "on_headers_finished": on_headers_finished,
            "on_part_data": on_part_data, "on_part_end": on_part_end})
        total = 0
        try:
            async for chunk in request.stream():
                total += len(chunk)
                if total > max_upload_bytes:
                    raise HTTPException(413, f"upload larger than {max_upload_bytes >> 20} MB")
                parser.write(chunk)
            parser.finalize()
        except ClientDisconnect:
            service.discard(job)
            log.info("upload for job %s abandoned by the client", job.id)
            return JSONResponse({"detail": "client disconnected"}, status_code=400)
        except HTTPException:
            service.discard(job)
            raise
        except Exception as e:  # a malformed body or part
            service.discard(job)
            raise HTTPException(400, f"malformed upload ({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
        finally:
            if state["fh"] is not None and not state["fh"].closed:
                state["fh"].close()
        if not list(job.folder.glob("input.*")) or not next(job.folder.glob("input.*")).stat().st_size:
            service.discard(job)
            raise HTTPException(400, "no audio in the 'file' part")
        formats = tuple(f.strip().lower() for f in (state["fields"].get("format") or [""])[-1].split(",") if f.strip())
        if bad := [f for f in formats if f not in FORMATS]:
            service.discard(job)
            raise HTTPException(400, f"unknown format(s) {', '.join(bad)}; choose from {', '.join(FORMATS)}")
        job.formats = tuple(dict.fromkeys(formats))
        try:
            job.config = service.request_config(state["fields"])
        except DeidError as e:
            service.discard(job)
            raise HTTPException(400, str(e)) from None
        if not service.submit(job):
            service.discard(job)
            if service.stopping.is_set():
                raise HTTPException(503, "the server is shutting down")
            raise HTTPException(429, "the queue is full; try again later", headers={"Retry-After": "30"})
        if sync:
            import asyncio

            await asyncio.get_running_loop().run_in_executor(None, job.done.wait, sync_timeout_s)
            return JSONResponse(job.as_dict(), status_code=job.status if job.done.is_set() else 202)
        return job.as_dict()

    @app.get("/v1/jobs/{job_id}")
    def job_state(job_id: str, request: Request) -> dict:
        check_auth(request)
        return get_job(job_id).as_dict()

    @app.get("/v1/jobs/{job_id}/{kind}")
    def job_output(job_id: str, kind: str, request: Request):
        check_auth(request)
        job = get_job(job_id)
        if kind not in ("audio", "report") + FORMATS:
            raise HTTPException(404, "outputs: audio, report, srt, vtt, txt")
        if job.state != "done":
            raise HTTPException(409, f"job is {job.state}" + (f": {job.error}" if job.error else ""))
        if kind not in job.outputs:
            raise HTTPException(404, f"this job made no {kind} (ask for it with format={kind})")
        path = Path(job.outputs[kind])
        return FileResponse(path, filename=f"redacted{''.join(path.suffixes[-1:])}")

    return app


def read_token(token_file: Path | None) -> str | None:
    if token_file is not None:
        try:
            token = token_file.read_text(encoding="utf-8").strip()
        except OSError as e:
            raise DeidError(f"--token-file {token_file}: {e.strerror or e}") from None
        except UnicodeDecodeError:
            raise DeidError(f"--token-file {token_file}: not UTF-8 text") from None
    else:
        token = os.environ.get("DEID_SPEECH_TOKEN", "").strip()
    if token and len(token) < 16:
        raise DeidError("the bearer token must be at least 16 characters")
    return token or None


def check_args(args) -> None:
    """The serve flags, checked before any model loads: a DeidError names the first bad one."""
    if not 1 <= args.port <= 65535:
        raise DeidError(f"--port must be between 1 and 65535 (got {args.port})")
    for flag, n in (("--max-upload-mb", args.max_upload_mb), ("--queue-size", args.queue_size)):
        if n < 1:
            raise DeidError(f"{flag} must be at least 1 (got {n})")
    for flag, s in (("--retention", args.retention), ("--sync-timeout", args.sync_timeout)):
        if not (math.isfinite(s) and s >= 0):
            raise DeidError(f"{flag} must be a number of seconds, 0 or more (got {s})")
    if args.work_dir.exists() and not args.work_dir.is_dir():
        raise DeidError(f"--work-dir {args.work_dir} is not a folder")
    try:
        args.work_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DeidError(f"--work-dir {args.work_dir}: {e.strerror or e}") from None


def run(args) -> int:
    """The ``serve`` command."""
    try:
        import uvicorn
    except ImportError:
        raise DeidError("deid-speech serve needs the server extra: pip install 'deid-speech[server]'") from None
    from deid_speech import Redactor
    from deid_speech.cli import redact_config

    check_args(args)
    token = read_token(args.token_file)
    if token is None and args.host not in LOOPBACK:
        raise DeidError(f"refusing to listen on {args.host} without a bearer token "
                        "(set DEID_SPEECH_TOKEN or --token-file)")
    service = Service(Redactor(redact_config(args)), args.work_dir, args.queue_size, args.retention)
    app = create_app(service, token, args.max_upload_mb << 20, args.sync_timeout)

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:  # SIGTERM, Ctrl-C: the jobs stop now, not after the queue
            service.stopping.set()
            super().handle_exit(sig, frame)

    try:
        Server(uvicorn.Config(app, host=args.host, port=args.port, log_level="warning")).run()
    except KeyboardInterrupt:  # SIGTERM or Ctrl-C once uvicorn has stopped (uvicorn.run swallows it too)
        pass
    finally:
        service.close()  # no upload and no unfinished output outlives the server
    return 0
