"""``deid-speech ingest SOURCE --out-dir DIR``: a resumable batch over a recording archive.

SOURCE is a folder (searched recursively, as ``redact`` does) or a list of paths: a
``.csv`` whose first column (or a ``path`` column) names the files, or a ``.jsonl`` of
``{"path": ...}`` (or ``"audio"``) objects; relative paths are relative to the list.

The ledger, ``DIR/ingest-ledger.sqlite``, records each input by its absolute path (symbolic
links resolved): its size, mtime and SHA-256, its state (``done`` with the SHA-256 of every
output, or ``failed`` with the one-line reason), the options it was redacted with and the
number of attempts. A run:

* skips an input that is ``done`` and unchanged (same size and mtime; or, after a touch,
  the same SHA-256) and whose outputs are all there with the recorded hashes;
* redoes an input that changed since, whose outputs were removed or altered, or that an
  interrupted run left unfinished (its earlier outputs are replaced);
* redoes a ``done`` input that was redacted with other options (those that change the
  outputs: ``--format``, the operators, ``--labels``, the models, ...);
* leaves ``failed`` inputs alone unless ``--retry-failed``;
* never writes over a file it does not own: an output path that exists and that the ledger
  does not record as this input's (another archive's, or what ``redact`` wrote there) fails
  that input with a one-line reason unless ``--overwrite``. An input keeps the output names
  the ledger records for it; a new one is named as ``redact`` would, keeping its extension
  ("x.flac.redacted.flac") where another input has "x.redacted.*".

The ledger is written after an input's outputs are complete (each written atomically, the
JSON report last), so a kill at any moment leaves nothing marked done that is not; an
audio output without its JSON is unfinished by the same rule as in ``redact``.
"""
from __future__ import annotations

import csv
import json
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from deid_speech.audio import display_name  # text SQLite and any terminal take: non-UTF-8 bytes as \xff escapes
from deid_speech.errors import DeidError
from deid_speech.models import sha256

LEDGER = "ingest-ledger.sqlite"
SCHEMA = """CREATE TABLE IF NOT EXISTS files (
    source TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, sha256 TEXT,
    state TEXT NOT NULL, outputs TEXT, error TEXT, attempts INTEGER NOT NULL DEFAULT 0, updated REAL, options TEXT)"""


@dataclass(frozen=True)
class Entry:
    source: str
    size: int
    mtime_ns: int
    sha256: str | None
    state: str
    outputs: dict
    error: str | None
    attempts: int
    options: dict | None = None  # what it was redacted with (:func:`options_of`); None: not recorded


def options_of(config, formats: tuple[str, ...], unredacted_report: bool) -> dict[str, str]:
    """What an input is redacted with, as far as it changes the outputs: every field of the
    RedactConfig (the operators one by one) but where the verifier decodes, the formats, and
    whether the clear report is written. The hash operator's key is not among them: it is
    never written anywhere."""
    from dataclasses import fields

    opts: dict[str, str] = {}
    for f in fields(config):
        value = getattr(config, f.name)
        if f.name == "redact":
            opts.update({f"redact.{g.name}": repr(getattr(value, g.name)) for g in fields(value) if g.repr})
        elif f.name != "verify_in_helper":
            opts[f.name] = repr(value)
    return {**opts, "format": repr(sorted(formats)), "unredacted_report": repr(bool(unredacted_report))}


def changed_options(before: dict | None, now: dict) -> list[str]:
    """The options (as flags) that differ between a recorded redaction and this run; none
    where nothing was recorded (a ledger from before options were) or for an option that
    did not exist then."""
    names = {"e2e_model": "--model", "fast_asr": "--fast-asr"}
    changed = [k for k in now if before and k in before and before[k] != now[k]]
    flags = [("the operators (--mode, --text-op, --label-op, padding, --merge-gap, --config)" if k.startswith("redact.")
              else names.get(k, "--" + k.replace("_", "-"))) for k in changed]
    return list(dict.fromkeys(flags))


def key(f: Path) -> str:
    """An input's key in the ledger: its absolute path, symbolic links resolved, so that
    "arch", "./arch" and "/data/arch" (or another working folder) name the same rows."""
    return display_name(str(f.resolve()))


class Ledger:
    """The SQLite ledger of one output folder (autocommit: each update is durable at once)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            self.db = sqlite3.connect(str(self.path), isolation_level=None, timeout=30)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute(SCHEMA)
            if "options" not in {r[1] for r in self.db.execute("PRAGMA table_info(files)")}:  # an older ledger
                self.db.execute("ALTER TABLE files ADD COLUMN options TEXT")
            self._make_absolute()
        except sqlite3.DatabaseError as e:
            raise DeidError(f"{self.path}: not a usable ingest ledger ({e})") from None

    def _make_absolute(self) -> None:
        """Rows of a ledger written before keys were absolute: their relative paths (the
        input's, its outputs') are taken from the current folder, where that run most
        likely was, when the input is there; other rows are left as they are."""
        rows = self.db.execute("SELECT source, outputs, updated FROM files").fetchall()
        old = [(s, json.loads(o or "{}"), u) for s, o, u in rows
               if not os.path.isabs(s) or not all(map(os.path.isabs, json.loads(o or "{}")))]
        if not old:
            return
        self.db.execute("BEGIN IMMEDIATE")
        try:
            for source, outputs, updated in old:
                if not Path(source).is_file():
                    continue
                new = key(Path(source))
                if new != source:
                    there = self.db.execute("SELECT updated FROM files WHERE source = ?", (new,)).fetchone()
                    if there is not None:  # both spellings were recorded: the later row stays
                        self.db.execute("DELETE FROM files WHERE source = ?",
                                        (source if (there[0] or 0) >= (updated or 0) else new,))
                        if (there[0] or 0) >= (updated or 0):
                            continue
                outputs = {str(Path(p).resolve()): h for p, h in outputs.items()}
                self.db.execute("UPDATE files SET source = ?, outputs = ? WHERE source = ?",
                                (new, json.dumps(outputs), source))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def get(self, source: str) -> Entry | None:
        row = self.db.execute("SELECT source, size, mtime_ns, sha256, state, outputs, error, attempts, options "
                              "FROM files WHERE source = ?", (source,)).fetchone()
        if row is None:
            return None
        return Entry(row[0], row[1], row[2], row[3], row[4], json.loads(row[5] or "{}"), row[6], row[7],
                     json.loads(row[8]) if row[8] else None)

    def record(self, source: str, size: int, mtime_ns: int, digest: str | None, state: str,
               outputs: dict | None = None, error: str | None = None, options: dict | None = None) -> None:
        self.db.execute(
            "INSERT INTO files (source, size, mtime_ns, sha256, state, outputs, error, attempts, updated, options) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(source) DO UPDATE SET size = excluded.size, "
            "mtime_ns = excluded.mtime_ns, sha256 = excluded.sha256, state = excluded.state, "
            "outputs = excluded.outputs, error = excluded.error, attempts = files.attempts + (excluded.state = 'running'), "
            "updated = excluded.updated, options = excluded.options",
            (source, size, mtime_ns, digest, state, json.dumps(outputs or {}), error and display_name(error),
             int(state == "running"), time.time(), json.dumps(options) if options is not None else None))

    def owners(self) -> dict[str, str]:
        """Every output path the ledger records (absolute), with the input it belongs to."""
        return {p: source for source, outputs in self.db.execute("SELECT source, outputs FROM files")
                for p in json.loads(outputs or "{}")}

    def disown(self, paths: set[str], source: str) -> None:
        """``source`` takes ``paths`` over (``--overwrite``): other inputs no longer own them,
        so their outputs are no longer complete (they are redone only with ``--overwrite``)."""
        for other, outputs in self.db.execute("SELECT source, outputs FROM files WHERE source != ?",
                                              (source,)).fetchall():
            outputs = json.loads(outputs or "{}")
            if paths & set(outputs):
                self.db.execute("UPDATE files SET outputs = ? WHERE source = ?",
                                (json.dumps({p: h for p, h in outputs.items() if p not in paths}), other))

    def counts(self) -> dict[str, int]:
        return dict(self.db.execute("SELECT state, COUNT(*) FROM files GROUP BY state").fetchall())

    def close(self) -> None:
        self.db.close()


def read_source(source: Path) -> tuple[list[Path], list[tuple[Path, str]], dict[Path, Path]]:
    """(audio files, skipped with why, the root each file's output tree mirrors)."""
    from deid_speech.pipeline import collect_inputs

    if source.is_dir() or source.suffix.lower() not in (".csv", ".jsonl"):
        files, skipped, roots = collect_inputs([str(source)])
        return files, skipped + _broken_links([source]), roots
    paths: list[str] = []
    try:
        if source.suffix.lower() == ".jsonl":
            from deid_speech.manifest import iter_objects

            for n, row in iter_objects(source):
                p = row.get("path", row.get("audio"))
                if not isinstance(p, str):
                    raise DeidError(f"{source}:{n}: no 'path' (or 'audio') string")
                paths.append(p)
        else:
            with open(source, newline="", encoding="utf-8") as fh:
                rows = [r for r in csv.reader(fh) if r and r[0].strip()]
            col = rows[0].index("path") if rows and "path" in rows[0] else 0
            start = 1 if rows and rows[0][col].strip().lower() in ("path", "file", "audio") else 0
            paths = [r[col].strip() for r in rows[start:] if len(r) > col]
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise DeidError(f"{source}: cannot read the list of files ({e})") from None
    if not paths:
        raise DeidError(f"{source}: lists no files")
    resolved = [str(Path(p).expanduser() if Path(p).expanduser().is_absolute() else source.parent / p) for p in paths]
    files, skipped, roots = collect_inputs(resolved)
    return files, skipped + _broken_links(sorted({r for r in roots.values()})), roots


def _broken_links(folders: list[Path]) -> list[tuple[Path, str]]:
    """Symbolic links to nothing in ``folders`` (which the search for audio passes over):
    listed as skipped, as every other file that is not redacted."""
    return [(x, "a symbolic link to a file that is not there") for folder in folders
            for x in sorted(folder.rglob("*")) if x.is_symlink() and not x.exists()]


def unreadable(files: list[Path]) -> tuple[list[Path], list[tuple[Path, str]]]:
    """(the inputs there is a file to read for; the others, with why): a list may name a file
    that is gone (each file comes once: :func:`deid_speech.pipeline.collect_inputs` drops repeats)."""
    good, bad = [], []
    for f in files:
        try:
            if f.is_file():
                good.append(f)
            else:
                bad.append((f, "no such file" if not f.exists() and not f.is_symlink() else
                            "a symbolic link to a file that is not there" if not f.exists() else "not a file"))
        except OSError as e:
            bad.append((f, f"cannot read it ({e.strerror or e})"))
    return good, bad


def _outputs_intact(entry: Entry) -> bool:
    return any(p.endswith(".redacted.json") for p in entry.outputs) and \
        all(Path(p).is_file() and sha256(Path(p)) == h for p, h in entry.outputs.items())


def output_names(files: list[Path], folders: dict[Path, Path], owners: dict[str, str]) -> set[Path]:
    """The inputs whose output names keep their extension ("x.flac.redacted.flac"): one the
    ledger records with such names; a new one whose "x.redacted.json" another input with
    another extension has, in the ledger or earlier in this run (as ``redact`` names "x.wav"
    and "x.flac" of one run). An input keeps the names it was given first, whatever is added
    to the archive later, so a report never ends up beside another input's audio."""
    from deid_speech.pipeline import output_paths

    taken: dict[str, set[str]] = {}
    for p, source in owners.items():
        if p.endswith(".redacted.json"):
            taken.setdefault(p, set()).add(Path(source).suffix.lower())
    full: set[Path] = set()
    for f in files:
        plain, whole = (str(output_paths(f, folders[f], x)[1].resolve()) for x in (False, True))
        if owners.get(whole) == key(f):
            full.add(f)
        elif owners.get(plain) != key(f):
            suffixes = taken.setdefault(plain, set())
            if suffixes and f.suffix and f.suffix.lower() not in suffixes:
                full.add(f)
            suffixes.add(f.suffix.lower())
    return full


def not_ours(f: Path, folder: Path, full_name: bool, owners: dict[str, str]) -> str | None:
    """Why ``f`` may not be redacted into ``folder``: an output path of it is there and the
    ledger does not record it as ``f``'s (another input's, or a file ingest did not write)."""
    from deid_speech.pipeline import every_output, occupied

    for p in every_output(f, folder, full_name):
        owner = owners.get(str(p.resolve()))
        if owner != key(f) and occupied(p):
            whose = f"the ledger has it as {owner}'s" if owner else "ingest did not write it here"
            return f"{f}: {p} already exists and is not this input's ({whose}); use --overwrite to replace it"
    return None


def decide(ledger: Ledger, f: Path, retry_failed: bool,
           options: dict | None = None) -> tuple[str, str, tuple[int, int, str | None]]:
    """(``skip`` | ``redo``, why, (size, mtime_ns, sha256 or None if not computed)).
    ``options``: this run's (:func:`options_of`); a done input redacted with others is redone."""
    st = f.stat()
    entry = ledger.get(key(f))
    if entry is None:
        return "redo", "new", (st.st_size, st.st_mtime_ns, None)
    digest = None
    same = entry.size == st.st_size and entry.mtime_ns == st.st_mtime_ns
    if not same and entry.sha256:  # touched, or changed: the hash decides
        digest = sha256(f)
        same = digest == entry.sha256
    if not same:
        return "redo", "changed since the last run", (st.st_size, st.st_mtime_ns, digest)
    if entry.state == "done":
        if not _outputs_intact(entry):
            return "redo", "outputs missing or altered", (st.st_size, st.st_mtime_ns, digest)
        changed = changed_options(entry.options, options or {})
        if changed:
            return "redo", f"redacted before with other {', '.join(changed)}", (st.st_size, st.st_mtime_ns, digest)
        return "skip", "done", (st.st_size, st.st_mtime_ns, digest)
    if entry.state == "failed" and not retry_failed:
        return "skip", f"failed before ({entry.error}); --retry-failed to try again", (st.st_size, st.st_mtime_ns,
                                                                                       digest)
    return "redo", "unfinished" if entry.state != "failed" else "retrying", (st.st_size, st.st_mtime_ns, digest)


def run(args) -> int:
    """The ``ingest`` command: plan from the ledger, redact what is to do (``--workers``),
    record each result; exit 1 if any input of this run failed."""
    import sys

    from deid_speech.batch import InProcess, Job, RayPool, WorkerPool
    from deid_speech.cli import redact_config
    from deid_speech.pipeline import Redactor, every_output, occupied, output_collisions, output_folders, planned_outputs

    out = args.out_dir
    if out.exists() and not out.is_dir():
        raise DeidError(f"--out-dir {out} is a file, not a folder")
    if not args.source.exists():
        raise DeidError(f"{args.source}: no such folder or list of files")
    if args.address and args.engine != "ray":
        raise DeidError("--address is a Ray cluster's: use it with --engine ray")
    config = redact_config(args)  # a bad option fails before any work
    options = options_of(config, args.format, args.unredacted_report)
    files, skipped_inputs, roots = read_source(args.source)
    files, bad = unreadable(files)
    for f, why in skipped_inputs:
        print(display_name(f"skipped: {f} ({why})"), file=sys.stderr)
    for f, why in bad:
        print(display_name(f"error: {f}: {why}"), file=sys.stderr)
    out.mkdir(parents=True, exist_ok=True)
    ledger = Ledger(out / LEDGER)
    try:
        folders = output_folders(files, out, roots)
        owners = ledger.owners()
        full = output_names(files, folders, owners)
        refused = output_collisions(files, folders, full)
        inputs = {f.resolve() for f in files}
        todo, done_before, failed_before, failed = [], 0, 0, len(bad)
        for f in files:
            try:
                action, why, (size, mtime, digest) = decide(ledger, f, args.retry_failed, options)
                if action != "skip":
                    digest = digest or sha256(f)
            except OSError as e:  # unreadable: this input fails, the others go on
                print(display_name(f"error: {f}: cannot read it ({e.strerror or e})"), file=sys.stderr)
                failed += 1
                continue
            if action == "skip":
                entry = ledger.get(key(f))
                if digest is not None and entry is not None:  # touched, same content: remember the new mtime
                    ledger.record(key(f), size, mtime, digest, entry.state, entry.outputs, entry.error, entry.options)
                done_before += why == "done"
                failed_before += why != "done"
                if why != "done":
                    print(display_name(f"skipped: {f}: {why}"), file=sys.stderr)
                continue
            problem = refused.get(f) or (None if args.overwrite else not_ours(f, folders[f], f in full, owners))
            if problem:  # nothing written, nothing recorded: the next run checks again
                print(display_name(f"error: {problem}"), file=sys.stderr)
                failed += 1
                continue
            # the outputs are this input's before any is written: a kill mid-write leaves them its own
            plan = {str(p.resolve()) for p in planned_outputs(f, folders[f], f in full, args.format,
                                                              args.unredacted_report)}
            claimed = plan | {str(p.resolve()) for p in every_output(f, folders[f], f in full) if occupied(p)}
            ledger.disown(claimed, key(f))
            if why.startswith("redacted before with other"):
                print(display_name(f"{f}: {why}: redoing it"))
            ledger.record(key(f), size, mtime, digest, "running", dict.fromkeys(claimed), options=options)
            todo.append((f, size, mtime, digest, claimed))
        jobs = [Job(f, folders[f], inputs, None, args.unredacted_report, f in full, args.format)
                for f, *_ in todo]
        workers = min(args.workers, len(jobs))
        if not jobs:
            pool = InProcess(None)  # nothing to do: no model is loaded
        elif args.engine == "ray":
            pool = RayPool(config, workers, args.address)
        else:
            pool = WorkerPool(config, workers) if workers > 1 else InProcess(Redactor(config))
        try:
            results = pool.redact_jobs(jobs)
            ok = 0
            for (f, size, mtime, digest, claimed), (good, msg) in zip(todo, results):
                print(display_name(msg), file=sys.stdout if good else sys.stderr)
                if good:
                    outputs = {str(p.resolve()): sha256(p) for p in planned_outputs(
                        f, folders[f], f in full, args.format, args.unredacted_report) if p.is_file()}
                    ledger.record(key(f), size, mtime, digest, "done", outputs, options=options)
                    ok += 1
                else:
                    left = dict.fromkeys(p for p in claimed if occupied(Path(p)))  # a removal that failed
                    ledger.record(key(f), size, mtime, digest, "failed", left,
                                  error=msg.removeprefix("error: ").split("\n")[0], options=options)
                    failed += 1
        finally:
            pool.close()
        print(f"{len(files) + len(bad)} input(s): {ok} redacted now, {done_before} done before, {failed} failed now, "
              f"{failed_before} failed before or skipped; ledger {out / LEDGER}")
        return 1 if failed else 0
    finally:
        ledger.close()
