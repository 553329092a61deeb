"""The redaction job: audio in, spans, audio and transcript out (in memory), and the
file-level wrapper that writes ``X.redacted.<ext>`` + ``X.redacted.json`` fail-closed."""
from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from deid_speech.audio import EXTENSIONS, TRANSCODED, Audio, AudioFile, for_recognition, load, save, write_text_atomic
from deid_speech.dtmf import keypad_tones
from deid_speech.errors import DeidError
from deid_speech.redact import (
    RedactOptions,
    TextRedactor,
    place_spans,
    redact_audio,
    redact_transcript,
    redacted_words,
    repeat_mentions,
)
from deid_speech.systems import MAX_VERIFY_PASSES, RECOGNISER, VERIFIER, VERIFY_PASSES
from deid_speech.types import LABELS, Recognition, Recognizer, Span, Transcript, Word

SCHEMA_VERSION = 5  # 2: the redacted report holds no clear text (the clear one is X.pii.json, opt-in);
# 3: operators per label (audio, text, padding before/after) replace mode/padding; a run of
# redacted words is one word; 4: keypad_tones (the keypad tones beeped); 5: the label SECRET
UNCOVERED_ACTIONS = ("beep", "fail", "warn")


@dataclass(frozen=True)
class RedactConfig:
    system: str = "cascade"
    asr_model: str = RECOGNISER
    fast_asr: bool = False  # Whisper decodes the windows in batches, greedily (--fast-asr; docs/results.md §0f)
    labels: tuple[str, ...] = LABELS
    redact: RedactOptions = field(default_factory=RedactOptions)
    spacy_model: str | None = None
    ner_model: str | None = "default"  # trained NER in the cascade: the shipped NER model, a folder, or None
    e2e_model: str | None = None  # a `deid-speech train e2e` folder (system e2e; default: the shipped one)
    min_score: float = 0.5
    # a second opinion: another decoder transcribes the audio too (cascade only). None: on
    # for the cascade unless its own recogniser is the verifier (docs/results.md §0i), off otherwise
    verify: bool | None = None
    verifier: str = VERIFIER  # that decoder: a Whisper model (tiny.en-sg, a folder, ...) or the e2e model;
    # "A,B": Whisper models taking turns by pass (pass k decoded by the (k mod n)-th; with fewer passes
    # than models the last go unused: --verify-passes 1 is the first model alone; docs/results.md §0af)
    verify_passes: int = VERIFY_PASSES  # how often the verifier decodes the audio (each pass dithered anew)
    # a Whisper verifier decodes in a helper process, beside the first decoder, each on half
    # the cores (asr/helper.py); None: when this process may use two cores or more
    verify_in_helper: bool | None = None
    uncovered: str = "beep"  # speech no word covers (not checked for PII): beep it, fail the file, or warn

    def __post_init__(self) -> None:
        from deid_speech import systems

        systems.get(self.system)  # a one-line DeidError for an unknown system
        if self.uncovered not in UNCOVERED_ACTIONS:
            raise DeidError(f"--uncovered must be one of {', '.join(UNCOVERED_ACTIONS)}")
        same = self.system == "cascade" and set(self.verifiers) == {self.asr_model}  # nothing new to say
        if self.verify is None:
            object.__setattr__(self, "verify", self.system == "cascade" and not same)
        if self.verify and self.system not in ("cascade", "cascade+verify"):
            raise DeidError("--verify checks the cascade's redaction with a second decoder: use it with --system cascade")
        if not all(self.verifiers):
            raise DeidError("--verifier needs a model: e2e, or a Whisper model name or folder "
                            "(or several, comma-separated, one per pass)")
        if len(self.verifiers) > 1 and "e2e" in self.verifiers:
            raise DeidError("--verifier e2e decodes alone; only Whisper models take turns by pass")
        if not (isinstance(self.verify_passes, int) and 1 <= self.verify_passes <= MAX_VERIFY_PASSES):
            raise DeidError(f"--verify-passes must be a whole number from 1 to {MAX_VERIFY_PASSES}, "
                            f"not {self.verify_passes!r}")
        if self.verify_passes != VERIFY_PASSES and not self.verifying:
            raise DeidError("--verify-passes sets how often --verify decodes, which is off here")
        if self.verify_in_helper and not self.verifying:
            raise DeidError("--helper-process runs the verifier of --verify, which is off here")
        if self.verify_in_helper and self.verifier == "e2e":
            raise DeidError("--helper-process runs a Whisper verifier; the e2e verifier decodes in this process")
        if self.verifier != VERIFIER and not self.verifying and not same:
            raise DeidError("--verifier chooses the decoder of --verify, which is off here")
        bad = [x for x in self.labels if x not in LABELS]
        if bad or not self.labels:
            raise DeidError(f"unknown label(s) {', '.join(bad) or '(none given)'}; "
                            f"choose from {', '.join(LABELS)}")

    @property
    def verifiers(self) -> tuple[str, ...]:
        """The verifier's models, one per pass in turn (``--verifier A,B``: pass k is decoded
        by the (k mod n)-th; ``--verify-passes 1``: the first alone)."""
        return tuple(m.strip() for m in self.verifier.split(","))

    @property
    def verifying(self) -> bool:
        """Whether a second decoder checks the redaction: ``verify``, or a system that always
        verifies (``cascade+verify`` in eval)."""
        from deid_speech import systems

        return bool(self.verify or systems.get(self.system).verify)


# the second opinion overrules the first decoder only where each pass heard plain words it was
# sure of: every word's probability at least SURE_PROB, no capitalised listed name, at most
# PLAIN_SYMBOLS spoken digits or letters among them (docs/results.md §0ak). Over a number span
# (a phone, an account, ...) the words' median probability is enough, and up to NUMBER_SYMBOLS
# digits or letters: fewer than any identifier the pattern detectors report (7 digits), which
# found nothing there (a noisy line's "seven thirty, table for ten" written as twelve digits, §0al);
# any number of them where the pass heard a unit or a look-alike's context word there (§0am)
SURE_PROB = 0.3
PLAIN_SYMBOLS = 2
NUMBER_SYMBOLS = 6
# acronyms a caller says letter by letter that are no identifier, beside the spaCy detector's
# ACRONYMS (banks, agencies): a pass that heard them over a non-number span heard no name there
SPELLED_ACRONYMS = frozenset({"dob", "ic"})
# a pass that left this long a stretch of the span without a word skipped words there: no opinion
# ("two two six five" heard where the first decoder wrote all ten digits of an account)
MAX_UNHEARD = 1.0
# a verifier's span is added when it reaches this far beyond the redaction so far (its padding
# included); a number's span further: the passes time the same digits a little differently, and
# a reach of 0.05-0.1 s added only the speech beside them, with the padding on top (dev, five
# sets: the same leak, over-redaction 0.1-0.25 points less; at 0.15-0.2 s a phone's first
# digit escaped; docs/results.md §0am)
MIN_REACH = 0.05
MIN_REACH_NUMBER = 0.1
# where every decoding (the first and each pass) gave the words at the same moment a probability
# under this, none of them could read that speech: a name they do not know, most often ("minimum /
# data / double / minimum" for "Zubaidah"); it is redacted as a name (dev utterances: 0.19 points
# less leak for 0.3 more over-redaction, the calls the same leak for 0.2 more; at 0.3: 0.29 / 1.2
# and 0.36 / 0.8; docs/results.md §0ao)
DOUBTED_PROB = 0.2
MIN_DOUBTED_S = 0.05
# a stretch of a first-decoder span that no pass found anything in is cut off it (:func:`trimmed`)
# when it lasts at least this long and the passes refute it as they would a span of its own; a
# tiny.en loop of digits over fast telephone speech ("8 ,3 ,4 ,3 ,4 ..." for a phone and the 6.5 s
# of small talk after it). Dev, two draws: the same leak on every set, 0.25-1.1 points less
# over-redaction (at 0.3 s the calls leaked 0.07 points more); test2: 1.1-2.1 points less for
# 0.06-0.12 points more leak (docs/results.md §0ar)
TRIM_MIN_S = 0.5
# words that carry on a number a pass heard ("forty one eleven ... eighteen hundred"): where a
# pass's words at the edge of such a stretch, next to what it found, are digits or these, the
# number may go on there, and the stretch is not cut
NUMBER_GOES_ON = frozenset({"hundred", "thousand"})


@dataclass(frozen=True)
class SecondOpinion:
    """What the verifier's passes say of a first redaction (:meth:`Redactor.verify`): the spans
    they add, and the first spans they refute (:func:`refuted`)."""

    added: list[Span]
    refuted: list[Span]
    agreed: list[Span] = field(default_factory=list)
    trimmed: list[tuple[Span, list[Span]]] = field(default_factory=list)  # a first span, and what is left of it

    def applied(self, spans: list[Span]) -> list[Span]:
        """``spans`` without the refuted ones, a trimmed one as what is left of it, and with
        the added ones; where every decoding found the entity, the one span of
        :func:`agreed_spans` instead of its parts."""
        def inside(s: Span) -> bool:
            return any(s.overlaps(a) for a in self.agreed)

        left = {id(s): parts for s, parts in self.trimmed}
        kept = [p for s in spans if s not in self.refuted for p in left.get(id(s), [s])]
        return [s for s in kept if not inside(s)] + [s for s in self.added if not inside(s)] + self.agreed


def _named(token: str) -> bool:
    """A capitalised word of the name list ("Emily,"): no everyday word, even where no detector
    took it for a name (spaCy tags "Emily," ADV)."""
    from deid_speech.ner.spacy_ner import listed_names
    from deid_speech.spoken import clean_token

    first = next((c for c in token if c.isalpha()), "")
    return first.isupper() and clean_token(token) in listed_names()


def _unheard(span: Span, words: list[Word]) -> float:
    """The longest stretch of ``span`` that none of ``words`` covers, in seconds."""
    longest, at = 0.0, span.start
    for w in sorted(words, key=lambda w: w.start):
        longest = max(longest, w.start - at)
        at = max(at, w.end)
    return max(longest, span.end - at)


def _reaches(span: Span, regions: list[tuple[float, float]]) -> bool:
    """Whether a verifier's span reaches far enough beyond the redaction so far (``regions``,
    padded and merged) to be added: by more than :data:`MIN_REACH`, a number's by more than
    :data:`MIN_REACH_NUMBER`."""
    from deid_speech.intervals import covered
    from deid_speech.ner.patterns import NUMBER_LABELS

    free = span.duration - covered(span.start, span.end, regions)
    return free > (MIN_REACH_NUMBER if span.label in NUMBER_LABELS else MIN_REACH)


def _lookalike_heard(span: Span, transcript: Transcript) -> bool:
    """Whether ``transcript`` holds a look-alike's context word over ``span`` or in the three
    words before it: a unit ("thirty eight dollars", "nine forty am") or a word that announces
    a number that is no PII ("reference", "order", "unit"; the pattern detector's
    ``NON_PII_BEFORE``/``NON_PII_AFTER``)."""
    from deid_speech.ner.patterns import NON_PII_AFTER, NON_PII_BEFORE
    from deid_speech.spoken import clean_token

    context = NON_PII_AFTER | NON_PII_BEFORE
    before = [w for w in transcript.words if w.end <= span.start + 0.05][-3:]
    return any(clean_token(w.text) in context for w in before + transcript.words_during(span.start, span.end))


# the look-alike context words (of patterns.NON_PII_BEFORE) that _named_over trusts inside another
# decoding's span: an address's or an order's, seldom a garble; not "lot", "room", "cost",
# "level", "code" or "case", which a pass also writes for other words ("transfer to a lot, five
# one seven ..." for "... our OCBC, five one seven ...")
NAMES_A_NUMBER = frozenset("unit block blk hash # postal reference ref tracking invoice order booking quotation "
                           "receipt member membership".split())


def _named_over(span: Span, transcript: Transcript) -> bool:
    """Whether ``transcript`` heard, over ``span``, a number named as a look-alike: with its
    unit right after it ("thirty eight dollars fifty", "nine forty pm"; the pattern detector's
    ``NON_PII_AFTER``) or a look-alike's context word right before it ("unit oh five dash two
    two"; :data:`NAMES_A_NUMBER`). Another decoding garbled those words into a longer run of
    digits ("38, 15, 4, half, 15, 4, half, 15", "2 -5 -2 -2. 4 -2 -1 -2 -2") and found a span
    that reaches over the context word, so :func:`~deid_speech.ner.patterns.lookalike`, which
    reads the words before and after a span, does not see it."""
    from deid_speech.ner.patterns import NON_PII_AFTER
    from deid_speech.spoken import TENS_WORDS, clean_token, token_symbols

    def number(t: str) -> bool:
        return clean_token(t) in TENS_WORDS or clean_token(t) in ("hundred", "thousand") \
            or (token_symbols(t) or "x")[:1].isdigit()

    words = transcript.words_during(span.start, span.end)
    tokens = [clean_token(w.text) for w in words]
    return any((b in NON_PII_AFTER and number(words[k].text))
               or (a in NAMES_A_NUMBER and number(words[k + 1].text))
               for k, (a, b) in enumerate(zip(tokens, tokens[1:])))


# a span's core, for asking a decoding what was said around it: its own words, not the cue or
# the word after it that a span reaching across a pause may also touch
CORE_TRIM = 0.15


def named_lookalike(span: Span, decodings: list[tuple[Transcript, list[Span]]]) -> bool:
    """Whether ``span`` is a number that some decoding (``decodings``: the first decoder's and
    every pass's transcript with the spans found in it) heard named as a look-alike and found
    nothing in (:func:`deid_speech.ner.patterns.lookalike`: "tracking S D X S E oh three ...",
    "policy number L seven eight ..."), or heard a number named so over it and found nothing
    there (:func:`_named_over`: "thirty eight dollars fifty" where the first decoder wrote "38,
    15, 4, half, 15, ..."), while no decoding heard a PII cue before it
    (:func:`~deid_speech.ner.patterns.pii_cue_before`). A decoding that misheard the context
    word ("truck is S D F G ...") found the number and kept it; the one that heard the word
    knows what it is (dev utterances: 0.7 points less over-redaction, the same leak;
    docs/results.md §0ao). A decoding that found a span there does not count, whatever words
    precede the stretch in it: another decoding may have stretched the span back over words
    it heard otherwise ("city bank loan hash one, ... one oh four eight ..." for "Citibank no
    dash one, ..."). Names, emails and dates never are look-alikes."""
    from deid_speech.ner.patterns import NUMBER_LABELS, lookalike, pii_cue_before

    if span.label not in NUMBER_LABELS:
        return False
    core = replace(span, start=span.start + CORE_TRIM, end=max(span.start + CORE_TRIM + 0.05, span.end - CORE_TRIM))
    return any(not any(core.overlaps(f) for f in found) and (lookalike(core, t) or _named_over(core, t))
               for t, found in decodings) and not any(pii_cue_before(core, t) for t, _ in decodings)


def doubted_everywhere(transcripts: list[Transcript]) -> list[Span]:
    """PERSON spans (source ``doubted``) over the moments where every one of ``transcripts``
    holds a word it gave a probability under :data:`DOUBTED_PROB`, each at least
    :data:`MIN_DOUBTED_S` long. Each decoding alone doubts many everyday words; all of them at
    once, two models and dithered audio, seldom do but where the speech is no word they know."""
    from deid_speech.intervals import intersect, union

    if not transcripts:
        return []
    lows = [union([(w.start, w.end) for w in t.words if w.prob < DOUBTED_PROB and w.text.strip(" ,.?!")])
            for t in transcripts]
    common = lows[0]
    for other in lows[1:]:
        common = intersect(common, other)
    return [Span(a, b, "PERSON", 0.5, "doubted") for a, b in union(common) if b - a >= MIN_DOUBTED_S]


def trimmed(span: Span, passes: list[tuple[Transcript, list[Span]]], first: Transcript | None = None) -> list[Span]:
    """What is left of a first-decoder ``span`` once the passes (each its transcript and the
    spans found in it) have had their say on its parts: a stretch of at least
    :data:`TRIM_MIN_S` that no pass found anything in, at either end of the span or between
    what they found, is cut off when the passes refute it as they would a span of its own
    (:func:`refuted`, with ``first``), unless a pass's word at its edge next to what that pass
    found is a digit or a word that carries a number on (:data:`NUMBER_GOES_ON`): the passes may
    have cut their own span short of the number's last digits ("... twenty seven | fifty after
    six pm"). tiny.en runs a phone into a loop of digits over the small talk after it ("8 ,3 ,4
    ,3 ,4 ..." for "eight triple three oh five one two, we also got the June camp ..."), where the
    passes heard the phone and then plain words. Without anything found in it the span is
    left to :func:`refuted` whole: ``[span]``."""
    from deid_speech.intervals import subtract, union
    from deid_speech.ner.base import TRIMMED
    from deid_speech.spoken import clean_token, normalize_tokens

    found = union([(f.start, f.end) for _, fs in passes for f in fs if f.overlaps(span)])
    if not found:
        return [span]

    def number_word(w: Word) -> bool:
        return bool(normalize_tokens([w.text])) or clean_token(w.text) in NUMBER_GOES_ON

    cut = []
    for a, b in subtract([(span.start, span.end)], found):
        if b - a < TRIM_MIN_S:
            continue
        after_found, before_found = a > span.start, b < span.end  # the edges that touch a found span
        edges = [[w for w, at in ((ws[0], after_found), (ws[-1], before_found)) if at]
                 for ws in (t.words_during(a, b) for t, _ in passes) if ws]
        if any(number_word(w) for ws in edges for w in ws):
            continue
        if refuted(replace(span, start=a, end=b), passes, first):
            cut.append((a, b))
    if not cut:
        return [span]
    return [replace(span, start=a, end=b, source=span.source + "+" + TRIMMED)
            for a, b in subtract([(span.start, span.end)], cut) if b - a > 0]


def agreed_spans(spans: list[Span], passes: list[tuple[Transcript, list[Span]]]) -> list[Span]:
    """One span for each stretch that the first decoding (``spans``) and every pass found
    something in: the spans of all of them that overlap one another, chained, merged into
    one (the union of their times, :func:`merge_spans`) and marked :data:`AGREED`, so that
    the redaction pads it by :data:`deid_speech.redact.AGREED_PAD` of the padding only. The
    padding stands for a recogniser's error in timing an entity (p90 of one decoder's);
    where four decodings found a number, an email or a date, the union of their times
    already holds that error. Not where a name is among the spans: the decoders garble a
    name's onset alike, and its padding is what covers it (dev: six names lost 0.09-0.2 s
    each; docs/results.md §0an). A stretch that one decoding missed is left as it was."""
    from deid_speech.ner.base import AGREED, merge_spans, overlapping

    members = [(s, 0) for s in spans] + [(replace(s, source=s.source + "+verify"), k + 1)
                                         for k, (_, found) in enumerate(passes) for s in found]
    decoding = {id(s): k for s, k in members}  # 0: the first decoding, k: pass k
    out: list[Span] = []
    for group in overlapping([s for s, _ in members]):
        if {decoding[id(s)] for s in group} == set(range(len(passes) + 1)) \
                and not any(s.label == "PERSON" for s in group):
            merged = merge_spans(group)[0]
            out.append(replace(merged, source=merged.source + "+" + AGREED))
    return out


def refuted(span: Span, passes: list[tuple[Transcript, list[Span]]], first: Transcript | None = None) -> bool:
    """Whether every pass (its transcript and the spans found in it) contradicts ``span``: it
    found nothing that overlaps it, and heard words there (none would be no opinion), each
    with a probability of at least :data:`SURE_PROB`, none a capitalised listed name, holding
    at most :data:`PLAIN_SYMBOLS` spoken digits or letters. Stock tiny.en reads garbled speech
    as names and numbers ("Members get seasoned parking", "Cara Cara Cara" for "car park
    office"); two models that hear it as the everyday words it was ("members get season
    parking") overrule it. A name the passes were unsure of ("not to Salahini bhi lahit" for
    "Dr Sami Nipilai") stays. A number span (:data:`NUMBER_LABELS`) asks less: the words'
    median probability at least :data:`SURE_PROB`, and at most :data:`NUMBER_SYMBOLS` symbols
    ("seven thirty, table for ten", where a noisy line gave the first decoder twelve digits),
    and any number of them where the pass heard a look-alike's context word there
    (:func:`_lookalike_heard`: "about thirty eight dollars fifty four thousand", where the
    first decoder wrote "38 ,000, 15, 4 ,000, 15, 4 ,000, 15, 4K").
    A pass whose words leave more than :data:`MAX_UNHEARD` s of the span uncovered skipped
    words there, and gives no opinion. Over any other span, a filler or particle the pass
    doubted ("ya" 0.17 where the first decoder wrote "You're") does not count against its
    certainty, nor do the letters of an acronym callers spell ("DOB", "IC") count as symbols
    (dev calls: 0.2 points less over-redaction, the same leak; docs/results.md §0ao), nor a
    word the pass doubted that the first decoding (``first``) heard too, and was sure of:
    "members" (0.19, 0.29) where the first decoder wrote "Members (0.89) get seasoned parking"
    and its NER took it for a name; two decoders wrote the same everyday word (dev calls 0.8
    points less over-redaction, the same leak; §0ap)."""
    from statistics import median

    from deid_speech.ner.patterns import NUMBER_LABELS
    from deid_speech.ner.spacy_ner import ACRONYMS, FILLERS
    from deid_speech.spoken import clean_token, normalize_tokens

    number = span.label in NUMBER_LABELS
    spelled = ACRONYMS | SPELLED_ACRONYMS
    # the words the first decoding was sure of over the span: a pass that wrote one of them too
    # heard the same everyday word, however it doubted it
    first_sure = {clean_token(w.text) for w in first.words_during(span.start, span.end)
                  if w.prob >= SURE_PROB} if first is not None and not number else set()
    for transcript, found in passes:
        if any(span.overlaps(f) for f in found):
            return False
        words = transcript.words_during(span.start, span.end)
        if not words or any(_named(w.text) for w in words) or _unheard(span, words) > MAX_UNHEARD:
            return False
        probs = [w.prob for w in words if number or clean_token(w.text) not in FILLERS | first_sure]
        if probs and (median if number else min)(probs) < SURE_PROB:
            return False
        tokens = [w.text for w in words if number or clean_token(w.text) not in spelled]
        symbols = sum(len(sym.text) for _, _, sym in normalize_tokens(tokens))
        if symbols > (NUMBER_SYMBOLS if number else PLAIN_SYMBOLS) and not (number and _lookalike_heard(span, transcript)):
            return False
    return True


@dataclass(frozen=True)
class RedactResult:
    audio: Audio | None  # the redacted audio (None where redact_file streamed it straight to disk)
    spans: list[Span]
    transcript: Transcript
    redacted: Transcript  # the transcript with every span's words replaced by its label's text operator
    uncovered: list[tuple[float, float]] = field(default_factory=list)
    verification: dict | None = None  # {"by": verifier, "passes": k, "added": n, "refuted": m} when --verify ran
    channels: list[dict] = field(default_factory=list)  # per channel, when channels differ:
    # {"channel", "transcript", "redacted" (Transcripts), "spans" (that channel's)}
    blanks: list[Span] = field(default_factory=list)  # beeped too: uncovered speech (--uncovered beep), keypad tones
    source: tuple[float, int, int] = (0.0, 0, 0)  # the input's duration, sample rate, channel count

    @property
    def keypad(self) -> list[tuple[float, float]]:
        """The stretches of keypad (DTMF) tones, beeped whatever the settings: ``blanks`` from
        the keypad-tone detector."""
        return [(s.start, s.end) for s in self.blanks if s.source == "keypad"]

    @property
    def redacted_transcript(self) -> str:
        return self.redacted.text

    def to_json(self, file: str, config: RedactConfig, asr_name: str) -> dict:
        """The report shared with the redacted audio (``X.redacted.json``): labels, times,
        scores and sources of what was redacted, the operators, the redacted transcript and
        word list; no clear text of any span or word."""

        def spans_of(spans: list[Span]) -> list[dict]:
            return [{k: v for k, v in s.to_dict().items() if k != "text"} for s in spans]

        return {
            "schema_version": SCHEMA_VERSION,
            "file": file,
            "duration": round(self.source[0], 3),
            "sample_rate": self.source[1],
            "channels": self.source[2],
            "system": config.system,
            "asr_model": asr_name,
            "ner_model": config.ner_model if config.system == "cascade" else None,
            "operators": config.redact.to_dict(),
            "labels": list(config.labels),
            "spans": spans_of(self.spans),
            "redacted_transcript": self.redacted.text,
            # speech-like audio that no transcribed word covers: it was not checked for PII
            "uncovered_speech": [[round(a, 2), round(b, 2)] for a, b in self.uncovered],
            "uncovered_action": config.uncovered,  # beep: those stretches were redacted too
            # keypad tones (a number keyed in on the phone), beeped whatever the settings; no key is named
            "keypad_tones": [[round(a, 2), round(b, 2)] for a, b in self.keypad],
            # the second opinion (--verify): which decoder read the audio again, spans it added
            "verified": self.verification,
            "words": redacted_words(self.redacted),
            # a file whose channels differ: each channel was transcribed and checked on its own
            # (the top-level transcript and words are the first channel's; spans are the union)
            "channel_results": [{"channel": c["channel"], "redacted_transcript": c["redacted"].text,
                                 "spans": spans_of(c["spans"]), "words": redacted_words(c["redacted"])}
                                for c in self.channels],
        }

    def to_pii_json(self, file: str) -> dict:
        """The unredacted report (``X.pii.json``, written only with --unredacted-report,
        mode 0600): the clear transcript, every span's text, every word."""
        return {
            "schema_version": SCHEMA_VERSION,
            "file": file,
            "warning": "holds the personal data the redaction removed: keep it as safe as the original audio",
            "transcript": self.transcript.text,
            "spans": [s.to_dict() for s in self.spans],
            "words": [w.to_dict() for w in self.transcript.words],
            "channel_results": [{"channel": c["channel"], "transcript": c["transcript"].text,
                                 "spans": [s.to_dict() for s in c["spans"]],
                                 "words": [w.to_dict() for w in c["transcript"].words]} for c in self.channels],
        }


class _TranscriberAdapter:
    """A recogniser that only has ``transcribe(audio16k, progress)`` (a plain ASR)."""

    def __init__(self, asr):
        self.asr, self.name = asr, getattr(asr, "name", type(asr).__name__)

    def recognize(self, audio, progress=None) -> Recognition:
        return Recognition(self.asr.transcribe(audio, progress=progress))


def unchecked_speech(mono, words, regions: list[tuple[float, float]] | None = None) -> list[tuple[float, float]]:
    """Speech of 16 kHz ``mono`` that no word of ``words`` covers, so no detector checked it,
    as ``redact`` reports it and (``--uncovered beep``) beeps it: stretches joined across a
    pause under :data:`~deid_speech.asr.whisper.BLANK_JOIN_S` with no word in it. ``regions``:
    the speech regions when the caller has them (by default the shared Silero VAD's)."""
    from deid_speech.asr.whisper import BLANK_JOIN_S, uncovered_speech

    return uncovered_speech(mono, 16000, words, regions=regions, join_s=BLANK_JOIN_S)


def as_recognizer(asr) -> Recognizer:
    """``asr`` as a :class:`Recognizer` (``recognize``), adapting a plain ``transcribe``."""
    if callable(getattr(asr, "recognize", None)):
        return asr
    if callable(getattr(asr, "transcribe", None)):
        return _TranscriberAdapter(asr)
    raise DeidError(f"{asr!r} is no recogniser: it needs recognize(audio16k) or transcribe(audio16k)")


def _e2e_tagger(config: RedactConfig) -> Recognizer:
    from deid_speech.e2e.infer import E2EOptions, E2ETagger, default_model

    return E2ETagger(E2EOptions(model=config.e2e_model or default_model()))


def _cores(config: RedactConfig) -> tuple[int, int] | None:
    """CTranslate2 threads for (the first decoder, the verifier) when the verifier decodes in
    a helper process beside the first; None when both decode here, one after the other."""
    from deid_speech.asr.whisper import cpu_threads

    n = cpu_threads()
    beside = config.verify_in_helper if config.verify_in_helper is not None else n >= 2
    if not (beside and config.verifying and config.verifier != "e2e"):
        return None
    return max(1, n // 2), max(1, n - n // 2)


def _verifier(config: RedactConfig, cores: tuple[int, int] | None) -> Recognizer:
    """The second decoder of ``--verify``: the e2e model, or a Whisper model decoding as the
    cascade's own does (in a helper process on ``cores[1]`` threads, :func:`_cores`)."""
    if config.verifier == "e2e":
        return _e2e_tagger(config)
    from deid_speech.asr.whisper import AsrOptions, Transcriber

    if cores is None:
        return ByPass([Transcriber(AsrOptions.second_opinion(model=m))
                       for m in config.verifiers[:config.verify_passes]])
    from deid_speech.asr.helper import HelperTranscriber

    helper = HelperTranscriber(tuple(AsrOptions.second_opinion(model=m, threads=cores[1])
                                     for m in config.verifiers[:config.verify_passes]))  # a model no pass uses: not loaded
    if config.verify_passes < HERE_FROM_PASSES:
        return helper
    models = config.verifiers[:config.verify_passes]
    mine = _Lazy(AsrOptions.second_opinion(model=models[0], threads=cores[0]))  # one model here: the first's
    return Beside(helper, {k: mine for k in range(config.verify_passes) if models[k % len(models)] == models[0]})


class _Lazy:
    """A Transcriber built when it first decodes, not before: this process holds the first
    decoder's weights alone until a pass decodes here (:class:`Beside`)."""

    def __init__(self, options):
        import threading

        self.options, self._built, self._lock = options, None, threading.Lock()

    def get(self):
        """The Transcriber, built now if it was not (once, whichever thread asks first)."""
        with self._lock:
            if self._built is None:
                from deid_speech.asr.whisper import Transcriber

                self._built = Transcriber(self.options)
            return self._built

    def release(self) -> None:
        if self._built is not None:
            self._built.release()


HERE_FROM_PASSES = 3  # with this many verifier passes or more, this process takes passes back (Beside)
# ... while the file's channels decoded so far, this one included, are shorter than this: this process
# holds the earlier channels' results beside the pass. The 21.4-minute stereo call held 1031 MB with a
# pass taken back on its second channel, against 975 MB without (largest PSS; issue 20 asks for under
# 1 GB); its 16 kHz mono twin 909 MB with one taken back (docs/results.md §0av)
TAKE_BACK_MAX_S = 22 * 60.0


class Beside:
    """A verifier in a helper process (:class:`~deid_speech.asr.helper.HelperTranscriber`)
    that gets every pass, of which this process takes back those in ``mine`` (pass number ->
    a recogniser of that pass's model) that the helper has not begun by the time this
    process's own first decoding is done (:meth:`take_back`;
    :meth:`~deid_speech.asr.helper.Pending.claim`), and decodes them itself. The helper
    queues its own model's passes first and this process's after, the undithered pass 0
    last (1, 2, 0 for three passes), so this process takes pass 0 back first (on the
    21-minute stereo call both processes held 40-65 MB less at once than with pass 2 taken
    back, docs/results.md §0av). With three passes the helper's work is twice the first
    decoder's: on the 108 s call tiny.en decodes in 9.9 s on one core, the passes
    (tiny.en-sg, base-sg, tiny.en-sg, the last two dithered) in 5.9, 10.4 and 5.1 s. A pass
    decodes the same words in either process (``tests/asr/test_helper.py``), and
    :meth:`Redactor.verify` reads the passes in their order, so which process decoded a pass
    changes no redaction. The pass's model is built when it first decodes (:class:`_Lazy`),
    and on audio of a minute or more the first decoder's weights (``others``, set by the
    :class:`Redactor`) are let go while it decodes, and its own after
    (:func:`~deid_speech.asr.whisper.let_go`). A pass taken back
    costs memory while it decodes, a second model's weights and buffers in this process: from
    :data:`TAKE_BACK_MAX_S` of a file's audio on, the passes queue in their order and stay the
    helper's (:meth:`Redactor.redact_tracks`; docs/results.md §0av)."""

    def __init__(self, helper, mine: dict):
        self.helper, self.mine = helper, dict(mine)
        self.name = helper.name
        self.others: list = []

    def share(self, audio):
        share = getattr(self.helper, "share", None)  # a track in shared memory, for the helper to map
        return share(audio) if callable(share) else audio

    def submit_passes(self, audio, seeds: tuple[int, ...], take_back: bool = True) -> list:
        """The helper's handles of passes ``seeds``; with ``take_back``, those of this process's
        model wrapped so that :meth:`take_back` can decode them here. Without, the passes
        queue in their order and stay the helper's."""
        from deid_speech.asr.whisper import let_go
        from deid_speech.audio import MODEL_RATE

        seeds, mine = tuple(seeds), (self.mine if take_back else {})
        # the helper's queue: its own passes first, then this process's, pass 0 (undithered) last
        order = [k for k in seeds if k not in mine] + sorted((k for k in seeds if k in mine), reverse=True)
        queued = dict(zip(order, self.helper.submit_passes(audio, tuple(order))))
        let_go(list({id(m): m for m in self.mine.values()}.values()), len(audio) / MODEL_RATE)  # the first decoder goes first
        return [_Claimable(self, audio, k, queued[k], order.index(k)) if k in mine else queued[k] for k in seeds]

    @staticmethod
    def take_back(heard: list) -> None:
        """This process, free now, decodes the passes of ``heard`` the helper has not begun, the
        last queued first, until one has begun (the helper begins them in their queue's order)."""
        for pending in sorted((p for p in heard if isinstance(p, _Claimable)), key=lambda p: -p.queued):
            if not pending.take():
                return

    def submit(self, audio):
        return self.submit_passes(audio, (0,))[0]

    def recognize(self, audio, progress=None) -> Recognition:
        return self.submit(audio).result()

    def close(self) -> None:
        self.helper.close()


class _Claimable:
    """Pass ``k`` of a :class:`Beside` verifier, sent to the helper (``pending``), which this
    process decodes itself instead if :meth:`take` finds the helper has not begun it."""

    def __init__(self, owner: Beside, mono, k: int, pending, queued: int):
        self.owner, self.mono, self.k, self.pending, self.queued = owner, mono, k, pending, queued
        self._result: Recognition | None = None

    def take(self) -> bool:
        """Take this pass back from the helper and decode it here, if the helper has not begun
        it: True if this process decoded it."""
        from deid_speech.asr.whisper import let_go
        from deid_speech.audio import MODEL_RATE

        if self._result is None:
            claim = getattr(self.pending, "claim", None)
            if not (callable(claim) and claim()):
                return False
            mine, audio_s = self.owner.mine[self.k], len(self.mono) / MODEL_RATE
            let_go(self.owner.others, audio_s)
            # the Transcriber itself, which reads a dithered track by slices (_Later)
            self._result = _Later(mine.get() if isinstance(mine, _Lazy) else mine, self.mono, self.k).result()
            let_go([mine], audio_s)
        return True

    def result(self) -> Recognition:
        return self._result if self._result is not None else self.pending.result()


def verifier_transcriber(verifier: str, cache=None, **options) -> Recognizer:
    """The Whisper verifier ``verifier`` (one model, or ``A,B`` taking turns by pass, as
    :class:`ByPass`) for ``eval`` and the benchmarks: each model's transcripts read from, or
    decoded into, ``cache`` (:func:`deid_speech.asr.whisper.transcriber`)."""
    from deid_speech.asr.whisper import AsrOptions, transcriber

    return ByPass([transcriber(AsrOptions.second_opinion(model=m, **options), cache)
                   for m in RedactConfig(verifier=verifier, verify=True, verify_passes=MAX_VERIFY_PASSES).verifiers])


def turns(recognizer) -> list:
    """The recognisers of a :class:`ByPass`, or ``[recognizer]``."""
    return list(getattr(recognizer, "recognizers", [recognizer]))


class ByPass:
    """Recognisers that take turns by pass (``--verifier A,B``): pass k of :meth:`Redactor.listen`
    is decoded by the (k mod n)-th. Two models miss different entities, where one model's
    dithered second pass often misses the same ones again (docs/results.md §0af). One recogniser
    is itself."""

    def __new__(cls, recognizers):
        recognizers = list(recognizers)
        if len(recognizers) == 1:
            return recognizers[0]
        return super().__new__(cls)

    def __init__(self, recognizers):
        self.recognizers = [as_recognizer(r) for r in recognizers]
        self.name = ",".join(getattr(r, "name", type(r).__name__) for r in self.recognizers)

    def for_pass(self, k: int, audio_s: float) -> Recognizer:
        """Pass k's recogniser; for ``audio_s`` of a minute or more the others' weights are let
        go first, as the helper does (:func:`deid_speech.asr.whisper.take_turn`)."""
        from deid_speech.asr.whisper import take_turn

        return take_turn(self.recognizers, k, audio_s)

    def recognize(self, audio, progress=None) -> Recognition:
        return self.recognizers[0].recognize(audio, progress)

    def close(self) -> None:
        for r in self.recognizers:
            close = getattr(r, "close", None)
            if close is not None:
                close()


class _Later:
    """A decoding by an in-process verifier of ``mono`` with the dither of seed ``k`` (none
    for 0), run when its result is asked for: no dithered copy waits in memory, and models
    taking turns (:class:`ByPass`) pick pass k's model only then."""

    def __init__(self, verifier, mono, k: int):
        self.verifier, self.mono, self.k = verifier, mono, k

    def result(self) -> Recognition:
        from deid_speech.asr.whisper import Transcriber
        from deid_speech.audio import MODEL_RATE, DitheredTrack, verifier_pass

        turn = getattr(self.verifier, "for_pass", None)
        recognizer = turn(self.k, len(self.mono) / MODEL_RATE) if turn is not None else self.verifier
        if self.k and isinstance(recognizer, Transcriber):  # Whisper reads by slices: no dithered copy
            return recognizer.recognize(DitheredTrack(self.mono, self.k))  # of the track (78 MB for 21 min)
        return recognizer.recognize(verifier_pass(self.mono, self.k))


class Redactor:
    """Loads the recogniser and detectors once; redacts many files. It keeps no per-call
    state: one Redactor can serve several threads."""

    def __init__(self, config: RedactConfig = RedactConfig(), asr=None, detectors=None, verifier=None):
        """The system (:mod:`deid_speech.systems`) says which recogniser and detectors to
        build; ``asr``, ``detectors`` and ``verifier`` (recognisers: ``recognize(audio16k)
        -> Recognition``, or a plain ``transcribe``) replace them (tests pass fakes)."""
        from deid_speech import systems, timing
        from deid_speech.ner.base import build_all

        self.config = config
        self.system = systems.get(config.system)
        self.verifier = None
        cores = _cores(config) if verifier is None else None  # the core split is for a verifier built here
        if config.verifying:  # a second opinion: another decoder reads the audio too
            self.verifier = as_recognizer(verifier if verifier is not None else _verifier(config, cores))
        if asr is not None and self.system.recognizer == "e2e" and not callable(getattr(asr, "recognize", None)):
            raise DeidError(f"system {config.system} needs a recogniser that tags entities itself "
                            "(recognize(audio16k) -> Recognition), like the e2e model; a plain ASR cannot")
        if asr is None:
            if self.system.recognizer == "e2e":  # one model transcribes and tags
                asr = _e2e_tagger(config)
            else:
                from deid_speech.asr.whisper import AsrOptions, Transcriber

                threads = {"threads": cores[0]} if cores else {}
                asr = Transcriber(AsrOptions.fast(model=config.asr_model, **threads) if config.fast_asr
                                  else AsrOptions(model=config.asr_model, **threads))
        self.asr = as_recognizer(asr)
        if isinstance(self.verifier, Beside):
            self.verifier.others = [asr]  # let go while a pass decodes here, on long audio
        with timing.stage("loading"):
            self.detectors = detectors if detectors is not None else build_all(self.system.detectors, config)

    def close(self) -> None:
        """Stop the verifier's helper process, if it has one (it also stops by itself when
        this process ends)."""
        close = getattr(self.verifier, "close", None)
        if close is not None:
            close()

    def detect(self, transcript: Transcript, tagged: tuple[Span, ...] | list[Span] = ()) -> list[Span]:
        """The spans of ``transcript``: the recogniser's own ``tagged`` spans (the e2e
        model's) and every detector's, each cut to the value it holds (no cue word, no sure
        words after a number: :func:`~deid_speech.ner.patterns.trim_to_value`), filtered by
        label and score, merged, and every other mention of a found value added."""
        from deid_speech import timing
        from deid_speech.ner.base import merge_spans
        from deid_speech.ner.patterns import lookalike, trim_to_value
        from deid_speech.ner.spacy_ner import name_part

        with timing.stage("detectors"):
            found: list[Span] = list(tagged)
            for d in self.detectors:
                try:
                    found.extend(d.detect(transcript))
                except DeidError:
                    raise
                except Exception as e:  # a detector that fails must fail loudly
                    raise DeidError(f"detector {d.name} failed: {e}") from e
            found = [trim_to_value(n, transcript) for s in found if (n := name_part(s, transcript)) is not None]
            keep = merge_spans([s for s in found if s.label in self.config.labels and s.score >= self.config.min_score
                                and not lookalike(s, transcript)])
            return place_spans(merge_spans(keep + repeat_mentions(keep, transcript)), transcript)

    def recognize(self, mono, progress=None) -> tuple[Transcript, list[Span]]:
        """Transcribe 16 kHz mono audio and find its spans."""
        rec = self.asr.recognize(mono, progress=progress)
        return rec.transcript, self.detect(rec.transcript, rec.spans)

    def listen(self, mono, take_back: bool = True) -> list:
        """Start the verifier's decodings of ``mono``, one per pass (pass k > 0 hears it with
        the dither of seed k): handles whose ``result()`` is the Recognition. A verifier in a
        helper process starts at once and decodes while this process does its own (with
        ``take_back``, this process may take some back: :class:`Beside`); one in this process
        decodes when :meth:`verify` asks for the result."""
        passes = range(self.config.verify_passes)
        if isinstance(self.verifier, Beside):
            return self.verifier.submit_passes(mono, tuple(passes), take_back=take_back)
        submit = getattr(self.verifier, "submit_passes", None)
        if submit is None:
            from deid_speech.asr.whisper import let_go
            from deid_speech.audio import MODEL_RATE

            # the first decoder goes first: the verifier's weights wait until its passes
            let_go(turns(self.verifier), len(mono) / MODEL_RATE)
            return [_Later(self.verifier, mono, k) for k in passes]
        return submit(mono, tuple(passes))

    def verify(self, mono, spans: list[Span], heard: list | None = None,
               transcript: Transcript | None = None) -> SecondOpinion:
        """A second opinion: let the verifier (another decoder: by default tiny.en-sg and
        base-sg taking turns by pass, fine-tunes that hear Singlish PII the stock model misses;
        or the e2e model)
        transcribe the same audio, run this redactor's detectors over its transcript, and
        return the spans that reach beyond the redaction so far (with its padding) by more
        than :data:`MIN_REACH` (a number's by more than :data:`MIN_REACH_NUMBER`). The
        verifier hears the whole audio, not only what the first redaction leaves audible: with
        the redactions silenced, it lost the context around them, and its cues took the words
        after a silenced name for the name (dev leak 7.8 / 15.0 % on utterances / calls against
        3.2 / 6.7 % with the whole audio; docs/results.md §0i). The verifier's own entity tags
        are not used: the e2e model's beeped 41 % of the other speech on the benchmark's dev
        part (its transcript through the detectors: 30 %).

        It listens ``verify_passes`` times: pass k > 0 hears the audio with an inaudible
        dither drawn from seed k (:func:`deid_speech.audio.dither`), so the same audio always
        gets the same redaction, and what one decoding missed another may catch (§0r).
        ``heard``: the handles of :meth:`listen`, when it was called before the first decoding.
        This process first decodes itself the passes of a :class:`Beside` verifier that the
        helper has not begun (:meth:`Beside.take_back`), then reads them all in their order.

        The passes also overrule the first decoder (:func:`refuted`): a span of ``spans`` that
        no pass found anything in, where every pass heard plain words it was sure of, is
        dropped (a Whisper verifier of two or more passes; the e2e model gives no word
        probabilities). A number that one decoding (the first one's ``transcript``, when
        given, or a pass's) heard named as a look-alike, and none heard a PII cue before, is
        dropped from them all (:func:`named_lookalike`). Where the first decoding (given as
        ``transcript``) and every pass doubted the words at the same moment, that speech is
        added as a name (:func:`doubted_everywhere`; a Whisper verifier of two or more passes).
        A stretch of a first span that no pass found anything in and that the passes refute is
        cut off it (:func:`trimmed`: a loop of digits run on past a phone)."""
        from deid_speech import timing
        from deid_speech.intervals import union
        from deid_speech.redact import redaction_regions

        added: list[Span] = []
        passes: list[tuple[Transcript, list[Span]]] = []
        with timing.stage("verification", absorb=True):
            heard = heard if heard is not None else self.listen(mono)
            if isinstance(self.verifier, Beside):
                self.verifier.take_back(heard)
            for pending in heard:
                regions = union([(a, b) for a, b, _ in redaction_regions(spans + added, self.config.redact)])
                heard_k = pending.result().transcript
                found = self.detect(heard_k)
                passes.append((heard_k, found))
                added += [Span(s.start, s.end, s.label, s.score, s.source + "+verify", s.text)
                          for s in found if _reaches(s, regions)]
            overrules = len(passes) >= 2 and self.config.verifier != "e2e"
            if overrules and transcript is not None:
                regions = union([(a, b) for a, b, _ in redaction_regions(spans + added, self.config.redact)])
                added += [s for s in doubted_everywhere([transcript] + [t for t, _ in passes]) if _reaches(s, regions)]
            heard_by = ([(transcript, spans)] if transcript is not None else []) + passes
            wrong = [s for s in spans if (overrules and refuted(s, passes, transcript)) or named_lookalike(s, heard_by)]
            cut = [(s, parts) for s in spans if s not in wrong
                   for parts in [trimmed(s, passes, transcript)] if parts != [s]] if overrules else []
            agreed = agreed_spans(SecondOpinion([], wrong, trimmed=cut).applied(spans), passes) if overrules else []
            return SecondOpinion([s for s in added if not named_lookalike(s, heard_by)], wrong,
                                 [s for s in agreed if not named_lookalike(s, heard_by)], cut)

    def redact(self, audio: Audio, progress=None, in_place: bool = False) -> RedactResult:
        """Transcribe and check every distinct channel on its own (:meth:`Audio.tracks16k`),
        redact the union of what was found in every channel. ``in_place``: beep into
        ``audio``'s own samples (the caller owns them and needs no clean copy)."""
        from deid_speech import timing

        with timing.stage("reading"):
            tracks = audio.tracks16k()
        found = self.redact_tracks(_handed_on(tracks), (audio.duration, audio.sample_rate, audio.channels), progress)
        with timing.stage("writing"):
            beeped = redact_audio(audio, found.spans + found.blanks, self.config.redact, in_place=in_place)
        return replace(found, audio=beeped)

    def redact_tracks(self, tracks: Iterable[tuple[int | None, object]], source: tuple[float, int, int],
                      progress=None) -> RedactResult:
        """What :meth:`redact` finds, from the 16 kHz tracks alone (no audio written:
        ``audio`` is None); ``source``: the input's duration, rate and channel count."""
        from deid_speech import timing
        from deid_speech.audio import MODEL_RATE
        from deid_speech.ner.base import merge_spans

        found, per = [], []
        added_total, refuted_total, agreed_total, trimmed_total, uncovered, keypad = 0, 0, 0, 0, [], []
        decoded_s = 0.0  # the channels' audio so far: passes are taken back from the helper below TAKE_BACK_MAX_S
        for channel, mono in _timed(tracks):
            with timing.stage("reading"):
                mono = for_recognition(mono)  # quiet speech is raised, not skipped
                if callable(share := getattr(self.verifier, "share", None)):
                    mono = share(mono)  # a helper maps these pages rather than copy them (asr/helper.py)
            decoded_s += len(mono) / MODEL_RATE
            # a helper starts now
            heard = self.listen(mono, take_back=decoded_s < TAKE_BACK_MAX_S) if self.verifier is not None else None
            transcript, spans = self.recognize(mono, progress)
            with timing.stage("vad"):
                uncovered += unchecked_speech(mono, transcript.words)
                keypad += keypad_tones(mono)
            # the track is let go before the verifier's results are waited for: a helper maps (or
            # holds) its own, a verifier in this process its pending passes (a long call's memory, §0aj)
            del mono
            if self.verifier is not None:
                opinion = self.verify(None, spans, heard, transcript)
                added_total, refuted_total = added_total + len(opinion.added), refuted_total + len(opinion.refuted)
                agreed_total, trimmed_total = agreed_total + len(opinion.agreed), trimmed_total + len(opinion.trimmed)
                spans = merge_spans(opinion.applied(spans))
            found += spans
            per.append((channel, transcript, spans))
            del heard  # the next channel's track is read (a file streamed) with this one let go
        if len(per) > 1:  # a value one speaker said and the other repeats ("Jason Lim" ... "Mr Lim")
            found += [s for _, tr, _ in per for s in place_spans(repeat_mentions(merge_spans(found), tr), tr)]
        spans = merge_spans(found)
        verification = ({"by": self.verifier.name, "passes": self.config.verify_passes, "added": added_total,
                         "refuted": refuted_total, "agreed": agreed_total, "trimmed": trimmed_total}
                        if self.verifier is not None else None)
        text = TextRedactor(self.config.redact)  # one per call: numbering and surrogates agree across channels
        redacted = [redact_transcript(tr, spans, text) for _, tr, _ in per]
        channels = [] if len(per) == 1 else [
            {"channel": ch, "transcript": tr, "redacted": red, "spans": sp}
            for (ch, tr, sp), red in zip(per, redacted)]
        first = per[0][1]
        uncovered = sorted(uncovered)
        blanks = []
        if uncovered and self.config.uncovered == "fail":
            raise DeidError(f"{sum(b - a for a, b in uncovered):.1f}s of speech-like audio got no words from the "
                            "recogniser and could not be checked for PII (--uncovered fail)")
        if self.config.uncovered == "beep":  # what could not be checked is not let through
            blanks = [Span(a, b, source="uncovered") for a, b in uncovered]
        blanks += [Span(a, b, source="keypad") for a, b in sorted(keypad)]
        return RedactResult(None, spans, first, redacted[0], uncovered, verification, channels, blanks, source)


def _handed_on(items: list):
    """The items of ``items`` in order, each taken out of the list as it is handed on."""
    items.reverse()
    while items:
        yield items.pop()


def _timed(tracks: Iterable[tuple[int | None, object]]):
    """The tracks, each one's reading timed as reading (a streamed file reads a later
    channel when it is asked for), none held here once handed on."""
    from deid_speech import timing

    it = iter(tracks)
    while True:
        with timing.stage("reading"):
            box = [next(it, None)]
        if box[0] is None:
            return
        yield box.pop()  # handed on, not held in this frame while the caller works on it


def output_paths(src: Path, out_dir: Path | None, full_name: bool = False) -> tuple[Path, Path]:
    """``X.redacted.<ext>`` (FLAC for containers libsndfile cannot write) and
    ``X.redacted.json``; ``full_name`` keeps the input's extension in X ("x.flac" ->
    "x.flac.redacted.flac"), for an input that shares its folder and stem with another."""
    folder = out_dir if out_dir is not None else src.parent
    stem = src.name if full_name or not src.suffix else src.name[: -len(src.suffix)]
    suffix = ".flac" if src.suffix.lower() in TRANSCODED else src.suffix
    return folder / f"{stem}.redacted{suffix}", folder / f"{stem}.redacted.json"


def full_name_outputs(files: list[Path], out_dirs: dict[Path, Path | None]) -> set[Path]:
    """Inputs that share an output folder and a stem, but not the extension, with an earlier
    input ("x.wav" and "x.flac"): they keep their extension in their output names, so both
    get their own."""
    seen: dict[tuple[Path, str], set[str]] = {}
    full: set[Path] = set()
    for f in files:
        json_out = output_paths(f, out_dirs[f])[1]
        suffixes = seen.setdefault((json_out.parent.resolve(), json_out.name), set())
        if suffixes and f.suffix and f.suffix.lower() not in suffixes:
            full.add(f)  # the same name with the same extension in two folders stays a collision
        suffixes.add(f.suffix.lower())
    return full


def _is_our_output(f: Path) -> bool:
    """``X.redacted.<ext>`` with its sidecar ``X.redacted.json`` beside it, or that sidecar:
    what an earlier run wrote (a recording that merely has ".redacted." in its name is not)."""
    name = f.name
    if name.endswith(".redacted.json"):
        return True
    stem, _, ext = name.rpartition(".")
    return stem.endswith(".redacted") and (f.parent / f"{stem}.json").is_file()


def _readable_audio(f: Path) -> bool:
    import soundfile as sf

    try:
        with open(f, "rb") as fh:  # a file object: non-UTF-8 names work too
            sf.info(fh)
        return True
    except Exception:
        return False


def collect_inputs(paths: list[str]) -> tuple[list[Path], list[tuple[Path, str]], dict[Path, Path]]:
    """Expand folders recursively: (files to redact, files skipped with the reason, the
    folder each found file came from, so --out-dir can mirror the tree below it). Audio is
    found by extension or, for other names, by whether it can be decoded; hidden and
    temporary files, what earlier runs wrote and a file given a second time are skipped, and
    every skip is listed."""
    files: list[tuple[Path, Path | None]] = []  # (file, the folder it was found in)
    skipped: list[tuple[Path, str]] = []
    for p in map(Path, paths):
        if not p.is_dir():
            if p.is_file() and _is_our_output(p):  # "redact *.flac" again: the earlier outputs match too
                skipped.append((p, "written by an earlier deid-speech run"))
            else:
                files.append((p, None))
            continue
        found = []
        for f in sorted(x for x in p.rglob("*") if x.is_file()):
            if f.name.startswith("."):
                skipped.append((f, "hidden or temporary file"))
            elif _is_our_output(f):
                skipped.append((f, "written by an earlier deid-speech run"))
            elif f.suffix.lower() in EXTENSIONS + TRANSCODED or _readable_audio(f):
                found.append(f)
            else:
                skipped.append((f, "not audio this tool can decode"))
        if not found:
            raise DeidError(f"{p}: no audio files ({', '.join(EXTENSIONS)} or others libsndfile reads) in this folder")
        files.extend((f, p) for f in found)
    once: list[Path] = []
    roots: dict[Path, Path] = {}
    seen: set[Path] = set()
    for f, root in files:  # a file named twice ("redact a.wav a.wav", or a file and its folder) is redacted once
        key = f.resolve() if f.exists() else f
        if key in seen:
            skipped.append((f, "given more than once"))
            continue
        seen.add(key)
        once.append(f)
        if root is not None:
            roots[f] = root
    return once, skipped, roots


def output_folders(files: list[Path], out_dir: Path | None, roots: dict[Path, Path]) -> dict[Path, Path | None]:
    """Where each file's outputs go: next to it, or under ``out_dir`` mirroring the tree
    below the folder it was found in ("calls/a/x.wav" -> "OUT/a/x.redacted.wav")."""
    return {f: None if out_dir is None else out_dir / f.parent.relative_to(roots[f]) if f in roots else out_dir
            for f in files}


def pii_report_path(src: Path, out_dir: Path | None, full_name: bool = False) -> Path:
    """Where ``--unredacted-report`` writes the clear report: ``X.pii.json``."""
    json_out = output_paths(src, out_dir, full_name)[1]
    return json_out.with_name(json_out.name[: -len(".redacted.json")] + ".pii.json")


def format_path(json_out: Path, fmt: str) -> Path:
    """``X.redacted.json`` -> ``X.redacted.srt`` (the format's writer's suffix)."""
    from deid_speech.writers import WRITERS

    return json_out.with_name(json_out.name[: -len(".json")] + WRITERS[fmt].suffix)


def planned_outputs(src: Path, out_dir: Path | None, full_name: bool = False, formats: tuple[str, ...] = ("json",),
                    unredacted_report: bool = False) -> list[Path]:
    """Every file a redaction of ``src`` writes: the audio, each format (the JSON last),
    and the clear report when asked for."""
    audio_out, json_out = output_paths(src, out_dir, full_name)
    fmts = [f for f in formats if f != "json"] + ["json"]
    return [audio_out, *(format_path(json_out, f) for f in fmts)] + \
        ([pii_report_path(src, out_dir, full_name)] if unredacted_report else [])


def occupied(p: Path, dangling: bool = True) -> bool:
    """Whether something is at ``p``: a file, a folder, or a link, even one that leads nowhere
    (writing the output would replace the link; ``dangling=False``: such a link is nothing, as
    for an output that must be there to count as written). A name the system cannot look up
    (too long and the like) is not: writing it fails with the reason."""
    try:
        return p.exists() or (dangling and p.is_symlink())
    except OSError:
        return False


def every_output(src: Path, out_dir: Path | None, full_name: bool = False) -> list[Path]:
    """Every file any redaction of ``src`` may have written (all formats, the clear report)."""
    from deid_speech.writers import FORMATS

    return planned_outputs(src, out_dir, full_name, FORMATS, True)


EXISTING = ("refuse", "overwrite", "skip")


def _reported_file(json_out: Path) -> str | None:
    """The input an existing report names (its ``file``), or None where there is no report to read."""
    try:
        with open(json_out, encoding="utf-8") as fh:
            d = json.load(fh)
    except (OSError, ValueError):
        return None
    return d.get("file") if isinstance(d, dict) and isinstance(d.get("file"), str) else None


def existing_policy(src: Path, out_dir: Path | None, full_name: bool, formats: tuple[str, ...],
                    unredacted_report: bool, existing: str = "refuse") -> tuple[str, str]:
    """What to do with ``src`` given the outputs already there: ("run", ""), ("skip", why)
    or ("refuse", why). Nothing is overwritten unless ``existing`` is "overwrite"; with
    "skip", a finished earlier redaction (every planned output there) is kept, and an
    unfinished one (no JSON: the run was killed) is redone."""
    plan = planned_outputs(src, out_dir, full_name, formats, unredacted_report)
    there = [p for p in every_output(src, out_dir, full_name) if occupied(p)]
    if not there or existing == "overwrite":
        return "run", ""
    json_out = output_paths(src, out_dir, full_name)[1]
    if existing == "skip":
        other = _reported_file(json_out)
        if other is not None and Path(other).name != src.name:  # "x.flac" beside an earlier run's "x.wav"
            return "refuse", (f"{src}: {json_out} is the report of {other}, not of this input; "
                              "use --overwrite to replace it, or another --out-dir")
        missing = [p for p in plan if not occupied(p, dangling=False)]
        if not missing:
            return "skip", f"{src}: already redacted ({json_out} exists)"
        if not occupied(json_out, dangling=False):
            return "run", ""  # unfinished: what an interrupted run left is redone
        return "refuse", (f"{src}: redacted earlier, but {missing[0]} is not there; "
                          "use --overwrite to redo it with the outputs asked for now")
    return "refuse", (f"{src}: {there[0]} already exists; use --overwrite to replace the earlier outputs "
                      "or --skip-existing to keep them")


def redact_file(redactor: Redactor, src: Path, out_dir: Path | None, inputs: set[Path],
                progress=None, unredacted_report: bool = False, full_name: bool = False,
                formats: tuple[str, ...] = ("json",)) -> tuple[Path, Path, RedactResult]:
    """Redact one file; write every output or none (fail closed). Every text is rendered
    before the disk is touched; then whatever an earlier run wrote for this input is
    removed (the caller has checked it may be: :func:`existing_policy`), the audio is
    written, then the transcripts, and the JSON last: an audio output without its JSON is
    unfinished, and a fresh audio never pairs with a stale report.
    ``unredacted_report``: also write the clear report ``X.pii.json`` (mode 0600)."""
    from deid_speech import timing
    from deid_speech.audio import display_name

    audio_out, json_out = output_paths(src, out_dir, full_name)
    pii_out = pii_report_path(src, out_dir, full_name)
    for out in every_output(src, out_dir, full_name):
        if out.resolve() in inputs:
            raise DeidError(f"{src}: output {out} would overwrite an input; use --out-dir")
    with timing.stage("reading"):
        stream = AudioFile.open(src)  # None: a container decoded whole
    if stream is None:
        with timing.stage("reading"):
            audio = load(src)
        result = redactor.redact(audio, progress=progress, in_place=True)  # the audio read here is ours

        def write_audio():
            save(result.audio, audio_out)
    else:  # read a block at a time for detection, and again to write: a long call is never held whole
        with timing.stage("reading"):
            tracks, level = stream.tracks16k()
        result = redactor.redact_tracks(tracks, (stream.duration, stream.sample_rate, stream.channels), progress)
        del tracks

        def write_audio():
            stream.write_redacted(audio_out, result.spans + result.blanks, redactor.config.redact, level)
    name = display_name(src)
    with timing.stage("writing"):
        return _write_outputs(redactor, src, out_dir, full_name, formats, unredacted_report, audio_out, json_out,
                              pii_out, result, name, write_audio)


def _write_outputs(redactor: Redactor, src: Path, out_dir: Path | None, full_name: bool, formats: tuple[str, ...],
                   unredacted_report: bool, audio_out: Path, json_out: Path, pii_out: Path, result: RedactResult,
                   name: str, write_audio) -> tuple[Path, Path, RedactResult]:
    from deid_speech.audio import write_error
    from deid_speech.writers import WRITERS

    texts = [(format_path(json_out, f), WRITERS[f].render(result, name, redactor.config, redactor.asr.name))
             for f in [f for f in formats if f != "json"] + ["json"]]
    clean_old_temps(audio_out.parent)
    try:
        for old in every_output(src, out_dir, full_name)[1:]:  # an earlier run's reports never outlive it
            old.unlink(missing_ok=True)
    except OSError as e:
        raise DeidError(f"{json_out}: cannot replace the earlier outputs ({write_error(e)})") from None
    write_audio()
    written, current = [audio_out], pii_out
    try:
        if unredacted_report:
            clear = json.dumps(result.to_pii_json(name), indent=2, ensure_ascii=False)
            write_text_atomic(pii_out, clear + "\n", mode=0o600)
            written.append(pii_out)
        for current, text in texts:
            write_text_atomic(current, text)
            written.append(current)
    except BaseException as e:  # all or nothing, Ctrl-C included
        for path in written:
            path.unlink(missing_ok=True)
        if not isinstance(e, Exception):
            raise
        raise DeidError(f"{current}: cannot write ({write_error(e)})") from None
    return audio_out, json_out, result


TEMP_MAX_AGE_S = 3600.0


def clean_old_temps(folder: Path, max_age_s: float = TEMP_MAX_AGE_S) -> None:
    """Remove ``.tmp-*`` files an interrupted run left in ``folder`` (older than an hour,
    so a concurrent run's temporaries are safe)."""
    import time

    now = time.time()
    for t in folder.glob(".tmp-*"):
        try:
            if t.is_file() and now - t.stat().st_mtime > max_age_s:
                t.unlink()
        except OSError:
            pass


def output_collisions(files: list[Path], out_dirs: dict[Path, Path | None],
                      full: set[Path] = frozenset()) -> dict[Path, str]:
    """Inputs that must be refused before any work, with the reason: two inputs whose
    outputs would land on the same file ("a/call.wav" and "b/call.wav" given by name with
    one --out-dir), or an output that is an input. ``full``: inputs named with their
    extension (:func:`full_name_outputs`)."""
    inputs = {f.resolve(): f for f in files}
    owner: dict[Path, Path] = {}
    refused: dict[Path, str] = {}
    for f in files:
        for out in output_paths(f, out_dirs[f], f in full):
            key = out.resolve()
            if key in inputs and inputs[key] != f:
                refused[f] = f"{f}: its output {out} is another input of this run ({inputs[key]}); use --out-dir"
            elif key in owner and owner[key] != f:
                refused[f] = (f"{f}: its output {out} would also be written for {owner[key]}; "
                              "redact them in separate runs or into separate --out-dir folders")
                refused.setdefault(owner[key], f"{owner[key]}: its output {out} would also be written for {f}; "
                                                "redact them in separate runs or into separate --out-dir folders")
            else:
                owner[key] = f
    return refused


def remove_stale_outputs(src: Path, out_dir: Path | None, inputs: set[Path] = frozenset(),
                         full_name: bool = False) -> str | None:
    """After a failure, make sure nothing named "redacted" from an older run remains for
    this input: a stale output would look like a fresh, successful redaction. Never
    removes an input of this run. Returns a problem to report (the cleanup itself failed)
    instead of raising."""
    for out in every_output(src, out_dir, full_name):
        try:
            key = out.resolve()
            if key == src.resolve() or key in inputs or not out.is_file():
                continue
            os.remove(out)
        except OSError as e:
            return f"could not remove the stale output {out} ({e.strerror or e})"
    return None
