"""bench/source_ablation.py: a variant drops one source's spans, everywhere or in the verifier's
transcripts only, and everything is put back after."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from deid_speech import pipeline
from deid_speech.pipeline import RedactConfig, Redactor
from deid_speech.types import Recognition, Span
from factories import make_transcript

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("source_ablation", ROOT / "bench" / "source_ablation.py")
ablation = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ablation)

TEXT = "hello my name is Tan and Lim bye"


class Fixed:
    """A detector that finds "Tan" by one source and "Lim" by another."""
    name = "fixed"

    def detect(self, transcript):
        w = {x.text: x for x in transcript.words}
        return [Span(w["Tan"].start, w["Tan"].end, "PERSON", 0.9, "spacy"),
                Span(w["Lim"].start, w["Lim"].end, "PERSON", 0.9, "name-list")]


class Asr:
    name = "fake"

    def transcribe(self, audio, progress=None):
        return make_transcript(TEXT, word_dur=0.3, gap=0.3, t0=0.0)

    def recognize(self, audio, progress=None):
        return Recognition(self.transcribe(audio))


class Later:  # the verifier hears the same words 5 s later (other times: nothing is covered yet)
    def result(self):
        return Recognition(make_transcript(TEXT, word_dur=0.3, gap=0.3, t0=5.0))


def found(variant: str) -> tuple[list[str], list[str]]:
    """The sources of the first transcript's spans and of the verifier's additions."""
    with ablation.patched(variant):
        r = Redactor(RedactConfig(verify=False), asr=Asr(), detectors=[Fixed()])
        mono = np.zeros(16000, dtype=np.float32)
        first = r.detect(Asr().transcribe(mono))
        added = r.verify(mono, first, [Later()]).added
    return sorted(s.source for s in first), sorted(s.source for s in added)


def test_a_source_is_dropped_everywhere_or_in_the_verifier_only() -> None:
    assert found("") == (["name-list", "spacy"], ["name-list+verify", "spacy+verify"])
    assert found("spacy") == (["name-list"], ["name-list+verify"])
    assert found("verify:spacy") == (["name-list", "spacy"], ["name-list+verify"])
    assert found("verify:*") == (["name-list", "spacy"], [])
    assert found("spacy&verify:name-list") == (["name-list"], [])
    # and nothing stays patched
    assert found("") == (["name-list", "spacy"], ["name-list+verify", "spacy+verify"])
    assert pipeline.Redactor.__init__.__module__ == "deid_speech.pipeline"


def test_repeat_leaves_out_the_other_mentions_of_a_found_value() -> None:
    t = make_transcript("my name is Tan yes Tan", word_dur=0.3, gap=0.3, t0=0.0)

    class One:
        name = "one"

        def detect(self, transcript):
            w = transcript.words[3]
            return [Span(w.start, w.end, "PERSON", 0.9, "spacy", "Tan")]

    r = Redactor(RedactConfig(verify=False), asr=Asr(), detectors=[One()])
    assert len(r.detect(t)) == 2  # the second "Tan" is a repeat
    with ablation.patched("repeat"):
        assert len(Redactor(RedactConfig(verify=False), asr=Asr(), detectors=[One()]).detect(t)) == 1
    assert len(r.detect(t)) == 2


def test_the_test_part_and_unknown_sources_are_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="tuning data only"):
        ablation.main(["--bench", str(tmp_path / "benchmark" / "test"), "--out", str(tmp_path / "a.json")])
    for bad in ("verify:nope", "verify:repeat", "nope", "spacy&nope"):
        with pytest.raises(SystemExit, match="unknown variant"):
            ablation.main(["--bench", str(tmp_path / "dev"), "--variants", bad, "--out", str(tmp_path / "a.json")])


def test_widen_leaves_a_too_short_span_as_timed() -> None:
    t = make_transcript("my name is Tan bye", word_dur=0.3, gap=0.3, t0=0.0)

    class Short:
        name = "short"

        def detect(self, transcript):  # a long name timed over 0.1 s: widened by default
            w = transcript.words[3]
            return [Span(w.start, w.start + 0.1, "PERSON", 0.9, "spacy", "Tan Boon Huat")]

    def detect():
        return Redactor(RedactConfig(verify=False), asr=Asr(), detectors=[Short()]).detect(t)[0]

    widened = detect()
    assert widened.source == "spacy+widened"
    with ablation.patched("widen"):
        timed = detect()
    assert timed.source == "spacy" and timed.duration < widened.duration
    assert detect() == widened


def test_the_dev_manifests_are_both_parts_or_a_one_line_exit(tmp_path: Path) -> None:
    import common  # bench/common.py, on the path the script put it on

    dev = tmp_path / "benchmark" / "dev"
    with pytest.raises(SystemExit, match=r"tool: no .*utterances.*make benchmark"):
        common.dev_manifests(dev, "tool")
    for part in ("utterances", "calls"):
        (dev / part).mkdir(parents=True)
        (dev / part / "manifest.jsonl").write_text("")
    assert common.dev_manifests(dev, "tool") == [("utterances", dev / "utterances" / "manifest.jsonl"),
                                                 ("calls", dev / "calls" / "manifest.jsonl")]
    with pytest.raises(SystemExit, match="tool: tuning data only"):
        common.dev_manifests(tmp_path / "benchmark" / "test", "tool")


def test_everything_is_put_back_when_a_variant_fails() -> None:
    from deid_speech.redact import place_spans, repeat_mentions

    before = (pipeline.Redactor.__init__, pipeline.Redactor.verify, pipeline.repeat_mentions, pipeline.place_spans)
    with pytest.raises(ZeroDivisionError), ablation.patched("spacy&repeat&widen&verify:*"):
        assert pipeline.place_spans is not place_spans and pipeline.repeat_mentions is not repeat_mentions
        assert ablation._state["everywhere"] == {"spacy"}
        raise ZeroDivisionError
    assert (pipeline.Redactor.__init__, pipeline.Redactor.verify, pipeline.repeat_mentions,
            pipeline.place_spans) == before
    assert pipeline.place_spans is place_spans and pipeline.repeat_mentions is repeat_mentions
    assert ablation._state == {"everywhere": frozenset(), "in_verifier": frozenset(), "in_verify": False}


def test_every_source_of_the_default_detectors_can_be_left_out() -> None:
    """A source missing from SOURCES would be kept in every variant without a word (session 52
    found "title-doubt", "opening" and "rare-word" missing)."""
    import re

    from deid_speech.systems import TABLE

    text = (ROOT / "src" / "deid_speech" / "ner" / "spacy_ner.py").read_text()
    inner = set(re.findall(r'"[A-Z_]+", [0-9.]+, "([a-z-]+)"', text))
    assert {"propn", "name-list", "cue", "name-slot", "rare-word", "date-grammar"} <= inner  # the scan works
    names = set(TABLE[ablation.SYSTEM].detectors)  # registered names, each the detector's own source
    assert names and (inner | names) <= set(ablation.SOURCES)


def test_test2_and_a_datasets_test_telephone_are_test_parts_too(tmp_path: Path) -> None:
    import common  # bench/common.py

    for test_part in ("benchmark/test2", "benchmark/test2/calls", "datasets/small/test_telephone", "benchmark/test"):
        with pytest.raises(SystemExit, match="tuning data only"):
            common.refuse_test_part(tmp_path / test_part, "tool")
    for tuning in ("benchmark/dev", "benchmark/dev-fast/calls", "real-more", "datasets/small/train"):
        common.refuse_test_part(tmp_path / tuning, "tool")  # no exit
    with pytest.raises(SystemExit, match="tuning data only"):
        ablation.main(["--manifest", str(tmp_path / "benchmark" / "test2" / "calls" / "manifest.jsonl"),
                       "--out", str(tmp_path / "a.json")])
    spec = importlib.util.spec_from_file_location("onset_offsets", ROOT / "bench" / "onset_offsets.py")
    onsets = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(onsets)
    with pytest.raises(SystemExit, match="onset_offsets: tuning data only"):
        onsets.main(["--bench", str(tmp_path / "benchmark" / "test2"), "--out", str(tmp_path / "o.json")])


def test_manifests_instead_of_the_dev_part(tmp_path: Path, monkeypatch) -> None:
    """--manifest scores the sets given (dev-fast, real speech), each under its folder's name;
    a missing one is a one-line exit, and --bench with --manifest is refused."""
    seen = []

    def fake_score(manifest, cache, variant):
        seen.append((manifest.parent.name, variant))
        return {"recall": 1.0, "leaked_duration": 0.01 if variant else 0.0, "leaky_entities": 0.0,
                "over_redaction": 0.1 if variant else 0.2, "by_cause": {}}

    monkeypatch.setattr(ablation, "score", fake_score)
    fast = tmp_path / "benchmark" / "dev-fast" / "calls" / "manifest.jsonl"
    real = tmp_path / "real-more" / "manifest.jsonl"
    for m in (fast, real):
        m.parent.mkdir(parents=True)
        m.write_text("")
    out = tmp_path / "a.json"
    assert ablation.main(["--manifest", str(fast), "--manifest", str(real), "--variants", "name-list",
                          "--out", str(out)]) == 0
    assert seen == [("calls", ""), ("calls", "name-list"), ("real-more", ""), ("real-more", "name-list")]
    import json

    rows = json.loads(out.read_text())["rows"]
    assert [(r["part"], r["variant"]) for r in rows] == [("dev-fast/calls", ""), ("dev-fast/calls", "name-list"),
                                                         (f"{tmp_path.name}/real-more", ""),
                                                         (f"{tmp_path.name}/real-more", "name-list")]
    assert rows[1]["d_leak"] == 0.01 and rows[1]["d_over"] == -0.1
    with pytest.raises(SystemExit, match="source_ablation: no "):
        ablation.main(["--manifest", str(tmp_path / "nope.jsonl"), "--out", str(out)])
    with pytest.raises(SystemExit):
        ablation.main(["--bench", str(tmp_path), "--manifest", str(real), "--out", str(out)])
