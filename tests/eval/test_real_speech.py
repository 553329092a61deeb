"""The real-speech regression set: its table of recordings (no network), and a build from
the cached pocketsphinx sdist (model-marked; skipped when the sdist is not cached)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from deid_speech.asr.models import cache_dir
from deid_speech.eval.real_speech import RECORDINGS, SDIST, build, record


def test_table_has_no_tidigits_and_unique_ids() -> None:
    assert not [r.member for r in RECORDINGS if "tidigits" in r.member.lower() or "dhd" in r.member.lower()]
    assert len({r.id for r in RECORDINGS}) == len(RECORDINGS)
    assert {r.kind for r in RECORDINGS} <= {"names", "lookalike", "other"}
    assert [r.id for r in RECORDINGS if r.entities] == [r.id for r in RECORDINGS if r.kind == "names"]


@pytest.mark.parametrize("rec", RECORDINGS, ids=lambda r: r.id)
def test_words_are_timed_in_order_within_the_audio(rec) -> None:
    words = rec.words
    assert " ".join(rec.timed.split()[::2]) == rec.text and len(words) == len(rec.text.split())
    prev_end = 0.0
    for w, start, end in words:
        assert prev_end - 1e-9 <= start < end <= rec.duration, (w, start, end)
        prev_end = end


@pytest.mark.parametrize("rec", RECORDINGS, ids=lambda r: r.id)
def test_entities_match_the_text_and_lie_within_their_words(rec) -> None:
    row = record(rec, f"audio/{rec.id}.flac")
    assert row["text"] == rec.text and len(row["words"]) == len(rec.words)
    for e, (label, phrase, _, _) in zip(row["entities"], rec.entities):
        assert e["label"] == label and rec.text[e["char_start"]:e["char_end"]] == phrase
        inside = [w for w in row["words"] if e["char_start"] <= w["char_start"] < e["char_end"]]
        assert inside and inside[0]["char_start"] == e["char_start"] and inside[-1]["char_end"] == e["char_end"]
        assert inside[0]["start"] <= e["start"] < e["end"] <= inside[-1]["end"]
        assert 0 <= e["start"] and e["end"] <= rec.duration


def test_the_one_name_is_mister_john_dashwood() -> None:
    ents = [(r.id, e[0], e[1]) for r in RECORDINGS for e in r.entities]
    assert ents == [("librivox-0870", "PERSON", "mister john dashwood")]


@pytest.mark.model
def test_build_from_the_cached_sdist(tmp_path: Path) -> None:
    sdist = cache_dir() / SDIST
    if not sdist.is_file():
        pytest.skip(f"{sdist} is not cached (python -m deid_speech.eval.real_speech --out DIR fetches it)")
    from deid_speech.eval.real_speech import fetch_sdist
    from deid_speech.eval.run import load_manifest

    manifest = build(tmp_path, fetch_sdist())  # fetch_sdist: the cached copy, SHA-256 checked
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    assert [r["id"] for r in rows] == [r.id for r in RECORDINGS]
    items = load_manifest(manifest)
    assert [len(i.words) for i in items] == [len(r.words) for r in RECORDINGS]
    assert [(s.start, s.end, s.label) for i in items for s in i.entities] == [(0.37, 1.58, "PERSON")]
    import soundfile as sf

    for r in RECORDINGS:
        info = sf.info(tmp_path / "audio" / f"{r.id}.flac")
        assert (info.samplerate, info.channels, info.format) == (16000, 1, "FLAC")
        assert abs(info.duration - r.duration) < 1e-3
