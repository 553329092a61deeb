import numpy as np
import pytest

from deid_speech.audio import Audio
from deid_speech.errors import DeidError
from deid_speech.ner.base import merge_spans
from deid_speech.redact import Operator, RedactOptions, place_spans, reach_gaps, redact_audio, redact_text, speech_level
from deid_speech.redact import _widen_short as _widen
from deid_speech.types import Span, Transcript
from factories import make_transcript, tone


def rms(x):
    return float(np.sqrt(np.mean(np.square(x))))


@pytest.mark.parametrize("sr,channels", [(16000, 1), (44100, 2), (8000, 1), (48000, 3)])
def test_beep_keeps_length_rate_channels_and_replaces_the_region(sr, channels):
    x = tone(3.0, sr, hz=220, channels=channels)
    x[:, -1] *= 0.5  # channels differ
    a = Audio(x, sr, "WAV", "PCM_16")
    out = redact_audio(a, [Span(1.0, 1.5, "PHONE")], RedactOptions.uniform(pad=0.1))
    assert out.samples.shape == x.shape and out.sample_rate == sr
    lo, hi = int(0.9 * sr), int(1.6 * sr)
    for c in range(channels):
        spec = np.abs(np.fft.rfft(out.samples[lo + 100:hi - 100, c]))
        freqs = np.fft.rfftfreq(hi - lo - 200, 1 / sr)
        assert abs(freqs[spec.argmax()] - 1000) < 20  # the 220 Hz speech is gone, a 1 kHz beep is there
    np.testing.assert_array_equal(out.samples[: lo - 1], x[: lo - 1])  # outside untouched
    np.testing.assert_array_equal(out.samples[hi + 1:], x[hi + 1:])
    assert np.array_equal(a.samples, x)  # input not modified


def test_beep_level_matches_speech_level():
    x = tone(4.0, 16000, amp=0.2)
    out = redact_audio(Audio(x, 16000), [Span(1.0, 2.0, "NRIC")], RedactOptions.uniform(pad=0.0))
    beep = out.samples[16000 + 200:32000 - 200, 0]
    assert rms(beep) == pytest.approx(speech_level(x[:, 0], 16000), rel=0.1)


def test_silence_mode_zeroes_the_padded_region_only():
    x = tone(2.0, 16000)
    out = redact_audio(Audio(x, 16000), [Span(0.5, 0.6, "PHONE")], RedactOptions.uniform(audio="silence", pad=0.2))
    assert np.all(out.samples[int(0.3 * 16000) + 1:int(0.8 * 16000) - 1] == 0)
    assert rms(out.samples[: int(0.29 * 16000)]) > 0.1 and rms(out.samples[int(0.81 * 16000):]) > 0.1


def test_spans_at_the_edges_are_clipped_not_crashing():
    x = tone(1.0, 16000)
    out = redact_audio(Audio(x, 16000), [Span(0.0, 0.05), Span(0.95, 1.5)], RedactOptions.uniform(audio="silence"))
    assert out.samples.shape == x.shape
    assert np.all(out.samples[:100] == 0) and np.all(out.samples[-100:] == 0)


def test_bad_options_are_rejected():
    with pytest.raises(DeidError, match="audio operator"):
        RedactOptions.uniform(audio="mute")
    with pytest.raises(DeidError, match="pad_before"):
        RedactOptions.uniform(pad=-1)
    with pytest.raises(DeidError, match="text operator"):
        Operator(text="shuffle")
    with pytest.raises(DeidError, match="unknown label"):
        RedactOptions(labels=(("SSN", Operator()),))
    with pytest.raises(DeidError, match="DEID_SPEECH_KEY"):
        RedactOptions(Operator(text="hash"))
    with pytest.raises(DeidError, match="too short"):
        RedactOptions(key=b"short")


def test_implausibly_short_span_widens_to_its_segment_never_disappears():
    t = make_transcript("my number is nine one two three four five six seven")
    seg = Span(0.0, 5.0, source="asr")
    t = type(t)(t.text, t.words, (seg,))
    s = Span(2.0, 2.05, "PHONE", 0.9, "patterns", "nine one two three four five six seven")
    (w,) = place_spans([s], t)
    # its words' own times are plausible: it widens between them, inside the segment
    assert w.start < 2.0 and w.end > 2.05 and 0.0 <= w.start and w.end <= 5.0 + 0.3
    assert w.duration >= 0.03 * len("nineonetwothreefourfivesixseven") and "widened" in w.source
    ok = Span(1.5, 5.4, "PHONE", 0.9, "patterns", "nine one two three four five six seven")
    (p,) = place_spans([ok], t)  # long enough: kept, reaching only into the pause before it
    assert (p.start, p.end, p.source) == (1.4, pytest.approx(5.7), "patterns")  # no word after: +0.3 s


def test_mistimed_words_widen_to_their_plausible_neighbours_not_a_20s_segment():
    # Whisper squeezed "Best" and "number" to zero length inside a 20 s segment
    words = [("Hello", 19.2, 19.6), ("Best", 21.0, 21.0), ("number", 21.0, 21.0), ("to", 21.4, 21.6),
             ("reach", 21.6, 21.9), ("you", 21.9, 22.1)] + [(f"w{i}", 22.5 + i, 22.9 + i) for i in range(16)]
    t = Transcript.from_words(words, segments=[Span(19.2, 39.4, source="asr")])
    (w,) = _widen([Span(21.0, 21.0, "PERSON", 0.6, "ner", "Best")], t)
    assert (w.start, w.end) == (19.6, 21.4)  # from "Hello" to "to", not 19.2-39.4
    # no plausible word on either side: the segment bounds it
    t2 = Transcript.from_words([("Best", 3.0, 3.0)], segments=[Span(2.0, 4.0, source="asr")])
    (w2,) = _widen([Span(3.0, 3.0, "PERSON", 0.6, "ner", "Best")], t2)
    assert (w2.start, w2.end) == (2.0, 4.0)
    # plausible neighbours packed tight: the stretch still grows to the time the text needs
    t3 = Transcript.from_words([("a", 1.0, 1.5), ("Samantha", 1.5, 1.5), ("b", 1.5, 2.0)])
    (w3,) = _widen([Span(1.5, 1.5, "PERSON", 0.6, "ner", "Samantha")], t3)
    assert w3.duration == pytest.approx(0.24) and w3.start < 1.5 < w3.end


def test_spans_reach_into_pauses_up_to_the_neighbouring_words():
    t = Transcript.from_words([("call", 0.0, 0.4), ("Tan", 1.5, 1.9), ("now", 2.0, 2.3), ("ok", 3.0, 3.2)])
    (a,) = reach_gaps([Span(1.5, 1.9, "PERSON", text="Tan")], t)
    assert (a.start, a.end) == (pytest.approx(1.2), 2.0)  # 0.3 s back into the long pause, up to "now" ahead
    (b,) = reach_gaps([Span(2.0, 2.3, "PERSON")], t, before=1.0, after=1.0)
    assert (b.start, b.end) == (1.9, 3.0)  # up to the neighbouring words, each side
    (c,) = reach_gaps([Span(0.0, 0.4, "PERSON")], Transcript.from_words([("x", 0.0, 0.4)]))
    assert (c.start, c.end) == (0.0, pytest.approx(0.7))  # nothing after: the most it may reach
    (d,) = reach_gaps([Span(1.5, 1.9, "PERSON")], t, after=0.05)
    assert d.end == pytest.approx(1.95)  # a smaller forward reach stops short of "now"


def test_merge_joins_overlaps_keeps_best_label_and_all_sources():
    a = Span(1.0, 2.0, "PERSON", 0.7, "cue", "Tan Wei")
    b = Span(1.5, 2.5, "PERSON", 0.8, "spacy", "Tan Wei Ming")
    c = Span(2.5, 3.0, "PHONE", 0.9, "patterns", "nine")  # touches, does not overlap
    m = merge_spans([c, b, a])
    assert [(s.start, s.end, s.label, s.source) for s in m] == [
        (1.0, 2.5, "PERSON", "cue+spacy"), (2.5, 3.0, "PHONE", "patterns")]
    assert m[0].text == "Tan Wei Ming"


def test_redacted_transcript_numbers_placeholders_per_distinct_value():
    t = make_transcript("call nine one two three four five six seven or 91234567 or 98765432 bye")
    w = t.words
    spans = [Span(w[1].start, w[8].end, "PHONE", 1, "p", "nine one two three four five six seven"),
             Span(w[10].start, w[10].end, "PHONE", 1, "p", "91234567"),
             Span(w[12].start, w[12].end, "PHONE", 1, "p", "98765432")]
    assert redact_text(t, spans) == "call [PHONE_1] or [PHONE_1] or [PHONE_2] bye"


def test_a_value_of_one_everyday_word_is_not_looked_for_again():
    """The trained NER sometimes takes "One" or "You're" for a name; looking for the value
    again would beep every "one" and "you're" of the call. The span itself stays; a name,
    and a value of several words, are still found again."""
    from deid_speech.redact import NOT_NAMES, repeat_mentions
    from deid_speech.spoken import common_word

    t = make_transcript("One. I need one. You're late, you're here. Wan says one two eight, "
                        "one two eight again. Wan Ting is here, Wan")
    w = t.words
    found = [Span(w[0].start, w[0].end, "PERSON", 0.9, "ner", "One."),
             Span(w[4].start, w[4].end, "PERSON", 0.9, "ner", "You're"),
             Span(w[8].start, w[8].end, "PERSON", 0.9, "ner", "Wan"),
             Span(w[10].start, w[12].end, "BANK_ACCOUNT", 0.9, "cue-runs", "one two eight")]
    said = sorted(s.text for s in repeat_mentions(found, t))
    assert said == ["Wan", "Wan", "one two eight"], said  # no "one", no "you're"
    assert [common_word(x, also=NOT_NAMES) for x in ("One", "one,", "You're", "I'm", "But", "Lim", "Wan", "Qma")] == \
        [True, True, True, True, True, False, False, False]


def test_redacted_transcript_keeps_trailing_punctuation_and_other_words():
    t = make_transcript("I'm Tan Wei Ming, from DBS.")
    w = t.words
    out = redact_text(t, [Span(w[1].start, w[3].end, "PERSON", 1, "spacy", "Tan Wei Ming")])
    assert out == "I'm [PERSON_1], from DBS."


def test_a_value_found_once_is_redacted_wherever_it_is_said_again():
    from deid_speech.redact import repeat_mentions

    t = make_transcript("ask for Qma or email. Qma. my name Jason Lim, yes Mr Lim. The lime is four four")
    w = t.words
    found = [Span(w[2].start, w[2].end, "PERSON", 0.9, "ner", "Qma"),
             Span(w[8].start, w[9].end, "PERSON", 0.9, "ner", "Jason Lim,"),
             Span(w[16].start, w[16].end, "PHONE", 0.9, "cue-runs", "four")]
    extra = repeat_mentions(found, t)
    said = sorted((s.text, s.label) for s in extra)
    # "Qma." again, "Lim." alone (capitalised); not "lime", not "The", not the second "four"
    # (one everyday word: test_a_value_of_one_everyday_word_is_not_looked_for_again)
    assert said == [("Lim.", "PERSON"), ("Qma.", "PERSON")], said
    assert all(s.source.endswith("+repeat") for s in extra)
    assert repeat_mentions(found + extra, t) == []  # nothing left to add
    short = [Span(w[0].start, w[0].end, "PERSON", 0.9, "ner", "as")]
    assert repeat_mentions(short, make_transcript("as as as")) == []  # under 3 letters: too common
