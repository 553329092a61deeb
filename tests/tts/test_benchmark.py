"""The unseen-voice benchmark: its sources meet the issue's requirements, its voices are
used by no other split, and one command voices it into manifests `eval` can score."""
from __future__ import annotations

import difflib
import shutil
from collections import Counter
from pathlib import Path

import pytest
import soundfile as sf

from deid_speech.errors import DeidError
from deid_speech.eval.run import load_manifest
from deid_speech.manifest import read_resumable
from deid_speech.tts import benchmark as B
from deid_speech.tts.voices import BENCHMARK_VOICES, DEFAULT_VOICES, HeldOutVoiceError, canonical, speaker, voices_for_split
from deid_speech.types import PAPER_LABELS, parse_tagged

needs_voices = pytest.mark.skipif(shutil.which("espeak-ng") is None or shutil.which("flite") is None,
                                  reason="espeak-ng and flite are needed (make setup installs them)")


def _labels(lines: list[str]) -> Counter:
    return Counter(e.label for t in lines for e in parse_tagged(t)[1])


@pytest.mark.parametrize("part,per_label,pii_free", [("test", 15, 20), ("test2", 15, 20), ("test3", 15, 20), ("dev", 10, 15)])
def test_benchmark_utterances_cover_every_label_and_look_alikes(part, per_label, pii_free):
    lines = B.read_utterances(B.SOURCE / "utterances" / f"{part}.txt")
    counts = _labels(lines)
    assert all(counts[label] >= per_label for label in PAPER_LABELS), counts
    assert sum(not parse_tagged(t)[1] for t in lines) >= pii_free
    assert len(lines) >= (100 if part == "dev" else 150)
    assert not any(ch.isdigit() or ch == "@" for t in lines for ch in t)  # spoken form only


def test_benchmark_calls_are_long_multi_turn_and_cover_every_label():
    calls = {p: [B.read_call(f) for f in sorted((B.SOURCE / "calls" / p).glob("*.txt"))]
             for p in B.PARTS if p not in B.CALLS_AGAIN}
    assert all(len(calls[p]) >= 5 for p in ("test", "test2", "test3")) and len(calls["dev"]) >= 3
    for turns in calls["test"] + calls["test2"] + calls["test3"] + calls["dev"]:
        words = sum(len(parse_tagged(t)[0].split()) for _, t in turns)
        assert 150 <= words <= 300, words  # 60-120 s at the voices' rates
        assert {s for s, _ in turns} == {"agent", "caller"}
    for part in ("test", "test2", "test3"):
        counts = _labels([t for turns in calls[part] for _, t in turns])
        assert all(counts[label] >= 4 for label in PAPER_LABELS), (part, counts)


def _texts(part: str) -> list[str]:
    return [parse_tagged(t)[0].lower() for t in B.read_utterances(B.SOURCE / "utterances" / f"{part}.txt")]


def _worst_ratio(texts: list[str], against: list[str], floor: float = 0.6) -> float:
    """The highest difflib ratio of any of ``texts`` to any of ``against`` (pairs whose quick
    upper bounds stay under ``floor`` are skipped: their ratio is below it too)."""
    worst = 0.0
    for text in texts:
        m = difflib.SequenceMatcher(None, b=text, autojunk=False)  # b: set_seq1 below changes only a
        for s in against:
            m.set_seq1(s)
            if m.real_quick_ratio() >= floor and m.quick_ratio() >= floor:
                worst = max(worst, m.ratio())
    return worst


def test_benchmark_sentences_are_not_drawn_from_the_seed_corpus():
    seed = [r["text"].lower() for p in sorted((B.SOURCE.parent / "seed").glob("*.jsonl")) for r in read_resumable(p)]
    assert _worst_ratio([t for p in B.PARTS if p not in B.CALLS_AGAIN for t in _texts(p)], seed) < 0.6


def test_benchmark_voices_are_used_by_no_other_split():
    parts = {p: set(canonical(BENCHMARK_VOICES[p])) for p in ("dev", "test", "test2", "test3", "dev-fast")}
    for p, voices in parts.items():
        assert not voices & set().union(*(v for q, v in parts.items() if q != p)), p
    assert not set().union(*parts.values()) & set(canonical(DEFAULT_VOICES))
    for split in ("train", "dev", "test"):
        with pytest.raises(HeldOutVoiceError, match="unseen-voice benchmark"):
            voices_for_split([BENCHMARK_VOICES["test"][0]], split)
    with pytest.raises(HeldOutVoiceError, match="benchmark-test split is voiced only by"):
        voices_for_split([BENCHMARK_VOICES["dev"][0]], "benchmark-test")
    assert voices_for_split(None, "benchmark-dev") == canonical(BENCHMARK_VOICES["dev"])


# espeak-ng variants (the "+Annie" of "en-us-nyc+Annie": a timbre, any dialect) that a benchmark part
# shares with the recogniser fine-tune's training voices (configs/datasets/asr.toml, which trained the
# verifier's tiny.en-sg and base-sg), found in session 57: test2 and test3 chose "variants no other data
# uses" against the benchmark and the default voices only. Known, disclosed (docs/results.md §0bd); no
# further overlap may come in.
KNOWN_SHARED_VARIANTS = {("test2", "annie"), ("test2", "andy"), ("test3", "steph"), ("test3", "alicia")}


def _espeak_variants(voices) -> set[str]:
    return {v.split("+", 1)[1].split("@")[0].lower() for v in voices if v.startswith("espeak:") and "+" in v}


def test_benchmark_speakers_are_in_no_shipped_dataset_config():
    import tomllib

    configs = sorted((Path(__file__).resolve().parents[2] / "configs" / "datasets").glob("*.toml"))
    assert configs
    lists = [tomllib.loads(c.read_text())["tts"]["voices"] for c in configs]  # a list, or "default"
    trained = {speaker(v) for voices in lists for v in (voices if isinstance(voices, list) else DEFAULT_VOICES)}
    for part, voices in BENCHMARK_VOICES.items():
        assert not {speaker(v) for v in voices} & trained, part
        shared = {(part, x) for x in _espeak_variants(voices) & _espeak_variants(trained)}
        assert shared <= KNOWN_SHARED_VARIANTS, shared


def test_malformed_sources_are_one_line_errors_with_file_and_line(tmp_path):
    (tmp_path / "u.txt").write_text("# c\nok [PHONE] nine one [PHONE]\nbad [PHONE] nine\n")
    with pytest.raises(DeidError, match=r"u.txt:3: unclosed \[PHONE\]"):
        B.read_utterances(tmp_path / "u.txt")
    (tmp_path / "c.txt").write_text("A: hello\nC: who is this\n")
    with pytest.raises(DeidError, match=r"c.txt:2: a turn starts with 'A:'"):
        B.read_call(tmp_path / "c.txt")


@needs_voices
@pytest.mark.model  # pocketsphinx times the reference words
def test_build_voices_utterances_and_calls_into_scorable_manifests(tmp_path):
    src = tmp_path / "src"
    (src / "utterances").mkdir(parents=True)
    (src / "calls" / "dev").mkdir(parents=True)
    (src / "utterances" / "dev.txt").write_text(
        "call me at [PHONE] nine one two three four five six seven [PHONE] lah\n"
        "the bus is one nine zero, come at three\n"
        "my name is [PERSON] Tan Wei Ming [PERSON]\n"
        "IC is [NRIC] S one two three four five six seven D [NRIC] ok\n")
    (src / "calls" / "dev" / "a.txt").write_text("# a call\nA: hello, this is [PERSON] Siti [PERSON]\n"
                                                 "B: my number is [PHONE] eight one two three, four five six seven [PHONE]\n")
    summary = B.build(tmp_path / "out", parts=("dev",), seed=1, source=src)
    utt, calls = summary["dev"]["utterances"], summary["dev"]["calls"]
    assert utt["n"] == 4 and calls["n"] == 1
    assert sum(utt["by_channel"].values()) == 4
    rows = read_resumable(tmp_path / "out/dev/utterances/manifest.jsonl")
    assert {r["voice"] for r in rows} <= set(canonical(BENCHMARK_VOICES["dev"]))
    call = read_resumable(tmp_path / "out/dev/calls/manifest.jsonl")[0]
    assert [e["label"] for e in call["entities"]] == ["PERSON", "PHONE"]
    assert call["voices"][0] != call["voices"][1]
    audio, sr = sf.read(tmp_path / "out/dev/calls" / call["audio"])
    assert sr == 16000 and abs(len(audio) / sr - call["duration"]) < 0.01
    for e in call["entities"]:
        assert 0 <= e["start"] < e["end"] <= call["duration"]
        assert call["text"][e["char_start"]:e["char_end"]] in call["tagged"]
    items = load_manifest(tmp_path / "out/dev/calls/manifest.jsonl")
    assert items[0].words and items[0].entities[1].label == "PHONE"
    # rerunning resumes: nothing is voiced again, the manifests are unchanged
    before = (tmp_path / "out/dev/calls/manifest.jsonl").read_bytes()
    again = B.build(tmp_path / "out", parts=("dev",), seed=1, source=src)
    assert again["dev"]["utterances"]["new"] == 0
    assert (tmp_path / "out/dev/calls/manifest.jsonl").read_bytes() == before
    # dev-fast voices dev's calls again, with its own (faster) voices, on the phone line, no utterances
    fast = B.build(tmp_path / "out", parts=("dev-fast",), seed=1, source=src)["dev-fast"]
    assert set(fast) == {"calls"} and fast["calls"]["by_channel"] == {"clean": 0, "telephone": 1}
    fast_call = read_resumable(tmp_path / "out/dev-fast/calls/manifest.jsonl")[0]
    assert fast_call["source"] == "calls/dev/a.txt" and fast_call["text"] == call["text"]
    assert set(fast_call["voices"]) <= set(canonical(BENCHMARK_VOICES["dev-fast"])) and fast_call["augment"]["telephone"]


@pytest.mark.parametrize("part,earlier", [("test2", ("dev", "test")), ("test3", ("dev", "test", "test2"))])
def test_a_later_test_part_repeats_no_sentence_of_the_earlier_ones(part, earlier):
    """test2 was written by authors who saw neither dev nor test, test3 (session 56) by authors who
    saw no other part: no line is a near copy of one of theirs."""
    assert _worst_ratio(_texts(part), [t for p in earlier for t in _texts(p)]) < 0.6
