"""The redaction systems, in one table: which recogniser each uses, which detectors (by
their registered names, :mod:`deid_speech.ner.base`) read its transcript, in what order,
and where it is offered. ``deid-speech redact --system``, ``deid-speech eval --system``,
:class:`deid_speech.pipeline.Redactor` and the experiment matrix all read it.

* ``cascade`` (default): Whisper (:data:`RECOGNISER`), then the spoken-form patterns, cue-anchored runs, spaCy
  with cues and name slots (when PERSON or DATE is asked for) and the trained NER.
* ``e2e``: the end-to-end Whisper writes the transcript and tags the entities itself.
* ``e2e+patterns``: the e2e model's tags plus the spoken-form detectors over its
  transcript, a safety net for entities the model tags only in part (on the example call:
  36 % of entity audio left audible by the model alone, 4 % with the patterns).
* eval-only systems: ``cascade+verify`` (the cascade with a second decoder's opinion on the
  audio: what ``redact`` does by default, :data:`VERIFIER`; in ``eval``, ``cascade``
  is the cascade alone), ``presidio`` and ``spacy`` (text-PII peers over Whisper's text).
"""
from __future__ import annotations

from dataclasses import dataclass

from deid_speech.errors import DeidError

CASCADE = ("patterns", "cue-runs", "spacy", "ner")
# the cascade's recogniser (--asr-model): the stock Whisper tiny.en. The fine-tune tiny.en-sg-full
# leaks less alone and decodes noisy calls twice as fast, but over four dithered draws of the
# real-speech set its WER is 8.9 +- 1.1 % against 7.5 +- 0.4 % (docs/results.md §0n)
RECOGNISER = "tiny.en"
# the cascade's second decoder (--verify, on by default in `redact`): decoder-only fine-tunes that
# hear Singlish PII the stock model misses (docs/results.md §0i); their own transcripts are worse on
# real speech, so they only add spans, never write the transcript. It decodes the audio three
# times, each later time with an inaudible dither (Whisper's decoding of noisy audio is chaotic: the
# union of two decodings lowered the leak of dev calls from 5.5 to 3.8 %, §0r), the passes taken in
# turn by two models, tiny.en-sg then base-sg, which miss different entities (§0af: the leak of
# the test part's utterances 4.57 -> 2.69 %, calls 6.78 -> 3.52 %, for 4.6-6.7 points more
# over-redaction, mostly wider spans around the entities found). The third pass (tiny.en-sg again,
# dithered anew) since session 40: the leak of every dev and test set fell (test calls 3.22 ->
# 2.80 %, utterances 2.53 -> 2.25 %) for 0.4-2.1 points more over-redaction and a quarter more
# time on a 108 s call (RTF 0.168 -> 0.210; docs/results.md §0am)
VERIFIER = "tiny.en-sg,base-sg"
VERIFY_PASSES = 3
MAX_VERIFY_PASSES = 4
SPOKEN_FORM = ("patterns", "cue-runs")


@dataclass(frozen=True)
class System:
    name: str
    recognizer: str  # "whisper" (plain transcripts) | "e2e" (the tagging model: transcript and spans)
    detectors: tuple[str, ...]  # registered detector names, run in this order over the transcript
    redact: bool  # offered by `deid-speech redact` (False: an evaluation baseline only)
    min_score: float = 0.5  # detections below it are dropped (peers apply their own threshold: 0)
    verify: bool = False  # a second decoder's opinion on the audio (eval)
    trains: str | None = None  # the model `deid-speech experiment` trains for it (`train ner|e2e`)


TABLE: dict[str, System] = {s.name: s for s in (
    System("cascade", "whisper", CASCADE, redact=True, trains="ner"),
    System("e2e", "e2e", (), redact=True, trains="e2e"),
    System("e2e+patterns", "e2e", SPOKEN_FORM, redact=True),
    System("cascade+verify", "whisper", CASCADE, redact=False, verify=True),
    System("presidio", "whisper", ("presidio",), redact=False, min_score=0.0),
    System("spacy", "whisper", ("spacy-plain",), redact=False, min_score=0.0),
)}
REDACT = tuple(n for n, s in TABLE.items() if s.redact)  # `deid-speech redact --system`
EVAL = tuple(TABLE)  # `deid-speech eval --system`
E2E = tuple(n for n, s in TABLE.items() if s.recognizer == "e2e")
TRAINABLE = tuple(n for n, s in TABLE.items() if s.trains)


def get(name: str, offered: tuple[str, ...] = EVAL) -> System:
    """The system ``name`` among ``offered``, or a one-line DeidError listing them."""
    if name not in offered:
        raise DeidError(f"unknown system {name!r}; choose from {', '.join(offered)}")
    return TABLE[name]
