"""Spoken-form pattern detectors: many spellings per label, and non-PII numbers that must
stay unflagged (the rules are listed in ner/patterns.py's docstring)."""
import pytest

from deid_speech.ner.patterns import PatternDetector
from factories import make_transcript

DET = PatternDetector()


def found(text: str) -> list[tuple[str, str]]:
    return [(s.label, s.text) for s in DET.detect(make_transcript(text))]


def labels(text: str) -> list[str]:
    return [lab for lab, _ in found(text)]


@pytest.mark.parametrize("text,value", [
    ("my number is nine one two three four five six seven", "nine one two three four five six seven"),
    ("can call me at 9123 4567 after six", "9123 4567"),
    ("HP is 91234567.", "91234567"),
    ("call 8765-4321 lah", "8765-4321"),
    ("nine eight double seven, six five four three ok", "nine eight double seven, six five four three"),
    ("six triple zero one two three four", "six triple zero one two three four"),
    ("ninety eight seventy six fifty four thirty two", "ninety eight seventy six fifty four thirty two"),
    ("plus six five nine one two three four five six seven", "plus six five nine one two three four five six seven"),
    ("my hp +65 9876 5432 can", "+65 9876 5432"),
    ("whatsapp me nine 1 2 3 four 5 6 7", "nine 1 2 3 four 5 6 7"),
    ("office line is six two three four, five six seven eight", "six two three four, five six seven eight"),
])
def test_spoken_phone_variants_are_detected(text, value):
    assert ("PHONE", value) in found(text)


@pytest.mark.parametrize("text", [
    "my IC is S one two three four five six seven D",
    "IC number S1234567D lah",
    "it's s one two three four five six seven d",
    "T zero one two three four five six G",
    "my fin is F double one two three four five six X",
    "S -1 -2 -3 -4 -5 -6 -7 -D",
    "nric S 1234567 D",
])
def test_spoken_nric_variants_are_detected(text):
    assert "NRIC" in labels(text)


def test_nric_with_wrong_check_letter_is_still_flagged_but_scored_lower():
    good = DET.detect(make_transcript("S one two three four five six seven D"))
    bad = DET.detect(make_transcript("S one two three four five six seven A"))
    assert good[0].label == bad[0].label == "NRIC"
    assert bad[0].score < good[0].score


def test_nric_missing_its_final_letter_after_an_ic_cue_is_flagged():
    assert labels("my IC is S one two three four five six seven") == ["NRIC"]


@pytest.mark.parametrize("text", [
    "passport K one two three four five six seven A",
    "my passport number is K1234567A",
    "passport is k double two three four five six seven b",
])
def test_passport_variants_are_detected(text):
    assert labels(text) == ["PASSPORT_NUM"]


@pytest.mark.parametrize("text", [
    "card number four one one one, one one one one, one one one one, one one one one",
    "my visa is 4111 1111 1111 1111",
    "5500 0000 0000 0004 expiry next year",
    "amex three seven eight two eight two two four six three one zero zero zero five",
    "card is four one one one one one one one one one one one one one one two",  # fails Luhn
])
def test_card_numbers_are_detected_with_or_without_luhn(text):
    assert labels(text) == ["CREDIT_CARD"]


@pytest.mark.parametrize("text", [
    "my car plate is S K B nine zero one two C",
    "plate SKB 9012C",
    "vehicle number S B S three two four oh E",
    "carpark entry for S G X one two three Z",
    "my plate s k b nine zero one two c",
])
def test_car_plates_are_detected(text):
    assert "CAR_PLATE" in labels(text)


@pytest.mark.parametrize("text", [
    "DBS account zero one two, three four five six seven, eight",
    "account number 012-345678-9",
    "my POSB savings one two three four five six seven eight nine",
    "OCBC account six oh one two three four five six seven oh oh one",
    "transfer to uob three one two dash three four five dash six seven eight dash nine",
])
def test_bank_accounts_are_detected(text):
    assert labels(text) == ["BANK_ACCOUNT"]


@pytest.mark.parametrize("text,value", [
    ("my email is remy at outlook dot sg ok", "remy at outlook dot sg"),
    ("email felicia123@gmail.com thanks", "felicia123@gmail.com"),
    ("r e m y at outlook dot s g", None),
    ("f e l i c i a one two three at gmail dot com", "f e l i c i a one two three at gmail dot com"),
    ("send to tan wei ming at gmail dot com can", "tan wei ming at gmail dot com"),
    ("remy underscore lee at yahoo dot com dot sg", "remy underscore lee at yahoo dot com dot sg"),
    ("it's jlim88 at gmail.com", "jlim88 at gmail.com"),
    ("email felicia one two three at gmail dot com", "felicia one two three at gmail dot com"),
])
def test_spoken_emails_are_detected(text, value):
    got = found(text)
    assert [lab for lab, _ in got] == ["EMAIL"]
    if value:
        assert got[0][1] == value


@pytest.mark.parametrize("text", [
    "it costs twelve ninety nine only",
    "the price is $1,299 and the reference is 12345678",
    "order number 98765432 already shipped",
    "tracking number nine eight seven six five four three two one",
    "block four five six hash oh eight dash twelve",
    "take bus one nine oh lah",
    "meet at three thirty pm",
    "last four digits one two three four",
    "press one then two",
    "the total is nine eight seven six five four three two dollars",
    "queue number one two three four five six seven",
    "your member number is two oh four five seven, and locker twelve",
    "membership number nine one two three four five six seven",
    "I'm at home now",
    "see you at the mall",
    "we are at level three",
])
def test_non_pii_numbers_and_words_are_not_flagged(text):
    assert found(text) == []


def test_two_entities_in_one_breath_are_separated():
    got = found("my phone 91234567 and IC S1234567D")
    assert sorted(lab for lab, _ in got) == ["NRIC", "PHONE"]


def test_every_span_records_its_detector_and_times_of_its_words():
    t = make_transcript("call me at nine one two three four five six seven ok")
    (s,) = DET.detect(t)
    assert s.source == "patterns"
    assert s.start == t.words[3].start and s.end == t.words[10].end


@pytest.mark.parametrize("text,label", [
    ("The loan for SNG97W1U, paid finish already", "CAR_PLATE"),  # "double one" heard as W1
    ("insurance renewal of SJ09137Z, we will email", "CAR_PLATE"),  # an extra digit
    ("my car. S .L .K. 66855J is car", "CAR_PLATE"),
    ("IC is S 1 2 3 4 5 6 7 8 D", "NRIC"),
])
def test_garbled_identifiers_are_still_flagged(text, label):
    assert label in labels(text)


@pytest.mark.parametrize("text,value", [
    # a plate whose check letter was lost or not yet said: S or G and two letters, 2-4 digits
    ("the grab is S J D seven five oh, wait, S J D seven oh five K, blue Prius", "S J D seven five oh"),
    ("The grab is SJD750, wait SJD705K, blue Prius", "SJD750"),
    ("bank changed to S J R eight eight thirty, since last month", "S J R eight eight thirty"),
    ("our lorry is G B D two nine one four can", "G B D two nine one four"),
    ("ok S K V four one two seven", "S K V four one two seven"),
])
def test_a_plate_without_its_check_letter_is_still_a_plate(text, value):
    assert ("CAR_PLATE", value) in found(text)


@pytest.mark.parametrize("text", [
    "the fare is S G D fifty two only",  # a currency
    "take bus SBS one nine oh lah",  # a bus operator's
    "send S M S eighty eight to me",
    "ok S J D seven then",  # one digit: too little to tell
    "the S I A eighty eight flight",  # I and O are never plate letters
    "the S U V twenty twenty model",
])
def test_a_plate_prefix_look_alike_without_a_check_letter_is_not_flagged(text):
    assert "CAR_PLATE" not in labels(text)


def test_an_identifier_after_a_shape_in_the_same_run_is_still_flagged():
    # "E K sixty two M" has a plate's shape; the run's rest, "N C four four oh nine C", was
    # hidden behind it before
    got = found("the food book is E, K sixty two, M N C four, four oh nine C, from the other end")
    assert ("CAR_PLATE", "E, K sixty two, M") in got
    assert ("CAR_PLATE", "N C four, four oh nine C") in got


def test_words_that_sound_like_letters_do_not_make_identifiers():
    assert found("are you 2 years old see") == []


@pytest.mark.parametrize("text,value", [
    ("can send the menu to kneelingatpacific .net .sg or not", "kneelingatpacific .net .sg"),
    ("My email, our dot charmer at icloud .com. No dot in between.", "our dot charmer at icloud .com"),
    ("My email is c .towatyahoo .com. Law.", "c .towatyahoo .com"),
    ("The e -mail charwood dot min at iclod .com is bouncing", "charwood dot min at iclod .com"),
])
def test_emails_as_whisper_writes_them_are_detected(text, value):
    assert ("EMAIL", value) in found(text)


@pytest.mark.parametrize("text,value", [
    # "at" misheard before a mail provider, no cue: the word in its place is taken for it
    ("back, diva dot zah bing day day that's hotmail dot com correct",
     "diva dot zah bing day day that's hotmail dot com"),
    ("it's kelvin tan and gmail .com can", "kelvin tan and gmail .com"),
    ("is priya eight eight it yahoo dot com dot sg", "priya eight eight it yahoo dot com dot sg"),
    # the local part's words that a dot joins use none of its word budget
    ("earn a net dot xanthi ah ah at moh dot edu dot sg", "earn a net dot xanthi ah ah at moh dot edu dot sg"),
    ("lim dot wei dot ling dot tan at gmail dot com", "lim dot wei dot ling dot tan at gmail dot com"),
    # six words besides "at": a garbled local part takes more words than were spoken
    ("ya D but not got in date eight at hotmail dot com", "D but not got in date eight at hotmail dot com"),
    ("so alpha bravo charlie delta echo foxtrot golf at gmail dot com",  # "gmail" is one of the six
     "charlie delta echo foxtrot golf at gmail dot com"),
])
def test_emails_whose_at_was_misheard_or_whose_local_part_is_dotted_are_detected(text, value):
    assert ("EMAIL", value) in found(text)


@pytest.mark.parametrize("text", [
    "I use hotmail dot com for everything",
    "my hotmail dot com account got hacked",
    "the new hotmail dot com is slow",
    "is it on yahoo dot com or gmail dot com",
    "just go gmail .com and sign up",
    "the website dot com is down",
])
def test_a_provider_or_domain_without_a_local_part_is_no_email(text):
    assert found(text) == []


def test_a_plain_web_address_is_not_an_email_when_nothing_precedes_it():
    assert found("visit .com for more") == []


@pytest.mark.parametrize("text,value", [
    # "send the quotation to adrian dot fernandez at singnet dot com dot sg", its local part garbled
    ("and the quotation to eh we are not the other, and the husbanding is dot com dot sg ok",
     "the husbanding is dot com dot sg"),
    ("so face of the dot com", "face of the dot com"),  # three words at most
    ("okay, signer .com ok", "signer .com"),  # not back across a clause's end
    ("moh dot nu dot sg", "moh dot nu dot sg"),
    ("send to boss.com ok", "send to boss.com"),
])
def test_a_domain_whose_local_part_was_garbled_is_still_an_address(text, value):
    got = [s for s in DET.detect(make_transcript(text)) if s.label == "EMAIL"]
    assert [s.text for s in got] == [value] and got[0].score < 0.75  # weak: no "at", no cue


@pytest.mark.parametrize("text", [
    "go to www dot dbs dot com dot sg for the form",
    "the website is shopee dot sg can",
    "you can visit lazada.sg",
    "book on the app, redmart dot com, free delivery",
    "my hotmail dot com password",
])
def test_a_website_or_a_provider_alone_is_no_garbled_address(text):
    assert [lab for lab, _ in found(text) if lab == "EMAIL"] == []


def test_nric_whose_prefix_letter_was_not_heard_is_flagged_with_its_final_letter():
    got = found("For my IC is 8 4 1 2 3 7 5 G. Can I have")
    assert got == [("NRIC", "8 4 1 2 3 7 5 G")]


def test_a_dollar_sign_glued_to_a_phone_length_number_is_no_price():
    assert ("PHONE", "$91730588") in found("That's $91730588. Correct.")
    assert found("it costs $1290 only") == [] and found("pay $12.90 at the counter") == []


class _NoAsr:
    def transcribe(self, audio, progress=None):
        raise AssertionError("detect() reads a transcript; nothing is decoded")


class _NerLike:
    """A detector that reads any digit run as an identifier, as the trained NER sometimes does."""
    name = "ner"

    def __init__(self, label):
        self.label = label

    def detect(self, transcript):
        from deid_speech.ner.base import span_from_words
        words = [w for w in transcript.words if any(c.isdigit() for c in w.text) or w.text.rstrip(".,") in
                 ("two", "zero", "four", "one", "eight", "three", "seven", "S", "D", "L", "E", "A", "C")]
        return [span_from_words(transcript, words, self.label, 0.9, self.name)] if words else []


@pytest.mark.parametrize("text,label,kept", [
    ("your case reference number is two zero two four one one zero eight three three seven", "CREDIT_CARD", False),
    ("order number 2024 1108 337 keep it", "BANK_ACCOUNT", False),
    ("the total is 88400 dollars", "BANK_ACCOUNT", False),
    ("my account number is two zero two four one one zero eight three three", "BANK_ACCOUNT", True),
    ("reference S1234567D is my IC", "NRIC", True),  # a valid NRIC is no look-alike in any context
    ("the security code is seven eight nine", "CREDIT_CARD", True),  # a card's, not a promo code
    ("the card code is seven eight nine", "CREDIT_CARD", True),
    ("the promo code is seven eight nine", "CREDIT_CARD", False),
])
def test_every_detectors_numbers_in_look_alike_context_stay_audible(text, label, kept):
    from deid_speech.ner.patterns import lookalike
    from deid_speech.pipeline import RedactConfig, Redactor

    tr = make_transcript(text)
    (span,) = _NerLike(label).detect(tr)
    assert lookalike(span, tr) is not kept
    got = Redactor(RedactConfig(verify=False), asr=_NoAsr(), detectors=[_NerLike(label)]).detect(tr)
    assert bool(got) is kept


def test_names_emails_and_dates_are_never_look_alikes():
    from deid_speech.ner.patterns import lookalike
    from deid_speech.types import Span

    tr = make_transcript("order for Tan Boon Huat on the third of May")
    assert not lookalike(Span(tr.words[2].start, tr.words[4].end, "PERSON"), tr)


def test_a_context_word_vetoes_only_the_number_it_names():
    from deid_speech.ner.patterns import lookalike

    tr = make_transcript("please block it thanks S double eight one two three four five Z")
    (span,) = _NerLike("NRIC").detect(tr)
    assert not lookalike(span, tr)


def test_spelled_letters_are_no_look_alikes_whatever_the_context():
    """A spelled name the recogniser put after a misheard context word ("the receipt is E A
    eight C A eight" for "... is M E H T A") is still redacted."""
    from deid_speech.ner.patterns import lookalike

    tr = make_transcript("the receipt is E A eight C A eight thank you")
    span = _NerLike("CAR_PLATE").detect(tr)[0]
    assert not lookalike(span, tr)


def _words_span(tr, first: str, last: str, label: str):
    """The span from the first word ``first`` to the last word ``last`` of ``tr``."""
    from deid_speech.types import Span

    texts = [w.text.strip(",.") for w in tr.words]
    i, j = texts.index(first), len(texts) - 1 - texts[::-1].index(last)
    return Span(tr.words[i].start, tr.words[j].end, label)


@pytest.mark.parametrize("text,first,last,label,code", [
    # a code after a look-alike's context word: letters and at least as many digits
    ("the parcel tracking S P X S G oh three one eight eight seven two the driver say", "S", "two", "CAR_PLATE", True),
    ("ok quotation number Q R seven seven one nine eight I email you", "Q", "eight", "NRIC", True),
    ("policy number L seven eight three two nine one five oh the premium", "L", "oh", "NRIC", True),
    ("order number S G two three four five seven eight nine two boxes", "S", "nine", "NRIC", True),
    # more letters than digits, or too few digits: a spelled name may hide there
    ("the receipt is E A eight C A eight thank you", "E", "eight", "CAR_PLATE", False),
    ("order number S G A B two three ok", "S", "three", "CAR_PLATE", False),
    # no context word naming it, or a valid NRIC: never a look-alike
    ("my IC number is S P X S G oh three one eight eight seven two", "S", "two", "NRIC", False),
    ("tracking S1234567D is my IC", "S1234567D", "S1234567D", "NRIC", False),
])
def test_a_code_with_letters_after_a_look_alikes_context_word_is_a_look_alike(text, first, last, label, code):
    from deid_speech.ner.patterns import lookalike

    tr = make_transcript(text)
    assert lookalike(_words_span(tr, first, last, label), tr) is code


@pytest.mark.parametrize("text,first,last,pii", [
    ("for the order, my IC S nine one two three four five six A", "S", "A", True),
    ("the car plate S J D seven five oh K", "S", "K", True),
    ("the Ninja Van parcel, tracking N V S G seven one one four", "N", "four", False),  # "van" is further
    ("IC number is order number S G two three four five", "S", "five", False),  # the nearest word wins
    ("ok lah then S G two three four five", "S", "five", False),  # no cue within three words
])
def test_the_nearest_context_word_says_whether_a_pii_cue_names_a_number(text, first, last, pii):
    from deid_speech.ner.patterns import pii_cue_before

    tr = make_transcript(text)
    assert pii_cue_before(_words_span(tr, first, last, "NRIC"), tr) is pii


def test_a_cue_the_recogniser_stretched_into_the_number_still_names_it():
    # "POSB" held until the account's first digit (its end inside the span): the cue is
    # before the number all the same, so a look-alike another decoding heard ("cost") does
    # not veto it
    from deid_speech.ner.patterns import pii_cue_before
    from deid_speech.types import Span, Transcript

    tr = Transcript.from_words([("let", 2.7, 2.9), ("it,", 2.94, 3.3), ("POSB", 3.38, 4.16), ("one", 4.16, 4.26),
                                ("six", 4.26, 4.66), ("three", 4.66, 5.2), ("four", 5.22, 5.5)])
    assert pii_cue_before(Span(4.01, 5.4, "BANK_ACCOUNT"), tr)
    tr = Transcript.from_words([("the", 2.7, 2.9), ("order", 2.94, 3.3), ("number", 3.38, 4.16),
                                ("one", 4.16, 4.26), ("six", 4.26, 4.66), ("three", 4.66, 5.2)])
    assert not pii_cue_before(Span(4.01, 5.2, "BANK_ACCOUNT"), tr)


@pytest.mark.parametrize("text,first,last,label,starts", [
    # the cue and the glue after it are no part of the value
    ("eh SBC account five five three two four seven eight", "SBC", "eight", "BANK_ACCOUNT", "five"),
    ("Chartered salary account, three eight seven three four five", "account", "five", "BANK_ACCOUNT", "three"),
    ("my IC number is S nine one two three four five six A", "IC", "A", "NRIC", "S"),
    ("the plate is S J D seven five oh K", "plate", "K", "CAR_PLATE", "S"),
    # "a" is the letter A and "for" the digit 4: they stay
    ("passport a one two three four five six seven", "passport", "seven", "PASSPORT_NUM", "a"),
    ("card for five three one two two", "card", "two", "CREDIT_CARD", "for"),
    # a word that is neither cue nor glue may be the garbled start of the number: it stays
    ("account free date three four five four five four two", "account", "two", "BANK_ACCOUNT", "free"),
    # a cue after the first digit may be a misheard part of the number; no cue: unchanged
    ("nine one card three four five six seven", "nine", "seven", "PHONE", "nine"),
    ("ok then nine one two three four five six seven", "ok", "seven", "PHONE", "ok"),
    # a cue alone (nothing after it) and names or emails are left as they are
    ("my account", "my", "account", "BANK_ACCOUNT", "my"),
    ("call Tan Wei Ming", "call", "Ming", "PERSON", "call"),
])
def test_a_number_span_starts_after_the_cue_it_took_in(text, first, last, label, starts):
    from deid_speech.ner.patterns import trim_to_value

    tr = make_transcript(text)
    span = _words_span(tr, first, last, label)
    out = trim_to_value(span, tr)
    start_word = next(w for w in tr.words if w.text.strip(",.") == starts)
    assert out.start == pytest.approx(max(span.start, start_word.start))
    assert out.end == span.end and out.label == span.label
    if out.start > span.start:
        assert out.text.split()[0].strip(",.") == starts


@pytest.mark.parametrize("text,first,last,label,probs,ends", [
    # a phone, card or account ends at its last digit: sure plain words and a bare "double" go
    ("two four double seven three six together ok", "two", "together", "CREDIT_CARD", {}, "six"),
    ("nine seven four six six eight four please double confirm", "nine", "double", "BANK_ACCOUNT", {}, "four"),
    ("nine one two three four five six seven you come", "nine", "you", "PHONE", {}, "you"),  # "you" reads as U
    # a word the recogniser doubted may be a garbled digit ("heaven" for seven): it stays
    ("eight eight two one four five seven tomorrow", "eight", "tomorrow", "PHONE", {"tomorrow": 0.2}, "tomorrow"),
    # an NRIC, passport or plate keeps its tail: its check letter may have become a word
    ("S J R eight eight thirty since", "S", "since", "CAR_PLATE", {}, "since"),
    ("K eight one five time for tomorrow", "K", "tomorrow", "PASSPORT_NUM", {}, "tomorrow"),
])
def test_a_phone_card_or_account_ends_at_its_last_digit(text, first, last, label, probs, ends):
    from deid_speech.ner.patterns import trim_to_value
    from deid_speech.types import Word

    tr = make_transcript(text)
    tr = type(tr)(tr.text, tuple(Word(w.text, w.start, w.end, w.char_start, w.char_end, probs.get(w.text, 0.9))
                                 for w in tr.words))
    span = _words_span(tr, first, last, label)
    out = trim_to_value(span, tr)
    end_word = [w for w in tr.words if w.text == ends][-1]
    assert out.end == pytest.approx(min(span.end, end_word.end)) and out.start == span.start
    if out.end < span.end:
        assert out.text.split()[-1] == ends


def test_the_words_of_an_address_after_digits_stay_in_the_span():
    """"two K dot seven seven oh seven dot com dot sg": the passes read an email as an account;
    its "dot com dot sg" says the value goes on, so the span keeps it (sure plain words after it
    still go)."""
    from deid_speech.ner.patterns import trim_to_value

    tr = make_transcript("two K dot seven seven oh seven dot com dot sg thanks")
    span = _words_span(tr, "two", "thanks", "BANK_ACCOUNT")
    out = trim_to_value(span, tr)
    assert out.end == pytest.approx([w for w in tr.words if w.text == "sg"][0].end)


@pytest.mark.parametrize("text,label,ends", [
    # a value whose check letter or digit is right is complete: the words after it are cut off
    ("S nine five five seven two two five A, the F one", "NRIC", "A,"),
    ("four five three two one two three four five six seven eight nine oh one four, the one", "CREDIT_CARD", "four,"),
    ("three seven one four four nine six three five three nine eight four three one, I", "CREDIT_CARD", "one,"),
    ("S K B ninety two fifty U the F", "CAR_PLATE", "U"),
    # a wrong check letter or digit says the value may go on: the span keeps its tail
    ("S nine five five seven two two five B, the F one", "NRIC", "one"),
    ("four five three two one two three four five six seven eight nine oh one two, the one", "CREDIT_CARD", "one"),
    # three or more symbols after it: a correction or a second number, kept
    ("S nine five five seven two two five A, sorry, S nine five five seven two two six", "NRIC", "six"),
    ("S K B ninety two fifty U, or ninety two fifty one", "CAR_PLATE", "one"),
])
def test_a_checked_value_ends_where_its_check_symbol_is_right(text, label, ends):
    from deid_speech.ner.patterns import trim_to_value

    tr = make_transcript(text)
    span = _words_span(tr, tr.words[0].text.strip(",."), tr.words[-1].text.strip(",."), label)
    out = trim_to_value(span, tr)
    assert out.end == pytest.approx([w for w in tr.words if w.text == ends][-1].end) and out.start == span.start
