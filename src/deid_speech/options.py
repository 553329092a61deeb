"""Command-line options declared once, as dataclass fields, with ``--config FILE`` (TOML).

    @dataclass(frozen=True)
    class Opts:
        out: Path = field(metadata={"help": "output folder"})  # no default: required
        epochs: int = field(default=3, metadata={"help": "passes over the data"})
        device: str = field(default="cpu", metadata={"choices": ("cpu", "cuda")})
        resume: bool = True  # --resume / --no-resume

    add_options(parser, Opts)          # --out, --epochs, --device, --resume/--no-resume, --config
    opts = build(parser.parse_args(argv), Opts)

A field's value comes from its flag if given, else from the ``--config`` file (keys are
field names), else from its default. Field types: str, int, float, bool, Path, and
``X | None`` of those. An unknown key or a value of the wrong type in the file, or a
missing required value, is a one-line :class:`DeidError`.
"""
from __future__ import annotations

import argparse
import dataclasses
import tomllib
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from deid_speech.errors import DeidError

_KEYS = "_config_keys"  # namespace attribute: {field name: (type, choices)} of every key a --config file may set


class _Default:
    """An argparse default that says "not given on the command line"; shows as its value."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __str__(self) -> str:
        return str(self.value)


class _Bool(argparse.BooleanOptionalAction):
    def __init__(self, *args: Any, help: str | None = None, **kw: Any) -> None:
        super().__init__(*args, **kw)  # help set after: Python versions differ in what they append to it
        self.help = help


def _base_type(tp: Any) -> type:
    """``int`` for ``int`` and ``int | None``."""
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        tp = next(a for a in typing.get_args(tp) if a is not type(None))
    return tp


def add_options(parser: argparse.ArgumentParser, cls: type, *, defaults: dict[str, Any] | None = None,
                exclude: Iterable[str] = ()) -> None:
    """A flag ``--field-name`` for each field of the dataclass ``cls`` (but ``exclude``),
    and ``--config FILE`` once. ``defaults`` replaces field defaults for this parser."""
    hints, defaults, exclude = typing.get_type_hints(cls), defaults or {}, set(exclude)
    keys = dict(parser.get_default(_KEYS) or {})
    for f in dataclasses.fields(cls):
        if f.name in exclude:
            continue
        tp, flag = _base_type(hints[f.name]), "--" + f.name.replace("_", "-")
        if f.name in defaults:
            default = defaults[f.name]
        elif f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = dataclasses.MISSING
        help_ = f.metadata.get("help", "")
        if default is dataclasses.MISSING:
            help_ = (help_ + " " if help_ else "") + "(required)"
        elif default is not None:
            help_ = (help_ + " " if help_ else "") + "(default %(default)s)"
        kw: dict[str, Any] = {"dest": f.name, "default": _Default(default), "help": help_}
        if tp is bool:
            parser.add_argument(flag, action=_Bool, **kw)
        else:
            parser.add_argument(flag, type=tp, choices=f.metadata.get("choices"), **kw)
        keys[f.name] = (tp, f.metadata.get("choices"))
    if not parser.get_default(_KEYS):
        parser.add_argument("--config", type=Path, metavar="FILE",
                            help="TOML file of option values (keys: the long option names with _ for -); "
                                 "flags override it")
    parser.set_defaults(**{_KEYS: keys})


def _config(path: Path | None, known: dict[str, tuple[type, Any]]) -> dict[str, Any]:
    """The ``--config`` file's values, checked and converted (all keys, before any is used)."""
    if path is None:
        return {}
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as e:
        raise DeidError(f"--config {path}: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise DeidError(f"--config {path}: not valid TOML ({e})") from None
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise DeidError(f"--config {path}: unknown option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return {k: _check(path, k, v, *known[k]) for k, v in data.items()}


def _check(path: Path, key: str, value: Any, tp: type, choices: Any) -> Any:
    ok = {bool: isinstance(value, bool), int: isinstance(value, int) and not isinstance(value, bool),
          float: isinstance(value, int | float) and not isinstance(value, bool)}.get(tp, isinstance(value, str))
    if not ok:
        raise DeidError(f"--config {path}: {key} must be {tp.__name__}, got {value!r}")
    if choices and value not in choices:
        raise DeidError(f"--config {path}: {key} must be one of {', '.join(map(str, choices))}, got {value!r}")
    return tp(value)


def build(args: argparse.Namespace, cls: type, **extra: Any) -> Any:
    """An instance of ``cls`` from ``args`` (flags, then the ``--config`` file, then
    defaults); ``extra`` sets fields that have no flag. A ValueError of ``cls`` becomes a
    DeidError."""
    known = getattr(args, _KEYS, {})
    path = getattr(args, "config", None)
    config, values = _config(path, known), dict(extra)
    for f in dataclasses.fields(cls):
        v = getattr(args, f.name, None)
        if f.name not in known or not isinstance(v, _Default):
            if f.name in known:
                values[f.name] = v
            continue
        if f.name in config:
            values[f.name] = config[f.name]
        elif v.value is dataclasses.MISSING:
            raise DeidError(f"--{f.name.replace('_', '-')} is required (as a flag or in --config)")
        else:
            values[f.name] = v.value
    try:
        return cls(**values)
    except ValueError as e:
        raise DeidError(str(e)) from None
