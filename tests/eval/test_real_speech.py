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


def test_more_recordings_have_known_sources_unique_ids_and_their_names_in_the_text() -> None:
    from deid_speech.eval.real_speech import MORE, SOURCES

    ids = [r.id for r in RECORDINGS] + [m.id for m in MORE]
    assert len(set(ids)) == len(ids)
    assert {m.source for m in MORE} <= set(SOURCES) - {"pocketsphinx"}
    assert all(len(SOURCES[m.source].sha256) == 64 for m in MORE)
    for m in MORE:
        assert m.text == m.text.lower() and "uh" not in m.text.split() and "um" not in m.text.split()
        for label, phrase in m.entities:
            assert label == "PERSON" and f" {phrase} " in f" {m.text} "
    assert sum(len(m.text.split()) for m in MORE) > 300


def test_package_transcripts_are_read_as_whisper_writes_words() -> None:
    from deid_speech.eval.real_speech import said_words

    assert said_words("1\nFrom fairest creatures, we desire increase,") == \
        "one from fairest creatures we desire increase".split()
    assert said_words("uh we're just yknow there's um <VOCNOISE> saying [adif] bunch self-substantial") == \
        "we're just you know there's saying bunch self substantial".split()


def test_a_table_text_that_differs_from_the_package_transcript_is_refused() -> None:
    from deid_speech.errors import DeidError
    from deid_speech.eval.real_speech import MORE, _check_text, said_words

    lab = next(m for m in MORE if m.id == "librispeech-61-70968-0000")
    truth = said_words("HE BEGAN A CONFUSED COMPLAINT AGAINST THE WIZARD WHO HAD VANISHED BEHIND THE CURTAIN ON THE LEFT")
    _check_text(lab, truth)
    with pytest.raises(DeidError, match="not the package's transcript"):
        _check_text(lab, truth[:-1] + ["right"])
    grid = next(m for m in MORE if m.id == "praatio-bobby")
    _check_text(grid, said_words('"" "BOBBY" "RIPPED" "THE" "LEDGER" "BOBBY RIPPED THE LEDGER" "b" "aa"'))
    with pytest.raises(DeidError):
        _check_text(grid, said_words('"BOBBY" "RAPPED" "THE" "LEDGER"'))


def test_a_more_record_takes_its_times_from_the_alignment_and_refuses_a_partial_one() -> None:
    from deid_speech.errors import DeidError
    from deid_speech.eval.real_speech import MORE, more_record
    from deid_speech.types import Transcript

    m = next(m for m in MORE if m.id == "praatio-mary")
    aligned = Transcript.from_words([("mary", 0.3, 0.7), ("rolled", 0.7, 1.0), ("the", 1.0, 1.1), ("barrel", 1.1, 1.6)])
    row = more_record(m, aligned, 1.9, "audio/praatio-mary.flac")
    assert row["text"] == "mary rolled the barrel" and row["kind"] == "names"
    assert row["entities"] == [{"label": "PERSON", "text": "mary", "char_start": 0, "char_end": 4,
                                "start": 0.3, "end": 0.7}]
    assert [w["start"] for w in row["words"]] == [0.3, 0.7, 1.0, 1.1]
    with pytest.raises(DeidError, match="did not time every word"):
        more_record(m, Transcript.from_words([("mary", 0.3, 0.7)]), 1.9, "a.flac")


@pytest.mark.model
def test_build_with_more_from_the_cached_sdists(tmp_path: Path) -> None:
    from deid_speech.eval.real_speech import MORE, MORE_SOURCES, SOURCES, fetch_sdist
    from deid_speech.eval.run import load_manifest

    names = MORE_SOURCES
    missing = [SOURCES[n].filename for n in ["pocketsphinx", *names] if not (cache_dir() / SOURCES[n].filename).is_file()]
    if missing:
        pytest.skip(f"not cached: {', '.join(missing)} (python -m deid_speech.eval.real_speech --more fetches them)")
    manifest = build(tmp_path, fetch_sdist(), {n: fetch_sdist(None, SOURCES[n]) for n in names})
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    assert [r["id"] for r in rows] == [r.id for r in RECORDINGS] + [m.id for m in MORE]
    for r, m in zip(rows[len(RECORDINGS):], MORE):
        assert r["text"] == m.text and 0 <= r["words"][0]["start"] and r["words"][-1]["end"] <= r["duration"] + 1e-3
        assert all(a["end"] <= b["start"] + 1e-6 for a, b in zip(r["words"], r["words"][1:]))
    items = load_manifest(manifest)
    assert sum(len(i.entities) for i in items) == 1 + sum(len(m.entities) for m in MORE)


def test_on_the_phone_is_a_noisy_narrow_band_copy_of_the_same_length_drawn_from_the_id() -> None:
    import numpy as np
    from scipy.signal import welch

    from deid_speech.eval.real_speech import on_the_phone

    t = np.arange(3 * 16000) / 16000
    x = (0.2 * (np.sin(2 * np.pi * 440 * t) + np.sin(2 * np.pi * 6000 * t))).astype(np.float32)
    y, spec = on_the_phone(x, "librivox-0870")
    assert len(y) == len(x) and spec["telephone"] and spec["noise"] == "pink" and 10 <= spec["snr_db"] <= 20
    f, p = welch(y, fs=16000, nperseg=512)
    assert p[f >= 4200].sum() < 1e-4 * p[(f >= 300) & (f <= 3400)].sum()  # the 6 kHz tone is cut off
    again, same = on_the_phone(x, "librivox-0870")
    other, other_spec = on_the_phone(x, "cards-001")
    assert np.array_equal(y, again) and same == spec
    assert other_spec["noise_seed"] != spec["noise_seed"] and not np.array_equal(y, other)


@pytest.mark.model
def test_build_on_the_phone_keeps_texts_and_times(tmp_path: Path) -> None:
    sdist = cache_dir() / SDIST
    if not sdist.is_file():
        pytest.skip(f"{sdist} is not cached (python -m deid_speech.eval.real_speech --out DIR fetches it)")
    import soundfile as sf

    from deid_speech.eval.real_speech import fetch_sdist

    clean = [json.loads(x) for x in build(tmp_path / "clean", fetch_sdist()).read_text().splitlines()]
    phone = [json.loads(x) for x in build(tmp_path / "phone", fetch_sdist(), telephone=True).read_text().splitlines()]
    for c, p in zip(clean, phone, strict=True):
        assert {k: v for k, v in p.items() if k != "augment"} == c and p["augment"]["telephone"]
        a, _ = sf.read(tmp_path / "clean" / c["audio"])
        b, _ = sf.read(tmp_path / "phone" / p["audio"])
        assert len(a) == len(b) and not (a == b).all()
