"""JSON Schemas of the two reports ``redact`` writes, built from the code's own types.

* ``X.redacted.json`` (shared with the redacted audio): no clear text anywhere; spans are
  :class:`~deid_speech.types.Span` without ``text``, words are ``text`` (the word or its
  placeholder), ``start``, ``end``.
* ``X.pii.json`` (``--unredacted-report``, mode 0600): the clear transcript, spans with
  their text and every :class:`~deid_speech.types.Word`.

    python -m deid_speech.schema docs/schema     # writes redacted.schema.json, pii.schema.json

A test checks the published files equal what this module builds and that real outputs
validate against them.
"""
from __future__ import annotations

import dataclasses
import json
import sys
import typing
from pathlib import Path

from deid_speech.types import LABELS, Span, Word

_JSON_TYPES = {float: "number", int: "integer", str: "string", bool: "boolean"}


def _object(cls: type, drop: tuple[str, ...] = (), extra: dict | None = None) -> dict:
    """An object schema with one property per dataclass field of ``cls`` (minus ``drop``)."""
    hints = typing.get_type_hints(cls)
    props = {f.name: {"type": _JSON_TYPES[hints[f.name]]} for f in dataclasses.fields(cls) if f.name not in drop}
    if "label" in props:
        props["label"] = {"type": "string", "enum": list(LABELS)}
    props.update(extra or {})
    return {"type": "object", "properties": props, "required": sorted(props), "additionalProperties": False}


def _operators() -> dict:
    """:class:`~deid_speech.redact.RedactOptions` as reported: every operator, never the key."""
    from deid_speech.redact import AUDIO_OPS, TEXT_OPS, Operator

    op = _object(Operator, extra={"audio": {"enum": list(AUDIO_OPS)}, "text": {"enum": list(TEXT_OPS)}})
    props = {"default": op, "merge_gap": {"type": "number"}, "keyed": {"type": "boolean"},
             "labels": {"type": "object", "propertyNames": {"enum": list(LABELS)}, "additionalProperties": op}}
    return {"type": "object", "properties": props, "required": sorted(props), "additionalProperties": False}


def _common(version: int) -> dict:
    return {"schema_version": {"const": version}, "file": {"type": "string"}}


def redacted_schema(version: int) -> dict:
    span = _object(Span, drop=("text",))
    word = _object(Word, drop=("char_start", "char_end", "prob"))
    channel = {"type": "object", "additionalProperties": False,
               "required": ["channel", "redacted_transcript", "spans", "words"],
               "properties": {"channel": {"type": "integer"}, "redacted_transcript": {"type": "string"},
                              "spans": {"type": "array", "items": span}, "words": {"type": "array", "items": word}}}
    stretches = {"type": "array", "items": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}}
    props = {**_common(version),
             "duration": {"type": "number"}, "sample_rate": {"type": "integer"}, "channels": {"type": "integer"},
             "system": {"type": "string"}, "asr_model": {"type": "string"}, "ner_model": {"type": ["string", "null"]},
             "operators": _operators(),
             "labels": {"type": "array", "items": {"type": "string", "enum": list(LABELS)}},
             "spans": {"type": "array", "items": span}, "redacted_transcript": {"type": "string"},
             "uncovered_speech": stretches,
             "uncovered_action": {"enum": ["beep", "fail", "warn"]},
             "keypad_tones": stretches,
             "verified": {"oneOf": [{"type": "null"}, {"type": "object", "required": ["by", "passes", "added"],
                                                        "properties": {"by": {"type": "string"},
                                                                       "passes": {"type": "integer", "minimum": 1},
                                                                       "added": {"type": "integer"},
                                                                       "refuted": {"type": "integer"},
                                                                       "agreed": {"type": "integer"},
                                                                       "trimmed": {"type": "integer"}}}]},
             "words": {"type": "array", "items": word}, "channel_results": {"type": "array", "items": channel}}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "deid-speech X.redacted.json",
            "description": "The report shared with the redacted audio: no clear text of any span or word.",
            "type": "object", "properties": props, "required": sorted(props), "additionalProperties": False}


def pii_schema(version: int) -> dict:
    span, word = _object(Span), _object(Word)
    channel = {"type": "object", "additionalProperties": False, "required": ["channel", "transcript", "spans", "words"],
               "properties": {"channel": {"type": "integer"}, "transcript": {"type": "string"},
                              "spans": {"type": "array", "items": span}, "words": {"type": "array", "items": word}}}
    props = {**_common(version), "warning": {"type": "string"}, "transcript": {"type": "string"},
             "spans": {"type": "array", "items": span}, "words": {"type": "array", "items": word},
             "channel_results": {"type": "array", "items": channel}}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "deid-speech X.pii.json",
            "description": "The unredacted report (--unredacted-report, mode 0600): holds the personal data.",
            "type": "object", "properties": props, "required": sorted(props), "additionalProperties": False}


def schemas() -> dict[str, dict]:
    from deid_speech.pipeline import SCHEMA_VERSION

    return {"redacted.schema.json": redacted_schema(SCHEMA_VERSION), "pii.schema.json": pii_schema(SCHEMA_VERSION)}


def main(argv: list[str] | None = None) -> int:
    out = Path((argv if argv is not None else sys.argv[1:] or ["docs/schema"])[0])
    out.mkdir(parents=True, exist_ok=True)
    for name, schema in schemas().items():
        (out / name).write_text(json.dumps(schema, indent=2) + "\n", encoding="utf-8")
        print(out / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
