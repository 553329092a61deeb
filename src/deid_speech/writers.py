"""Transcript outputs of ``redact``: one writer class per format, found by name in
:data:`WRITERS` (``--format json,srt,vtt,txt``).

Every writer renders from the redacted transcript only (:attr:`RedactResult.redacted`:
placeholders, masks, hashes or surrogates in place of the PII); none of them can reach
the clear text. ``json`` is the report ``X.redacted.json``; it is always written, last,
and marks a finished redaction.

Subtitle cues follow the recogniser's segments, split so that none runs over
:data:`MAX_CUE_S` seconds or :data:`MAX_CUE_CHARS` characters; a file whose channels were
transcribed apart gets cues from every channel, each marked with its channel.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from deid_speech.types import Transcript

MAX_CUE_S = 7.0
MAX_CUE_CHARS = 84  # two lines of 42, the usual subtitle limit


@dataclass(frozen=True)
class Cue:
    start: float
    end: float
    text: str
    channel: int | None = None  # set when the file's channels were transcribed apart


def _split(words: list, channel: int | None) -> list[Cue]:
    cues, cur = [], []
    for w in words:
        if cur and (w.end - cur[0].start > MAX_CUE_S
                    or len(" ".join(x.text for x in cur)) + 1 + len(w.text) > MAX_CUE_CHARS):
            cues.append(Cue(cur[0].start, cur[-1].end, " ".join(x.text for x in cur), channel))
            cur = []
        cur.append(w)
    if cur:
        cues.append(Cue(cur[0].start, cur[-1].end, " ".join(x.text for x in cur), channel))
    return cues


def transcript_cues(redacted: Transcript, channel: int | None = None) -> list[Cue]:
    """Cues of one redacted transcript: consecutive words in one recogniser segment (by
    their midpoint; words outside every segment group with their outside neighbours),
    split to size."""
    cues: list[Cue] = []
    group: list = []
    key: int | None = None
    for w in redacted.words:
        mid = (w.start + w.end) / 2
        k = next((i for i, g in enumerate(redacted.segments) if g.start <= mid <= g.end), None)
        if group and k != key:
            cues += _split(group, channel)
            group = []
        group.append(w)
        key = k
    return cues + (_split(group, channel) if group else [])


def result_cues(result) -> list[Cue]:
    """Every cue of a redaction, in time order (all channels when they were apart)."""
    if result.channels:
        cues = [c for ch in result.channels for c in transcript_cues(ch["redacted"], ch["channel"])]
    else:
        cues = transcript_cues(result.redacted)
    return sorted(cues, key=lambda c: (c.start, c.end, c.channel or 0))


def _clock(t: float, sep: str) -> str:
    ms = int(round(max(0.0, t) * 1000))
    h, ms = divmod(ms, 3_600_000)
    m, ms = divmod(ms, 60_000)
    s, ms = divmod(ms, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


def _end(c: Cue) -> float:
    return max(c.end, c.start + 0.001)  # a cue must end after it starts


class Writer:
    """Renders one redaction as the text of one output file ``X.redacted<suffix>``."""

    name = ""
    suffix = ""

    def render(self, result, file: str, config, asr_name: str) -> str:
        raise NotImplementedError


class JsonWriter(Writer):
    name, suffix = "json", ".json"

    def render(self, result, file, config, asr_name) -> str:
        return json.dumps(result.to_json(file, config, asr_name), indent=2, ensure_ascii=False) + "\n"


class TxtWriter(Writer):
    """The redacted transcript, one cue per line (``[channel N]`` in front when channels differ)."""

    name, suffix = "txt", ".txt"

    def render(self, result, file, config, asr_name) -> str:
        return "".join((f"[channel {c.channel}] " if c.channel is not None else "") + c.text + "\n"
                       for c in result_cues(result))


class SrtWriter(Writer):
    name, suffix = "srt", ".srt"

    def render(self, result, file, config, asr_name) -> str:
        blocks = [f"{i}\n{_clock(c.start, ',')} --> {_clock(_end(c), ',')}\n"
                  + (f"[channel {c.channel}] " if c.channel is not None else "") + c.text + "\n"
                  for i, c in enumerate(result_cues(result), 1)]
        return "\n".join(blocks)


class VttWriter(Writer):
    name, suffix = "vtt", ".vtt"

    def render(self, result, file, config, asr_name) -> str:
        blocks = ["WEBVTT\n"] + [f"{_clock(c.start, '.')} --> {_clock(_end(c), '.')}\n"
                                 + (f"<v channel {c.channel}>" if c.channel is not None else "")
                                 + _vtt_escape(c.text) + "\n" for c in result_cues(result)]
        return "\n".join(blocks)


def _vtt_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("-->", "--&gt;")


WRITERS: dict[str, Writer] = {w.name: w for w in (JsonWriter(), SrtWriter(), VttWriter(), TxtWriter())}
FORMATS = tuple(WRITERS)


def parse_formats(value: str) -> tuple[str, ...]:
    """``"srt,vtt"`` -> ``("srt", "vtt", "json")``: the JSON report is always written, last."""
    names = [x.strip().lower() for x in value.split(",") if x.strip()]
    bad = [x for x in names if x not in WRITERS]
    if bad or not names:
        raise ValueError(f"unknown format(s) {', '.join(bad) or '(none)'}; choose from {','.join(FORMATS)}")
    return tuple(dict.fromkeys([x for x in names if x != "json"] + ["json"]))
