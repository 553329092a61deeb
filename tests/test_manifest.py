"""One JSONL module: strict, uniform validation for every reader, and a resumable writer."""
from __future__ import annotations

import json

import pytest

from deid_speech import manifest
from deid_speech.errors import DeidError


def _write(path, *rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


GOOD = {"id": "a", "text": "call me at nine one", "entities": [{"label": "PHONE", "char_start": 11, "char_end": 19}]}


@pytest.mark.parametrize("row,message", [
    ("[1, 2]", "not a JSON object"),
    ("{bad", "not JSON"),
    ({"id": "a", "text": "hi", "entities": [{"label": "NAME", "char_start": 0, "char_end": 2}]}, "bad entity"),
    ({"id": "a", "text": "hi", "entities": [{"label": "PERSON", "char_start": 0, "char_end": 9}]}, "bad entity"),
    ({"id": "a", "text": "hi", "entities": [{"label": "PERSON", "char_start": 1, "char_end": 1}]}, "bad entity"),
    ({"id": "a", "text": "hi", "entities": [{"label": "PERSON", "char_start": 0, "char_end": 2,
                                             "start": 2.0, "end": 1.0}]}, "bad entity"),
    ({"id": "a", "text": "hi", "entities": [{"label": "PERSON", "char_start": 0, "char_end": 2, "start": 1.0}]},
     "bad entity"),
    ({"id": "a", "text": 5}, "'text' must be a string"),
    ({"id": "a", "tagged": "[PERSON] Tan [PERSON"}, "bad tagged text"),
    ({"id": "a"}, "expected a record with 'text'"),
    ({"id": "", "text": "hi"}, "no usable 'id'"),
    ({"id": "a", "text": "hi", "words": [1]}, "'words' must be a list of objects"),
])
def test_every_bad_record_is_a_one_line_error_naming_file_and_line(tmp_path, row, message) -> None:
    p = _write(tmp_path / "m.jsonl", GOOD | {"id": "ok"}, row)
    with pytest.raises(DeidError, match=message) as e:
        manifest.read(p)
    assert f"{p}:2" in str(e.value) and "\n" not in str(e.value)


def test_repeated_ids_unsafe_ids_and_empty_files(tmp_path) -> None:
    with pytest.raises(DeidError, match="id 'a' is repeated"):
        manifest.read(_write(tmp_path / "r.jsonl", GOOD, GOOD))
    with pytest.raises(DeidError, match="not usable as a file name"):
        manifest.read(_write(tmp_path / "u.jsonl", GOOD | {"id": "../x"}), safe_ids=True)
    with pytest.raises(DeidError, match="no records"):
        manifest.read(_write(tmp_path / "e.jsonl", ""), nonempty=True)
    with pytest.raises(DeidError, match="no such file"):
        manifest.read(tmp_path / "missing.jsonl")


def test_audio_is_resolved_against_the_manifest_folder_and_must_exist(tmp_path) -> None:
    (tmp_path / "audio").mkdir()
    (tmp_path / "audio" / "a.flac").write_bytes(b"x")
    p = _write(tmp_path / "manifest.jsonl", GOOD | {"audio": "audio/a.flac", "voice": "flite:rms"})
    [r] = manifest.read(tmp_path, need=("text", "audio"))  # a folder means its manifest.jsonl
    assert r.audio == (tmp_path / "audio" / "a.flac").resolve()
    assert r.to_dict()["audio"] == str(r.audio) and r.to_dict()["voice"] == "flite:rms"
    _write(p, GOOD | {"audio": "audio/gone.flac"})
    with pytest.raises(DeidError, match="gone.flac not found"):
        manifest.read(p, need=("audio",))
    assert manifest.read(p, need=("audio",), check_audio=False)[0].audio.name == "gone.flac"
    with pytest.raises(DeidError, match="no 'audio' file"):
        manifest.read(_write(tmp_path / "n.jsonl", GOOD), need=("audio",))


def test_tagged_records_are_parsed_and_fields_kept_in_order(tmp_path) -> None:
    row = {"tagged": "I am [PERSON] Tan Wei Ming [PERSON] lah", "source": "llm", "id": "t1"}
    [r] = manifest.read(_write(tmp_path / "t.jsonl", row))
    assert r.text == "I am Tan Wei Ming lah" and r.entities == (manifest.Entity("PERSON", 5, 17),)
    d = r.to_dict()
    assert list(d)[:3] == ["tagged", "source", "id"] and d["entities"] == [
        {"label": "PERSON", "char_start": 5, "char_end": 17}]
    [t] = manifest.read(tmp_path / "t.jsonl", need=("tagged",))
    assert t.text is None and t.tagged == row["tagged"]  # what is voiced: not parsed
    assert manifest.read(_write(tmp_path / "noid.jsonl", {"text": "x"}))[0].id == "noid-1"
    assert manifest.read(tmp_path / "noid.jsonl", line_ids=False)[0].to_dict() == {"text": "x"}


def test_writer_resumes_after_a_cut_line_and_syncs_each_record(tmp_path) -> None:
    p = tmp_path / "out" / "m.jsonl"
    with manifest.JsonlWriter(p) as w:
        assert w.rows == [] and w.done == set()
        w.write({"id": "a", "n": 1})
        w.write({"id": "b", "n": 2})
    with open(p, "a", encoding="utf-8") as fh:
        fh.write('{"id": "c", "n"')  # the job was killed mid-line
    with manifest.JsonlWriter(p) as w:
        assert w.done == {"a", "b"} and [r["n"] for r in w.rows] == [1, 2]
        w.write({"id": "c", "n": 3})
    assert [json.loads(x)["id"] for x in p.read_text().splitlines()] == ["a", "b", "c"]


def test_whole_file_write_round_trips(tmp_path) -> None:
    p = _write(tmp_path / "in.jsonl", GOOD, GOOD | {"id": "b"})
    manifest.write(tmp_path / "copy.jsonl", manifest.read(p))
    assert [r.to_dict() for r in manifest.read(tmp_path / "copy.jsonl")] == [r.to_dict() for r in manifest.read(p)]


def test_iter_objects_names_the_file_and_line_of_a_bad_record(tmp_path):

    p = tmp_path / "m.jsonl"
    p.write_text('{"a": 1}\n\n{"a": 2}\n')
    assert list(manifest.iter_objects(p)) == [(1, {"a": 1}), (3, {"a": 2})]
    p.write_text('{"a": 1}\n{"a": \n')
    with pytest.raises(DeidError, match=r"m\.jsonl:2: not JSON"):
        list(manifest.iter_objects(p))
    p.write_text('{"a": 1}\n[1, 2]\n')
    with pytest.raises(DeidError, match=r"m\.jsonl:2: not a JSON object"):
        list(manifest.iter_objects(p))
    p.write_bytes(b'{"a": "\xff\xfe"}\n')
    with pytest.raises(DeidError, match="not UTF-8"):
        list(manifest.iter_objects(p))


def test_entities_come_from_tagged_where_missing_and_a_reference_must_say_them(tmp_path) -> None:
    row = {"id": "a", "text": "call Tan now", "tagged": "call [PERSON] Tan [PERSON] now"}
    [r] = manifest.read(_write(tmp_path / "t.jsonl", row))  # no 'entities': not "no PII"
    assert r.entities == (manifest.Entity("PERSON", 5, 8),)
    manifest.check_entities(r)
    none = {"id": "n", "text": "call me now", "tagged": "call me now", "entities": []}
    [r] = manifest.read(_write(tmp_path / "n.jsonl", none))
    assert r.entities == ()
    manifest.check_entities(r)  # truly no PII: fine
    for bad, message in (
            (row | {"entities": [{"label": "PERSON", "char_start": 0, "char_end": 8}]}, "disagree with the 'tagged'"),
            (row | {"entities": []}, "disagree with the 'tagged'"),
            (row | {"tagged": "call [PERSON] Tan Wei [PERSON] now"}, "'tagged' text is not its 'text'"),
            ({"id": "a", "text": "call Tan now"}, "no 'entities'")):
        [r] = manifest.read(p := _write(tmp_path / "b.jsonl", bad))
        with pytest.raises(DeidError, match=message) as e:
            manifest.check_entities(r)
        assert f"{p}:1" in str(e.value) and "\n" not in str(e.value)
    p = _write(tmp_path / "b.jsonl", GOOD | {"id": "ok"}, row | {"entities": [
        {"label": "PERSON", "char_start": 5, "char_end": 8, "text": "Lim"}]})
    with pytest.raises(DeidError, match=rf"{p}:2: entity PERSON at characters 5-8 is 'Tan' in the text, but its 'text'"):
        manifest.read(p)


def test_resumable_reading_refuses_a_file_it_did_not_write_and_leaves_it(tmp_path) -> None:
    p = tmp_path / "m.jsonl"
    for text, message in (('{"id": "a"}\nnotes\n{"id": "b"}\n', r"m\.jsonl:2: not JSON"),
                          ('{"id": "a"}\nnotes\n', r"m\.jsonl:2: not JSON"),  # a whole last line: not cut short
                          ('{"id": "a"}\n{"x": 1}\n', r"m\.jsonl:2: not a record with an id")):
        p.write_text(text)
        with pytest.raises(DeidError, match=message):
            manifest.read_resumable(p, lambda d: "id" in d, "a record with an id")
        assert p.read_text() == text
    p.write_text('{"id": "a"}\n{"id": "b", "n')  # cut short: dropped, as before
    assert manifest.read_resumable(p, lambda d: "id" in d) == [{"id": "a"}] and p.read_text() == '{"id": "a"}\n'
