"""Outputs safe to share: operators per label, transcript formats, re-runs (fake ASR, no models)."""
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import srt
import webvtt

from deid_speech.audio import Audio
from deid_speech.cli import build_parser, redact_many, redact_options
from deid_speech.errors import DeidError
from deid_speech.ner.patterns import PatternDetector
from deid_speech.pipeline import RedactConfig, Redactor, redact_file
from deid_speech.redact import Operator, RedactOptions, TextRedactor, redact_audio, redact_transcript, redaction_regions
from deid_speech.types import Span, Transcript
from deid_speech.writers import FORMATS, MAX_CUE_CHARS, MAX_CUE_S, parse_formats
from factories import tone

KEY = b"a-secret-key-of-32-bytes-for-tests"
PHONE = "nine one two three four five six seven"
CARD = "four five three two one one five two eight eight zero four six seven one two"
TEXT = f"hello my number is {PHONE} and my card is {CARD} ok call {PHONE} again thank you"


class SegmentedAsr:
    """A canned transcript with words 0.25 s apart and segments of eight words."""
    name = "fake"

    def __init__(self, text=TEXT):
        self.text = text

    def transcribe(self, audio, progress=None):
        words = [(w, 0.3 + i * 0.25, 0.3 + i * 0.25 + 0.2) for i, w in enumerate(self.text.split())]
        segs = [Span(words[i][1], words[min(i + 7, len(words) - 1)][2]) for i in range(0, len(words), 8)]
        return Transcript.from_words(words, segs)


def redactor(options=RedactOptions(), text=TEXT):
    return Redactor(RedactConfig(redact=options, verify=False), asr=SegmentedAsr(text), detectors=[PatternDetector()])


@pytest.fixture
def call(tmp_path):
    p = tmp_path / "call.wav"
    sf.write(p, tone(12.0, 16000, hz=300.0), 16000)
    return p


def outputs(call: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in call.parent.iterdir()
            if p.name.startswith("call.redacted.") and p.suffix != ".wav"}


# --- text operators -----------------------------------------------------------------

def test_every_text_operator_hides_the_values_and_keeps_mentions_consistent():
    for op in ("placeholder", "mask", "hash", "surrogate"):
        result = redactor(RedactOptions(Operator(text=op), key=KEY)).redact(Audio(tone(12.0), 16000))
        text = result.redacted_transcript
        assert "nine one two" not in text and "four five three" not in text, op
        assert text.startswith("hello my number is ") and text.endswith(" again thank you"), op
        words = [w.text for w in result.redacted.words]
        phone, card = words[4], words[9]  # each run of entity words is one word
        assert words[5:9] == ["and", "my", "card", "is"] and words[10:12] == ["ok", "call"], (op, words)
        # the phone, said twice, reads the same both times
        assert words[12] == phone and (card != phone or op == "mask"), (op, words)


def test_placeholders_are_numbered_per_value_and_hash_depends_on_the_key():
    t = Transcript.from_words([(w, i, i + 0.5) for i, w in enumerate("a 91234567 b 81234567 c 91234567".split())])
    spans = [Span(1, 1.5, "PHONE", text="91234567"), Span(3, 3.5, "PHONE", text="81234567"),
             Span(5, 5.5, "PHONE", text="91234567")]
    assert redact_transcript(t, spans).text == "a [PHONE_1] b [PHONE_2] c [PHONE_1]"
    hashed = redact_transcript(t, spans, TextRedactor(RedactOptions(Operator(text="hash"), key=KEY))).text
    other = redact_transcript(t, spans, TextRedactor(RedactOptions(Operator(text="hash"), key=KEY + b"2"))).text
    h = hashed.split()
    assert h[1] == h[5] != h[3] and h[1].startswith("[PHONE:") and len(h[1]) == len("[PHONE:]") + 12
    assert hashed != other  # another key, other hashes: the value cannot be looked up without the key
    masked = redact_transcript(t, spans, TextRedactor(RedactOptions(Operator(text="mask")))).text
    assert masked == "a ******** b ******** c ********"


def test_surrogates_are_valid_same_form_and_consistent_across_calls_with_a_key():
    from deid_speech.validators import is_valid_nric as is_nric

    t = Transcript.from_words([(w, i, i + 0.5) for i, w in enumerate("ic S1234567D and S1234567D".split())])
    spans = [Span(1, 1.5, "NRIC", text="S1234567D"), Span(3, 3.5, "NRIC", text="S1234567D")]
    opts = RedactOptions(Operator(text="surrogate"), key=KEY)
    a = redact_transcript(t, spans, TextRedactor(opts)).text.split()
    b = redact_transcript(t, spans, TextRedactor(opts)).text.split()
    assert a == b and a[1] == a[3] != "S1234567D" and is_nric(a[1]) and a[1][0] == "S"


def test_label_overrides_replace_only_their_label():
    opts = RedactOptions(Operator(), (("PHONE", Operator(audio="silence", text="mask", pad_before=0.0)),))
    assert opts.operator("PHONE").text == "mask" and opts.operator("NRIC").text == "placeholder"
    r = redactor(opts).redact(Audio(tone(12.0, 16000, hz=300.0), 16000))
    assert "****" in r.redacted_transcript and "[CREDIT_CARD_1]" in r.redacted_transcript


# --- audio operators, padding, merging ----------------------------------------------

def test_padding_is_applied_per_side_and_close_redactions_merge():
    opts = RedactOptions(Operator(pad_before=0.3, pad_after=0.05), merge_gap=0.3)
    regions = redaction_regions([Span(1.0, 2.0, "PHONE"), Span(2.5, 3.0, "NRIC"), Span(5.0, 5.5, "PHONE")], opts)
    # 2.05 to 2.2 is 0.15 s apart: joined; 3.05 to 4.7 is not
    assert [(round(a, 2), round(b, 2)) for a, b, _ in regions] == [(0.7, 2.2), (2.2, 3.05), (4.7, 5.55)]
    apart = RedactOptions(Operator(pad_before=0.3, pad_after=0.05), merge_gap=0.0)
    assert round(redaction_regions([Span(1.0, 2.0, "PHONE"), Span(2.5, 3.0, "NRIC")], apart)[0][1], 2) == 2.05


@pytest.mark.parametrize("audio_op", ["beep", "silence", "noise"])
def test_every_audio_operator_replaces_the_audio_and_never_mixes_it_in(audio_op):
    sr = 16000
    x = tone(4.0, sr, hz=440.0, amp=0.3)
    out = redact_audio(Audio(x, sr), [Span(1.0, 2.0, "PHONE")], RedactOptions.uniform(audio=audio_op, pad=0.0))
    inside = out.samples[int(1.05 * sr): int(1.95 * sr), 0]
    original = x[int(1.05 * sr): int(1.95 * sr), 0]
    # nothing of the original is left: the redacted stretch does not correlate with it
    corr = abs(np.dot(inside, original)) / (np.linalg.norm(inside) * np.linalg.norm(original) + 1e-9)
    assert corr < 0.05, corr
    if audio_op == "silence":
        assert np.all(inside == 0)
    else:  # at speech level, not a whisper or a blast
        rms = np.sqrt(np.mean(inside ** 2))
        assert 0.1 < rms < 0.4, rms
    np.testing.assert_array_equal(out.samples[: int(0.9 * sr)], x[: int(0.9 * sr)])


def test_noise_does_not_depend_on_the_audio_it_replaces():
    sr = 16000
    a = redact_audio(Audio(tone(3.0, sr, hz=200.0), sr), [Span(1.0, 2.0, "PHONE")],
                     RedactOptions.uniform(audio="noise", pad=0.0))
    b = redact_audio(Audio(tone(3.0, sr, hz=900.0), sr), [Span(1.0, 2.0, "PHONE")],
                     RedactOptions.uniform(audio="noise", pad=0.0))
    seg = slice(int(1.1 * sr), int(1.9 * sr))
    np.testing.assert_allclose(a.samples[seg], b.samples[seg], rtol=1e-4, atol=1e-5)


# --- settings: flags and redact.toml ------------------------------------------------

def _args(*argv):
    return build_parser().parse_args(["redact", "x.wav", *argv])


def test_config_file_then_flags(tmp_path, monkeypatch):
    cfg = tmp_path / "redact.toml"
    cfg.write_text('merge_gap = 0.5\n[default]\ntext = "mask"\npad_before = 0.25\n'
                   '[labels.PERSON]\ntext = "surrogate"\naudio = "silence"\n[labels.PHONE]\npad_after = 0.4\n')
    monkeypatch.delenv("DEID_SPEECH_KEY", raising=False)
    o = redact_options(_args("--config", str(cfg), "--pad-after", "0.2", "--label-op", "NRIC=noise,placeholder"))
    assert o.merge_gap == 0.5 and o.default == Operator("beep", "mask", 0.25, 0.2)
    assert o.operator("PERSON") == Operator("silence", "surrogate", 0.25, 0.2)
    assert o.operator("PHONE") == Operator("beep", "mask", 0.25, 0.4)
    assert o.operator("NRIC") == Operator("noise", "placeholder", 0.25, 0.2)
    assert o.operator("EMAIL") == o.default
    assert redact_options(_args("--padding", "0.3")).default == Operator(pad_before=0.3, pad_after=0.3)


@pytest.mark.parametrize("toml,msg", [
    ('[default]\ntext = "shuffle"\n', "text operator"),
    ('[default]\npadding = 0.2\n', "unknown key"),
    ('[labels.SSN]\ntext = "mask"\n', "unknown label"),
    ('[labels]\nPERSON = "mask"\n', "must be tables"),
    ('merge_gap = "wide"\n', "merge_gap"),
    ('colour = "red"\n', "unknown setting"),
    ('[default\n', "not valid TOML"),
])
def test_bad_config_is_a_one_line_error(tmp_path, toml, msg):
    cfg = tmp_path / "redact.toml"
    cfg.write_text(toml)
    with pytest.raises(DeidError, match=msg):
        redact_options(_args("--config", str(cfg)))


def test_hash_needs_a_key_and_the_key_is_never_written(call, monkeypatch, capsys):
    monkeypatch.delenv("DEID_SPEECH_KEY", raising=False)
    with pytest.raises(DeidError, match="DEID_SPEECH_KEY"):
        redact_options(_args("--text-op", "hash"))
    monkeypatch.setenv("DEID_SPEECH_KEY", KEY.decode())
    opts = redact_options(_args("--text-op", "hash"))
    redact_file(redactor(opts), call, None, {call.resolve()}, formats=FORMATS)
    for name, text in outputs(call).items():
        assert KEY.decode() not in text, name
    assert json.loads((call.parent / "call.redacted.json").read_text())["operators"]["keyed"] is True


@pytest.mark.parametrize("bad", ["PHONE", "PHONE=", "SSN=mask", "PHONE=shuffle"])
def test_bad_label_op_is_an_error(bad):
    with pytest.raises(DeidError, match="--label-op"):
        redact_options(_args("--label-op", bad))


# --- formats ------------------------------------------------------------------------

def test_formats_parse_with_standard_parsers_and_hold_only_redacted_text(call):
    _, json_out, result = redact_file(redactor(), call, None, {call.resolve()}, formats=parse_formats("srt,vtt,txt"))
    out = outputs(call)
    assert set(out) == {"call.redacted.json", "call.redacted.srt", "call.redacted.vtt", "call.redacted.txt"}
    subs = list(srt.parse(out["call.redacted.srt"]))
    vtt = webvtt.from_string(out["call.redacted.vtt"]) if hasattr(webvtt, "from_string") else \
        webvtt.read_buffer(__import__("io").StringIO(out["call.redacted.vtt"]))
    assert len(subs) == len(vtt.captions) >= 3
    joined = " ".join(s.content for s in subs)
    assert joined == " ".join(c.text for c in vtt.captions) == " ".join(out["call.redacted.txt"].split())
    assert joined == result.redacted_transcript and "[PHONE_1]" in joined and "[CREDIT_CARD_1]" in joined
    for s in subs:
        assert s.end > s.start and (s.end - s.start).total_seconds() <= MAX_CUE_S + 0.5
        assert len(s.content) <= MAX_CUE_CHARS
    for name, text in out.items():  # no clear value anywhere
        assert "nine" not in text and "four five" not in text, name


def test_channels_apart_are_marked_in_every_cue(tmp_path):
    from test_pipeline import ChannelAsr, _stereo

    src = _stereo(tmp_path, tone(5.0, 16000, hz=600.0)[:, 0], tone(5.0, 16000, hz=120.0)[:, 0])
    r = Redactor(RedactConfig(verify=False), asr=ChannelAsr(), detectors=[PatternDetector()])
    redact_file(r, src, None, {src.resolve()}, formats=("srt", "vtt", "json"))
    subs = list(srt.parse(src.with_name(src.stem + ".redacted.srt").read_text()))
    assert {s.content.split("]")[0] for s in subs} == {"[channel 0", "[channel 1"}
    assert "<v channel 1>" in src.with_name(src.stem + ".redacted.vtt").read_text()


def test_unknown_format_is_a_usage_error():
    with pytest.raises(SystemExit):
        _args("--format", "json,docx")
    assert parse_formats("txt,json,srt") == ("txt", "srt", "json")  # the report always comes last


# --- re-runs ------------------------------------------------------------------------

def test_rerun_refuses_by_default_overwrites_or_skips_when_asked(call, capsys):
    assert redact_many(redactor(), [call], None, formats=("srt", "json")) == 0
    before = {n: (call.parent / n).stat().st_mtime_ns for n in outputs(call)}
    assert redact_many(redactor(), [call], None, formats=("srt", "json")) == 1  # nothing overwritten
    assert "--overwrite" in capsys.readouterr().err
    assert {n: (call.parent / n).stat().st_mtime_ns for n in outputs(call)} == before
    assert redact_many(redactor(), [call], None, formats=("srt", "json"), existing="skip") == 0
    assert "already redacted" in capsys.readouterr().out
    assert {n: (call.parent / n).stat().st_mtime_ns for n in outputs(call)} == before
    # asked for a format the earlier run did not write: not silently incomplete
    assert redact_many(redactor(), [call], None, formats=("vtt", "json"), existing="skip") == 1
    assert "use --overwrite" in capsys.readouterr().err
    # --overwrite: the earlier run's srt does not outlive it
    assert redact_many(redactor(), [call], None, formats=("vtt", "json"), existing="overwrite") == 0
    assert set(outputs(call)) == {"call.redacted.json", "call.redacted.vtt"}


def test_skip_existing_redoes_an_unfinished_output(call):
    (call.parent / "call.redacted.wav").write_bytes(b"half")  # killed before its JSON was written
    assert redact_many(redactor(), [call], None, existing="skip") == 0
    assert sf.info(call.parent / "call.redacted.wav").frames == sf.info(call).frames


def test_skip_existing_does_not_take_another_inputs_report_for_this_ones(call, tmp_path, capsys):
    out = tmp_path / "out"
    assert redact_many(redactor(), [call], out) == 0  # call.wav -> out/call.redacted.*
    flac = call.with_suffix(".flac")
    sf.write(flac, sf.read(call)[0], sf.info(call).samplerate)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()
    # with both in the run, call.flac sorts first and takes the short names, which call.wav's outputs hold
    assert redact_many(redactor(), [flac, call], out, existing="skip") == 1
    err = capsys.readouterr().err
    assert f"{out / 'call.redacted.json'} is the report of {call}, not of this input" in err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.name in before} == before


def test_a_link_at_an_output_name_is_not_replaced_even_one_that_leads_nowhere(call, tmp_path, capsys):
    link = call.parent / "call.redacted.json"
    link.symlink_to(tmp_path / "nowhere.json")  # a user's link, dangling
    assert redact_many(redactor(), [call], None) == 1
    assert "use --overwrite" in capsys.readouterr().err
    assert link.is_symlink() and not (call.parent / "call.redacted.wav").exists()
    assert redact_many(redactor(), [call], None, existing="overwrite") == 0
    assert not link.is_symlink() and json.loads(link.read_text())["spans"]


def test_overwrite_and_skip_existing_exclude_each_other():
    with pytest.raises(SystemExit):
        _args("--overwrite", "--skip-existing")
