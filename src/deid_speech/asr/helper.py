"""A Whisper decoder in a helper process of its own, so that it decodes beside this process.

CTranslate2 seeds the temperature fallback's sampler from a process-wide seed, so two
decoders in one process take turns (``whisper._DECODING``) to give every audio the same
transcript whatever else the process decodes. On two cores that leaves one idle: tiny.en
decodes the 108 s benchmark call in 19.0 s on two threads and in 18.2 s on one. The
second opinion (``--verify``) therefore runs in a helper process, on the other core, while
the first decoder works here; the transcripts are the same bit for bit (the thread count
changes none of them: 15 of 15 checked, docs/results.md §0r).

The helper is ``python -m deid_speech.asr.helper``, started with :mod:`subprocess`, not
:mod:`multiprocessing`: a spawned child would import the caller's ``__main__`` again, which a
script that uses the library without an ``if __name__ == "__main__"`` guard does not survive.
Requests (the decoding options, then a float32 array and the dither seeds of its passes)
go to its stdin and results (one per pass) come back on its stdout, pickled, in order. The
helper dithers each pass itself, a slice at a time as the decoder reads it
(:class:`~deid_speech.audio.DitheredTrack`), so a long call waits in memory once.

On Linux the track need not cross the pipe at all: :func:`share` puts it in shared memory (a
memfd) that this process decodes from, and the helper maps the same pages, read-only; the
file descriptor goes over a Unix socket beside the pipe (``SCM_RIGHTS``). A 21-minute track is
78 MB, held once for both processes instead of once in each (docs/results.md §0aj). Where
memfds or descriptor passing are missing, the array goes through the pipe as before.

``submit(audio)`` starts a decoding and returns a handle whose ``result()`` waits for the
:class:`~deid_speech.types.Recognition`; ``recognize`` does both. A model that cannot be
loaded, a decoding that fails and a helper that dies all fail that result with a one-line
:class:`~deid_speech.errors.DeidError`, so the file fails closed.
"""
from __future__ import annotations

import os
import pickle
import socket
import threading

import numpy as np

from deid_speech.errors import DeidError

_SHARED: dict[int, tuple] = {}  # id(track) -> (weak reference to it, its memfd): tracks made by share()


def share(audio: np.ndarray) -> np.ndarray:
    """``audio`` (a mono track) copied into shared memory, read-only, for a
    :class:`HelperTranscriber` to map rather than receive through its pipe; ``audio`` itself
    where the system has no memfd (or the copy cannot be made). The memory is let go when
    the returned array, every view of it and the helper's mapping are gone."""
    import mmap
    import weakref

    audio = np.ascontiguousarray(audio, dtype=np.float32)
    if audio.ndim != 1 or not len(audio) or not hasattr(os, "memfd_create") or not hasattr(socket, "send_fds"):
        return audio
    try:
        fd = os.memfd_create("deid-speech-track", os.MFD_CLOEXEC)
    except OSError:
        return audio
    try:
        os.ftruncate(fd, audio.nbytes)
        track = np.frombuffer(mmap.mmap(fd, audio.nbytes), np.float32)
        track[:] = audio
    except (OSError, ValueError):
        os.close(fd)
        return audio
    track.flags.writeable = False  # the helper reads these pages while this process does: nobody writes
    key = id(track)
    _SHARED[key] = (weakref.ref(track), fd)
    weakref.finalize(track, _unshare, key, fd)
    return track


def _unshare(key: int, fd: int) -> None:
    if _SHARED.get(key, (None, fd))[1] == fd:
        _SHARED.pop(key, None)
    os.close(fd)


def _shared_fd(audio) -> int | None:
    """The memfd of a track made by :func:`share` (not of a view of it), else None."""
    entry = _SHARED.get(id(audio))
    return entry[1] if entry is not None and entry[0]() is audio else None


def _mapped(fd: int, n: int) -> np.ndarray:
    """The ``n`` samples of a shared track, mapped read-only (the helper's side)."""
    import mmap

    try:
        return np.frombuffer(mmap.mmap(fd, n * 4, access=mmap.ACCESS_READ), np.float32, count=n)
    finally:
        os.close(fd)


class Pending:
    """A decoding under way in the helper: ``result()`` waits for its Recognition (and
    gives the same one again when asked again). A handle dropped unasked (the file failed
    before its verification) tells the helper to discard its result when it comes."""

    def __init__(self, helper: HelperTranscriber, seq: int):
        self._helper, self._seq = helper, seq
        self._outcome: tuple[str, object] | None = None
        self.taken = False  # claimed: this process decodes it

    def result(self):
        if self._outcome is None:
            self._outcome = self._helper._result(self._seq)
        status, value = self._outcome
        if status != "ok":
            raise DeidError(value)
        return value

    def claim(self) -> bool:
        """Take this decoding back from the helper, if it has not begun it: True, and the
        helper will not decode it (its ``result()`` is then an error: the caller decodes it
        itself, and asked again, True again); False if the helper has begun it (or decoded it,
        or cannot be asked)."""
        if self._outcome is None and self._helper._claim(self._seq):
            self.taken, self._outcome = True, ("error", "this decoding was taken back from the helper")
        return self.taken

    def __del__(self):
        if self._outcome is None:
            try:
                self._helper._abandon(self._seq)
            except Exception:  # at interpreter exit
                pass


class HelperTranscriber:
    """A :class:`~deid_speech.asr.whisper.Transcriber` for ``options``, loaded and run in one
    helper process; decodings submitted from several threads queue there, in order.
    ``options`` may be a tuple (``--verifier A,B``): the helper loads each model, and pass k of
    :meth:`submit_passes` is decoded by the (k mod n)-th, the others' weights let go first on
    audio of a minute or more (:func:`~deid_speech.asr.whisper.take_turn`)."""

    def __init__(self, options):
        import os
        import subprocess
        import sys
        from pathlib import Path

        import deid_speech
        from deid_speech.asr.models import resolve_model

        self.options = options if isinstance(options, tuple) else (options,)  # the helper reads a tuple
        self.name = ",".join(resolve_model(o.model).name for o in self.options)  # a missing model fails here, in one line
        package_root = str(Path(deid_speech.__file__).resolve().parents[1])
        env = {"MALLOC_ARENA_MAX": "2",  # glibc: one decoding thread needs no per-thread arenas (-40 MB, same speed)
               **os.environ, "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)}
        # a Unix socket beside the pipe carries the memfds of shared tracks (share)
        self._sock, theirs = (socket.socketpair() if hasattr(socket, "send_fds") else (None, None))
        args = [str(theirs.fileno())] if theirs is not None else []
        try:
            self._proc = subprocess.Popen([sys.executable, "-m", "deid_speech.asr.helper", *args],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                          env=env, pass_fds=(theirs.fileno(),) if theirs is not None else ())
        finally:
            if theirs is not None:
                theirs.close()
        self._write = threading.Lock()
        self._read = threading.Lock()
        self._sent = self._received = 0
        self._done: dict[int, tuple[str, object]] = {}  # results read before their handle asked
        self._abandoned: set[int] = set()  # handles dropped unasked: their results are discarded
        self._cancel: set[int] = set()  # abandoned decodings the helper has not been told to skip yet
        self.skipped = 0  # decodings the helper skipped (abandoned, or a pass after a failed one)
        self._send(self.options)

    def _send(self, obj) -> None:
        try:
            pickle.dump(obj, self._proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise DeidError(f"the helper process decoding with {self.name} stopped") from None

    def submit(self, audio: np.ndarray) -> Pending:
        return self.submit_passes(audio, (0,))[0]

    def submit_passes(self, audio: np.ndarray, seeds: tuple[int, ...]) -> list[Pending]:
        """One decoding of ``audio`` per seed, the helper adding the dither of each seed
        itself, a slice at a time (:class:`deid_speech.audio.DitheredTrack`): the audio waits
        in the helper once, not once per pass; a track made by :func:`share` is mapped there,
        not sent."""
        seeds = tuple(int(k) for k in seeds)
        fd = _shared_fd(audio) if self._sock is not None else None
        with self._write:
            self._send_cancels()
            if fd is not None:  # the helper maps the track: its descriptor first, then the request
                try:
                    socket.send_fds(self._sock, [b"t"], [fd])
                except OSError:
                    raise DeidError(f"the helper process decoding with {self.name} stopped") from None
                self._send(("shared", len(audio), seeds))
            else:
                self._send((np.ascontiguousarray(audio, dtype=np.float32), seeds))
            first = self._sent + 1
            self._sent += len(seeds)
            return [Pending(self, first + i) for i in range(len(seeds))]

    def _result(self, seq: int) -> tuple[str, object]:
        """``("ok", Recognition)`` or ``("error", one line)`` for decoding ``seq``; the results
        before it are read and kept for their handles (or discarded, if abandoned)."""
        with self._read:
            while seq not in self._done:
                try:
                    got = pickle.load(self._proc.stdout)
                except Exception:  # EOF: the helper died (out of memory, killed)
                    return "error", f"the helper process decoding with {self.name} stopped"
                self._received += 1
                self.skipped += got[0] == "skipped"
                if got[0] == "claimed":  # this process decodes it (_claim): nobody asks for it here
                    continue
                if self._received in self._abandoned:
                    self._abandoned.discard(self._received)
                else:
                    self._done[self._received] = got
            return self._done.pop(seq)

    def _abandon(self, seq: int) -> None:
        self._abandoned.add(seq)
        if self._done.pop(seq, None) is not None:
            self._abandoned.discard(seq)
        elif seq > self._received:  # not decoded yet: the helper skips it
            self._cancel.add(seq)
            if self._write.acquire(blocking=False):  # not when this thread is sending (a handle collected
                try:  # inside submit_passes): then the next submit tells it
                    self._send_cancels()
                except DeidError:
                    pass  # the helper is gone: nothing to skip
                finally:
                    self._write.release()

    def _claim(self, seq: int) -> bool:
        """Ask the helper to leave decoding ``seq`` to this process: it answers on the socket,
        at once, whether it had begun it. A helper that cannot answer (no socket, or gone)
        keeps it."""
        if self._sock is None or seq <= self._received:
            return False
        with self._write:
            try:
                self._send_cancels()
                self._send(("claim", seq))
                return self._sock.recv(1) == b"1"  # the helper writes ("claimed", None) in its place
            except (DeidError, OSError):
                return False

    def _send_cancels(self) -> None:
        if self._cancel:
            seqs, self._cancel = tuple(sorted(self._cancel)), set()
            self._send(("cancel", seqs))

    def recognize(self, audio: np.ndarray, progress=None):
        return self.submit(audio).result()

    def share(self, audio: np.ndarray) -> np.ndarray:
        """``audio`` in memory this process and the helper share (:func:`share`): submitted,
        it is mapped by the helper instead of copied through the pipe."""
        return share(audio) if self._sock is not None else audio

    def close(self) -> None:
        """Let the helper finish what it holds and exit. Results nobody read are read here and
        dropped: a helper whose writes fill the pipe would otherwise never exit."""
        if self._proc.poll() is None:
            try:
                self._proc.stdin.close()
            except OSError:
                pass
            with self._read:
                try:
                    while self._proc.stdout.read(1 << 16):
                        pass
                except (OSError, ValueError):
                    pass
            self._proc.wait()
        if self._sock is not None:
            self._sock.close()

    def __del__(self):
        proc = getattr(self, "_proc", None)
        if proc is not None and proc.poll() is None:
            try:
                proc.stdin.close()  # EOF: the helper exits after its current decoding
            except Exception:
                pass


def main() -> None:
    """The helper: read the options, load the model (or models: pass k is decoded by the (k mod
    n)-th), then decode each array read from stdin, once per seed, and write ``("ok",
    Recognition)`` or ``("error", one line)`` to stdout, in order. A reader thread drains
    stdin, so the parent's writes never wait for a decoding, and a writer thread
    (:class:`ResultWriter`) fills stdout, so a decoding never waits for the parent to read the
    result before it. A decoding the parent abandoned (``("cancel", seqs)``: its file failed
    first) and the passes after a failed pass of the same audio (the file fails at that pass)
    are not decoded: ``("skipped", one line)``. Nor is one the parent claimed before it began
    (``("claim", seq)``, answered at once with one byte on the socket, ``1`` if taken):
    ``("claimed", None)``."""
    import queue
    import signal
    import sys

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # stdout carries results only
    options = pickle.load(inp)
    sock = socket.socket(fileno=int(sys.argv[1])) if len(sys.argv) > 1 else None  # shared tracks' memfds
    requests: queue.Queue = queue.Queue()
    cancelled: set[int] = set()  # numbers of decodings (1, 2, ... in the order sent) not to run
    claimed: set[int] = set()  # ... of those, the ones the parent decodes itself
    seq = 0  # the number of the last decoding begun (or skipped): a claim reads it under turn
    turn = threading.Lock()  # a claim and the start of a decoding: one at a time

    def read() -> None:
        while True:
            try:
                request = pickle.load(inp)
                # ("shared", samples, seeds): the track's memfd waits on the socket
                if isinstance(request[0], str) and request[0] == "shared":
                    _, fds, _, _ = socket.recv_fds(sock, 1, 1)
                    request = (_mapped(fds[0], request[1]), request[2])
            except Exception:  # EOF: the parent is done (or gone between a descriptor and its request)
                requests.put(None)
                return
            if isinstance(request[0], str) and request[0] == "claim":  # ("claim", seq): answered at once
                with turn:
                    taken = request[1] > seq and request[1] not in cancelled
                    if taken:
                        claimed.add(request[1])
                try:
                    sock.sendall(b"1" if taken else b"0")
                except OSError:  # the parent is gone
                    pass
            elif isinstance(request[0], str):  # ("cancel", seqs)
                with turn:
                    cancelled.update(request[1])
            else:
                requests.put(request)
            del request  # not held here while the next request is awaited: the decoding loop lets go of it

    threading.Thread(target=read, daemon=True).start()
    from deid_speech.asr.whisper import Transcriber, take_turn
    from deid_speech.audio import MODEL_RATE

    try:  # one model, or several taking turns by pass
        asrs, error = [Transcriber(o) for o in options], None
    except Exception as e:
        asrs, error = [], str(e) if isinstance(e, DeidError) else f"{type(e).__name__}: {e}"
    results = ResultWriter(out)
    try:
        while (request := requests.get()) is not None:
            audio, seeds = request
            failed = None
            for k in seeds:
                if results.broken.is_set():  # nobody reads any more: decode nothing for nobody
                    return
                with turn:
                    seq += 1
                    skip, taken = seq in cancelled, seq in claimed
                    cancelled.discard(seq)
                    claimed.discard(seq)
                if taken:
                    result = ("claimed", None)
                elif skip or failed:
                    result = ("skipped", failed or "abandoned")
                else:
                    asr = take_turn(asrs, k, len(audio) / MODEL_RATE) if asrs else None  # one model held on long audio
                    result = _decode(asr, error, audio, k)
                    if result[0] == "error":
                        failed = result[1]
                results.put(result)
            del audio, request  # freed before waiting for the next one, not held beside it
    finally:
        results.close()


class ResultWriter:
    """Results written to a pipe, in order, by a thread of their own: ``put`` never waits for
    the reader. A pipe holds 64 KiB, and one pass over a ten-minute call pickles to about
    110 KiB: written by the decoding loop itself, the first pass's result waited there until
    the parent had finished its own decoding and read it, and the second pass started only then
    (the ten-minute call's wall time: 171 s, of which 55 s waiting for the second pass;
    docs/results.md §0ab). ``close`` waits until everything put is written. If the reader is
    gone, or a result cannot be written, ``broken`` is set, the pipe is closed (the parent,
    if alive, sees the helper stop and fails that file in one line) and what is left is
    dropped."""

    def __init__(self, out):
        import queue

        self._out = out
        self._queue: queue.Queue = queue.Queue()
        self.broken = threading.Event()
        self._thread = threading.Thread(target=self._write, name="helper-results")
        self._thread.start()

    def put(self, result) -> None:
        self._queue.put(result)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()

    def _write(self) -> None:
        while (result := self._queue.get()) is not None:
            try:
                pickle.dump(result, self._out, protocol=pickle.HIGHEST_PROTOCOL)
                self._out.flush()
            except BaseException:  # the parent is gone, or a result that cannot be pickled
                self.broken.set()
                try:  # a half-written result must not be read as whole: end the stream here
                    self._out.close()
                except BaseException:
                    pass
                while self._queue.get() is not None:
                    pass
                return


def _decode(asr, error: str | None, audio: np.ndarray, k: int) -> tuple[str, object]:
    """One pass: ``("ok", Recognition)`` of ``audio`` with the dither of seed ``k``, dithered a
    slice at a time as the decoder reads it (the track may be shared, and is never written), or
    ``("error", one line)``."""
    from deid_speech.audio import DitheredTrack
    from deid_speech.types import Recognition

    try:
        if asr is None:
            raise DeidError(error)
        heard = audio if k == 0 else DitheredTrack(audio, k)
        return "ok", Recognition(asr.transcribe(heard))
    except DeidError as e:
        return "error", str(e)
    except Exception as e:
        return "error", f"the second decoder failed: {type(e).__name__}: {e}"


if __name__ == "__main__":
    main()
