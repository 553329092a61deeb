"""bench/long_vs_parts.py: the separate calls' transcripts placed where the joined call has them,
and already-decoded verifier passes handed to the redactor's own merge."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("long_vs_parts", ROOT / "bench" / "long_vs_parts.py")
long_vs_parts = importlib.util.module_from_spec(spec)
spec.loader.exec_module(long_vs_parts)


def test_parts_are_shifted_to_their_offsets_and_joined_in_order():
    from deid_speech.types import Transcript

    a = Transcript.from_words([("my", 0.5, 0.7, 0.9), ("name", 0.8, 1.1, 0.8)])
    b = Transcript.from_words([("Tan", 0.2, 0.6, 0.4)])
    j = long_vs_parts.joined_transcript([(a, 0.0), (b, 106.0), (a, 212.5)])
    assert j.text == "my name Tan my name"
    assert [(w.start, w.end) for w in j.words] == [(0.5, 0.7), (0.8, 1.1), (106.2, 106.6), (213.0, 213.2), (213.3, 213.6)]
    assert [w.prob for w in j.words] == [0.9, 0.8, 0.4, 0.9, 0.8]  # the recogniser's confidence travels
    assert j.text[j.words[2].char_start:j.words[2].char_end] == "Tan"


def test_a_decoded_pass_feeds_the_redactors_verify_and_adds_what_reaches_beyond():
    from deid_speech.pipeline import RedactConfig, Redactor
    from deid_speech.types import Span, Transcript

    class Phones:
        name = "phones"

        def detect(self, tr):
            return [Span(w.start, w.end, "PHONE", 1.0, "fake", w.text) for w in tr.words if w.text.isdigit()]

    class Deaf:
        def recognize(self, audio):
            raise AssertionError("nothing is decoded: the pass is already heard")

    r = Redactor(RedactConfig(verify=False), asr=Deaf(), detectors=[Phones()])
    heard = Transcript.from_words([("call", 0.0, 0.3), ("91234567", 0.4, 1.6), ("now", 5.0, 5.2), ("81234567", 6.0, 7.0)])
    first = r.detect(Transcript.from_words([("call", 0.0, 0.3), ("91234567", 0.4, 1.6), ("now", 5.0, 5.2)]))
    added = r.verify(None, first, [long_vs_parts.Heard(heard)]).added
    assert len(added) == 1  # the first number is covered already
    assert added[0].label == "PHONE" and added[0].source == "fake+verify" and added[0].start <= 6.0 < 7.0 <= added[0].end
