"""The redaction job with a fake ASR (canned transcript): outputs, schema, fail-closed."""
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from deid_speech.cli import redact_many
from deid_speech.errors import DeidError
from deid_speech.ner.patterns import PatternDetector
from deid_speech.pipeline import RedactConfig, Redactor, SecondOpinion, collect_inputs, output_paths, redact_file
from deid_speech.types import Recognition, Span, Transcript
from factories import make_transcript, tone

TEXT = "hello my number is nine one two three four five six seven thank you"


class FakeAsr:
    name = "fake"

    def __init__(self, text=TEXT):
        self.text = text

    def transcribe(self, audio, progress=None):
        return make_transcript(self.text, word_dur=0.2, gap=0.05, t0=0.5)


class BrokenDetector:
    name = "broken"

    def detect(self, transcript):
        raise RuntimeError("boom")


def redactor(**kw):
    return Redactor(RedactConfig(**{"verify": False, **kw}), asr=FakeAsr(), detectors=[PatternDetector()])


@pytest.fixture
def call(tmp_path):
    p = tmp_path / "call.flac"
    sf.write(p, tone(5.0, 44100, channels=2), 44100, format="FLAC", subtype="PCM_16")
    return p


def test_redact_file_writes_audio_and_json_next_to_input(call):
    audio_out, json_out, result = redact_file(redactor(), call, None, {call.resolve()})
    assert (audio_out.name, json_out.name) == ("call.redacted.flac", "call.redacted.json")
    info = sf.info(audio_out)
    assert (info.samplerate, info.channels, info.format) == (44100, 2, "FLAC")
    assert info.frames == sf.info(call).frames
    d = json.loads(json_out.read_text())
    assert set(d) >= {"file", "duration", "sample_rate", "system", "asr_model", "spans", "redacted_transcript"}
    assert "transcript" not in d and d["schema_version"] == 5
    assert d["system"] == "cascade" and d["asr_model"] == "fake" and d["sample_rate"] == 44100
    (span,) = d["spans"]
    assert set(span) == {"label", "start", "end", "score", "source"}  # no clear text in a shared report
    assert span["label"] == "PHONE" and "nine" not in json_out.read_text()
    # the run of phone words is one word: neither their number nor their times show
    assert [w["text"] for w in d["words"]][3:6] == ["is", "[PHONE_1]", "thank"]
    phone_words = [w for w in result.transcript.words if w.text not in ("hello", "my", "number", "is", "thank", "you")]
    assert (d["words"][4]["start"], d["words"][4]["end"]) == (round(phone_words[0].start, 3),
                                                               round(phone_words[-1].end, 3))
    assert d["redacted_transcript"] == "hello my number is [PHONE_1] thank you"
    # the phone region really changed, the rest did not
    x, _ = sf.read(call)
    y, _ = sf.read(audio_out)
    a, b = int(span["start"] * 44100), int(span["end"] * 44100)
    assert np.abs(y[a:b] - x[a:b]).mean() > 0.05
    np.testing.assert_allclose(y[: int(0.3 * 44100)], x[: int(0.3 * 44100)], atol=1e-4)


def test_out_dir_and_label_subset(call, tmp_path):
    out = tmp_path / "out"
    _, json_out, _ = redact_file(redactor(labels=("NRIC",)), call, out, set())
    assert json_out.parent == out
    assert json.loads(json_out.read_text())["spans"] == []


def test_a_failing_detector_fails_closed_and_removes_stale_outputs(call, capsys):
    # an earlier successful run left outputs; now a stage fails: both must disappear
    for p in output_paths(call, None):
        p.write_text("stale")
    broken = Redactor(RedactConfig(verify=False), asr=FakeAsr(), detectors=[BrokenDetector()])
    assert redact_many(broken, [call], None) == 1  # without --overwrite: refused, the earlier outputs kept
    assert all(p.read_text() == "stale" for p in output_paths(call, None))
    assert "--overwrite" in capsys.readouterr().err
    assert redact_many(broken, [call], None, existing="overwrite") == 1
    assert not any(p.exists() for p in output_paths(call, None))
    err = capsys.readouterr()
    assert "detector broken failed: boom" in err.err and "Traceback" not in err.err


def test_many_inputs_continue_past_a_bad_one_and_exit_non_zero(call, tmp_path, capsys):
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"not audio")
    rc = redact_many(redactor(), [bad, call], None)
    assert rc == 1
    assert output_paths(call, None)[0].exists()
    assert not output_paths(bad, None)[0].exists()
    out = capsys.readouterr().out
    assert "2 file(s): 1 redacted, 1 failed" in out


def test_output_that_would_overwrite_an_input_is_refused(tmp_path):
    src = tmp_path / "x.wav"
    sf.write(src, tone(1.0), 16000)
    victim = tmp_path / "x.redacted.wav"
    sf.write(victim, tone(1.0), 16000)
    before = victim.read_bytes()
    with pytest.raises(DeidError, match="overwrite an input"):
        redact_file(redactor(), src, None, {src.resolve(), victim.resolve()})
    assert victim.read_bytes() == before


def test_a_file_given_twice_is_redacted_once(tmp_path):
    (tmp_path / "in").mkdir()
    sf.write(tmp_path / "in" / "a.wav", tone(0.5), 16000)
    sf.write(tmp_path / "b.wav", tone(0.5), 16000)
    args = [tmp_path / "in" / "a.wav", tmp_path / "b.wav", tmp_path / "in" / "a.wav", tmp_path / "in" / ".." / "b.wav",
            tmp_path / "in"]
    files, skipped, roots = collect_inputs([str(a) for a in args])
    assert files == [tmp_path / "in" / "a.wav", tmp_path / "b.wav"] and roots == {}
    assert [(p, r) for p, r in skipped] == [(a, "given more than once") for a in args[2:4]] + \
        [(tmp_path / "in" / "a.wav", "given more than once")]


def test_folders_are_searched_and_every_skip_is_listed_with_its_reason(tmp_path):
    (tmp_path / "a").mkdir()
    for name in ("a/one.wav", "two.flac", "two.redacted.flac", "two.redacted.json", "notes.txt", "clip.xyz",
                 ".tmp-x.wav", "rec.redacted.final.wav", "call.m4a"):
        (tmp_path / name).write_bytes(b"x")
    sf.write(tmp_path / "noext", tone(0.5), 16000, format="WAV")  # a real recording without an extension
    files, skipped, _ = collect_inputs([str(tmp_path)])
    assert [p.name for p in files] == ["one.wav", "call.m4a", "noext", "rec.redacted.final.wav", "two.flac"]
    why = {p.name: r for p, r in skipped}
    assert set(why) == {"two.redacted.flac", "two.redacted.json", "notes.txt", "clip.xyz", ".tmp-x.wav"}
    assert "earlier deid-speech run" in why["two.redacted.flac"] and "decode" in why["clip.xyz"]


def _m4a(path, seconds=2.0):
    import av

    with av.open(str(path), "w") as out:
        st = out.add_stream("aac", rate=16000)
        st.layout = "mono"
        x = tone(seconds, 16000)[:, 0]
        for i in range(0, len(x), 1024):
            fr = av.AudioFrame.from_ndarray(x[None, i:i + 1024], format="flt", layout="mono")
            fr.rate = 16000
            for pkt in st.encode(fr):
                out.mux(pkt)
        for pkt in st.encode(None):
            out.mux(pkt)
    return path


def test_an_m4a_call_is_decoded_and_redacted_into_flac(tmp_path):
    src = _m4a(tmp_path / "call.m4a", 5.0)
    audio_out, json_out, result = redact_file(redactor(), src, None, {src.resolve()})
    assert audio_out.name == "call.redacted.flac" and sf.info(audio_out).format == "FLAC"
    assert [s.label for s in result.spans] == ["PHONE"]
    (tmp_path / "bad.m4a").write_bytes(b"not audio")
    with pytest.raises(DeidError, match="cannot decode audio"):
        redact_file(redactor(), tmp_path / "bad.m4a", None, set())
    (tmp_path / "empty").mkdir()
    with pytest.raises(DeidError, match="no audio files"):
        collect_inputs([str(tmp_path / "empty")])


def test_an_opus_call_that_libsndfile_reads_is_redacted_into_flac_as_its_name_says(tmp_path):
    src = tmp_path / "call.opus"
    sf.write(src, tone(5.0, 48000), 48000, format="OGG", subtype="OPUS")
    assert sf.info(src).subtype == "OPUS"  # libsndfile reads it itself (not through PyAV)
    audio_out, _, result = redact_file(redactor(), src, None, {src.resolve()})
    assert audio_out.name == "call.redacted.flac" and sf.info(audio_out).format == "FLAC"
    assert sf.info(audio_out).frames == sf.info(src).frames and [s.label for s in result.spans] == ["PHONE"]


def test_out_dir_mirrors_the_input_tree_so_equal_names_in_two_folders_both_survive(tmp_path):
    _tone_file(tmp_path / "in" / "a" / "call.wav"), _tone_file(tmp_path / "in" / "b" / "call.wav")
    files, _, roots = collect_inputs([str(tmp_path / "in")])
    assert redact_many(redactor(), files, tmp_path / "out", roots=roots) == 0
    assert (tmp_path / "out/a/call.redacted.wav").exists() and (tmp_path / "out/b/call.redacted.wav").exists()


def test_unknown_system_or_label_is_a_clear_error():
    with pytest.raises(DeidError, match="unknown label"):
        RedactConfig(labels=("PHONE", "SSN"))
    with pytest.raises(DeidError, match="unknown system"):
        RedactConfig(system="magic")
    with pytest.raises(DeidError, match="e2e"):
        Redactor(RedactConfig(system="e2e"), asr=FakeAsr())


class FakeTagger(FakeAsr):
    """Stands in for the e2e model: writes a transcript and tags nothing in it."""

    name = "e2e:fake"

    def recognize(self, audio, progress=None):
        self.calls = getattr(self, "calls", 0) + 1
        return Recognition(super().transcribe(audio, progress))


def test_e2e_plus_patterns_catches_what_the_model_left_untagged(call):
    from deid_speech.audio import load

    audio = load(call)
    alone = Redactor(RedactConfig(system="e2e"), asr=FakeTagger()).redact(audio)
    netted = Redactor(RedactConfig(system="e2e+patterns"), asr=FakeTagger()).redact(audio)
    assert alone.spans == []
    assert [s.label for s in netted.spans] == ["PHONE"]
    assert "[PHONE_1]" in netted.redacted_transcript and "nine" not in netted.redacted_transcript


def test_eval_decodes_once_for_both_e2e_systems(call):
    from deid_speech.eval.run import Item, system_predictions

    tagger = FakeTagger()
    items = [Item("a", call, TEXT, [], []), Item("b", call, TEXT, [], [])]
    preds = [p for _, _, p in system_predictions(["e2e", "e2e+patterns"], items, e2e=tagger)]
    assert tagger.calls == 2  # once per item, not once per system
    assert all(p["e2e"].transcript is p["e2e+patterns"].transcript for p in preds)
    assert [len(p["e2e"].spans) for p in preds] == [0, 0] and [len(p["e2e+patterns"].spans) for p in preds] == [1, 1]


class FakeVerifier:
    """A second decoder: hears a card number the first transcript lost, after the phone."""
    name = "fake-e2e"

    def __init__(self):
        self.heard = None

    def recognize(self, audio, progress=None):
        self.heard = audio.copy()
        first = make_transcript(TEXT, word_dur=0.2, gap=0.05, t0=0.5)  # the phone the first pass found, again
        card = make_transcript("the card is four five three two one one five two eight eight zero four six seven "
                               "one two", word_dur=0.25, gap=0.02, t0=5.0)
        return Recognition(Transcript.from_words([(w.text, w.start, w.end) for w in first.words + card.words]))


def test_verify_decodes_the_audio_again_and_adds_what_reaches_beyond_the_redaction(tmp_path):
    call = tmp_path / "long.flac"
    sf.write(call, tone(10.0, 44100, channels=2), 44100, format="FLAC", subtype="PCM_16")
    ver = FakeVerifier()
    r = Redactor(RedactConfig(verify=True), asr=FakeAsr(), detectors=[PatternDetector()], verifier=ver)
    audio_out, json_out, result = redact_file(r, call, None, {call.resolve()})
    d = json.loads(json_out.read_text())
    # the later passes heard nothing new; the phone, which every decoding found, is one agreed span
    assert d["verified"] == {"by": "fake-e2e", "passes": 3, "added": 1, "refuted": 0, "agreed": 1, "trimmed": 0}
    labels = sorted(s["label"] for s in d["spans"])
    assert labels == ["CREDIT_CARD", "PHONE"] and any("verify" in s["source"] for s in d["spans"])
    assert ver.heard.any() and len(ver.heard) == 10 * 16000  # the whole call, first redaction included
    card = next(s for s in d["spans"] if s["label"] == "CREDIT_CARD")
    x, _ = sf.read(call)
    y, _ = sf.read(audio_out)
    k = int((card["start"] + card["end"]) / 2 * 44100)
    assert not np.allclose(x[k:k + 100], y[k:k + 100])  # the card the verifier found is beeped


class SecondPassVerifier:
    """A verifier that hears the card only when the audio differs from what it heard first
    (a chaotic decoder: the dithered second pass catches what the first missed)."""
    name = "fake-whisper"

    def __init__(self):
        self.heard = []

    def recognize(self, audio, progress=None):
        self.heard.append(audio.copy())
        card = " the card is four five three two one one five two eight eight zero four six seven one two"
        text = TEXT if len(self.heard) == 1 else TEXT + card
        return Recognition(make_transcript(text, word_dur=0.2, gap=0.05, t0=0.5))


def test_the_verifier_listens_again_to_dithered_audio_and_what_any_pass_finds_is_redacted():
    audio = (0.1 * np.sin(np.arange(8 * 16000) / 7.0)).astype(np.float32)
    found = {}
    for passes in (1, 2, 3):
        ver = SecondPassVerifier()
        r = Redactor(RedactConfig(verify=True, verify_passes=passes), asr=FakeAsr(), detectors=[PatternDetector()],
                     verifier=ver)
        result = r.redact_tracks([(None, audio)], (8.0, 16000, 1))
        found[passes] = sorted(s.label for s in result.spans)
        assert len(ver.heard) == passes and result.verification["passes"] == passes
        assert np.array_equal(ver.heard[0], audio)  # the first pass hears the audio itself
        for k, heard in enumerate(ver.heard[1:], 1):
            change = heard - audio
            assert 0 < np.abs(change).max() < 1e-3 and np.sqrt(np.mean(change ** 2)) < 2e-4  # inaudible
            assert not any(np.array_equal(heard, other) for other in ver.heard[:k])  # each pass its own dither
    assert found[1] == ["PHONE"]
    assert found[2] == found[3] == ["CREDIT_CARD", "PHONE"]  # the card only the second decoding heard
    # the same audio always gets the same redaction: the dither comes from a fixed seed
    again = SecondPassVerifier()
    Redactor(RedactConfig(verify=True), asr=FakeAsr(), detectors=[PatternDetector()],
             verifier=again).redact_tracks([(None, audio)], (8.0, 16000, 1))
    assert np.array_equal(again.heard[1], ver.heard[1])


def test_sure_passes_that_heard_plain_words_overrule_the_first_decoder():
    """A name the stock model read into everyday speech ("Cara Cara Cara" for "car park office")
    is refuted when every pass heard words there, sure of each, none a capitalised listed name,
    with no more than two spoken symbols, and found nothing; an unsure pass, a pass that found
    something there, a pass that heard nothing or a name there, or one that heard digits is no
    such opinion."""
    from deid_speech.pipeline import refuted

    span = Span(1.0, 2.5, "PERSON", 0.8, "name-list", "Cara Cara Cara")

    def heard(words, found=()):
        return Transcript.from_words(words), list(found)

    plain = [("car", 1.0, 1.4, 0.9), ("park", 1.5, 1.9, 0.8), ("office", 2.0, 2.5, 0.95)]
    assert refuted(span, [heard(plain), heard(plain)])
    assert refuted(span, [heard(plain), heard([("car", 1.0, 1.4, 0.9), ("park", 1.5, 1.9, 0.8), ("five", 2.0, 2.2, 0.9),
                                             ("B", 2.25, 2.45, 0.9)])])  # two symbols: a block number, plain enough
    assert not refuted(span, [heard(plain), heard([("car", 1.0, 1.4, 0.9), ("five", 1.5, 1.9, 0.9), ("five", 2.0, 2.2, 0.9),
                                                   ("B", 2.25, 2.45, 0.9)])])  # three
    assert not refuted(span, [heard(plain), heard([("car", 1.0, 1.4, 0.9), ("Kara", 1.5, 1.9, 0.29)])])
    assert not refuted(span, [heard(plain), heard(plain, [Span(1.5, 1.9, "PERSON")])])
    assert not refuted(span, [heard(plain), heard([("later", 4.0, 4.5, 0.9)])])
    # a name the pass heard but no detector flagged (spaCy tags "Emily," ADV) is no everyday word
    assert not refuted(span, [heard(plain), heard([("Emily,", 1.0, 1.4, 0.9), ("is", 1.5, 1.9, 0.9)])])
    assert refuted(span, [heard(plain), heard([("emily", 1.0, 1.4, 0.9), ("is", 1.5, 1.9, 0.9)])])
    assert not refuted(span, [heard(plain), heard([("nine", 1.0, 1.3, 0.9), ("one", 1.4, 1.7, 0.9),
                                                   ("two", 1.8, 2.1, 0.9)])])


def test_a_number_span_is_refuted_by_sure_enough_passes_that_heard_fewer_symbols_than_an_identifier():
    """Twelve digits a noisy line gave the first decoder, where both passes heard "seven thirty,
    table for ten" (730 10): refuted on the words' median probability, with up to six symbols;
    seven symbols (an identifier's length), a pass unsure of most words, or a name span is no
    such opinion."""
    from deid_speech.pipeline import refuted

    account = Span(1.0, 3.0, "BANK_ACCOUNT", 0.75, "patterns", "eight, four, three, four, seven, seven, 30, ...")

    def heard(words):
        return Transcript.from_words(words), []

    table = [("other", 0.9, 1.1, 0.09), ("seven", 1.2, 1.4, 0.88), ("thirty,", 1.4, 1.7, 1.0),
             ("table", 1.9, 2.2, 0.43), ("for", 2.3, 2.4, 0.52), ("ten", 2.5, 2.8, 0.6)]  # 730 10: five symbols
    assert refuted(account, [heard(table), heard(table)])
    assert not refuted(Span(1.0, 3.0, "PERSON", 0.75, "ner"), [heard(table), heard(table)])  # "other" 0.09
    seven = table + [("eleven", 2.8, 2.95, 0.6)]  # 730 1011: seven symbols
    assert not refuted(account, [heard(table), heard(seven)])
    unsure = [(w, a, b, 0.2 if w != "thirty," else p) for w, a, b, p in table]
    assert not refuted(account, [heard(table), heard(unsure)])


def test_a_number_span_is_refuted_by_passes_that_heard_a_look_alikes_context_word_there():
    """Where the first decoder wrote an account's digits for a time, a price or a reference
    ("38 ,000, 15, 4 ,000, ..." for "thirty eight dollars fifty"), passes that heard a unit
    ("am", "dollars") or a look-alike's announcing word ("reference") in or just before the
    span overrule it whatever its digits; a pass with as many digits and no such word, one that
    found an entity there, or an unsure one does not."""
    from deid_speech.pipeline import refuted

    account = Span(1.0, 4.0, "BANK_ACCOUNT", 0.75, "cue-runs", "two 8, 4, 8, F, 9, 4, the IP, 4, 3, F, 2, 3")

    def heard(words, found=()):
        return Transcript.from_words(words), list(found)

    def timed(text, p=0.9, t0=1.0):
        return [(w, t0 + 0.25 * i, t0 + 0.25 * i + 0.2, p) for i, w in enumerate(text.split())]

    slot = timed("at nine forty am or Thursday at two thirty or eleven")  # 9 40 2 30 11: eight symbols
    plain = timed("at nine forty seven or Thursday at two thirty or eleven")
    assert refuted(account, [heard(slot), heard(slot)])
    assert not refuted(account, [heard(slot), heard(plain)])
    assert refuted(account, [heard(slot), heard(timed("thirty eight fifty seven four two one dollars before the subsidy ok"))])
    assert refuted(account, [heard(slot), heard(timed("C two oh seven five two one please bring her card", t0=1.0)
                                                      + [("reference", 0.2, 0.7, 0.9), ("is", 0.75, 0.95, 0.9)])])
    assert not refuted(account, [heard(slot), heard(slot, [Span(1.5, 2.5, "PHONE", 0.9, "patterns")])])
    assert not refuted(account, [heard(slot), heard(timed("at nine forty am or Thursday at two thirty or eleven", p=0.1))])


def test_a_pass_that_skipped_words_in_a_span_gives_no_opinion():
    """Both passes heard only "two two six five", sure of each, where the first decoder wrote all
    ten digits of an account (2.6-6.8 s): they left 2.3 s of it without a word, so they skipped
    words there and do not overrule it."""
    from deid_speech.pipeline import refuted

    account = Span(2.6, 6.8, "BANK_ACCOUNT", 0.75, "patterns", "3719042265")
    tail = Transcript.from_words([("two", 4.9, 5.2, 0.97), ("two", 5.5, 5.7, 1.0), ("six", 5.8, 6.1, 1.0),
                                  ("five,", 6.4, 6.8, 0.7)])
    assert not refuted(account, [(tail, []), (tail, [])])
    assert refuted(Span(4.8, 6.8, "BANK_ACCOUNT", 0.75, "patterns", "2265"), [(tail, []), (tail, [])])


class SureVerifier:
    """A verifier that hears ``text`` on every pass, sure of each word (0.9)."""
    name = "sure"

    def __init__(self, text):
        self.text = text

    def recognize(self, audio, progress=None):
        t = make_transcript(self.text, word_dur=0.2, gap=0.05, t0=0.5)
        return Recognition(Transcript.from_words([(w.text, w.start, w.end, 0.9) for w in t.words]))


def _timed(text, t0, p=0.9, step=0.3):
    return [(w, round(t0 + step * i, 3), round(t0 + step * i + 0.25, 3), p) for i, w in enumerate(text.split())]


def test_the_part_of_a_span_that_no_pass_found_anything_in_is_cut_off_where_the_passes_refute_it():
    """tiny.en ran a phone into a loop of digits over the small talk after it (1.0-6.0 s); every
    pass heard the phone (1.0-3.1 s) and then plain words it was sure of: the span is cut back to
    the phone. Not where a pass doubted the words, heard digits next to what it found (its span
    stopped short of the number's last group), heard a word that carries a number on, or where
    the stretch is shorter than TRIM_MIN_S; a span no pass found anything in is left whole to
    :func:`refuted`."""
    from deid_speech.pipeline import TRIM_MIN_S, trimmed

    span = Span(1.0, 6.0, "PHONE", 0.9, "cue-runs+patterns", "8 ,3 ,4 ,3 ,4 ,5 ,1 ,2 ,3 ,2 ,3 ,2 ,3 ,2 ,5")
    phone = _timed("eight three oh three oh five one two", 1.0, step=0.25)  # 1.0-3.0 s

    def heard(after, p=0.9):
        return Transcript.from_words(phone + _timed(after, 3.2, p)), [Span(1.0, 3.1, "PHONE", 0.9, "cue-runs")]

    talk = "we also got the new camp in Malacca three days"  # one symbol: "three"
    (left,) = trimmed(span, [heard(talk), heard(talk)])
    assert (left.start, left.end, left.label) == (1.0, 3.1, "PHONE") and left.source == "cue-runs+patterns+trimmed"
    assert trimmed(span, [heard(talk), heard(talk, p=0.2)]) == [span]  # an unsure pass
    assert trimmed(span, [heard(talk), heard("fifty after six pm we also got the camp")]) == [span]  # "fifty" next to it
    assert trimmed(span, [heard(talk), heard("hundred after six pm we also got the camp")]) == [span]
    assert trimmed(span, [heard(talk), heard("nine eight seven six five four three two")]) == [span]  # digits
    short = Span(1.0, 3.1 + TRIM_MIN_S - 0.05, "PHONE", 0.9, "cue-runs+patterns")
    assert trimmed(short, [heard(talk), heard(talk)]) == [short]
    unfound = [(t, []) for t, _ in (heard(talk), heard(talk))]
    assert trimmed(span, unfound) == [span]
    # a stretch between two found parts goes too, and the span falls into two
    two = [(t, found + [Span(5.0, 6.0, "PHONE", 0.9, "cue-runs")]) for t, found in (heard(talk), heard(talk))]
    assert [(s.start, s.end) for s in trimmed(span, two)] == [(1.0, 3.1), (5.0, 6.0)]


def test_a_trimmed_span_is_redacted_as_what_is_left_of_it_and_the_report_counts_it():
    """Through redact: the first decoder's phone ran on over "thank you see you on Monday", which
    both passes heard as plain words after the phone they found; the redaction ends with the
    phone, and ``verified`` counts one trimmed span."""
    from deid_speech.ner.base import span_from_words

    first_text = "hello my number is nine one two three four five six seven eight one two three four five"
    plain_text = "hello my number is nine one two three four five six seven thank you see you on monday"

    class Digits:
        name = "digits"

        def detect(self, transcript):  # the first decoder's loop: every digit from "nine" on is the phone
            ws = transcript.words[4:] if transcript.words[-1].text == "five" else []
            return [span_from_words(transcript, ws, "PHONE", 0.9, "cue-runs")] if ws else []

    audio = (0.1 * np.sin(np.arange(8 * 16000) / 7.0)).astype(np.float32)
    words = make_transcript(plain_text, word_dur=0.2, gap=0.05, t0=0.5).words
    for passes in (2, 1):
        r = Redactor(RedactConfig(verify=True, verify_passes=passes), asr=FakeAsr(first_text),
                     detectors=[PatternDetector(), Digits()], verifier=SureVerifier(plain_text))
        result = r.redact_tracks([(None, audio)], (8.0, 16000, 1))
        (span,) = [s for s in result.spans if s.label == "PHONE"]
        assert span.start <= words[4].start  # "nine"
        if passes == 2:
            assert result.verification["trimmed"] == 1 and span.end == pytest.approx(words[11].end, abs=0.06)  # "seven"
        else:  # one pass is no majority: the loop stays redacted
            assert result.verification["trimmed"] == 0 and span.end > words[-2].start


def test_a_verifier_span_is_added_only_where_it_reaches_beyond_the_redaction():
    """A pass's span that the redaction so far (padded) covers all but a sliver of adds nothing:
    a number's sliver may be 0.1 s (the passes time the same digits a little differently), any
    other label's 0.05 s (a name's edge); beyond that the span is added."""
    from deid_speech.pipeline import MIN_REACH, MIN_REACH_NUMBER, _reaches

    regions = [(1.0, 3.0)]
    assert MIN_REACH < MIN_REACH_NUMBER
    assert not _reaches(Span(1.2, 3.08, "PHONE", 0.9, "patterns"), regions)
    assert not _reaches(Span(0.92, 2.5, "BANK_ACCOUNT", 0.9, "patterns"), regions)
    assert _reaches(Span(1.2, 3.15, "PHONE", 0.9, "patterns"), regions)
    assert _reaches(Span(0.8, 2.0, "NRIC", 0.9, "cue-runs"), regions)
    assert _reaches(Span(1.2, 3.08, "PERSON", 0.9, "name-list"), regions)  # a name's edge: 0.08 s is enough
    assert not _reaches(Span(1.2, 3.04, "PERSON", 0.9, "name-list"), regions)
    assert _reaches(Span(4.0, 4.5, "DATE", 0.9, "date-grammar"), regions)  # nothing covered


def test_a_stretch_every_decoding_found_is_one_agreed_span_the_redaction_does_not_pad():
    """The first decoding's phone and each pass's, timed a little differently, become one span
    over the union of their times, tagged ``agreed`` and not padded; a stretch that one pass
    missed, or that holds a name, is left to the usual padded spans."""
    from deid_speech.ner.base import merge_spans
    from deid_speech.pipeline import agreed_spans
    from deid_speech.redact import RedactOptions, padded, redaction_regions

    empty = Transcript.from_words([])
    first = [Span(1.0, 3.0, "PHONE", 0.9, "patterns"), Span(5.0, 6.0, "NRIC", 0.9, "patterns"),
             Span(8.0, 9.0, "PERSON", 0.7, "cue")]
    passes = [(empty, [Span(0.9, 2.8, "PHONE", 0.9, "cue-runs"), Span(5.1, 6.2, "NRIC", 0.9, "patterns"),
                       Span(8.0, 9.1, "PERSON", 0.7, "cue")]),
              (empty, [Span(1.1, 2.0, "PHONE", 0.9, "patterns"), Span(2.0, 3.2, "PHONE", 0.6, "cue-runs"),
                       Span(7.9, 9.0, "PERSON", 0.7, "name-list")])]  # the NRIC: this pass missed it
    agreed = agreed_spans(first, passes)
    assert [(s.start, s.end, s.label) for s in agreed] == [(0.9, 3.2, "PHONE")]  # a chain: 2.0-3.2 joins 1.1-2.0
    assert agreed[0].source == "cue-runs+patterns+verify+agreed"
    opts = RedactOptions()
    assert padded(agreed[0], opts) == (0.9, 3.2)
    assert padded(first[0], opts) == (1.0 - opts.default.pad_before, 3.0 + opts.default.pad_after)
    opinion = SecondOpinion([Span(2.0, 3.2, "PHONE", 0.6, "cue-runs+verify")], [], agreed)
    assert opinion.applied(first) == [first[1], first[2], agreed[0]]  # the parts give way to the agreed span
    # a region that also holds a span one decoding alone found is padded in full
    merged = merge_spans([agreed[0], Span(3.1, 3.5, "PHONE", 0.6, "cue-runs")])
    assert "agreed" not in merged[0].source.split("+")
    assert redaction_regions(merged, opts)[0][:2] == (0.9 - opts.default.pad_before, 3.5 + opts.default.pad_after)
    assert agreed_spans(first, passes[:1])[0].label == "PHONE"  # one pass: the phone and the NRIC agree
    assert len(agreed_spans(first, passes[:1])) == 2  # the name never does


def test_a_doubted_particle_or_a_spelled_acronym_does_not_stop_the_passes_refuting_a_name():
    """"You're" for the particle "ya": a pass that doubted "ya" (0.17) but was sure of the rest
    still overrules it, and so does one that heard "DOB" (three spelled letters, but an acronym);
    a doubted word that is no particle, or spelled letters that are no acronym, do not."""
    from deid_speech.pipeline import refuted

    name = Span(1.0, 2.2, "PERSON", 0.6, "ner", "You're")

    def heard(*words):
        return Transcript.from_words([(w, 1.0 + 0.3 * i, 1.25 + 0.3 * i, p) for i, (w, p) in enumerate(words)]), []

    ya = heard(("sign", 0.9), ("up", 0.9), ("ya", 0.17), ("lah,", 0.95))
    dob = heard(("your", 0.8), ("DOB", 0.52), ("account", 0.9), ("ok", 0.9))
    assert refuted(name, [ya, dob])
    assert not refuted(name, [ya, heard(("sign", 0.9), ("up", 0.9), ("Yana", 0.17), ("lah,", 0.95))])
    assert not refuted(name, [ya, heard(("your", 0.8), ("DJB", 0.52), ("account", 0.9), ("ok", 0.9))])


def test_a_word_the_first_decoder_was_sure_of_does_not_stop_passes_that_doubted_it_refuting_a_name():
    """"Members get seasoned parking", a name to the first decoder's NER: the passes heard the
    same words and doubted "members" (0.19, 0.29). Two decoders wrote that word, so the doubt
    no longer saves the name; it does where the first decoder doubted the word too, where it
    heard another word, or where no first transcript is given."""
    from deid_speech.pipeline import refuted

    name = Span(1.0, 2.2, "PERSON", 0.6, "ner", "Members get seasoned parking")

    def heard(*words):
        return Transcript.from_words([(w, 1.0 + 0.3 * i, 1.25 + 0.3 * i, p) for i, (w, p) in enumerate(words)])

    passes = [(heard(("members", p), ("get", 0.95), ("season", 0.73), ("parking,", 0.89)), []) for p in (0.19, 0.29)]
    first = heard(("Members", 0.89), ("get", 0.97), ("seasoned", 0.44), ("parking.", 0.96))
    assert refuted(name, passes, first)
    assert not refuted(name, passes)
    assert not refuted(name, passes, heard(("Members", 0.2), ("get", 0.97), ("seasoned", 0.44), ("parking.", 0.96)))
    assert not refuted(name, passes, heard(("Memphis", 0.89), ("get", 0.97), ("seasoned", 0.44), ("parking.", 0.96)))


def test_a_span_only_the_first_decoder_found_is_dropped_when_every_pass_heard_plain_words():
    """Through redact: the stock model's "Cara Cara Cara" is refuted by two passes that heard
    "car park office" (the report counts it), kept with one pass (one opinion is no majority),
    and the phone number both decoders heard stays redacted."""
    from deid_speech.ner.base import span_from_words

    first_text = "hello Cara Cara Cara my number is nine one two three four five six seven thank you"
    plain_text = "hello car park office my number is nine one two three four five six seven thank you"

    class Names:
        name = "names"

        def detect(self, transcript):
            ws = [w for w in transcript.words if w.text == "Cara"]
            return [span_from_words(transcript, ws, "PERSON", 0.55, "name-list")] if ws else []

    audio = (0.1 * np.sin(np.arange(8 * 16000) / 7.0)).astype(np.float32)
    for passes, kept in ((2, False), (1, True)):
        r = Redactor(RedactConfig(verify=True, verify_passes=passes), asr=FakeAsr(first_text),
                     detectors=[PatternDetector(), Names()], verifier=SureVerifier(plain_text))
        result = r.redact_tracks([(None, audio)], (8.0, 16000, 1))
        assert ("PERSON" in [s.label for s in result.spans]) is kept
        assert "PHONE" in [s.label for s in result.spans]
        assert result.verification["refuted"] == (0 if kept else 1)
        assert result.verification["agreed"] == (0 if kept else 1)  # the phone: every decoding found it


def test_two_verifier_models_take_turns_by_pass_and_what_either_finds_is_redacted():
    """``--verifier A,B``: pass k is decoded by the (k mod 2)-th model, each hearing its pass's
    own audio (pass 0 the audio itself, pass k > 0 its dither); the card that only B hears
    is redacted, and the JSON names both."""
    from deid_speech.pipeline import ByPass

    class Model(SecondPassVerifier):
        def __init__(self, name, hears_card):
            super().__init__()
            self.name, self.hears_card = name, hears_card

        def recognize(self, audio, progress=None):
            self.heard.append(audio.copy())
            card = " the card is four five three two one one five two eight eight zero four six seven one two"
            return Recognition(make_transcript(TEXT + (card if self.hears_card else ""), word_dur=0.2, gap=0.05,
                                               t0=0.5))

    audio = (0.1 * np.sin(np.arange(8 * 16000) / 7.0)).astype(np.float32)
    a, b = Model("A", False), Model("B", True)
    r = Redactor(RedactConfig(verify=True, verifier="A,B", verify_passes=3), asr=FakeAsr(),
                 detectors=[PatternDetector()], verifier=ByPass([a, b]))
    result = r.redact_tracks([(None, audio)], (8.0, 16000, 1))
    assert len(a.heard) == 2 and len(b.heard) == 1  # passes 0 and 2 by A, pass 1 by B
    assert np.array_equal(a.heard[0], audio) and not np.array_equal(b.heard[0], audio)
    assert not np.array_equal(a.heard[1], b.heard[0])  # passes 1 and 2: dithers of their own
    assert sorted(s.label for s in result.spans) == ["CREDIT_CARD", "PHONE"]
    # the phone every decoding heard is one agreed span; the card only B heard is not
    assert result.verification == {"by": "A,B", "passes": 3, "added": result.verification["added"], "refuted": 0,
                                   "agreed": 1, "trimmed": 0}
    assert [s.label for s in result.spans if "agreed" in s.source.split("+")] == ["PHONE"]
    assert ByPass([a]) is a  # one model is itself
    assert RedactConfig(verifier=" tiny.en-sg , base-sg ").verifiers == ("tiny.en-sg", "base-sg")


def test_in_process_verifier_models_are_held_one_at_a_time_on_a_long_call():
    """Without the helper, a call of a minute or more has the verifier's weights let go while the
    first decoder works, and each pass's model chosen when that pass decodes, the other model's
    weights let go first (``take_turn``); shorter audio keeps both."""
    from deid_speech.pipeline import ByPass

    events = []

    class Model(SecondPassVerifier):
        def __init__(self, name):
            super().__init__()
            self.name = name

        def release(self):
            events.append(f"release {self.name}")

        def recognize(self, audio, progress=None):
            events.append(f"decode {self.name}")
            return super().recognize(audio, progress)

    class First(FakeAsr):
        def transcribe(self, audio, progress=None):
            events.append("first")
            return super().transcribe(audio, progress)

    for seconds, expected in ((61, ["release A", "release B", "first", "release B", "decode A", "release A", "decode B"]),
                              (8, ["first", "decode A", "decode B"])):
        events.clear()
        audio = (0.1 * np.sin(np.arange(seconds * 16000) / 7.0)).astype(np.float32)
        r = Redactor(RedactConfig(verify=True, verifier="A,B", verify_passes=2, verify_in_helper=False), asr=First(),
                     detectors=[PatternDetector()], verifier=ByPass([Model("A"), Model("B")]))
        r.redact_tracks([(None, audio)], (float(seconds), 16000, 1))
        assert events == expected


def test_beside_takes_back_the_passes_the_helper_has_not_begun_the_last_queued_first(monkeypatch):
    """Three passes with a helper process: the helper gets all three at once, its own model's
    pass first and this process's model's after, the undithered pass 0 last (1, 2, 0). Once its
    own first decoding is done, this process takes back those of its passes that the helper has
    not begun, the last queued first, and stops at the first it cannot take; what the helper
    keeps is read from it. Whichever process decodes a pass, what each pass found is redacted
    (only pass 1 hears the card). On a minute of audio or more this process holds one model at
    a time: its pass model's weights wait until the first decoder is done, and the first
    decoder's are let go while a pass decodes here. From TAKE_BACK_MAX_S of a file's audio on
    (its channels so far), the passes queue in their order and nothing is taken back."""
    import deid_speech.pipeline as pipeline
    from deid_speech.pipeline import Beside

    events = []
    card = " the card is four five three two one one five two eight eight zero four six seven one two"

    class Model(SecondPassVerifier):
        name = "A"

        def release(self):
            events.append("release A")

        def recognize(self, audio, progress=None):
            events.append("decode A")
            self.heard.append(np.asarray(audio[:]).copy())
            return Recognition(make_transcript(TEXT, word_dur=0.2, gap=0.05, t0=0.5))

    class Done:
        def __init__(self, k, begun):
            self.k, self.begun = k, begun

        def claim(self):
            events.append(f"claim {self.k}")
            return self.k not in self.begun

        def result(self):
            events.append(f"result {self.k}")
            return Recognition(make_transcript(TEXT + (card if self.k == 1 else ""), word_dur=0.2, gap=0.05, t0=0.5))

    class Helper:
        name = "A,B"

        def __init__(self, begun):
            self.begun = begun

        def submit_passes(self, audio, seeds):
            events.append(f"helper {seeds}")
            return [Done(k, self.begun) for k in seeds]

        def close(self):
            events.append("close")

    class First(FakeAsr):
        def transcribe(self, audio, progress=None):
            events.append("first")
            return super().transcribe(audio, progress)

        def release(self):
            events.append("release first")

    here = ["release first", "decode A", "release A"]  # a minute or more: one model at a time
    cases = [  # seconds, passes the helper had begun, events, passes decoded here
        (61, {1, 2}, ["helper (1, 2, 0)", "release A", "first", "claim 0", *here, "claim 2", "result 1", "result 2"], [0]),
        (8, {1, 2}, ["helper (1, 2, 0)", "first", "claim 0", "decode A", "claim 2", "result 1", "result 2"], [0]),
        (61, {0, 1, 2}, ["helper (1, 2, 0)", "release A", "first", "claim 0", "result 0", "result 1", "result 2"], []),
        (61, {1}, ["helper (1, 2, 0)", "release A", "first", "claim 0", *here, "claim 2", *here, "result 1"], [0, 2]),
        (71, set(), ["helper (0, 1, 2)", "release A", "first", "result 0", "result 1", "result 2"], []),  # too long
    ]
    monkeypatch.setattr(pipeline, "TAKE_BACK_MAX_S", 70.0)
    for seconds, begun, expected, decoded_here in cases:
        events.clear()
        audio = (0.1 * np.sin(np.arange(seconds * 16000) / 7.0)).astype(np.float32)
        mine = Model()
        r = Redactor(RedactConfig(verify=True, verifier="A,B"), asr=First(), detectors=[PatternDetector()],
                     verifier=Beside(Helper(begun), {0: mine, 2: mine}))
        result = r.redact_tracks([(None, audio)], (float(seconds), 16000, 1))
        assert events == expected
        assert len(mine.heard) == len(decoded_here)
        for k, heard in zip(decoded_here, mine.heard):  # pass 0 hears the audio itself, pass 2 it dithered
            assert np.array_equal(heard, audio) == (k == 0) and np.abs(heard - audio).max() < 1e-3
        assert sorted(s.label for s in result.spans) == ["CREDIT_CARD", "PHONE"]
        assert result.verification["passes"] == 3 and result.verification["by"] == "A,B"
        r.close()
        assert events[-1] == "close"
    # two channels of 40 s: the second brings the file's audio to 80 s, so nothing of it is taken back
    events.clear()
    audio = (0.1 * np.sin(np.arange(40 * 16000) / 7.0)).astype(np.float32)
    r = Redactor(RedactConfig(verify=True, verifier="A,B"), asr=First(), detectors=[PatternDetector()],
                 verifier=Beside(Helper({1, 2}), {0: Model(), 2: Model()}))
    r.redact_tracks([(0, audio), (1, audio * 0.5)], (40.0, 16000, 2))
    assert events == ["helper (1, 2, 0)", "first", "claim 0", "decode A", "claim 2", "result 1", "result 2",
                      "helper (0, 1, 2)", "first", "result 0", "result 1", "result 2"]


def test_verifier_models_by_pass_are_checked():
    one = RedactConfig(verifier="tiny.en-sg,base-sg", verify_passes=1)  # fewer passes than models: the first alone
    from deid_speech.pipeline import ByPass, _verifier

    alone = _verifier(one, None)  # nothing is loaded before the first decoding
    assert not isinstance(alone, ByPass) and alone.options.model == "tiny.en-sg"
    both = _verifier(RedactConfig(verifier="tiny.en-sg,base-sg"), None)
    assert [r.options.model for r in both.recognizers] == ["tiny.en-sg", "base-sg"]
    with pytest.raises(DeidError, match="e2e decodes alone"):
        RedactConfig(verifier="e2e,base-sg")
    for bad in ("tiny.en-sg,", ",", " "):
        with pytest.raises(DeidError, match="--verifier needs a model"):
            RedactConfig(verifier=bad)


def test_verify_passes_and_the_helper_process_are_checked():
    assert RedactConfig().verify_passes == 3
    for bad in (0, 5, -1, 1.5, "2"):
        with pytest.raises(DeidError, match="--verify-passes must be a whole number from 1 to 4"):
            RedactConfig(verify_passes=bad)
    with pytest.raises(DeidError, match="which is off here"):
        RedactConfig(verify=False, verify_passes=2)
    assert RedactConfig(verify=False, verify_passes=3).verify is False  # the default needs no --verify
    with pytest.raises(DeidError, match="--helper-process runs the verifier of --verify, which is off here"):
        RedactConfig(verify=False, verify_in_helper=True)
    with pytest.raises(DeidError, match="the e2e verifier decodes in this process"):
        RedactConfig(verifier="e2e", verify_in_helper=True)


def test_verify_is_refused_for_the_e2e_systems():
    with pytest.raises(DeidError, match="--verify checks the cascade"):
        RedactConfig(system="e2e", verify=True)


def test_the_verifier_can_be_a_whisper_model_and_needs_verify(monkeypatch):
    import deid_speech.asr.whisper as whisper

    built = []

    class FakeWhisper:
        def __init__(self, options):
            built.append(options.model)
            self.name = options.model

        def transcribe(self, audio, progress=None):
            return make_transcript("nothing here")

    monkeypatch.setattr(whisper, "Transcriber", FakeWhisper)
    r = Redactor(RedactConfig(verify=True, verifier="tiny.en-sg", verify_in_helper=False), asr=FakeAsr(),
                 detectors=[PatternDetector()])
    assert built == ["tiny.en-sg"] and r.verifier.name == "tiny.en-sg"
    assert r.verify(np.zeros(16000, np.float32), []) == SecondOpinion([], [])
    with pytest.raises(DeidError, match="which is off here"):
        RedactConfig(verifier="e2e", verify=False)


def test_the_verifier_goes_to_a_helper_process_only_with_two_cores_or_more(monkeypatch):
    import deid_speech.asr.whisper as whisper
    from deid_speech.pipeline import _cores

    for n, split in ((1, None), (2, (1, 1)), (3, (1, 2)), (16, (8, 8))):
        monkeypatch.setattr(whisper, "cpu_threads", lambda requested=0, n=n: requested or n)
        assert _cores(RedactConfig()) == split
        assert _cores(RedactConfig(verify_in_helper=False)) is None
        assert _cores(RedactConfig(verify=False)) is None and _cores(RedactConfig(verifier="e2e")) is None
    monkeypatch.setattr(whisper, "cpu_threads", lambda requested=0: requested or 1)
    assert _cores(RedactConfig(verify_in_helper=True)) == (1, 1)  # asked for: even on one core


def test_the_cascade_verifies_by_default_unless_its_recogniser_is_the_verifier():
    assert RedactConfig().verify is True and RedactConfig().verifier == "tiny.en-sg,base-sg"
    assert RedactConfig(verify=False).verify is False
    assert RedactConfig(asr_model="tiny.en-sg", verifier="tiny.en-sg").verify is False  # the same decoder twice
    assert RedactConfig(asr_model="tiny.en-sg").verify is True  # base-sg's turn still says something new
    assert RedactConfig(asr_model="tiny.en-sg", verifier="e2e").verify is True
    assert RedactConfig(system="e2e").verify is False and RedactConfig(system="e2e+patterns").verify is False
    with pytest.raises(DeidError, match="needs a model"):
        RedactConfig(verify=True, verifier=" ")


def test_without_verify_the_json_says_so(call):
    _, json_out, _ = redact_file(redactor(), call, None, {call.resolve()})
    assert json.loads(json_out.read_text())["verified"] is None


def _tone_file(path, seconds=2.0):
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(path, tone(seconds, 16000), 16000)
    return path


def test_inputs_whose_outputs_collide_are_refused_before_any_work_and_nothing_is_lost(tmp_path, capsys):
    a, b = _tone_file(tmp_path / "a" / "call.wav"), _tone_file(tmp_path / "b" / "call.wav")
    x, y = _tone_file(tmp_path / "x.wav"), _tone_file(tmp_path / "x.flac")
    out = tmp_path / "out"
    assert redact_many(redactor(), [a, b], out) == 1
    assert not out.exists() or not any(out.iterdir())
    err = capsys.readouterr()
    assert "would also be written for" in err.err and "2 file(s): 0 redacted, 2 failed" in err.out
    # x.wav and x.flac get distinct outputs: the second keeps its extension in its names
    assert redact_many(redactor(), [x, y], None) == 0
    names = sorted(p.name for p in tmp_path.glob("x*redacted*"))
    assert names == ["x.flac.redacted.flac", "x.flac.redacted.json", "x.redacted.json", "x.redacted.wav"]
    assert a.exists() and b.exists() and x.exists() and y.exists()
    files, skipped, _ = collect_inputs([str(tmp_path)])  # a folder run recognises both pairs as outputs
    assert {p.name for p, _ in skipped} >= set(names)


def test_a_second_run_over_its_own_outputs_never_deletes_them(tmp_path):
    src = _tone_file(tmp_path / "a.wav")
    assert redact_many(redactor(), [src], None) == 0
    first = (tmp_path / "a.redacted.wav").read_bytes()
    # `deid-speech redact *.wav` again: the earlier output is now an input too; given as a
    # file, it is skipped as an output of this tool; forced in, a.wav is refused, nothing lost
    files, skipped, _ = collect_inputs([str(src), str(tmp_path / "a.redacted.wav")])
    assert files == [src] and [p.name for p, _ in skipped] == ["a.redacted.wav"]
    assert redact_many(redactor(), [src, tmp_path / "a.redacted.wav"], None) == 1
    assert (tmp_path / "a.redacted.wav").read_bytes() == first
    assert (tmp_path / "a.redacted.json").exists()


def test_a_cleanup_that_fails_is_reported_not_raised(tmp_path, monkeypatch, capsys):
    import deid_speech.pipeline as P

    src = _tone_file(tmp_path / "a.wav")
    (tmp_path / "a.redacted.json").write_text("{}")  # stale, from an earlier run

    def boom(*a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(P.os, "remove", boom)
    r = Redactor(RedactConfig(verify=False), asr=FakeAsr(), detectors=[BrokenDetector()])
    assert redact_many(r, [src, _tone_file(tmp_path / "b.wav")], None, existing="overwrite") == 1
    captured = capsys.readouterr()
    assert "could not remove the stale output" in captured.err and "2 file(s): 0 redacted, 2 failed" in captured.out


class ChannelAsr:
    """Hears what a channel says: a phone number where the channel is loud and high-pitched,
    a card where it is loud and low-pitched, nothing where it is silent."""
    name = "fake"

    def __init__(self):
        self.calls = 0

    def transcribe(self, audio, progress=None):
        self.calls += 1
        if np.sqrt(np.mean(audio ** 2)) < 1e-3:
            return make_transcript("")
        crossings = np.mean(np.abs(np.diff(np.sign(audio[:16000])))) / 2 * 16000
        text = ("my number is nine one two three four five six seven" if crossings > 400 else
                "card four five three two one one five two eight eight zero four six seven one two")
        return make_transcript(text, word_dur=0.2, gap=0.02, t0=0.3 if crossings > 400 else 0.5)


def _stereo(tmp_path, left, right, name="st.wav"):
    p = tmp_path / name
    sf.write(p, np.stack([left, right], axis=1), 16000)
    return p


def test_channels_that_cancel_in_the_mix_are_each_checked(tmp_path):
    x = tone(5.0, 16000, hz=440.0)[:, 0]
    src = _stereo(tmp_path, x, -x)
    r = Redactor(RedactConfig(verify=False), asr=ChannelAsr(), detectors=[PatternDetector()])
    _, json_out, result = redact_file(r, src, None, {src.resolve()})
    assert [s.label for s in result.spans] == ["PHONE"]
    y, _ = sf.read(tmp_path / "st.redacted.wav")
    k = int(1.5 * 16000)  # inside the phone: both channels beeped, neither keeps its speech
    assert not np.allclose(y[k:k + 200, 0], x[k:k + 200]) and not np.allclose(y[k:k + 200, 1], -x[k:k + 200])


def test_each_channel_is_transcribed_apart_and_what_either_says_is_redacted_in_both(tmp_path):
    agent, caller = tone(5.0, 16000, hz=600.0)[:, 0], tone(5.0, 16000, hz=120.0)[:, 0]
    src = _stereo(tmp_path, agent, caller)
    r = Redactor(RedactConfig(verify=False), asr=ChannelAsr(), detectors=[PatternDetector()])
    _, json_out, result = redact_file(r, src, None, {src.resolve()})
    d = json.loads(json_out.read_text())
    chans = d["channel_results"]
    assert [c["channel"] for c in chans] == [0, 1]
    assert [[s["label"] for s in c["spans"]] for c in chans] == [["PHONE"], ["CREDIT_CARD"]]
    assert d["spans"] and min(s["start"] for s in d["spans"]) <= 1.1 and max(s["end"] for s in d["spans"]) >= 4.0
    assert all("four five three" not in c["redacted_transcript"] and "nine one two" not in c["redacted_transcript"]
               for c in chans)
    assert "nine" not in json_out.read_text() and "four five" not in json_out.read_text()


def test_the_unredacted_report_is_separate_opt_in_and_private(tmp_path):
    import stat

    agent, caller = tone(5.0, 16000, hz=600.0)[:, 0], tone(5.0, 16000, hz=120.0)[:, 0]
    src = _stereo(tmp_path, agent, caller)
    r = Redactor(RedactConfig(verify=False), asr=ChannelAsr(), detectors=[PatternDetector()])
    redact_file(r, src, None, {src.resolve()})
    assert not (tmp_path / "st.pii.json").exists()  # never by default
    redact_file(r, src, None, {src.resolve()}, unredacted_report=True)
    pii = tmp_path / "st.pii.json"
    assert stat.S_IMODE(pii.stat().st_mode) == 0o600
    d = json.loads(pii.read_text())
    chans = d["channel_results"]
    assert "nine one two" in chans[0]["transcript"] and "four five three" in chans[1]["transcript"]
    assert "nine one two" not in chans[1]["transcript"]  # never one merged transcript
    assert [s["text"] for s in chans[0]["spans"]] == ["nine one two three four five six seven"]


def test_a_stereo_file_with_equal_channels_is_decoded_once(tmp_path):
    x = tone(3.0, 16000, hz=440.0)[:, 0]
    asr = ChannelAsr()
    src = _stereo(tmp_path, x, x)
    _, json_out, _ = redact_file(Redactor(RedactConfig(verify=False), asr=asr, detectors=[PatternDetector()]), src, None,
                                 {src.resolve()})
    assert asr.calls == 1 and json.loads(json_out.read_text())["channel_results"] == []


@pytest.mark.parametrize("action", ["beep", "fail", "warn"])
def test_speech_no_word_covers_is_beeped_or_fails_the_file_or_is_only_reported(tmp_path, action, monkeypatch):
    import deid_speech.asr.whisper as whisper

    monkeypatch.setattr(whisper, "speech_regions", lambda audio, options=None: [(0.0, 6.0)])  # the VAD: all speech
    src = tmp_path / "a.wav"
    x = tone(6.0, 16000, hz=300.0)
    sf.write(src, x, 16000)
    r = Redactor(RedactConfig(uncovered=action, verify=False), asr=FakeAsr("hello there"), detectors=[PatternDetector()])
    if action == "fail":
        with pytest.raises(DeidError, match="could not be checked for PII"):
            redact_file(r, src, None, {src.resolve()})
        assert not (tmp_path / "a.redacted.wav").exists()
        from deid_speech.batch import Job, redact_one  # a batch's line names the file (several may fail)

        ok, line = redact_one(r, Job(src, None, {src.resolve()}, None))
        assert not ok and line.startswith(f"error: {src}: ") and "could not be checked for PII" in line
        return
    _, json_out, result = redact_file(r, src, None, {src.resolve()})
    d = json.loads(json_out.read_text())
    assert d["uncovered_action"] == action and d["uncovered_speech"] and d["spans"] == []
    y, _ = sf.read(tmp_path / "a.redacted.wav", dtype="float32")
    k = int(4.0 * 16000)
    changed = not np.allclose(y[k:k + 400], x[k:k + 400, 0], atol=1e-3)
    assert changed is (action == "beep")


def test_a_fresh_audio_never_pairs_with_a_stale_report(tmp_path, monkeypatch):
    import deid_speech.pipeline as P

    src = tmp_path / "a.wav"
    sf.write(src, tone(5.0), 16000)
    (tmp_path / "a.redacted.json").write_text('{"stale": true}')

    def fail_json(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(P, "write_text_atomic", fail_json)
    with pytest.raises(DeidError, match="disk full"):
        redact_file(redactor(), src, None, {src.resolve()})
    assert not (tmp_path / "a.redacted.json").exists() and not (tmp_path / "a.redacted.wav").exists()
    assert not list(tmp_path.glob(".tmp-*"))


def test_old_temporaries_are_cleaned_and_fresh_ones_kept(tmp_path):
    import os
    import time

    from deid_speech.pipeline import clean_old_temps

    old, fresh = tmp_path / ".tmp-old.wav", tmp_path / ".tmp-new.wav"
    old.write_bytes(b"x")
    fresh.write_bytes(b"x")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    clean_old_temps(tmp_path)
    assert not old.exists() and fresh.exists()


def test_a_file_name_that_is_not_utf8_is_redacted_and_reported(tmp_path):
    import os

    src = Path(os.fsdecode(os.fsencode(str(tmp_path)) + b"/caf\xe9.wav"))
    with open(src, "wb") as fh:
        sf.write(fh, tone(5.0), 16000, format="WAV", subtype="PCM_16")
    audio_out, json_out, result = redact_file(redactor(), src, None, {src.resolve()})
    assert audio_out.exists() and json.loads(json_out.read_text(encoding="utf-8"))["file"].endswith("caf\\xe9.wav")
    assert [s.label for s in result.spans] == ["PHONE"]


def test_outputs_that_cannot_be_written_fail_that_file_with_a_reason_and_the_batch_goes_on(tmp_path, capsys):
    long_src = _tone_file(tmp_path / ("n" * 245 + ".wav"))  # its output name is over 255 bytes
    blocked = _tone_file(tmp_path / "b.wav")
    (tmp_path / "b.redacted.json").mkdir()  # a folder where the report would go
    fine = _tone_file(tmp_path / "c.wav")
    assert redact_many(redactor(), [long_src, blocked, fine], None) == 1
    out = capsys.readouterr()
    assert "file name too long" in out.err and "b.redacted.json" in out.err
    assert "3 file(s): 1 redacted, 2 failed" in out.out and "Traceback" not in out.err
    assert (tmp_path / "c.redacted.wav").exists() and not (tmp_path / "b.redacted.wav").exists()


def test_every_report_validates_against_the_published_schemas(tmp_path):
    import jsonschema

    from deid_speech.schema import schemas

    root = Path(__file__).resolve().parents[1] / "docs" / "schema"
    built = schemas()
    for name, schema in built.items():  # the published files are what the code builds
        assert json.loads((root / name).read_text()) == schema, "regenerate: python -m deid_speech.schema"
    mono = _tone_file(tmp_path / "m.wav", 5.0)
    stereo = _stereo(tmp_path, tone(5.0, 16000, hz=600.0)[:, 0], tone(5.0, 16000, hz=120.0)[:, 0])
    for src, asr in ((mono, FakeAsr()), (stereo, ChannelAsr())):
        r = Redactor(RedactConfig(verify=False), asr=asr, detectors=[PatternDetector()])
        _, json_out, _ = redact_file(r, src, None, {src.resolve()}, unredacted_report=True)
        jsonschema.validate(json.loads(json_out.read_text()), built["redacted.schema.json"])
        pii = json_out.with_name(json_out.name.replace(".redacted.json", ".pii.json"))
        jsonschema.validate(json.loads(pii.read_text()), built["pii.schema.json"])
    bad = json.loads(json_out.read_text())
    bad["spans"][0]["text"] = "nine one two"  # clear text in the shared report is a schema error
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, built["redacted.schema.json"])


class _HelperLike:
    """A verifier in a helper process, as the pipeline sees it: ``submit_passes`` sends the
    audio away (here: its length) and ``result()`` waits. At each wait it notes which of the
    first decoder's tracks this process still holds."""
    name = "fake-helper"

    def __init__(self, tracks):
        self.tracks, self.alive_at_wait = tracks, []

    def submit_passes(self, audio, seeds):
        helper = self

        class Pending:
            def result(self):
                import gc

                gc.collect()
                helper.alive_at_wait.append([r() is not None for r in helper.tracks])
                return Recognition(make_transcript(TEXT, word_dur=0.2, gap=0.05, t0=0.5))

        return [Pending() for _ in seeds]

    def recognize(self, audio, progress=None):
        raise AssertionError("a helper's audio is decoded by submit_passes")

    def share(self, audio):  # as HelperTranscriber.share: a read-only copy both processes read
        shared = audio.copy()
        shared.flags.writeable = False
        return shared


@pytest.mark.parametrize("channels", [1, 2])
def test_a_track_is_let_go_while_the_verifiers_results_are_waited_for(tmp_path, channels):
    """A long call's track (78 MB for 21 minutes at 16 kHz) is not held in this process while
    the helper decodes it: the streamed reader, the pipeline's loop and the redactor hand it
    on without keeping it, and the redactor lets go of it once the first decoder and the
    uncovered-speech check are done with it."""
    import weakref

    path = tmp_path / "call.flac"
    x = tone(4.0, 16000, channels=channels)
    if channels == 2:
        x[:, 1] *= 0.5  # a second distinct channel
    sf.write(path, x, 16000, format="FLAC", subtype="PCM_16")
    tracks: list = []

    class Remembering(FakeAsr):
        def transcribe(self, audio, progress=None):
            tracks.append(weakref.ref(audio))
            assert not audio.flags.writeable  # the first decoder reads the track the helper shares
            return super().transcribe(audio, progress)

    ver = _HelperLike(tracks)
    r = Redactor(RedactConfig(verify=True, verify_passes=2), asr=Remembering(), detectors=[PatternDetector()],
                 verifier=ver)
    _, json_out, result = redact_file(r, path, None, {path.resolve()})
    assert len(tracks) == channels and len(ver.alive_at_wait) == 2 * channels
    assert not any(any(alive) for alive in ver.alive_at_wait)  # no track held while the helper works
    assert json.loads(json_out.read_text())["verified"]["passes"] == 2
    # the in-memory path (Audio.tracks16k's list) hands its tracks on the same way
    from deid_speech.audio import Audio

    tracks.clear(), ver.alive_at_wait.clear()
    r.redact(Audio(x, 16000, "WAV", "PCM_16"))
    assert len(tracks) == channels and not any(any(alive) for alive in ver.alive_at_wait)


def test_an_in_process_whisper_verifier_hears_its_dithered_pass_by_slices_without_a_copy():
    """``--no-helper-process``: pass k > 0 of a Whisper verifier reads a DitheredTrack (the
    dither's values, slice by slice, no dithered copy of a long call beside its track); any
    other recogniser gets the dithered array itself."""
    from deid_speech.asr.whisper import Transcriber
    from deid_speech.audio import DitheredTrack, dither

    heard = []

    class Whisper(Transcriber):
        name = "fake-whisper"

        def __init__(self):  # nothing loaded
            pass

        def transcribe(self, audio, progress=None):
            heard.append(audio)
            return make_transcript(TEXT, word_dur=0.2, gap=0.05, t0=0.5)

    class Other:
        name = "other"

        def recognize(self, audio, progress=None):
            heard.append(audio)
            return Recognition(make_transcript(TEXT, word_dur=0.2, gap=0.05, t0=0.5))

    audio = (0.1 * np.sin(np.arange(8 * 16000) / 7.0)).astype(np.float32)
    for verifier, lazy in ((Whisper(), True), (Other(), False)):
        heard.clear()
        r = Redactor(RedactConfig(verify=True, verify_passes=2, verify_in_helper=False), asr=FakeAsr(),
                     detectors=[PatternDetector()], verifier=verifier)
        r.redact_tracks([(None, audio)], (8.0, 16000, 1))
        assert len(heard) == 2 and heard[0] is audio  # pass 0: the track itself
        assert isinstance(heard[1], DitheredTrack) is lazy
        assert np.array_equal(np.asarray(heard[1]), dither(audio, 1))  # the same values either way


def test_a_number_one_decoding_heard_named_as_a_look_alike_is_dropped_from_every_decoding():
    """A parcel's tracking code: the first decoder heard "truck is S D F G ..." and found a plate;
    one pass heard "tracking" before the same code, so it is a look-alike in every decoding,
    the first decoder's span, a pass's added span and the agreed span alike; where another
    decoding heard "IC" before it, or the span is a name, it stays."""
    from deid_speech.pipeline import named_lookalike

    def at(text, t0=1.0):
        return Transcript.from_words([(w, t0 + 0.3 * i, t0 + 0.3 * i + 0.25, 0.9) for i, w in enumerate(text.split())])

    first = at("parcel truck is S D F G seven one one four oh two two nine five they say")
    heard_tracking = at("parcel tracking S D F G seven one one four oh two two nine five they say", t0=1.3)
    heard_ic = at("parcel my IC S D F G seven one one four oh two two nine five they say")
    code = Span(1.9, 5.85, "CAR_PLATE", 0.6, "cue-runs")
    assert named_lookalike(code, [(first, [code]), (heard_tracking, [])])
    assert not named_lookalike(code, [(first, [code])])  # no decoding heard the context word
    assert not named_lookalike(code, [(first, [code]), (heard_tracking, []), (heard_ic, [code])])  # a PII cue
    assert not named_lookalike(Span(1.9, 5.85, "PERSON", 0.6, "cue"), [(first, []), (heard_tracking, [])])
    # a decoding that found a span there names nothing, whatever stands before the stretch in it
    assert not named_lookalike(code, [(first, [code]), (heard_tracking, [Span(2.5, 5.9, "CAR_PLATE", 0.9, "ner")])])

    class Heard:
        def __init__(self, tr):
            self.tr = tr

        def result(self):
            return Recognition(self.tr)

    class Plate:
        name = "plate"

        def detect(self, transcript):
            ws = [w for w in transcript.words if w.text in "S D F G seven one four oh two nine five".split()]
            return [Span(ws[0].start, ws[-1].end, "CAR_PLATE", 0.9, "patterns")]

    r = Redactor(RedactConfig(verify=True, verify_passes=2), asr=FakeAsr(), detectors=[Plate()],
                 verifier=FakeVerifier())
    spans = Plate().detect(first)
    opinion = r.verify(None, spans, [Heard(heard_tracking), Heard(first)], first)
    assert opinion.refuted == spans and opinion.added == [] and opinion.agreed == []
    assert opinion.applied(spans) == []
    kept = r.verify(None, spans, [Heard(heard_ic), Heard(first)], first)
    assert kept.refuted == [] and kept.applied(spans) and kept.agreed  # every decoding found it


def test_a_sum_or_a_unit_number_another_decoding_heard_over_a_garbled_run_of_digits_is_a_look_alike():
    """"Consultation is about thirty eight dollars fifty": the first decoder wrote "38, 15, 4, half,
    15, 4, half, 15" and a cue before it made that an account; a pass that heard the price with
    its unit over the same stretch, and found nothing there, makes it a look-alike. A unit no
    number stands before ("the dollars"), a pass that found the span, or a PII cue keep it."""
    from deid_speech.pipeline import named_lookalike

    def at(text, t0=1.0):
        return Transcript.from_words([(w, t0 + 0.3 * i, t0 + 0.3 * i + 0.25, 0.9) for i, w in enumerate(text.split())])

    first = at("consultation is about 38, 15, 4, half, 15, 4, half, 15, OK")
    price = at("consultation is about thirty eight dollars fifty before subsidy ok can send")
    run = Span(1.9, 4.15, "BANK_ACCOUNT", 0.6, "cue-runs")
    assert named_lookalike(run, [(first, [run]), (price, [])])
    assert not named_lookalike(run, [(first, [run])])
    assert not named_lookalike(run, [(first, [run]), (price, [Span(2.0, 3.0, "BANK_ACCOUNT", 0.6, "ner")])])
    no_number = at("consultation is about the dollars and the fifty before subsidy ok can send")
    assert not named_lookalike(run, [(first, [run]), (no_number, [])])
    cued = at("consultation my account thirty eight dollars fifty before subsidy ok can send")
    assert not named_lookalike(run, [(first, [run]), (price, []), (cued, [])])
    # an address's unit number heard whole by a pass, that the first decoder ran into digits
    first = at("Yishun yes and 2 -5 -2 -2. 4 -2 -1 -2 -2. to get some")
    unit = at("Yishun yes and unit oh five dash two two, for room, want to")
    run = Span(1.9, 4.15, "BANK_ACCOUNT", 0.75, "patterns")
    assert named_lookalike(run, [(first, [run]), (unit, [])])
    # a context word a pass also writes for other words does not count inside a span:
    # "transfer to a lot, five one seven ..." for "transfer to our OCBC, five one seven ..."
    lot = at("pay by transfer to a lot, five one seven four eight three nine four two six")
    assert not named_lookalike(Span(2.3, 4.6, "BANK_ACCOUNT", 0.9, "patterns"),
                               [(at("pay by transfer to the one five one seven four eight three nine four two"), []),
                                (lot, [])])


def test_speech_every_decoding_doubted_at_the_same_moment_is_redacted_as_a_name():
    """"minimum / data / double / minimum" for "Zubaidah": where the first decoding and every pass
    gave the words at one moment a probability under DOUBTED_PROB, that moment is a name; one
    decoding sure of its word there, a moment shorter than MIN_DOUBTED_S or a verifier of one
    pass adds nothing."""
    from deid_speech.pipeline import DOUBTED_PROB, MIN_DOUBTED_S, doubted_everywhere

    low = DOUBTED_PROB / 2

    def heard(*words):
        return Transcript.from_words([(w, a, b, p) for w, a, b, p in words])

    first = heard(("my", 0.0, 0.3, 0.9), ("minimum", 0.8, 1.1, low), ("binte", 1.1, 1.4, 0.9))
    p1 = heard(("my", 0.0, 0.3, 0.9), ("data", 0.7, 1.0, low), ("binte", 1.1, 1.4, 0.9))
    p2 = heard(("my", 0.0, 0.3, 0.9), ("double", 0.85, 1.2, low), ("binte", 1.2, 1.4, 0.9))
    sure = heard(("my", 0.0, 0.3, 0.9), ("minimum", 0.8, 1.1, 0.9), ("binte", 1.1, 1.4, 0.9))
    (span,) = doubted_everywhere([first, p1, p2])
    assert (span.start, span.end, span.label, span.source) == (0.85, 1.0, "PERSON", "doubted")
    assert doubted_everywhere([sure, p1, p2]) == []
    brief = heard(("my", 0.0, 0.3, 0.9), ("double", 0.99, 1.2, low))
    assert 1.0 - 0.99 < MIN_DOUBTED_S and doubted_everywhere([first, p1, brief]) == []

    class Heard:
        def __init__(self, tr):
            self.tr = tr

        def result(self):
            return Recognition(self.tr)

    r = Redactor(RedactConfig(verify=True, verify_passes=2), asr=FakeAsr(), detectors=[PatternDetector()],
                 verifier=FakeVerifier())
    assert [s.source for s in r.verify(None, [], [Heard(p1), Heard(p2)], first).added] == ["doubted"]
    # the first decoding's own transcript is asked, not a pass's: sure there, nothing is added
    assert r.verify(None, [], [Heard(p1), Heard(p2)], sure).added == []
    assert r.verify(None, [], [Heard(p1), Heard(p2)]).added == []  # without the first transcript: no opinion


def test_the_redactor_drops_the_cue_a_detector_took_into_a_number():
    """A detector that reports "SBC account five five three ..." as the account: the redaction
    starts at the first digit, so "account" (and what was heard before it) stays audible; a
    name's span is left as the detector gave it."""
    tr = make_transcript("eh SBC account five five three two four seven eight oh two one seven four holder name Tan")

    class Greedy:
        name = "greedy"

        def detect(self, transcript):
            ws = transcript.words
            return [Span(ws[1].start, ws[14].end, "BANK_ACCOUNT", 0.9, "ner"),
                    Span(ws[16].start, ws[17].end, "PERSON", 0.9, "ner")]

    r = Redactor(RedactConfig(), asr=FakeAsr(), detectors=[Greedy()])
    account, name = sorted(r.detect(tr), key=lambda s: s.start)
    # it may reach back into the pause before "five" (place_spans), never into "account"
    assert tr.words[2].end <= account.start <= tr.words[3].start and account.end >= tr.words[14].end
    assert account.text.startswith("five five three")
    assert name.start <= tr.words[16].start


def test_a_secret_said_aloud_is_beeped_and_named_secret_by_the_default_detectors(call):
    text = "ok my OTP is four eight two nine one three and my number is nine one two three four five six seven"
    r = Redactor(RedactConfig(verify=False), asr=FakeAsr(text))
    _, json_out, result = redact_file(r, call, None, {call.resolve()})
    d = json.loads(json_out.read_text())
    assert [s["label"] for s in d["spans"]] == ["SECRET", "PHONE"]
    assert d["redacted_transcript"] == "ok my OTP is [SECRET_1] and my number is [PHONE_1]"
    assert "eight" not in json_out.read_text()
    # a label left out is left audible, as any other
    kept = Redactor(RedactConfig(verify=False, labels=("PHONE",)), asr=FakeAsr(text))
    assert [s.label for s in kept.detect(make_transcript(text))] == ["PHONE"]
