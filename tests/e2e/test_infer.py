"""E2E inference: windows -> tagged text -> timed words and Spans; model-folder checks;
the redact and eval commands with --system e2e."""
import json
from pathlib import Path

import numpy as np
import pytest

from deid_speech import models as shipped
from deid_speech.align.base import project_words
from deid_speech.e2e.infer import Window, pauses_in, place
from deid_speech.errors import DeidError
from deid_speech.types import Transcript

ROOT = Path(__file__).resolve().parents[2]
CALL = shipped.path("example")


def even_aligner(clip, text):
    """Fake aligner: words spread evenly over the clip."""
    return project_words(text, [], duration=len(clip) / 16000)


def failing_aligner(clip, text):
    raise DeidError("cannot align")


def test_place_times_tagged_words_and_offsets_each_window():
    audio = np.zeros(16000 * 20, np.float32)
    wins = [Window(0.0, 8.0, "call me at [PHONE] nine eight [PHONE] ok"),
            Window(8.0, 20.0, "name is [PERSON] Jason Lim [PERSON].")]
    tr, spans = place(wins, audio, even_aligner)
    assert tr.text == "call me at nine eight ok name is Jason Lim."
    assert [(s.label, s.text, s.source) for s in spans] == [("PHONE", "nine eight", "e2e"),
                                                            ("PERSON", "Jason Lim", "e2e")]
    phone, person = spans
    assert 0 < phone.start < phone.end <= 8.0 and 8.0 < person.start < person.end <= 20.0
    for s in spans:  # the span is exactly the union of its words' times
        ws = [w for w in tr.words if s.text.startswith(w.text.strip(".")) or w.text.strip(".") in s.text.split()]
        assert min(w.start for w in ws) == pytest.approx(s.start) and max(w.end for w in ws) == pytest.approx(s.end)
    assert [(g.start, g.end) for g in tr.segments] == [(0.0, 8.0), (8.0, 20.0)]


def test_an_entity_never_crosses_a_window():
    audio = np.zeros(16000 * 10, np.float32)
    wins = [Window(0.0, 5.0, "my number [PHONE] nine eight"), Window(5.0, 10.0, "seven six [PHONE]")]
    _, spans = place(wins, audio, even_aligner)
    assert [(s.text, s.label) for s in spans] == [("nine eight", "PHONE"), ("seven six", "PHONE")]
    assert spans[0].end <= 5.0 <= spans[1].start


def test_a_window_the_aligner_cannot_place_is_redacted_whole():
    audio = np.zeros(16000 * 10, np.float32)
    tr, spans = place([Window(2.0, 9.0, "call [PHONE] nine eight [PHONE] ok")], audio, failing_aligner)
    assert tr.text == "call nine eight ok" and len(tr.words) == 4
    assert [(s.start, s.end, s.label) for s in spans] == [(2.0, 9.0, "PHONE")]


def test_fallback_times_the_words_and_the_entity_is_widened():
    audio = np.zeros(16000 * 10, np.float32)
    win = [Window(2.0, 9.0, "call [PHONE] nine eight [PHONE] ok")]
    tr, spans = place(win, audio, failing_aligner, even_aligner)
    shifted = [round(w.start + 2.0, 2) for w in even_aligner(audio[:7 * 16000], tr.text).words]
    assert [round(w.start, 2) for w in tr.words] == shifted
    nine, eight = even_aligner(audio[:7 * 16000], tr.text).words[1:3]
    # default: widened by 0.5 s, not the whole window
    assert [(s.start, s.end) for s in spans] == [pytest.approx((2.0 + nine.start - 0.5, 2.0 + eight.end + 0.5))]
    _, spans = place(win, audio, failing_aligner, even_aligner, unsure_pad=None)
    assert [(s.start, s.end) for s in spans] == [(2.0, 9.0)]  # None: the whole window


def test_speech_that_no_word_covers_is_decoded_again(monkeypatch):
    import deid_speech.asr.whisper as whisper
    from deid_speech.e2e.infer import E2EOptions, E2ETagger

    monkeypatch.setattr(whisper, "speech_regions", lambda audio, options=None: [(0.0, 2.0), (4.0, 6.0)])  # the VAD
    rng = np.random.default_rng(0)
    audio = np.zeros(16000 * 8, np.float32)
    audio[: 2 * 16000] = rng.normal(0, 0.1, 2 * 16000)
    audio[4 * 16000: 6 * 16000] = rng.normal(0, 0.1, 2 * 16000)
    calls = []

    def tag_many(audios, progress=None, stretches=None):
        calls.append(stretches)
        if stretches is None:  # the first pass hears only the first stretch
            return [[Window(0.0, 2.0, "hello there")]]
        return [[Window(a, b, "call [PHONE] nine eight [PHONE]") for a, b in stretches[0]]]

    tagger = object.__new__(E2ETagger)
    tagger.options, tagger.ct2 = E2EOptions(model="fake"), None
    tagger.tag_many, tagger.align = tag_many, even_aligner
    tr, spans = tagger.run(audio)
    assert calls[0] is None and calls[1] and 3.5 <= calls[1][0][0][0] <= 4.1
    assert tr.text == "hello there call nine eight"
    assert [s.label for s in spans] == ["PHONE"] and 3.5 < spans[0].start < spans[0].end <= 6.5


def test_without_pocketsphinx_the_fallback_is_said_once_and_widens_each_entity(monkeypatch, caplog):
    import threading

    import deid_speech.align.base as align_base
    from deid_speech.e2e.infer import UNSURE_PAD_S, E2ETagger

    tries = []

    def no_aligner(name, **kwargs):
        tries.append(name)
        raise DeidError("pocketsphinx is not installed (pip install pocketsphinx)")

    monkeypatch.setattr(align_base, "get_aligner", no_aligner)
    tagger = object.__new__(E2ETagger)
    tagger._aligner, tagger._no_aligner, tagger._align_lock = None, None, threading.Lock()
    audio = np.zeros(16000 * 12, np.float32)
    wins = [Window(0.0, 6.0, "call [PHONE] nine eight [PHONE] ok"), Window(6.0, 12.0, "at [PHONE] one two [PHONE]")]
    with caplog.at_level("WARNING", logger="deid_speech"):
        _, spans = place(wins, audio, tagger.align, even_aligner)
    assert tries == ["pocketsphinx"]  # built once, not once per window
    said = [r.getMessage() for r in caplog.records if "no forced aligner" in r.getMessage()]
    assert len(said) == 1 and "pocketsphinx is not installed" in said[0] and "deid-speech[e2e]" in said[0]
    first = even_aligner(audio[:6 * 16000], "call nine eight ok").words
    assert spans[0].start == pytest.approx(first[1].start - UNSURE_PAD_S)
    assert spans[0].end == pytest.approx(first[2].end + UNSURE_PAD_S)
    assert len(spans) == 2 and spans[1].start >= 6.0


def test_empty_windows_are_skipped():
    tr, spans = place([Window(0.0, 3.0, ""), Window(3.0, 4.0, "[PHONE]")], np.zeros(64000, np.float32), even_aligner)
    assert tr.text == "" and spans == []


def test_pauses_are_word_starts_after_a_silence():
    tr = Transcript.from_words([("a", 0.0, 0.2), ("b", 0.25, 0.4), ("c", 1.0, 1.2)])
    assert pauses_in(tr) == [tr.words[2].char_start]


@pytest.mark.parametrize("make", ["missing", "empty", "plain-whisper"])
def test_bad_model_folder_is_a_one_line_error(tmp_path, make, tokenizer_dir):
    from deid_speech.e2e.infer import check_model_dir

    p = tmp_path / "m"
    if make == "empty":
        p.mkdir()
    elif make == "plain-whisper":
        p = tokenizer_dir  # a Whisper folder without the tag tokens
    with pytest.raises(DeidError) as e:
        check_model_dir(p)
    assert "\n" not in str(e.value) and "--model" in str(e.value)


def test_redact_e2e_with_a_missing_model_fails_closed(tmp_path, capsys):
    from deid_speech.cli import main

    wav = tmp_path / "call.wav"
    wav.write_bytes(CALL.read_bytes())
    rc = main(["redact", "--system", "e2e", "--model", str(tmp_path / "nope"), str(wav)])
    err = capsys.readouterr().err
    assert rc == 1 and len(err.strip().splitlines()) == 1 and "--model" in err
    assert not list(tmp_path.glob("*.redacted.*"))


def test_model_option_without_e2e_is_an_error(tmp_path):
    from deid_speech.cli import main

    assert main(["redact", "--model", str(tmp_path), str(CALL), "--out-dir", str(tmp_path)]) == 1
    assert not list(tmp_path.glob("*.redacted.*"))


def test_eval_e2e_with_a_missing_model_is_a_one_line_error(tmp_path, capsys):
    from deid_speech.cli import main

    man = tmp_path / "manifest.jsonl"
    man.write_text(json.dumps({"id": "a", "audio": str(CALL), "text": "hi", "entities": []}) + "\n")
    rc = main(["eval", "--system", "e2e", "--model", str(tmp_path / "nope"), "--manifest", str(man),
               "--out-dir", str(tmp_path / "out")])
    assert rc == 1 and "--model" in capsys.readouterr().err


def test_redactor_uses_the_tagger_as_asr_and_detector():
    from deid_speech.pipeline import RedactConfig, Redactor
    from deid_speech.types import Recognition

    class FakeTagger:
        name = "e2e:fake"

        def recognize(self, audio, progress=None):
            tr, spans = place([Window(0.0, 4.0, "at [PHONE] nine eight [PHONE] ok")], audio, even_aligner)
            return Recognition(tr, tuple(spans))

    from deid_speech.audio import Audio

    audio = Audio(np.random.default_rng(0).normal(0, 0.1, (64000, 1)).astype(np.float32), 16000)
    r = Redactor(RedactConfig(system="e2e"), asr=FakeTagger())
    res = r.redact(audio)
    assert [s.label for s in res.spans] == ["PHONE"]
    assert "nine" not in res.redacted_transcript and "PHONE" in res.redacted_transcript


@pytest.fixture(scope="module")
def untrained_e2e_dir(tmp_path_factory):
    """tiny.en with the nine tags added but not trained (plumbing tests), HF + ct2."""
    from deid_speech.asr.export import export_ct2
    from deid_speech.asr.hf import load_base
    from deid_speech.e2e.tokens import add_tags_to_model

    out = tmp_path_factory.mktemp("e2e-untrained")
    model, processor = load_base("tiny.en")
    add_tags_to_model(model, processor)
    model.save_pretrained(out)
    processor.save_pretrained(out)
    export_ct2(out, out / "ct2", "int8")
    return out


@pytest.mark.model
@pytest.mark.parametrize("backend", ["ct2", "hf"])
def test_untrained_tags_leave_a_sane_timed_transcript_of_the_example(untrained_e2e_dir, backend):
    from deid_speech.audio import load
    from deid_speech.e2e.infer import E2EOptions, E2ETagger

    audio = load(CALL).mono16k()
    tagger = E2ETagger(E2EOptions(model=str(untrained_e2e_dir), backend=backend, batch_size=3))
    assert (tagger.ct2 is not None) == (backend == "ct2")
    tr, spans = tagger.run(audio)
    assert spans == []  # the tags were never trained: the model does not write them
    assert "Jason" in tr.text and "Rachel" in tr.text and "[" not in tr.text
    starts = [w.start for w in tr.words]
    assert starts == sorted(starts) and all(0 <= w.start <= w.end <= len(audio) / 16000 + 0.01 for w in tr.words)
    jason = next(w for w in tr.words if w.text.startswith("Jason"))
    assert 13.5 < jason.start < 15.6  # the truth: "Jason Lim" spoken 14.47-15.51 s
    assert len(tr.segments) >= 3  # 72 s in windows of at most 27 s


@pytest.mark.model
def test_shipped_model_finds_pii_in_the_example_call(tmp_path, monkeypatch):
    from deid_speech.cli import main
    from deid_speech.types import Span

    monkeypatch.setenv("DEID_SPEECH_CACHE", str(tmp_path / "cache"))  # rebuilt from the delta here
    assert main(["redact", "--system", "e2e", str(CALL), "--out-dir", str(tmp_path)]) == 0
    d = json.loads((tmp_path / "call.redacted.json").read_text())
    truth = [Span(e["start"], e["end"], e["label"]) for e in
             json.loads((shipped.path("example-truth")).read_text())["entities"]]
    pred = [Span.from_dict(s) for s in d["spans"]]
    found = [t for t in truth if any(p.overlaps(t) for p in pred)]
    assert len(found) >= 4, (d["spans"], d["redacted_transcript"])
    assert d["system"] == "e2e" and d["asr_model"].startswith("e2e:")


@pytest.mark.model
def test_redact_e2e_writes_the_cascade_json_format(untrained_e2e_dir, tmp_path):
    from deid_speech.cli import main

    assert main(["redact", "--system", "e2e", "--model", str(untrained_e2e_dir), str(CALL),
                 "--out-dir", str(tmp_path)]) == 0
    d = json.loads((tmp_path / "call.redacted.json").read_text())
    assert d["system"] == "e2e" and d["words"] and (tmp_path / "call.redacted.wav").is_file()
    assert {"spans", "redacted_transcript", "uncovered_speech", "words", "asr_model"} <= set(d)
    assert "transcript" not in d  # the shared report holds no clear text (schema 2)


def test_the_batch_follows_where_the_model_is_unless_one_is_asked_for():
    from types import SimpleNamespace

    from deid_speech.e2e.infer import CPU_BATCH, GPU_BATCH, E2EOptions, E2ETagger

    class Fake:
        def __init__(self, device):
            self.device = device

        def eval(self):
            return self

        def parameters(self):
            yield SimpleNamespace(device=SimpleNamespace(type=self.device))

    assert (CPU_BATCH, GPU_BATCH) == (4, 16)
    assert E2ETagger(E2EOptions(model="m"), Fake("cpu"), object()).batch_size == CPU_BATCH
    assert E2ETagger(E2EOptions(model="m"), Fake("cuda"), object()).batch_size == GPU_BATCH
    assert E2ETagger(E2EOptions(model="m", batch_size=3), Fake("cuda"), object()).batch_size == 3
    with pytest.raises(ValueError, match="batch_size"):
        E2EOptions(model="m", batch_size=0)
