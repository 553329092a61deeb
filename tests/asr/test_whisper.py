"""Whisper transcription: windowing for long calls (unit) and on real speech (model)."""
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from deid_speech import models as shipped
from deid_speech.asr.whisper import AsrOptions, cut_points
from deid_speech.types import Span

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = shipped.path("example")


def test_cut_points_land_in_silence_and_cover_the_whole_call():
    sr = 16000
    rng = np.random.default_rng(0)
    x = (0.3 * rng.standard_normal(sr * 700)).astype(np.float32)
    for quiet in (290.0, 585.5):  # quiet stretches just before the nominal 300 s cuts
        x[int(quiet * sr): int((quiet + 0.5) * sr)] = 0.0
    cuts = cut_points(x, sr, window_s=300)
    assert cuts[0] == 0 and cuts[-1] == pytest.approx(700)
    assert 290.0 <= cuts[1] <= 290.5
    assert all(b > a for a, b in zip(cuts, cuts[1:]))


def test_short_audio_is_one_window():
    assert cut_points(np.zeros(16000 * 20, np.float32), 16000, 300) == [0.0, 20.0]


def test_window_options_are_validated():
    with pytest.raises(ValueError):
        AsrOptions(window_s=3)
    with pytest.raises(ValueError):
        AsrOptions(window_s=60, overlap_s=30)


@pytest.mark.model
def test_windowed_transcription_neither_loses_nor_duplicates_words():
    from deid_speech.asr.whisper import Transcriber
    from deid_speech.audio import load

    audio = load(EXAMPLE).mono16k()
    assert len(audio) / 16000 > 40
    whole = Transcriber(AsrOptions()).transcribe(audio)
    windowed = Transcriber(AsrOptions(window_s=12, overlap_s=2)).transcribe(audio)
    starts = [w.start for w in windowed.words]
    assert starts == sorted(starts)
    # nothing duplicated: no two words overlap by more than half of the shorter one
    for x, y in zip(windowed.words, windowed.words[1:]):
        assert min(x.end, y.end) - max(x.start, y.start) <= 0.5 * min(x.end - x.start, y.end - y.start) + 1e-6
    # nothing lost: all speech is covered by words, and the ordinary words agree with the
    # whole-window pass (digits are left out: Whisper writes them as words or figures
    # depending on context, "nine one" vs "91")
    from deid_speech.asr.whisper import uncovered_speech

    assert uncovered_speech(audio, 16000, windowed.words) == []
    import difflib
    import re

    def words(t):
        return [w for w in re.findall(r"[a-z']+", t.text.lower()) if len(w) > 2]

    a, b = words(whole), words(windowed)
    ratio = difflib.SequenceMatcher(a=a, b=b).ratio()
    assert ratio > 0.75, (ratio, " ".join(a), " ".join(b))  # 12 s windows lose some context


@pytest.mark.model
def test_tiny_en_transcribes_the_example_with_word_times():
    from deid_speech.asr.whisper import Transcriber
    from deid_speech.audio import load

    truth = json.loads((EXAMPLE.parent / "call.truth.json").read_text())
    t = Transcriber().transcribe(load(EXAMPLE).mono16k())
    assert len(t.words) > 50
    for w in t.words:
        assert t.text[w.char_start:w.char_end] == w.text
        assert 0 <= w.start <= w.end <= truth["duration"] + 0.5
    import jiwer

    wer = jiwer.wer(truth["text"].lower(), t.text.lower())
    assert wer < 0.5


@pytest.mark.model
def test_the_transcript_does_not_depend_on_how_many_blas_threads_the_process_has():
    """A Ray or pool worker may get one BLAS thread where the CLI gets one per core; the
    log-mel features (a BLAS product) then differed in the last bit and word times moved
    by 20 ms, so the same call was redacted differently in the two."""
    import os
    import subprocess
    import sys

    code = ("import json, sys; from deid_speech.asr.whisper import AsrOptions, Transcriber; "
            "from deid_speech.audio import load; from deid_speech import models; "
            "a = load(models.path('example')).mono16k()[:8 * 16000]; "
            "print(json.dumps([[w.text, w.start, w.end] for w in Transcriber(AsrOptions(threads=2)).transcribe(a).words]))")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env=dict(os.environ, OPENBLAS_NUM_THREADS=n, OMP_NUM_THREADS=n)).stdout
            for n in ("1", "4")]
    assert json.loads(runs[0]) == json.loads(runs[1]) and len(json.loads(runs[0])) > 8


class _CountingTranscriber:
    """Stands in for the Whisper model: a transcript that names the call's audio."""

    loads = 0
    calls = 0

    def __init__(self, options):
        type(self).loads += 1
        self.options = options

    def transcribe_raw(self, audio, progress=None):
        from deid_speech.types import Transcript

        type(self).calls += 1
        return Transcript.from_words([(f"n{len(audio)}", 0.0, 0.5, 1.0),
                                      (f"b{self.options.beam_size}", 0.5, 1.0, 1.0)], segments=[Span(0.0, 1.0)])


@pytest.mark.model
def test_a_sampled_decoding_does_not_depend_on_what_the_process_decoded_before():
    """CTranslate2 seeds a thread's sampler once: without the rebuild (_SamplerWatch) the
    second decoding of this clip (tiny.en-sg falls back to sampling on it) drew from where
    the first one left off and wrote other words; serial and --workers runs disagreed."""
    import soundfile as sf

    from deid_speech.asr.whisper import Transcriber

    x, sr = sf.read(EXAMPLE, dtype="float32")
    clip, other = x[40 * sr: 58 * sr], x[: 20 * sr]
    t = Transcriber(AsrOptions(model="tiny.en-sg"))
    first = t.transcribe(clip).to_dict()
    assert t._model.model.sampled  # the fallback sampled on this clip: the test means something
    t.transcribe(other)
    assert t.transcribe(clip).to_dict() == first
    assert t.transcribe(clip).to_dict() == first


@pytest.mark.model
def test_a_released_model_holds_no_weights_and_decodes_the_same_after():
    """``release`` (a verifier whose models take turns holds one at a time) drops the
    CTranslate2 weights; the next decoding builds them again and writes the same words."""
    import soundfile as sf

    from deid_speech.asr.whisper import Transcriber

    x, sr = sf.read(EXAMPLE, dtype="float32")
    clip = x[: 12 * sr]
    t = Transcriber(AsrOptions.second_opinion(model="tiny.en-sg"))
    first = t.transcribe(clip).to_dict()
    t.release()
    assert t._model.model._model is None
    assert t.transcribe(clip).to_dict() == first
    assert t._model.model._model is not None


class _Turn:
    def __init__(self):
        self.released = 0

    def release(self):
        self.released += 1


def test_take_turn_gives_pass_k_to_the_k_mod_n_th_and_lets_the_others_go():
    from deid_speech.asr.whisper import take_turn

    a, b = _Turn(), _Turn()
    assert take_turn([a, b], 0, 120.0) is a and (a.released, b.released) == (0, 1)
    assert take_turn([a, b], 3, 120.0) is b and (a.released, b.released) == (1, 1)
    assert take_turn([a], 1, 120.0) is a and a.released == 1  # one model: never let go
    plain = object()  # a recogniser that cannot let go (a cached one) is left as it is
    assert take_turn([plain, a], 1, 120.0) is a
    assert take_turn([a, b], 0, 10.0) is a and (a.released, b.released) == (1, 1)  # short audio: both kept


def test_cached_transcriber_decodes_each_audio_once_across_runs(tmp_path, monkeypatch):
    import deid_speech.asr.whisper as whisper

    monkeypatch.setattr(whisper, "Transcriber", _CountingTranscriber)
    _CountingTranscriber.loads = _CountingTranscriber.calls = 0
    cache = tmp_path / "asr.jsonl"
    a, b = np.zeros(16000, np.float32), np.ones(8000, np.float32) * 0.1
    first = whisper.CachedTranscriber(AsrOptions(), cache)
    ta = first.transcribe(a)
    assert first.transcribe(a).to_dict() == ta.to_dict()
    first.transcribe(b)
    assert (first.hits, first.misses, _CountingTranscriber.calls) == (1, 2, 2)

    # a later run (a new process) reads the file: no model load at all for known audio
    again = whisper.CachedTranscriber(AsrOptions(), cache)
    assert again.transcribe(a).to_dict() == ta.to_dict() and again.transcribe(b).text == "n8000 b5"
    assert (again.hits, again.misses, _CountingTranscriber.loads) == (2, 0, 1)

    # other decoding options, or changed audio, are decoded afresh
    wide = whisper.CachedTranscriber(AsrOptions(beam_size=1), cache)
    assert wide.transcribe(a).text == "n16000 b1" and wide.misses == 1
    a2 = a.copy()
    a2[100] = 1e-3
    assert again.transcribe(a2).text == "n16000 b5" and again.misses == 1


def test_the_fallback_is_capped_and_a_cache_of_the_old_options_stays_valid(tmp_path, monkeypatch):
    """max_temperature and best_of shape the fallback; at the values decoding had before the
    fields existed (1.0, 5) they are left out of the cache key (those transcripts are still
    found), otherwise they are in it: the default best_of 1 decodes afresh."""
    import deid_speech.asr.whisper as whisper

    assert AsrOptions(max_temperature=1.0).temperatures(True) == (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    assert AsrOptions().temperatures(True) == (0.0, 0.2, 0.4)  # the default since session 13
    assert AsrOptions.second_opinion().temperatures(True)[-1] == 1.0
    assert AsrOptions(max_temperature=0.4).temperatures(False) == (0.0,)
    for bad in ({"max_temperature": 1.5}, {"max_temperature": -0.1}, {"best_of": 0}):
        with pytest.raises(ValueError):
            AsrOptions(**bad)
    monkeypatch.setattr(whisper, "Transcriber", _CountingTranscriber)
    cache = tmp_path / "asr.jsonl"
    keys = {whisper.CachedTranscriber(o, cache).model_key
            for o in (AsrOptions(max_temperature=1.0, best_of=5), AsrOptions(max_temperature=1.0, best_of=5, seek=False))}
    assert len(keys) == 1
    import hashlib
    from dataclasses import asdict

    from deid_speech.asr.models import _identity

    later = ("max_temperature", "best_of", "logprob_threshold", "prompt_windows", "seek", "initial_prompt",
             "seek_chunk_s", "second_chance_fallback")  # fields added since
    old = {k: v for k, v in asdict(AsrOptions()).items() if k not in later}
    ident = json.dumps([_identity(str(whisper.resolve_model("tiny.en").path)), old], sort_keys=True)
    assert keys == {hashlib.sha1(ident.encode()).hexdigest()[:16]}  # the key caches were written under
    capped = {whisper.CachedTranscriber(o, cache).model_key
              for o in (AsrOptions(max_temperature=0.4, best_of=5), AsrOptions(best_of=2), AsrOptions())}
    assert AsrOptions().best_of == 1
    assert len(capped) == 3 and not capped & keys
    # the verifier's seeking, and the other new fields away from their old values, are new keys too
    others = {whisper.CachedTranscriber(o, cache).model_key
              for o in (AsrOptions(max_temperature=1.0, best_of=5, seek=True),
                        AsrOptions(max_temperature=1.0, best_of=5, prompt_windows=False),
                        AsrOptions(max_temperature=1.0, best_of=5, logprob_threshold=None),
                        AsrOptions(max_temperature=1.0, best_of=5, second_chance_fallback=False))}
    assert len(others) == 4 and not others & (keys | capped)


def test_the_decoder_gets_the_fallback_it_is_given(monkeypatch):
    import deid_speech.asr.whisper as whisper

    seen = []

    class Model:
        model = type("Ct2", (), {"fresh": lambda self: None, "is_multilingual": False})()

        def transcribe(self, audio, **kw):
            seen.append((kw["temperature"], kw["best_of"], kw["beam_size"]))
            return iter(()), None

    t = whisper.Transcriber.__new__(whisper.Transcriber)
    t.options, t._model = AsrOptions(max_temperature=0.4, best_of=2), Model()
    t.resolved = whisper.ResolvedModel("ct2", Path("."), "x")
    t._decode_unlocked(np.zeros(16000, np.float32), None, fallback=True)
    t._decode_unlocked(np.zeros(16000, np.float32), None, fallback=False)
    assert seen == [((0.0, 0.2, 0.4), 2, 5), ((0.0,), 2, 5)]


def test_cached_transcriber_skips_a_line_cut_short(tmp_path, monkeypatch):
    import deid_speech.asr.whisper as whisper

    monkeypatch.setattr(whisper, "Transcriber", _CountingTranscriber)
    cache = tmp_path / "asr.jsonl"
    a = np.zeros(1600, np.float32)
    whisper.CachedTranscriber(AsrOptions(), cache).transcribe(a)
    cache.write_text(cache.read_text() + '{"model": "x", "audio": "y", "transc')  # interrupted write
    c = whisper.CachedTranscriber(AsrOptions(), cache)
    assert c.transcribe(a).text == "n1600 b5" and c.hits == 1


def test_cached_transcriber_keys_on_the_model_files(tmp_path, monkeypatch):
    """A model folder retrained in place has new files: its old transcripts are not reused."""
    import deid_speech.asr.whisper as whisper
    from deid_speech.asr.models import ResolvedModel

    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "model.bin").write_bytes(b"one")
    monkeypatch.setattr(whisper, "Transcriber", _CountingTranscriber)
    monkeypatch.setattr(whisper, "resolve_model", lambda name: ResolvedModel("ct2", folder, "m"))
    cache = tmp_path / "asr.jsonl"
    a = np.zeros(1600, np.float32)
    whisper.CachedTranscriber(AsrOptions(model=str(folder)), cache).transcribe(a)
    assert whisper.CachedTranscriber(AsrOptions(model=str(folder)), cache).cached(a) is not None
    (folder / "model.bin").write_bytes(b"retrained")
    assert whisper.CachedTranscriber(AsrOptions(model=str(folder)), cache).cached(a) is None


def test_word_times_come_back_by_the_models_lag_and_the_cache_keeps_them_as_decoded(tmp_path, monkeypatch):
    """A tiny model's words come 0.10 s late (bench/word_lag.py): the transcriber moves them and
    their segments back, within the audio; the cache file keeps the decoder's own times, so the
    transcripts cached before the correction read the same as a fresh decoding."""
    import deid_speech.asr.whisper as whisper
    from deid_speech.asr.models import ResolvedModel

    monkeypatch.setattr(whisper, "Transcriber", _CountingTranscriber)
    folder = tmp_path / "m"
    folder.mkdir()
    monkeypatch.setattr(whisper, "resolve_model", lambda name: ResolvedModel("ct2", folder, "m", 0.1))
    cache = tmp_path / "asr.jsonl"
    a = np.zeros(16000, np.float32)
    fresh = whisper.CachedTranscriber(AsrOptions(), cache).transcribe(a)
    assert [(w.start, w.end) for w in fresh.words] == [(0.0, pytest.approx(0.4)), (pytest.approx(0.4), pytest.approx(0.9))]
    assert (fresh.segments[0].start, fresh.segments[0].end) == (0.0, pytest.approx(0.9))
    stored = json.loads(cache.read_text())["transcript"]["words"]
    assert [(w["start"], w["end"]) for w in stored] == [(0.0, 0.5), (0.5, 1.0)]
    again = whisper.CachedTranscriber(AsrOptions(), cache)
    assert again.transcribe(a).to_dict() == fresh.to_dict() == again.cached(a).to_dict() and again.misses == 0


def test_unlag_moves_words_and_segments_and_keeps_them_in_the_audio():
    from deid_speech.asr.whisper import unlag
    from deid_speech.types import Transcript

    t = Transcript.from_words([("a", 0.05, 0.3), ("b", 0.9, 1.0)], segments=[Span(0.05, 1.0)])
    assert unlag(t, 0.0, 1.0) is t
    early = unlag(t, 0.1, 1.0)  # a late model's words: moved back, none before 0
    assert [(w.text, w.start, w.end) for w in early.words] == [("a", 0.0, pytest.approx(0.2)),
                                                              ("b", pytest.approx(0.8), pytest.approx(0.9))]
    assert early.text == t.text and [(w.char_start, w.char_end) for w in early.words] == [(0, 1), (2, 3)]
    late = unlag(t, -0.05, 1.0)  # an early model's words: moved on, none past the end
    assert [(w.start, w.end) for w in late.words] == [(pytest.approx(0.1), pytest.approx(0.35)),
                                                      (pytest.approx(0.95), 1.0)]
    assert (late.segments[0].start, late.segments[0].end) == (pytest.approx(0.1), 1.0)


def test_a_transcriber_takes_its_models_lag_off_what_it_decodes(monkeypatch):
    import deid_speech.asr.whisper as whisper
    from deid_speech.asr.models import ResolvedModel
    from deid_speech.types import Transcript

    t = object.__new__(whisper.Transcriber)  # no weights: the decoding is stood in for
    t.resolved = ResolvedModel("ct2", Path("."), "m", -0.05)
    monkeypatch.setattr(whisper.Transcriber, "transcribe_raw",
                        lambda self, audio, progress=None: Transcript.from_words([("x", 0.5, 0.7)]))
    w = t.transcribe(np.zeros(16000, np.float32)).words[0]
    assert (w.start, w.end) == (pytest.approx(0.55), pytest.approx(0.75))


def test_the_shipped_models_lag_by_their_architecture_and_an_unknown_folder_by_nothing(tmp_path):
    from deid_speech.asr.models import WORD_LAG_S, resolve_model

    assert resolve_model("tiny.en").lag_s == WORD_LAG_S["tiny.en"] == 0.10
    assert {WORD_LAG_S[m] for m in ("tiny.en-sg", "tiny.en-sg-full")} == {0.10}
    assert WORD_LAG_S["base"] == WORD_LAG_S["base-sg"] == -0.05
    (tmp_path / "model.bin").write_bytes(b"x")
    assert resolve_model(str(tmp_path)).lag_s == 0.0


def _looping_transcriber(loop_when, monkeypatch, batched=True):
    """A Transcriber whose decoder loops ("-0 -0 -0 ...") when ``loop_when(careful, dur)``
    (``careful``: the one-window retry with beams and the fallback); every stretch of the
    audio counts as speech."""
    import deid_speech.asr.whisper as whisper
    from deid_speech.asr.whisper import AsrOptions, Transcriber

    monkeypatch.setattr(whisper, "speech_regions", lambda audio, options=None: [(0.0, len(audio) / 16000)])
    from deid_speech.asr.models import ResolvedModel

    t = object.__new__(Transcriber)
    t.options = (AsrOptions.fast if batched else AsrOptions)(window_s=10.0, overlap_s=0.5)
    t.resolved = ResolvedModel("ct2", Path("fake"), "fake")
    t.calls = []

    def words(careful, dur):
        if loop_when(careful, dur):
            return [(" -0", 0.1 * i, 0.1 * i + 0.05, 0.9) for i in range(int(dur * 9))], [(0.0, dur)]
        return [(f" word{i}", 0.5 * i, 0.5 * i + 0.3, 0.9) for i in range(int(dur * 2))], [(0.0, dur)]

    def decode(audio, prompt=None, fallback=False):
        t.calls.append(("careful", prompt))
        return words(True if batched else bool(prompt), len(audio) / 16000)

    def decode_batch(clips, no_repeat=0):
        t.calls.append(("batch", len(clips), no_repeat))
        return [(*words(False, len(c) / 16000), -0.2) for c in clips]

    t._decode, t._decode_batch = decode, decode_batch
    return t


def test_windows_are_decoded_in_one_batch_and_a_looping_one_again_on_its_own(monkeypatch):
    audio = np.random.default_rng(0).normal(0, 0.1, 25 * 16000).astype(np.float32)
    t = _looping_transcriber(lambda careful, dur: not careful, monkeypatch)  # batched: always loops
    tr = t.transcribe(audio)
    n = t.calls[0][1]
    assert t.calls[0] == ("batch", n, 0) and n >= 3  # 25 s of speech in 10 s windows: one batch
    assert t.calls[1] == ("batch", n, 3)  # all loop: again together, no 3-gram twice
    assert [c[0] for c in t.calls[2:]] == ["careful"] * n  # they still loop: each on its own, with beams
    assert "-0" not in tr.text and len(tr.words) > 30
    starts = [w.start for w in tr.words]
    assert starts == sorted(starts)


def test_one_at_a_time_each_window_is_prompted_and_a_looping_one_redone_without_the_prompt(monkeypatch):
    audio = np.random.default_rng(0).normal(0, 0.1, 25 * 16000).astype(np.float32)
    # the default mode; the fake loops only when prompted
    t = _looping_transcriber(lambda prompted, dur: prompted and dur > 5, monkeypatch, batched=False)
    tr = t.transcribe(audio)
    assert "-0" not in tr.text and len(tr.words) > 30
    assert all(c[0] == "careful" for c in t.calls)  # no batch
    assert t.calls[0][1] == "" and t.calls[1][1].startswith("word0")  # window 2 is prompted by window 1's words
    assert ("careful", "") in t.calls[2:]  # its retry ran without them


def test_a_window_that_loops_whatever_is_left_uncovered_not_passed_as_checked(monkeypatch):
    from deid_speech.asr.whisper import uncovered_speech

    audio = np.random.default_rng(0).normal(0, 0.1, 25 * 16000).astype(np.float32)
    t = _looping_transcriber(lambda careful, dur: dur > 5, monkeypatch)  # full windows always loop
    tr = t.transcribe(audio)
    assert "-0" not in tr.text
    gaps = uncovered_speech(audio, 16000, tr.words, regions=[(0.0, 25.0)])
    assert gaps and sum(b - a for a, b in gaps) > 10  # the looping windows' speech is reported


def _raw(text, step=0.3):
    return [(" " + t, step * i, step * i + 0.2, 0.9) for i, t in enumerate(text.split())]


@pytest.mark.parametrize("text,kept", [
    ("s s s s s s", ""), ("my card is -0 -0 -0 -0 -0 -0 -0 ok", "my card is ok"),
    ("Hot, hot hot. Hot hot HOT", ""), ("it is 8 upon 8 upon 8 upon 8 upon", "it is"),
    ("I'm red I'm red I'm red I'm red then", "then"),
    ("at dot com dot s g dot com dot s g dot com dot s g dot com dot s g", "at"),
])
def test_a_loop_inside_a_decoding_is_cut_out(text, kept):
    from deid_speech.asr.whisper import cut_loops, loops, mark_loops

    assert loops(_raw(text))
    assert " ".join(w[0].strip() for w in cut_loops(mark_loops(_raw(text)))) == kept


@pytest.mark.parametrize("text", [
    "here's some more words words words words and that should be good",  # the real-speech set
    "double double double double", "nine nine eight eight nine nine eight eight",
    "one two one two one two", "zero zero zero zero five", "S one two three four five six seven D",
    "no no no no no I said no",
])
def test_speech_that_repeats_itself_is_not_a_loop(text):
    from deid_speech.asr.whisper import loops, mark_loops

    assert loops(_raw(text)) == [] and mark_loops(_raw(text)) == _raw(text)


def test_a_short_loop_in_a_long_window_passes_the_window_tests_and_is_cut_out():
    from deid_speech.asr.whisper import cut_loops, hallucinated, mark_loops

    words = _raw("hello this is Mei Ling from the clinic calling about your appointment next week "
                 "could you confirm your date of birth and the s s s s s s s number on your card please "
                 "and also the phone we can reach you at in the evening thank you")
    assert not hallucinated(words, 30.0)  # compression and word rate: the window looks fine
    cut = cut_loops(mark_loops(words))
    assert len(cut) == len(words) - 7 and " s " not in " ".join(w[0] for w in cut)


def test_a_loop_in_part_of_a_window_is_cut_out_and_its_speech_left_unchecked(monkeypatch):
    """The one-at-a-time mode: a loop in a window's words ("eight" six times, over speech the
    recogniser could not read) is cut out and the rest of the window kept; the loop's speech
    is not decoded again (a number decoded again came back as other words and leaked) but
    left with no word, which redact beeps as unchecked speech."""
    from deid_speech.asr.whisper import plan_windows, uncovered_speech

    audio = np.random.default_rng(0).normal(0, 0.1, 25 * 16000).astype(np.float32)
    t = _looping_transcriber(lambda careful, dur: False, monkeypatch, batched=False)

    def decode(audio, prompt=None, fallback=False):
        t.calls.append(("careful", prompt, len(audio) / 16000))
        dur = len(audio) / 16000
        words = [(f" word{i}", 0.5 * i, 0.5 * i + 0.5, 0.9) for i in range(int(dur * 2))]  # every moment covered
        if dur > 6:
            words[6:12] = [(" eight", 3.0 + 0.5 * k, 3.5 + 0.5 * k, 0.9) for k in range(6)]
        return words, [(0.0, dur)]

    t._decode = decode
    tr = t.transcribe(audio)
    assert "eight" not in tr.text and "word5" in tr.text and "word12" in tr.text  # the rest of each window kept
    windows = plan_windows(audio, [(0.0, 25.0)], 10.0, 0.5, t.options.skip_silence_s)
    assert len(t.calls) == len(windows) == 4  # each window once; no stretch decoded again on its own
    gaps = uncovered_speech(audio, 16000, tr.words, regions=[(0.0, 25.0)])
    loops = sum(b - a for a, b in gaps)
    assert 2.5 <= loops <= 3 * 3.0 + 0.5  # the loops' stretches (3 s in each window that owns one), not whole windows


@pytest.mark.parametrize("word,start,end,regions,cut", [
    (" a", 46.48, 56.82, [(44.0, 60.0)], 46.48 + 1.85),  # tiny.en gave up on a passport and two sentences
    (" filletino", 94.51, 113.93, [(93.0, 115.0)], 94.51 + 1.5 + 9 * 0.35),
    (" I?", 30.92, 39.23, [(30.0, 34.0), (34.6, 40.0)], 30.92 + 1.85),  # speech in two regions
    (" 553247802174.", 10.0, 15.1, [(9.0, 16.0)], None),  # twelve digits read out: 5.1 s is no stretch
    (" okay", 5.0, 9.0, [(4.0, 5.5), (8.6, 9.5)], None),  # stretched over a pause: its place is unknown
    (" Tan", 5.0, 8.5, [(4.0, 8.5)], None),  # 0.4 s of speech past 1.85 s and the margins: left as it is
    (" double", 2.0, 3.9, [(0.0, 10.0)], None),  # slow, but a word can last that long
])
def test_a_word_stretched_over_speech_it_skipped_is_cut_back(word, start, end, regions, cut):
    from deid_speech.asr.whisper import unstretched

    before, after = (" hello", start - 0.5, start, 0.9), (" thanks", end, end + 0.4, 0.9)
    out = unstretched([before, (word, start, end, 0.3), after], regions)
    assert out[0] == before and out[2] == after and out[1][:2] == (word, start)
    assert out[1][2] == pytest.approx(cut if cut is not None else end)


def test_speech_under_a_stretched_word_is_decoded_again(monkeypatch):
    """One window's decoding wrote "a" over 1.5-13 s (tiny.en gave up on the speech there):
    that speech gets the second chance, its words land in the transcript, and "a" keeps only
    the time a word can take. Before, "a" covered it all and it was never decoded again."""
    audio = np.random.default_rng(0).normal(0, 0.1, 18 * 16000).astype(np.float32)
    import deid_speech.asr.whisper as whisper

    t = _looping_transcriber(lambda careful, dur: False, monkeypatch, batched=False)
    t.options = replace(t.options, window_s=20.0, overlap_s=0.5)
    monkeypatch.setattr(whisper, "speech_regions", lambda audio, options=None: [(0.0, 13.4)])

    def decode(audio, prompt=None, fallback=False):
        dur = len(audio) / 16000
        t.calls.append(("careful", prompt, dur))
        if dur > 12:  # the whole speech: one window
            return [(" so", 1.0, 1.4, 0.9), (" a", 1.5, 13.0, 0.06), (" good", 13.0, 13.4, 0.1)], [(0.0, dur)]
        return [(f" again{i}", 0.5 * i, 0.5 * i + 0.4, 0.9) for i in range(int(dur * 2))], [(0.0, dur)]

    t._decode = decode
    tr = t.transcribe(audio)
    assert len(t.calls) == 2 and t.calls[1][2] == pytest.approx(10.05)  # the stretch (3.65-12.7 s) and 0.5 s either side
    a = next(w for w in tr.words if w.text.strip() == "a")
    assert a.end == pytest.approx(3.35)
    again = [w for w in tr.words if w.text.strip().startswith("again")]
    assert again and min(w.start for w in again) < 6.0 and max(w.end for w in again) > 12.0


def test_an_unsure_window_is_decoded_again_when_asked(monkeypatch):
    from dataclasses import replace

    audio = np.zeros(25 * 16000, np.float32)
    t = _looping_transcriber(lambda careful, dur: False, monkeypatch)
    t.options = replace(t.options, retry_logprob=-1.0)
    batches = []

    def decode_batch(clips, no_repeat=0):
        batches.append((len(clips), no_repeat))
        return [([(f" w{k}-{i}", 0.5 * i, 0.5 * i + 0.3, 0.9) for i in range(len(c) // 8000)], [(0.0, len(c) / 16000)],
                 -1.5 if (k == 1 and not no_repeat) else -0.2) for k, c in enumerate(clips)]

    t._decode_batch = decode_batch
    t.transcribe(audio)
    assert batches[0][1] == 0 and batches[1:] == [(1, 3)]  # the unsure window 2 again, alone, with no 3-gram twice
    assert not [c for c in t.calls if c[0] == "careful"]


def test_plan_windows_skip_long_pauses_and_tile_the_call():
    from deid_speech.asr.whisper import plan_windows

    audio = np.zeros(60 * 16000, np.float32)
    w = plan_windows(audio, [(0.5, 5.0), (6.0, 12.0), (40.0, 45.0)], window_s=28, overlap_s=1, skip_silence_s=1.0)
    assert [x.clip for x in w] == [(0.5, 12.0), (40.0, 45.0)]  # 12-40 s is not decoded
    assert w[0].own == (0.0, 26.0) and w[1].own == (26.0, 60.0)  # owned parts tile the call


def test_plan_windows_cut_long_speech_with_overlap_and_fit_whisper():
    from deid_speech.asr.whisper import plan_windows

    rng = np.random.default_rng(1)
    audio = (0.2 * rng.standard_normal(90 * 16000)).astype(np.float32)
    audio[int(25 * 16000): int(25.2 * 16000)] = 0.0  # a quiet moment inside the speech
    w = plan_windows(audio, [(2.0, 88.0)], window_s=28, overlap_s=1, skip_silence_s=1.0)
    assert len(w) >= 4
    assert w[0].own[0] == 0.0 and w[-1].own[1] == 90.0
    assert all(a.own[1] == pytest.approx(b.own[0]) for a, b in zip(w, w[1:]))  # no gap, no overlap
    assert all(x.clip[1] - x.clip[0] <= 30.0 for x in w)
    assert all(x.clip[0] <= max(x.own[0], 2.0) and x.clip[1] >= min(x.own[1], 88.0) for x in w)
    inner = [x for x in w[1:]]
    assert all(x.clip[0] == pytest.approx(x.own[0] - 1.0) for x in inner)  # 1 s of context before a cut
    assert 25.0 <= w[1].own[0] <= 25.2  # the first cut found the quiet moment


def test_uncovered_speech_is_speech_no_word_covers():
    from deid_speech.asr.whisper import uncovered_speech

    audio = np.zeros(30 * 16000, np.float32)
    words = [("a", 1.0, 1.5, 1.0), ("b", 1.6, 2.0, 1.0), ("c", 9.0, 9.5, 1.0)]
    gaps = uncovered_speech(audio, 16000, words, regions=[(0.8, 12.0), (20.0, 20.5)])
    assert gaps == [(2.3, 8.7), (9.8, 12.0)]  # words padded by 0.3 s; a region under 1 s is no gap


def test_what_redact_beeps_joins_uncovered_speech_across_a_short_pause_with_no_word_in_it():
    """The VAD missed 1.3 s of an account number read between two stretches that got no
    words: redact's blanks (join_s=BLANK_JOIN_S) take the pause too; a word between two
    stretches keeps them apart (it was heard and checked), and so does a long pause."""
    from deid_speech.asr.whisper import BLANK_JOIN_S, uncovered_speech

    audio = np.zeros(30 * 16000, np.float32)
    heard = [("account", 3.0, 3.7, 1.0)]
    regions = [(3.0, 6.3), (7.6, 9.9), (13.0, 15.0)]
    assert uncovered_speech(audio, 16000, heard, regions=regions) == [(4.0, 6.3), (7.6, 9.9), (13.0, 15.0)]
    assert uncovered_speech(audio, 16000, heard, regions=regions, join_s=BLANK_JOIN_S) == [(4.0, 9.9), (13.0, 15.0)]
    between = heard + [("okay", 6.8, 7.1, 1.0)]
    assert uncovered_speech(audio, 16000, between, regions=regions, join_s=BLANK_JOIN_S) == [
        (4.0, 6.3), (7.6, 9.9), (13.0, 15.0)]


def test_speech_stretches_join_short_pauses_and_seek_chunks_cover_them():
    from deid_speech.asr.whisper import seek_chunks, speech_stretches

    assert speech_stretches([(0.0, 2.0), (2.5, 4.0), (6.0, 7.0)], 1.0) == [(0.0, 4.0), (6.0, 7.0)]
    rng = np.random.default_rng(0)
    audio = rng.normal(0, 0.1, 100 * 16000).astype(np.float32)
    audio[int(61.5 * 16000): int(62.5 * 16000)] *= 0.001  # a quiet second inside the long stretch
    stretches = [(0.0, 10.0), (12.0, 20.0), (25.0, 95.0)]
    chunks = seek_chunks(audio, stretches, chunk_s=40.0)
    for lo, hi, clips in chunks:
        assert hi - lo <= 40.0 + 1e-6
        assert clips[0][0] == 0.0 and abs(clips[-1][1] - (hi - lo)) < 1e-9
        assert all(0 <= a < b <= hi - lo + 1e-9 for a, b in clips)
    # whole stretches packed, the 70 s one cut (at its quiet second among others), nothing lost or doubled
    assert chunks[0][2] == [(0.0, 10.0), (12.0, 20.0)]
    covered = [(lo + a, lo + b) for lo, _, clips in chunks for a, b in clips]
    assert covered[:2] == stretches[:2] and covered[2][0] == 25.0 and covered[-1][1] == 95.0
    assert all(x[1] == y[0] for x, y in zip(covered[2:], covered[3:]))
    assert len(covered) >= 4


def test_seeking_decodes_the_stretches_and_drops_a_window_that_loops(monkeypatch):
    """``seek``: faster-whisper's own loop over the speech stretches (clip_timestamps), no
    prompt; a 30 s window whose decoding still loops after the fallback is dropped and its
    speech left to the uncovered-speech pass, never kept as words."""
    import deid_speech.asr.whisper as whisper
    from deid_speech.asr.models import ResolvedModel

    monkeypatch.setattr(whisper, "speech_regions", lambda audio, options=None: [(1.0, 20.0), (20.5, 50.0)])
    Seg = type("Seg", (), {})
    Word = type("Word", (), {})

    def seg(a, b, ratio, text):
        s = Seg()
        s.start, s.end, s.compression_ratio = a, b, ratio
        s.words = []
        for i in range(int(b - a)):
            w = Word()
            w.word, w.start, w.end, w.probability = f" {text}{i}", a + i, a + i + 0.5, 0.9
            s.words.append(w)
        return s

    seen = []

    class Model:
        model = type("Ct2", (), {"fresh": lambda self: None, "is_multilingual": False})()

        def transcribe(self, audio, **kw):
            seen.append((len(audio) / 16000, kw["clip_timestamps"], kw["initial_prompt"]))
            if kw["clip_timestamps"] != "0":  # the seeking pass: the second 30 s window loops
                return iter([seg(0.0, 29.0, 1.4, "w"), seg(29.0, 49.0, 9.0, "-0")]), None
            return iter([seg(0.0, len(audio) / 16000, 1.2, "again")]), None  # the uncovered stretch

    t = whisper.Transcriber.__new__(whisper.Transcriber)
    t.options, t._model, t._lock = AsrOptions(seek=True), Model(), whisper._DECODING
    t.resolved = ResolvedModel("ct2", Path("."), "x")
    tr = t.transcribe(np.zeros(60 * 16000, np.float32))
    assert seen[0] == (49.0, [0.0, 49.0], None)  # one pass over the two regions as one stretch, no prompt
    assert "-0" not in tr.text and tr.words[0].text.strip() == "w0" and tr.words[0].start == 1.0  # call times
    assert any(w.text.startswith("again") for w in tr.words)  # the dropped window's speech decoded again
    assert len(seen) >= 2 and all(s[1] == "0" for s in seen[1:])
    starts = [w.start for w in tr.words]
    assert starts == sorted(starts)


def test_an_initial_prompt_goes_before_every_decoding_and_keeps_old_caches_valid(monkeypatch, tmp_path):
    from deid_speech.asr import whisper
    from deid_speech.asr.models import ResolvedModel

    prompts = []

    class Model:
        model = type("Ct2", (), {"fresh": lambda self: None, "is_multilingual": False})()

        def transcribe(self, audio, **kw):
            prompts.append(kw["initial_prompt"])
            return iter([]), None

    def decoder(**kw):
        t = whisper.Transcriber.__new__(whisper.Transcriber)
        t.options, t._model, t._lock = AsrOptions(**kw), Model(), whisper._DECODING
        t.resolved = ResolvedModel("ct2", Path("."), "x")
        return t

    clip = np.zeros(16000, np.float32)
    decoder()._decode(clip, "the words before")
    decoder(initial_prompt="Names: Toh Shu Fen.")._decode(clip, "the words before")
    decoder(initial_prompt="Names: Toh Shu Fen.", seek=True)._decode(clip, None, clips=[0.0, 1.0])
    decoder()._decode(clip, None)
    assert prompts == ["the words before", "Names: Toh Shu Fen. the words before", "Names: Toh Shu Fen.", None]
    with pytest.raises(ValueError, match="batched"):
        AsrOptions(batched=True, initial_prompt="Names: Toh Shu Fen.")
    # another prompt is another decoding: its own cache key
    monkeypatch.setattr(whisper, "resolve_model", lambda name: ResolvedModel("ct2", tmp_path, name))
    monkeypatch.setattr("deid_speech.asr.models._identity", lambda path: "same model")
    # (that the default's key is the old one is checked with the other later fields in
    # test_the_fallback_is_capped_and_a_cache_of_the_old_options_stays_valid)
    plain = whisper.CachedTranscriber(AsrOptions(), tmp_path / "c.jsonl").model_key
    assert plain != whisper.CachedTranscriber(AsrOptions(initial_prompt="Names: X."), tmp_path / "c.jsonl").model_key


def test_seeking_decodes_pieces_of_seek_chunk_s(monkeypatch, tmp_path):
    from deid_speech.asr import whisper
    from deid_speech.asr.models import ResolvedModel

    monkeypatch.setattr(whisper, "speech_regions", lambda audio, options=None: [(0.0, 100.0), (102.0, 250.0)])
    decoded = []

    class Model:
        model = type("Ct2", (), {"fresh": lambda self: None, "is_multilingual": False})()

        def transcribe(self, audio, **kw):
            decoded.append(round(len(audio) / 16000))
            return iter([]), None

    t = whisper.Transcriber.__new__(whisper.Transcriber)
    t.options, t._model, t._lock = AsrOptions(seek=True, seek_chunk_s=120.0), Model(), whisper._DECODING
    t.resolved = ResolvedModel("ct2", Path("."), "x")
    audio = np.zeros(250 * 16000, np.float32)
    t._seeking(audio, [(0.0, 100.0), (102.0, 250.0)], [], [], None)
    assert decoded and max(decoded) <= 120 and sum(decoded) >= 248  # every stretch, in pieces of <= 120 s
    decoded.clear()
    t.options = AsrOptions(seek=True)  # 300 s: both stretches in one piece
    t._seeking(audio, [(0.0, 100.0), (102.0, 250.0)], [], [], None)
    assert decoded == [250]
    with pytest.raises(ValueError, match="seek_chunk_s"):
        AsrOptions(seek_chunk_s=10.0)
    # another piece size is another decoding: its own cache key
    monkeypatch.setattr(whisper, "resolve_model", lambda name: ResolvedModel("ct2", tmp_path, name))
    monkeypatch.setattr("deid_speech.asr.models._identity", lambda path: "same model")
    # (the default's key is the old one: see test_the_fallback_is_capped_and_a_cache_of_the_old_options_stays_valid)
    key = whisper.CachedTranscriber(AsrOptions(), tmp_path / "c.jsonl").model_key
    assert key != whisper.CachedTranscriber(AsrOptions(seek_chunk_s=120.0), tmp_path / "c.jsonl").model_key


@pytest.mark.model
def test_seeking_transcribes_the_example_like_the_windows_do():
    from deid_speech.asr.whisper import Transcriber, uncovered_speech
    from deid_speech.audio import load

    audio = load(EXAMPLE).mono16k()
    windowed = Transcriber(AsrOptions()).transcribe(audio)
    seeking = Transcriber(AsrOptions(seek=True)).transcribe(audio)
    for x, y in zip(seeking.words, seeking.words[1:]):
        assert x.start <= y.start
        assert min(x.end, y.end) - max(x.start, y.start) <= 0.5 * min(x.end - x.start, y.end - y.start) + 1e-6
    assert uncovered_speech(audio, 16000, seeking.words) == []
    import difflib
    import re

    def words(t):
        return [w for w in re.findall(r"[a-z']+", t.text.lower()) if len(w) > 2]

    ratio = difflib.SequenceMatcher(a=words(windowed), b=words(seeking)).ratio()
    assert ratio > 0.8, ratio


@pytest.mark.parametrize("second_chance_fallback", [True, False])
def test_speech_no_word_covers_is_decoded_again_with_or_without_the_fallback(monkeypatch, second_chance_fallback):
    """The windows always get the fallback; the second chance on speech they left without
    words gets it only when ``second_chance_fallback``."""
    import dataclasses

    audio = np.random.default_rng(0).normal(0, 0.1, 25 * 16000).astype(np.float32)
    t = _looping_transcriber(lambda careful, dur: False, monkeypatch, batched=False)
    t.options = dataclasses.replace(t.options, second_chance_fallback=second_chance_fallback)
    calls = []

    def decode(clip, prompt=None, fallback=False):
        calls.append((len(clip) / 16000, fallback))
        if len(calls) == 1:  # the first window: words for its first 3 s only, the rest uncovered
            return [(f" word{i}", 0.5 * i, 0.5 * i + 0.3, 0.9) for i in range(6)], [(0.0, 3.0)]
        dur = len(clip) / 16000
        return [(f" more{i}", 0.5 * i, 0.5 * i + 0.3, 0.9) for i in range(int(dur * 2))], [(0.0, dur)]

    t._decode = decode
    tr = t.transcribe(audio)
    windows = len(_planned_windows(t, audio))
    assert len(calls) > windows  # a second chance ran
    assert all(fb for _, fb in calls[:windows])
    assert all(fb is second_chance_fallback for _, fb in calls[windows:])
    assert any(w.text.startswith("more") for w in tr.words if w.start > 3.5)


def _planned_windows(t, audio):
    from deid_speech.asr.whisper import plan_windows

    o = t.options
    return plan_windows(audio, [(0.0, len(audio) / 16000)], o.window_s, o.overlap_s, o.skip_silence_s)


# the 40 words tiny.en wrote before the example's last window (its prompt in transcribe)
_LAST_WINDOW_PROMPT = ("email. It is Jason Dot Lim at Yahoo dot com. I see a charge of $49 .90 on the 12th of "
                       "March 2 times. I will reverse one. What? Thanks. Can add my card played. SKB 8 7 3 6")


@pytest.mark.model
def test_a_tail_shorter_than_tail_s_after_the_last_word_is_not_decoded_as_a_window_of_its_own(monkeypatch):
    """faster-whisper seeks on from a decoding's last word: on the example's last window it ran
    a whole encoder pass (and a decoding) for the 0.02 s left after it, which gave no word.
    Now the decoding stops there, with the same words and segments."""
    from deid_speech.asr import whisper
    from deid_speech.asr.whisper import Transcriber, plan_windows, speech_regions
    from deid_speech.audio import load

    # the example's samples as they are: redact now takes their 0.002 offset off (audio.DC_MAX),
    # and the window that left the 0.02 s tail is this audio's
    audio = load(EXAMPLE).mono16k()
    t = Transcriber(AsrOptions())
    o = t.options
    last = plan_windows(audio, speech_regions(audio, o.vad), o.window_s, o.overlap_s, o.skip_silence_s)[-1]
    clip = audio[int(last.clip[0] * 16000): int(last.clip[1] * 16000)]
    passes = []
    encode = t._model.encode
    monkeypatch.setattr(t._model, "encode", lambda features: passes.append(1) or encode(features), raising=False)

    monkeypatch.setattr(whisper, "TAIL_S", 0.0)  # as before: every tail decoded
    before = t._decode(clip, _LAST_WINDOW_PROMPT, fallback=True)
    assert len(passes) == 2  # the window, then its 0.02 s tail in a window of its own
    assert clip.size / 16000 - before[0][-1][2] < 0.2

    passes.clear()
    monkeypatch.setattr(whisper, "TAIL_S", 0.2)
    after = t._decode(clip, _LAST_WINDOW_PROMPT, fallback=True)
    assert len(passes) == 1
    assert after == before
