"""One table of systems and one registry of detectors; a Redactor shared by threads."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from deid_speech import systems
from deid_speech.audio import Audio
from deid_speech.errors import DeidError
from deid_speech.ner.base import MODULES, REGISTRY, build, build_all
from deid_speech.pipeline import RedactConfig, Redactor
from deid_speech.types import Recognition
from factories import make_transcript

TEXTS = ["my phone is nine one two three four five six seven ok", "card four five three two one one five two "
         "eight eight zero four six seven one two thanks", "no numbers here at all lah", "call me at eight one "
         "two two three three four four tomorrow"]


def test_the_table_is_the_only_list_of_systems() -> None:
    from deid_speech.cli import build_parser

    assert set(systems.REDACT) < set(systems.EVAL) == set(systems.TABLE)
    assert systems.REDACT == ("cascade", "e2e", "e2e+patterns") and systems.E2E == ("e2e", "e2e+patterns")
    assert systems.TRAINABLE == ("cascade", "e2e")
    assert all(d in MODULES for s in systems.TABLE.values() for d in s.detectors)
    redact = build_parser()._subparsers._group_actions[0].choices["redact"]
    choices = next(a.choices for a in redact._actions if a.dest == "system")
    assert tuple(choices) == systems.REDACT
    with pytest.raises(DeidError, match="unknown system 'presidio'; choose from cascade, e2e, e2e\\+patterns"):
        systems.get("presidio", systems.REDACT)


def test_detectors_are_built_by_name_and_only_their_module_is_imported() -> None:
    code = ("import sys; from deid_speech.ner.base import build; d = build('patterns'); "
            "print(d.name, 'spacy' in sys.modules, 'deid_speech.ner.spacy_ner' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["patterns", "False", "False"]
    with pytest.raises(DeidError, match="unknown detector 'regex'"):
        build("regex")


def test_config_decides_which_optional_detectors_are_built() -> None:
    names = [d.name for d in build_all(("patterns", "cue-runs", "spacy", "ner"),
                                       RedactConfig(labels=("PHONE", "NRIC"), ner_model=None))]
    assert names == ["patterns", "cue-runs"]  # no PERSON/DATE asked: no spaCy; no trained NER
    assert set(REGISTRY) >= {"patterns", "cue-runs"}


class SlowAsr:
    """A recogniser whose answer depends only on its input (the first sample's value picks
    the text), slow enough that calls from several threads interleave."""

    name = "slow"

    def recognize(self, audio, progress=None) -> Recognition:
        k = int(round(float(audio[0]) * 10)) % len(TEXTS)
        time.sleep(0.05)
        return Recognition(make_transcript(TEXTS[k], word_dur=0.2, gap=0.05, t0=0.3))


def _audio(k: int) -> Audio:
    x = np.random.default_rng(k).normal(0, 0.05, 16000 * 12).astype(np.float32)
    x[0] = k / 10
    return Audio(x[:, None], 16000)


def _summary(result) -> tuple:
    return (tuple((s.label, round(s.start, 3), round(s.end, 3)) for s in result.spans), result.redacted_transcript,
            float(np.abs(result.audio.samples).sum()))


def test_one_redactor_serves_four_threads_with_sequential_results() -> None:
    from deid_speech.ner.patterns import PatternDetector

    r = Redactor(RedactConfig(labels=("PHONE", "CREDIT_CARD"), verify=False), asr=SlowAsr(), detectors=[PatternDetector()])
    inputs = [_audio(k % 4) for k in range(12)]
    sequential = [_summary(r.redact(a)) for a in inputs]
    assert len({s[1] for s in sequential}) == 4 and any("[PHONE_1]" in s[1] for s in sequential)
    active, most = [0], [0]
    lock = threading.Lock()

    def job(a):
        with lock:
            active[0] += 1
            most[0] = max(most[0], active[0])
        try:
            return _summary(r.redact(a))
        finally:
            with lock:
                active[0] -= 1

    with ThreadPoolExecutor(4) as pool:
        threaded = list(pool.map(job, inputs))
    assert threaded == sequential and most[0] > 1  # the calls did overlap


@pytest.mark.model
def test_the_shipped_e2e_system_is_thread_safe() -> None:
    from deid_speech import load_audio, models

    call = load_audio(models.path("example"))
    clips = [Audio(call.samples[int(a * call.sample_rate): int(b * call.sample_rate)], call.sample_rate)
             for a, b in ((10.0, 24.0), (24.0, 40.0))]
    r = Redactor(RedactConfig(system="e2e"))
    sequential = [_summary(r.redact(c)) for c in clips]
    with ThreadPoolExecutor(2) as pool:
        threaded = list(pool.map(lambda c: _summary(r.redact(c)), clips * 2))
    assert threaded == sequential * 2
    assert json.dumps(sequential)  # plain data, comparable
