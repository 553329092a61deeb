"""Redacting a batch of files: one job, and the ways to run many (in this process, in
worker processes, on Ray actors). ``deid-speech redact`` and ``deid-speech ingest`` use it.

Every pool's ``redact_jobs(jobs)`` yields ``(success, the line to print)`` per job, in the
jobs' order, and never raises for a file that fails: that file's outputs are not written
(:func:`deid_speech.pipeline.redact_file` fails closed).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import NamedTuple

from deid_speech.errors import DeidError


class Job(NamedTuple):
    src: Path
    out_dir: Path | None
    inputs: set[Path]  # every input of the batch: no output may overwrite one
    refused: str | None  # why its outputs may not be written (they belong to another input), or None
    unredacted_report: bool = False
    full_name: bool = False
    formats: tuple[str, ...] = ("json",)


def redact_one(redactor, job: Job, progress=None) -> tuple[bool, str]:
    """Redact one file of a batch: (success, the line to print). Never raises."""
    from deid_speech.pipeline import redact_file, remove_stale_outputs

    t0 = time.perf_counter()
    f = job.src
    if job.refused is not None:  # its outputs belong to another input: touch nothing
        return False, f"error: {job.refused}"
    try:
        audio_out, _, result = redact_file(redactor, f, job.out_dir, job.inputs, progress=progress,
                                           unredacted_report=job.unredacted_report, full_name=job.full_name,
                                           formats=job.formats)
    except Exception as e:  # never a traceback, never a half-written or stale output
        problem = remove_stale_outputs(f, job.out_dir, job.inputs, job.full_name)
        why = str(e) if isinstance(e, DeidError) else f"unexpected failure ({type(e).__name__}: {e})"
        msg = f"error: {why}" if str(f) in why else f"error: {f}: {why}"  # every line names its file
        return False, msg + (f"; {problem}" if problem else "")
    msg = f"{f}: {len(result.spans)} span(s) redacted in {time.perf_counter() - t0:.1f}s -> {audio_out}"
    if result.uncovered:
        secs = sum(b - a for a, b in result.uncovered)
        what = "was beeped" if redactor.config.uncovered == "beep" else "was not checked for PII"
        msg += (f"\nwarning: {f}: {secs:.1f}s of speech-like audio has no transcribed words and "
                f"{what} (see uncovered_speech in the JSON)")
    if result.keypad:  # a number keyed in on the phone: no word names it, its tones give it away
        secs = sum(b - a for a, b in result.keypad)
        msg += f"\n{f}: keypad tones beeped: {len(result.keypad)} stretch(es), {secs:.1f}s (see keypad_tones in the JSON)"
    return True, msg


class InProcess:
    """One Redactor in this process, the jobs one after another."""

    def __init__(self, redactor):
        self.redactor = redactor

    def redact_jobs(self, jobs):
        return (redact_one(self.redactor, job) for job in jobs)

    def close(self) -> None:
        if self.redactor is not None:
            self.redactor.close()


class WorkerPool:
    """``workers`` processes, each with its own Redactor for ``config`` (models loaded once
    per process, in its initializer); results in the jobs' order."""

    def __init__(self, config, workers: int):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        config = one_process_each(config)
        self.config, self.workers = config, workers
        # spawn: a fresh interpreter per worker, never a fork of threads that hold model locks
        self._pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                         initializer=init_worker, initargs=(config,))

    def redact_jobs(self, jobs):
        return self._pool.map(worker_redact, jobs)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def one_process_each(config):
    """``config`` for a pool's worker: the pool gives each worker a core, so its verifier
    decodes in the worker itself, not in a helper process of its own."""
    from dataclasses import replace

    return replace(config, verify_in_helper=False)


_WORKER: dict = {}  # in a worker process (or Ray actor): its Redactor


def init_worker(config) -> None:
    import signal

    from deid_speech import Redactor

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; a file in hand is finished
    try:
        _WORKER["redactor"] = Redactor(config)
    except Exception as e:  # reported per file (one line each), never a broken pool's traceback
        _WORKER["error"] = str(e) if isinstance(e, DeidError) else f"{type(e).__name__}: {e}"


def worker_redact(job: Job) -> tuple[bool, str]:
    redactor = _WORKER.get("redactor")
    if redactor is None:
        return False, f"error: {job.src}: {_WORKER.get('error', 'the worker has no redactor')}"
    return redact_one(redactor, job)


class RayPool:
    """``workers`` Ray actors, each with its own Redactor (models loaded once per actor);
    ``map`` keeps the input order. An actor whose process dies is restarted and its task
    retried (``max_restarts``, ``max_task_retries``); outputs are written atomically and the
    ledger only by the driver, so a retry neither duplicates nor loses an output. Local by
    default (``ray.init()`` starts a one-machine cluster); ``address`` joins a cluster, whose
    nodes must see the inputs and ``--out-dir`` at the same paths (shared storage)."""

    def __init__(self, config, workers: int, address: str | None = None):
        try:
            import ray
        except ImportError:
            raise DeidError("--engine ray needs Ray: pip install 'deid-speech[ray]'") from None
        from ray.util import ActorPool

        self.ray = ray
        if address and address != "auto":
            _check_reachable(address)
        if not ray.is_initialized():
            try:
                # no --address: always a new local instance ("local"), never a cluster that happens
                # to run on this machine
                ray.init(address=address or "local", include_dashboard=False, log_to_driver=False,
                         **({} if address else {"num_cpus": workers}))
            except Exception as e:  # an unreachable cluster: one line
                raise DeidError(f"cannot start or reach Ray{f' at {address}' if address else ''}: "
                                f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
        actor = ray.remote(num_cpus=1, max_restarts=3, max_task_retries=3)(_RedactActor)
        self.actors = [actor.remote(one_process_each(config)) for _ in range(workers)]
        self.pool = ActorPool(self.actors)

    def redact_jobs(self, jobs):
        return self.pool.map(lambda a, job: a.redact.remote(job), jobs)

    def close(self) -> None:
        for a in self.actors:
            self.ray.kill(a)


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """A quick TCP check of ``host:port`` (or ``ray://host:port``): Ray itself keeps retrying
    an unreachable address for minutes."""
    import socket

    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise DeidError(f"--address {address}: expected host:port, ray://host:port or auto")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as e:
        raise DeidError(f"cannot reach Ray at {address} ({e.strerror or e})") from None


class _RedactActor:
    def __init__(self, config):
        init_worker(config)

    def redact(self, job: Job) -> tuple[bool, str]:
        return worker_redact(job)
