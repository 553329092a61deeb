"""JSONL records, read and written in one place: seed splits, augmentation output and voiced
manifests.

One record type, :class:`Record`, covers them all; what a reader needs is asked for with
``need``:

* ``"text"``: ``text`` and ``entities`` (character offsets), or a ``tagged`` sentence that
  is parsed into both (augmentation output); a record with ``text`` and ``tagged`` but no
  ``entities`` takes them from ``tagged`` where it is that text with tags (a reference is
  held to more: :func:`check_entities`);
* ``"tagged"``: the tagged sentence itself (what is voiced);
* ``"audio"``: an audio file, resolved against the manifest's folder and made absolute;
  with ``check_audio`` it must exist.

Validation is strict and the same for every reader: a line that is not a JSON object, an
entity with an unknown label or offsets outside its text (or not on its own ``text``), times
that run backwards, a missing field, a repeated id: each is a one-line :class:`DeidError`
naming the file and line.
Every field is kept as read (``Record.raw``) and written back unchanged, in its order;
only a relative ``audio`` path becomes absolute.

:class:`JsonlWriter` appends records to a file that a job may be interrupted while writing:
on opening, a last line cut short is dropped (the file rewritten atomically; a bad line
before the last is an error, the file left as it is), the ids
already there are known (``done``), and each record is flushed to disk as it is written, so
a rerun resumes where the last one stopped.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deid_speech.errors import DeidError
from deid_speech.types import LABELS

SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")  # usable as a file name


@dataclass(frozen=True)
class Entity:
    label: str
    char_start: int
    char_end: int
    start: float | None = None  # seconds, in voiced manifests
    end: float | None = None

    @property
    def timed(self) -> bool:
        return self.start is not None and self.end is not None

    def to_dict(self) -> dict:
        d: dict[str, Any] = {"label": self.label, "char_start": self.char_start, "char_end": self.char_end}
        if self.timed:
            d.update(start=self.start, end=self.end)
        return d


@dataclass(frozen=True)
class Record:
    id: str | None  # None only where the file gave none and the reader asked for no default
    text: str | None = None
    entities: tuple[Entity, ...] = ()
    tagged: str | None = None
    audio: Path | None = None  # absolute
    words: tuple[dict, ...] = ()
    raw: dict = field(default_factory=dict)  # the object as read, every field in its order
    where: str = ""  # "file:line", for messages

    def to_dict(self) -> dict:
        """The object as read, with ``id`` set, ``audio`` absolute, and ``text`` and
        ``entities`` added where they were parsed from ``tagged``."""
        d = dict(self.raw)
        if self.id is not None and "id" not in d:
            d = {"id": self.id, **d}
        if self.audio is not None:
            d["audio"] = str(self.audio)
        if self.text is not None and "text" not in self.raw:
            d["text"] = self.text
            d["entities"] = [e.to_dict() for e in self.entities]
        return d


def _entity(e: Any, text: str, where: str) -> Entity:
    try:
        label, cs, ce = e["label"], e["char_start"], e["char_end"]
        if label not in LABELS or not (isinstance(cs, int) and isinstance(ce, int)) or not 0 <= cs < ce <= len(text):
            raise ValueError
        start, end = e.get("start"), e.get("end")
        if (start is None) != (end is None):
            raise ValueError
        if start is not None:
            start, end = float(start), float(end)
            if not 0 <= start < end:
                raise ValueError
    except (KeyError, TypeError, ValueError):
        raise DeidError(f"{where}: bad entity {json.dumps(e)[:80]} (need a label in {','.join(LABELS)}, "
                        "char_start < char_end inside the text, and start < end when timed)") from None
    if "text" in e and e["text"] != text[cs:ce]:
        raise DeidError(f"{where}: entity {label} at characters {cs}-{ce} is {text[cs:ce]!r} in the text, "
                        f"but its 'text' is {str(e['text'])[:60]!r}")
    return Entity(label, cs, ce, start, end)


def _tag_entities(text: str, tagged: str) -> tuple[Entity, ...] | None:
    """The entities of ``tagged``, where it is ``text`` with tags; None otherwise."""
    from deid_speech.types import parse_tagged

    try:
        plain, ents = parse_tagged(tagged)
    except ValueError:
        return None
    return tuple(Entity(e.label, e.char_start, e.char_end) for e in ents) if plain == text else None


def check_entities(r: Record) -> None:
    """Strict, for a reference (``eval``): the record says what its entities are, in an
    ``entities`` list (``[]``: none) or a ``tagged`` text that is its ``text`` with tags,
    and where it has both they agree. A one-line DeidError otherwise."""
    tags = _tag_entities(r.text, r.tagged) if r.text is not None and r.tagged is not None else None
    if "entities" not in r.raw and tags is None:
        raise DeidError(f"{r.where}: no 'entities'" + (
            " (a record without personal data says \"entities\": [])" if r.tagged is None
            else ", and its 'tagged' text is not its 'text' with tags"))
    key, tag_key = (sorted((e.label, e.char_start, e.char_end) for e in x) for x in (r.entities, tags or ()))
    if tags is not None and key != tag_key:
        label, a, b = (sorted(set(key) ^ set(tag_key)) or key)[0]
        raise DeidError(f"{r.where}: 'entities' disagree with the 'tagged' text (e.g. {label} {r.text[a:b]!r} "
                        f"at characters {a}-{b})")


def parse(row: dict, where: str, base: Path, need: tuple[str, ...] = ("text",), check_audio: bool = True,
          default_id: str | None = None) -> Record:
    """One JSON object as a :class:`Record` (see the module docstring for ``need``)."""
    text, tagged = row.get("text"), row.get("tagged")
    if tagged is not None and not isinstance(tagged, str):
        raise DeidError(f"{where}: 'tagged' is not a string")
    if "tagged" in need and tagged is None:
        raise DeidError(f"{where}: record has no 'tagged' text")
    entities: tuple[Entity, ...] = ()
    if text is None and tagged is not None and "text" in need:
        from deid_speech.types import parse_tagged

        try:
            text, ents = parse_tagged(tagged)
        except ValueError as exc:
            raise DeidError(f"{where}: bad tagged text ({exc})") from None
        entities = tuple(Entity(e.label, e.char_start, e.char_end) for e in ents)
    elif text is not None:
        if not isinstance(text, str) or not isinstance(row.get("entities", []), list):
            raise DeidError(f"{where}: 'text' must be a string and 'entities' a list")
        entities = tuple(_entity(e, text, where) for e in row.get("entities", []))
        if "entities" not in row and tagged is not None:  # not "no entities": those of the tagged text
            entities = _tag_entities(text, tagged) or ()
    elif "text" in need:
        raise DeidError(f"{where}: expected a record with 'text' and 'entities' (or 'tagged')")
    audio = None
    if "audio" in need or "audio" in row:
        if not isinstance(row.get("audio"), str):
            raise DeidError(f"{where}: record has no 'audio' file")
        audio = Path(row["audio"]).expanduser()
        audio = (audio if audio.is_absolute() else base / audio).resolve()
        if check_audio and not audio.is_file():
            raise DeidError(f"{where}: audio file {audio} not found")
    rid = row.get("id", default_id)
    if rid is not None and (not isinstance(rid, (str, int)) or rid == ""):
        raise DeidError(f"{where}: record has no usable 'id'")
    words = row.get("words", [])
    if not isinstance(words, list) or not all(isinstance(w, dict) for w in words):
        raise DeidError(f"{where}: 'words' must be a list of objects")
    return Record(None if rid is None else str(rid), text, entities, tagged, audio, tuple(words), dict(row), where)


def iter_objects(path: Path):
    """``(line number, object)`` of each non-blank line; a one-line DeidError for a line that
    is not a JSON object, or a file that is not UTF-8."""
    try:
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DeidError(f"{path}:{n}: not JSON ({exc.msg})") from None
                if not isinstance(row, dict):
                    raise DeidError(f"{path}:{n}: not a JSON object")
                yield n, row
    except UnicodeDecodeError:
        raise DeidError(f"{path}: not UTF-8 text") from None


def read(path: str | os.PathLike, need: tuple[str, ...] = ("text",), limit: int | None = None,
         check_audio: bool = True, safe_ids: bool = False, nonempty: bool = False,
         line_ids: bool = True) -> list[Record]:
    """The records of a JSONL file (a folder means its ``manifest.jsonl``), validated.

    A record without an id gets ``<file stem>-<line>`` (None without ``line_ids``);
    repeated ids are an error; with ``safe_ids`` they must also be usable as file names."""
    p = Path(path)
    if p.is_dir() and (p / "manifest.jsonl").is_file():
        p = p / "manifest.jsonl"
    if not p.is_file():
        raise DeidError(f"{p}: no such file")
    out: list[Record] = []
    seen: set[str] = set()
    for n, row in iter_objects(p):
        if limit is not None and len(out) >= limit:
            break
        r = parse(row, f"{p}:{n}", p.parent, need, check_audio, default_id=f"{p.stem}-{n}" if line_ids else None)
        if r.id is None:
            out.append(r)
            continue
        if r.id in seen:
            raise DeidError(f"{p}:{n}: id {r.id!r} is repeated")
        if safe_ids and not SAFE_ID.match(r.id):
            raise DeidError(f"{p}:{n}: id {r.id!r} is not usable as a file name (letters, digits, . _ - only)")
        seen.add(r.id)
        out.append(r)
    if nonempty and not out:
        raise DeidError(f"{p}: no records")
    return out


def read_resumable(path: str | os.PathLike, record: Callable[[Any], bool] | None = None,
                   what: str = "a record") -> list[dict]:
    """The objects of a JSONL file that a job appends to. A last line cut by an interruption
    (no newline) is dropped from the file (rewritten atomically); what precedes it is kept.
    Any other line that is not JSON, or an object that ``record`` refuses (not ``what``), is a
    one-line DeidError, and the file is left as it is: not a file this job wrote."""
    from deid_speech.audio import write_text_atomic

    p = Path(path)
    if not p.exists():
        return []
    if p.is_dir():
        raise DeidError(f"{p}: is a folder, not a JSONL file")
    rows, clean = [], True
    try:
        with open(p, encoding="utf-8") as fh:
            lines = [(n, line) for n, line in enumerate(fh, 1) if line.strip()]
    except UnicodeDecodeError:
        raise DeidError(f"{p}: not UTF-8 text") from None
    for k, (n, line) in enumerate(lines):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            if k < len(lines) - 1 or line.endswith("\n"):  # a line cut short has no newline
                raise DeidError(f"{p}:{n}: not JSON (and not a last line cut short); the file is left as it is") from None
            clean = False
            break
        if record is not None and not record(row):
            raise DeidError(f"{p}:{n}: not {what}; the file is left as it is")
        rows.append(row)
    if not clean:
        write_text_atomic(p, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return rows


class JsonlWriter:
    """Append records to ``path``, resuming: ``rows`` and ``done`` (their ids) hold what an
    earlier run wrote; each :meth:`write` is flushed and synced before it returns."""

    def __init__(self, path: str | os.PathLike, key: str = "id"):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rows = read_resumable(self.path)
        self.key = key
        self.done = {str(r.get(key)) for r in self.rows if isinstance(r, dict)}
        self._fh = open(self.path, "a", encoding="utf-8")

    def write(self, row: dict | Record) -> None:
        d = row.to_dict() if isinstance(row, Record) else row
        self._fh.write(json.dumps(d, ensure_ascii=False) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self.rows.append(d)
        self.done.add(str(d.get(self.key)))

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def write(path: str | os.PathLike, rows: list[dict | Record]) -> None:
    """Write a whole JSONL file atomically."""
    from deid_speech.audio import write_text_atomic

    write_text_atomic(Path(path), "".join(
        json.dumps(r.to_dict() if isinstance(r, Record) else r, ensure_ascii=False) + "\n" for r in rows))
