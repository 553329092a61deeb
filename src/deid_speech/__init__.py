"""deid-speech: offline speech de-identification.

The public API::

    from deid_speech import Redactor, RedactConfig, RedactOptions, load_audio, save_audio

    redactor = Redactor(RedactConfig())            # the default cascade; models load once
    result = redactor.redact(load_audio("call.wav"))
    save_audio(result.audio, "call.redacted.wav")
    print(result.redacted_transcript)              # "[PERSON_1] speaking, my IC is [NRIC_1] ..."

``import deid_speech`` stays light: the names above are imported on first use (PEP 562),
so importing the package loads neither numpy nor torch nor any model.
"""
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

__version__ = "0.2.0"

# public name -> (module, attribute)
_LAZY = {
    "Redactor": ("deid_speech.pipeline", "Redactor"),
    "RedactConfig": ("deid_speech.pipeline", "RedactConfig"),
    "RedactResult": ("deid_speech.pipeline", "RedactResult"),
    "redact_file": ("deid_speech.pipeline", "redact_file"),
    "RedactOptions": ("deid_speech.redact", "RedactOptions"),
    "Operator": ("deid_speech.redact", "Operator"),
    "Audio": ("deid_speech.audio", "Audio"),
    "load_audio": ("deid_speech.audio", "load"),
    "save_audio": ("deid_speech.audio", "save"),
    "DeidError": ("deid_speech.errors", "DeidError"),
    "LABELS": ("deid_speech.types", "LABELS"),
    "EntitySpan": ("deid_speech.types", "EntitySpan"),
    "Span": ("deid_speech.types", "Span"),
    "Transcript": ("deid_speech.types", "Transcript"),
    "Word": ("deid_speech.types", "Word"),
    "parse_tagged": ("deid_speech.types", "parse_tagged"),
    "render_tagged": ("deid_speech.types", "render_tagged"),
}
__all__ = ["LABELS", "Audio", "DeidError", "EntitySpan", "Operator", "RedactConfig", "RedactOptions", "RedactResult",
           "Redactor", "Span", "Transcript", "Word", "load_audio", "parse_tagged", "redact_file", "render_tagged",
           "save_audio"]

if TYPE_CHECKING:  # for type checkers and IDEs; never executed
    from deid_speech.audio import Audio
    from deid_speech.audio import load as load_audio
    from deid_speech.audio import save as save_audio
    from deid_speech.errors import DeidError
    from deid_speech.pipeline import RedactConfig, Redactor, RedactResult, redact_file
    from deid_speech.redact import Operator, RedactOptions
    from deid_speech.types import LABELS, EntitySpan, Span, Transcript, Word, parse_tagged, render_tagged


def __getattr__(name: str):
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'deid_speech' has no attribute {name!r}") from None
    value = getattr(import_module(module), attr)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
