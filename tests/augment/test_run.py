"""The augmentation job with scripted backends: acceptance, tag replacement, resume, limits."""
import json
import re
from collections import Counter

import pytest

from deid_speech.augment.llm import TemplateBackend
from deid_speech.augment.repair import REPAIRS
from deid_speech.augment.run import AugmentOptions, augment
from deid_speech.errors import DeidError
from deid_speech.types import parse_tagged
from deid_speech.validators import is_valid_nric

SEEDS = [
    "my IC is [NRIC] S one two three four five six seven D [NRIC] lah",
    "uh the IC number [NRIC] T zero one two three four five six G [NRIC] can",
    "call me at [PHONE] nine one two three four five six seven [PHONE] ok",
]


@pytest.fixture
def seed_file(tmp_path):
    p = tmp_path / "seed.jsonl"
    with open(p, "w") as fh:
        for i, t in enumerate(SEEDS):
            text, ents = parse_tagged(t)
            fh.write(json.dumps({"id": f"s{i}", "text": text, "tagged": t,
                                 "entities": [e.to_dict() for e in ents]}) + "\n")
    return p


class Scripted:
    """Answers every request with sentences carrying the requested tags, plus junk."""

    name, model = "scripted", "script-1"

    def __init__(self):
        self.calls = 0

    def generate(self, req):
        self.calls += 1
        tag = next(iter(req.tags))
        words = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()
        good = [f"line {words[self.calls % 12]} {words[k]} is [{tag}] nine one two three four five six [{tag}] for you ok"
                for k in range(5)]
        return "\n".join(["1. numbered line", "Here are the sentences:", *good, good[0]])


def test_job_accepts_valid_lines_fills_fresh_values_and_reports(seed_file, tmp_path):
    out = tmp_path / "aug.jsonl"
    s = augment(seed_file, out, AugmentOptions(n=12, seed=3, per_request=5), Scripted())
    assert s["accepted"] == 12 and s["complete"]
    assert s["rejected"]["meta"] >= 1 and s["rejected"]["duplicate"] >= 1
    # "1. numbered line" loses its number, then still lacks its tags
    assert s["repairs"]["bullet"] >= 1 and s["rejected"]["wrong_tags"] >= 1 and s["repaired_accepted"] == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 12 and len({r["id"] for r in rows}) == 12
    for r in rows:
        assert set(r) >= {"id", "text", "tagged", "entities", "strategy", "temperature", "backend", "model"}
        assert r["strategy"] == "similar" and r["temperature"] == 0.3 and r["backend"] == "scripted"
        assert "placeholder" not in r["text"]  # tag replacement filled real values
        text, ents = parse_tagged(r["tagged"])
        assert text == r["text"] and [e.to_dict() for e in ents] == r["entities"]
        for e in ents:
            if e.label == "NRIC":
                letters = re.findall(r"\b[A-Z]\b", text[e.char_start:e.char_end])
                assert len(letters) == 2  # prefix and check letter spelled out
    assert sum(s["labels"].values()) == 12


def test_job_resumes_after_an_interruption_without_duplicates(seed_file, tmp_path):
    out = tmp_path / "aug.jsonl"
    augment(seed_file, out, AugmentOptions(n=7, seed=1, per_request=5), Scripted())
    with open(out, "a") as fh:
        fh.write('{"id": "cut-off-li')  # the process died mid-line
    b = Scripted()
    s = augment(seed_file, out, AugmentOptions(n=15, seed=1, per_request=5), b)
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 15 == s["accepted"] and s["new"] == 8
    assert len({r["id"] for r in rows}) == 15
    assert min(r["request"] for r in rows[7:]) > max(r["request"] for r in rows[:7])


def test_a_useless_model_stops_at_the_request_limit(seed_file, tmp_path):
    class Useless:
        name, model = "useless", "x"

        def generate(self, req):
            return "I cannot help with that.\n- bullet"

    s = augment(seed_file, tmp_path / "a.jsonl", AugmentOptions(n=5, max_requests=4), Useless())
    assert s["accepted"] == 0 and s["requests"] == 4 and not s["complete"]
    assert s["acceptance_rate"] == 0.0
    # a job that knows it made those 4 requests does not make them again (same seeds, same answers)
    seeds = []

    class Counting(Useless):
        def generate(self, req):
            seeds.append(req.seed)
            return super().generate(req)

    s = augment(seed_file, tmp_path / "a.jsonl", AugmentOptions(n=5, max_requests=6, first_request=4), Counting())
    assert s["requests"] == 6 and len(seeds) == 2
    again = []
    augment(seed_file, tmp_path / "b.jsonl", AugmentOptions(n=5, max_requests=2), type("C", (Counting,), {
        "generate": lambda self, req: again.append(req.seed) or "nothing"})())
    assert set(seeds).isdisjoint(again)  # requests 4, 5 have other seeds than 0, 1


def test_diverse_uses_its_default_temperature_and_no_examples(seed_file, tmp_path):
    seen = []

    class Spy(Scripted):
        def generate(self, req):
            seen.append(req)
            return super().generate(req)

    augment(seed_file, tmp_path / "d.jsonl", AugmentOptions(strategy="diverse", n=3, per_request=5), Spy())
    assert seen[0].temperature == 0.6 and "Example sentences" not in seen[0].messages[1]["content"]


def test_template_backend_needs_no_llm_and_keeps_tag_sets(seed_file, tmp_path):
    backend = TemplateBackend(SEEDS)
    s = augment(seed_file, tmp_path / "t.jsonl", AugmentOptions(n=20, seed=2), backend)
    assert s["complete"] and s["acceptance_rate"] > 0.5
    rows = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines()]
    for r in rows:
        labels = Counter(e["label"] for e in r["entities"])
        assert labels in (Counter({"NRIC": 1}), Counter({"PHONE": 1}))
        for e in r["entities"]:
            if e["label"] == "NRIC":
                from deid_speech.spoken import normalize_tokens

                sym = "".join(x[2].text for x in normalize_tokens(r["text"][e["char_start"]:e["char_end"]].split()))
                assert is_valid_nric(sym), sym


def test_bad_options_are_clear_errors():
    with pytest.raises(DeidError):
        AugmentOptions(strategy="wild")
    with pytest.raises(DeidError):
        AugmentOptions(temperature=5)


class Messy:
    """Answers with one line per repair, each fixable, plus lines no repair may let through."""

    name, model = "messy", "m"

    def __init__(self):
        self.calls = 0

    def generate(self, req):
        self.calls += 1
        w = "alpha bravo charlie delta echo foxtrot golf hotel india juliet".split()[self.calls % 10]
        return "\n".join([
            f"1. {w} one, my number is [PHONE] nine one two three four five six seven [PHONE] lah",
            f"{w} two, call me at [phone] eight eight one two three four five six [ Phone ] ok",
            f"{w} three, the hotline [PHONE] six two three four five six seven eight [NRIC] can",
            f"{w} four, IC [NRIC] S one two three four five six seven D [NRIC] and [PHONE] x [PHONE] ok",
            f"- {w} five, call [PHONE] nine one two three four [PHONE] or nine eight seven six five four three two",
            f"{w} six, please call me at [PHONE] after lunch can",
            f"{w} seven, I need to call the [PHONE] for an appointment",
        ])


def test_repairs_are_counted_and_never_let_bad_lines_through(seed_file, tmp_path):
    seeds = tmp_path / "phone.jsonl"
    with open(seeds, "w") as fh:  # one tag set only: every request asks for {PHONE}
        t = SEEDS[2]
        text, ents = parse_tagged(t)
        fh.write(json.dumps({"id": "s", "text": text, "tagged": t, "entities": [e.to_dict() for e in ents]}) + "\n")
    s = augment(seeds, tmp_path / "m.jsonl", AugmentOptions(n=100, per_request=5, max_requests=2), Messy())
    assert s["lines"] == 14
    assert s["repairs"] == {"bullet": 4, "comment": 0, "tag_spelling": 2, "header_tag": 0, "tag_balance": 2, "slot": 2}
    assert s["new"] == 8 and s["repaired_accepted"] == 8
    assert s["rejected"] == {"unbalanced": 2, "wrong_tags": 2, "untagged_pii": 2}
    rows = [json.loads(x) for x in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert all([e["label"] for e in r["entities"]] == ["PHONE"] for r in rows)
    assert not any("five, call" in r["text"] for r in rows)  # the untagged number stays out
    slot = [r for r in rows if "six, please" in r["text"]]
    values = [r["text"][r["entities"][0]["char_start"]:r["entities"][0]["char_end"]] for r in slot]
    assert len(slot) == 2 and all(len(v.split()) >= 8 and "phone" not in v for v in values), values  # placeholder replaced

    off = augment(seeds, tmp_path / "raw.jsonl", AugmentOptions(n=100, per_request=5, max_requests=2, repair=False),
                  Messy())
    assert off["new"] == 0 and off["repairs"] == dict.fromkeys(REPAIRS, 0)
    # unrepaired "[phone]" tags stay in the words as brackets
    assert off["rejected"] == {"bullet": 4, "unbalanced": 6, "bracket": 2, "wrong_tags": 2}


def test_each_request_carries_the_sampling_options(seed_file, tmp_path):
    seen = []

    class Spy(Scripted):
        def generate(self, req):
            seen.append(req)
            return super().generate(req)

    augment(seed_file, tmp_path / "s.jsonl",
            AugmentOptions(n=3, per_request=5, completions=3, repeat_penalty=1.3, presence_penalty=0.4), Spy())
    r = seen[0]
    assert (r.completions, r.repeat_penalty, r.presence_penalty) == (3, 1.3, 0.4)
    assert len(set(r.seeds())) == 3 and r.seeds()[0] == r.seed
    with pytest.raises(DeidError):
        AugmentOptions(completions=0)


def test_rejected_raw_lines_are_kept_up_to_the_cap_with_their_reason(seed_file, tmp_path):
    s = augment(seed_file, tmp_path / "a.jsonl", AugmentOptions(n=5, seed=3, per_request=5, keep_rejected=2),
                Scripted())
    assert [r["line"] for r in s["rejected_lines"]] == ["1. numbered line", "Here are the sentences:"]
    assert [r["reason"] for r in s["rejected_lines"]] == ["wrong_tags", "meta"]  # raw line, reason after repair
    assert all(r["tags"].startswith("[") for r in s["rejected_lines"])
    assert "rejected_lines" not in augment(seed_file, tmp_path / "b.jsonl", AugmentOptions(n=5, seed=3, per_request=5),
                                           Scripted())


def test_grammar_with_a_backend_that_cannot_take_one_is_a_clear_error(seed_file, tmp_path):
    with pytest.raises(DeidError, match="--grammar needs the llamacpp backend"):
        augment(seed_file, tmp_path / "g.jsonl", AugmentOptions(n=2, grammar=True), Scripted())
    assert not (tmp_path / "g.jsonl").exists()


def test_a_line_given_back_from_the_prompt_is_rejected_as_an_echo(tmp_path):
    seeds = tmp_path / "seed.jsonl"  # one sentence with no personal data: the request asks for more like it
    seeds.write_text(json.dumps({"id": "s0", "text": "the bus is one seven four lah",
                                 "tagged": "the bus is one seven four lah", "entities": []}) + "\n")
    new = "eh the bus number is one seven four, and it comes at nine thirty lah"

    class Echo:  # gives back every line of its prompt (as Gemma-3-270M did), then one new sentence
        name, model = "echo", "e"

        def generate(self, req):
            return "\n".join([x for m in req.messages for x in m["content"].splitlines() if x.strip()] + [new])

    s = augment(seeds, tmp_path / "e.jsonl", AugmentOptions(strategy="diverse", n=5, max_requests=1), Echo())
    rows = [json.loads(x) for x in (tmp_path / "e.jsonl").read_text().splitlines()]
    assert [r["text"] for r in rows] == [new]
    assert s["rejected"]["echo"] >= 1  # the no-PII instruction, which reads as a sentence with numbers


def test_the_template_backend_s_lines_are_no_echo(seed_file, tmp_path):
    # its lines are the seed sentences the Similar prompt quotes, re-voiced: never an instruction
    s = augment(seed_file, tmp_path / "t.jsonl", AugmentOptions(n=20, seed=2), TemplateBackend(
        [json.loads(x)["tagged"] for x in seed_file.read_text().splitlines()]))
    assert "echo" not in s["rejected"] and s["accepted"] == 20


@pytest.mark.parametrize("tagged, message", [
    ("call me at [PHONE] nine eight [NRIC] lah", r"seed.jsonl:2: bad tagged text \(\[NRIC\] inside open"),
    ("call me at [FOO] nine eight [FOO] lah", r"seed.jsonl:2: bad tagged text \(unknown tag"),
    ("call me at [PHONE] nine eight lah", r"seed.jsonl:2: bad tagged text \(unclosed"),
    (None, r"seed.jsonl:2: record has no 'tagged' text")])
def test_a_bad_seed_line_is_a_one_line_error_and_no_output_is_made(tmp_path, tagged, message):
    seeds = tmp_path / "seed.jsonl"
    bad = {"id": "x"} if tagged is None else {"id": "x", "tagged": tagged}
    seeds.write_text(json.dumps({"id": "ok", "tagged": SEEDS[2]}) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(DeidError, match=message) as info:
        augment(seeds, tmp_path / "out.jsonl", AugmentOptions(n=2), Scripted())
    assert "\n" not in str(info.value) and not (tmp_path / "out.jsonl").exists()


def test_a_seed_line_with_only_tagged_text_is_enough(tmp_path):
    seeds = tmp_path / "seed.jsonl"
    seeds.write_text("".join(json.dumps({"tagged": t}) + "\n" for t in SEEDS))
    assert augment(seeds, tmp_path / "out.jsonl", AugmentOptions(n=2, per_request=5), Scripted())["complete"]


def test_a_resume_with_other_generating_options_is_refused(seed_file, tmp_path):
    out = tmp_path / "aug.jsonl"
    augment(seed_file, out, AugmentOptions(n=3, seed=1, per_request=5), Scripted())
    before = out.read_bytes()
    for opts, what in [(AugmentOptions(strategy="diverse", n=6, seed=1, per_request=5), "strategy 'similar'"),
                       (AugmentOptions(temperature=0.5, n=6, seed=1, per_request=5), "temperature 0.3"),
                       (AugmentOptions(n=6, seed=2, per_request=5), "seed 1")]:
        with pytest.raises(DeidError, match=f"was started with other options \\({what}"):
            augment(seed_file, out, opts, Scripted())
    with pytest.raises(DeidError, match="backend 'scripted', not 'template'"):
        augment(seed_file, out, AugmentOptions(n=6, seed=1, per_request=5), TemplateBackend(SEEDS))
    assert out.read_bytes() == before
    assert augment(seed_file, out, AugmentOptions(n=6, seed=1, per_request=5), Scripted())["new"] == 3
