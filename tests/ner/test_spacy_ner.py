"""PERSON/DATE detection with the real spaCy pipeline (en_core_web_sm from PyPI)."""
import pytest

from factories import make_transcript

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def det():
    from deid_speech.ner.spacy_ner import SpacyDetector

    return SpacyDetector()


def found(det, text):
    return [(s.label, s.text) for s in det.detect(make_transcript(text))]


@pytest.mark.parametrize("text,name", [
    ("Hello, my name is Tan Wei Ming, calling about my account.", "Tan Wei Ming"),
    ("Can I speak to Muhammad Faizal bin Rahman please?", "Muhammad Faizal bin Rahman"),
    ("This is Priya d/o Subramaniam speaking.", "Priya d/o Subramaniam"),
    ("ok Mr Goh, your appointment is confirmed", "Mr Goh"),
    ("hi I'm Jonathan De Souza from the clinic", "Jonathan De Souza"),
    ("my name is siti nurhaliza", "siti nurhaliza"),
])
def test_names_are_found_including_patronymics_and_cues(det, text, name):
    got = found(det, text)
    persons = [t for lab, t in got if lab == "PERSON"]
    assert any(name in p for p in persons), got


@pytest.mark.parametrize("text,date", [
    ("My date of birth is twelfth of March nineteen eighty seven.", "twelfth of March nineteen eighty seven"),
    ("born on 3 March 1987 lah", "3 March 1987"),
    ("my birthday is 12/03/1987", "12/03/1987"),
    ("the appointment is on March the fourth", "March the fourth"),
    ("DOB is the twenty third of December two thousand and one", "twenty third of December two thousand and one"),
    ("birthday is twenty nine of February you know", "twenty nine of February"),  # a cardinal day, said
    ("born on the thirty first of May", "thirty first of May"),
])
def test_calendar_dates_are_found(det, text, date):
    dates = [t for lab, t in found(det, text) if lab == "DATE"]
    assert any(date in d for d in dates), dates


@pytest.mark.parametrize("text,date", [
    ("um, want you back on Tuesday, fourteenth October, four blood test", "Tuesday, fourteenth October"),
    ("see you Friday the third of May at the clinic", "Friday the third of May"),
    ("so Saturday, 14th October can", "Saturday, 14th October"),
])
def test_a_weekday_said_before_a_date_is_part_of_it(det, text, date):
    # the date grammar's own span holds the weekday, so that a decoding that heard the date
    # alone does not refute the weekday's part of another's span
    grammar = [s.text for s in det.detect(make_transcript(text)) if s.source == "date-grammar"]
    assert grammar == [date]


def test_a_weekday_alone_is_no_date(det):
    assert [x for x in found(det, "ok see you on Sunday then, Monday also can") if x[0] == "DATE"] == []


@pytest.mark.parametrize("text", [
    "I'll call you back tomorrow, next week can?",
    "ok lah see you later",
    "the office opens at nine thirty",
    # a month alone, a count of years, a sum: no calendar day
    "my salary goes to May bank every month",
    "the rate is two percent for the first three years, after that higher",
    "the reno is another two thousand one hundred, so the total",
    "can be purchased three days two thousand or fifteen dollars",  # fast speech, garbled: a sum
    "the kids got the June camp at the community centre",
    # no month has a thirty-second day ("... you did her kitchen last year", garbled)
    "hi, Calvin, I got your number from N T oh, I'm in Eugene thirty second last year, I just",
])
def test_relative_times_are_not_dates(det, text):
    assert [x for x in found(det, text) if x[0] == "DATE"] == []


@pytest.mark.parametrize("text,name", [
    ("Every month, the account holder is low Huey link.", "low Huey link"),
    ("Travel Insurance for Limay Lane, Passport, K9868282Q, Departing", "Limay Lane"),
    ("can I confirm the appointment for Daren tow Rui N?", "Daren"),
    ("my brother Ahmad Rizal will collect", "Ahmad Rizal"),
    # after a title a name may start with single letters; a capitalised word after "patient is"
    ("auntie S D read the card for her", "auntie S D"),  # "Auntie Lucy" as the recogniser wrote it
    ("ok Mr K Tan, your card is ready", "Mr K Tan"),
    ("Auntie Mei Ling say her POSB book is lost", "Mei Ling"),  # the verb ends the name
    ("the patient is QF, um, QF A", "QF"),
    ("patient's name is Wong Ah Kow", "Wong Ah Kow"),
])
def test_names_mangled_by_asr_are_found_by_cues_and_proper_noun_runs(det, text, name):
    persons = [t for lab, t in found(det, text) if lab == "PERSON"]
    assert any(name in p for p in persons), persons


@pytest.mark.parametrize("text,name", [
    # real speech names people with no cue around them (the real-speech set's sentences)
    ("He turned sharply and faced Gregson across the table.", "Gregson"),
    ("Damon fried the omelet.", "Damon"),
    ("Later that evening Sheila went back to the office.", "Sheila"),
    ("We waited outside until Harrison came down.", "Harrison"),
    ("the forms were signed by Gwendolyn yesterday", "Gwendolyn"),
])
def test_a_listed_name_is_found_without_a_cue(det, text, name):
    persons = [t for lab, t in found(det, text) if lab == "PERSON"]
    assert name in persons, persons


@pytest.mark.parametrize("text", [
    "My daughter manage everything, her email is with her",
    "you're IC number please",
    "Reading from the card, expiry zero five",
    "For my IC is 8 4 1 2 3 7 5 G.",
    "Travel Insurance for the Passport Office",
    # a pronoun after a title, a state after "patient is"
    "uncle I tell you the price is ok",
    "auntie a bit late today",
    # a title said as a form of address, with a verb after it
    "Auntie say her POSB book is lost",
    "the doctor say come back after two weeks",
    "the bus uncle let them board anot",
    "the patient is stable now",
    "the patient is waiting outside",
    # "call me" asking for a call, not giving a name
    "Will you call me back later?",
    "ok can call me again tomorrow",
    # after "I'm" / "this is", a word the recogniser was sure of that no name is (real speech)
    "this is the acoustic corpus, I'm talking pretty fast here",
    "and I'm saying a bunch of different words",
    "I think this is probably good, right",
    "and I'm also saying it",
    # listed names that are common words where they stand
    "Will you hold the line for a moment?",
    "May I have the reference number?",
    "Young people pay less for the plan.",
    "the Bank will send the letter",
    "Black or white, both colours are available.",
    "Grant the access first, then log in again.",
    # a farewell, and a listed name that an organisation word follows (the example call, stock tiny.en)
    "Okay. Thanks. Bye. You're welcome. Bye.",
    "Good afternoon, Merlin Bank. How can I help you?",
    # fillers that spaCy's small model tags as a PERSON, and the word "name" after a name cue
    "Correct? Ya ya, correct.",
    "ok ya ya correct",
    "Patient name please?",
    "patient name",
    # an identifier's cue word, "I'm" and a form of address after a name cue or a title
    "patient NRIC, she said",
    "ok uncle, sir",
    "receipt just send I'm",
])
def test_common_words_are_not_taken_for_names(det, text):
    assert [t for lab, t in found(det, text) if lab == "PERSON"] == []


def test_fillers_around_a_name_are_trimmed_and_the_name_kept(det):
    got = found(det, "ok ya Siti Aminah lah")
    assert ("PERSON", "Siti Aminah") in got and all("ya" not in t.split() for lab, t in got if lab == "PERSON")


@pytest.mark.parametrize("text,name", [
    ("patient name Rajesh", "Rajesh"),  # the name follows the word "name"
    ("my name is Fin.", "Fin"),  # words that are names as well as identifier or filler words
    ("call me Fin", "Fin"),
    ("the patient Im Ha Na", "Im Ha Na"),
    ("ok Mr K I Tan here", "Mr K I Tan"),
    ("Will Tan called yesterday", "Will Tan"),
    ("Please ask An Nguyen", "An Nguyen"),
    ("I spoke with Ah Beng.", "Ah Beng"),
])
def test_names_that_are_also_common_or_cue_words_are_still_found_whole(det, text, name):
    assert ("PERSON", name) in found(det, text)


def test_a_doubted_word_after_a_cue_may_still_be_a_garbled_name(det):
    from deid_speech.types import Transcript

    # the recogniser's "I'm having" for "under Darren", at probability 0.44
    words = "Correct. I'm having my payroll.".split()
    probs = [0.9, 0.9, 0.44, 0.6, 0.5]
    sure = Transcript.from_words([(w, i * 0.5, i * 0.5 + 0.4) for i, w in enumerate(words)])
    doubted = Transcript.from_words([(w, i * 0.5, i * 0.5 + 0.4, p) for i, (w, p) in enumerate(zip(words, probs))])
    persons = lambda tr: [s.text for s in det.detect(tr) if s.label == "PERSON"]  # noqa: E731
    assert persons(sure) == [] and any("having" in p for p in persons(doubted)), (persons(sure), persons(doubted))


@pytest.mark.parametrize("text", ["For my IC is 8 4 1 2 3 7 5 G.", "the code is 4 5 6 7"])
def test_bare_digit_strings_are_not_dates(det, text):
    assert [t for lab, t in found(det, text) if lab == "DATE"] == []


@pytest.mark.parametrize("text,name", [
    ("my name is to june way, calling about my card", "to june way"),
    ("Hold her name, Desmond Westerhouse.", "Desmond Westerhouse"),
    ("the surname is T -H -E -V -A -R. First name is", "T -H -E -V -A -R"),
    ("everybody called him Kelvin.", "Kelvin"),
    # Singlish drops the "is": seen missed on the benchmark's dev part
    ("the surname is Thevar, first name Suresh", "Suresh"),
    ("will everybody call him Selvin, his email kelv at icloud", "Selvin"),
    ("one three nine two, name on card Wendling per error", "Wendling per"),
    ("ok my name Nurhidayah, so the email", "Nurhidayah"),
    ("your name please? Cheryl Ong.", "Cheryl"),
    ("may I have your full name please? Rajendran Pillai.", "Rajendran"),
    ("and the first name, please? Wei Ling.", "Wei Ling"),
    ("Parkview management office Selvaram, speaking, hi", "Selvaram"),
])
def test_a_name_slot_after_an_introduction_is_redacted_whatever_the_spelling(det, text, name):
    assert any(lab == "PERSON" and name in t for lab, t in found(det, text))


def test_a_patronymics_joiner_is_no_word_of_a_name_slots_three(det):
    # "Name please? Suresh son of Krishnan", garbled: three words of a name and a joiner between
    persons = [s.text for s in det.detect(make_transcript("Name please? slash son of christian, ok thanks"))
               if s.label == "PERSON" and "name-slot" in s.source]
    assert "slash son of christian" in persons, persons
    # without a joiner the slot still ends after three words
    persons = [s.text for s in det.detect(make_transcript("Name please? slash sun off christian, ok thanks"))
               if s.label == "PERSON" and "name-slot" in s.source]
    assert "slash sun off" in persons, persons


def test_a_name_before_here_in_an_introduction_is_redacted_and_a_place_is_not(det):
    from deid_speech.types import Transcript

    assert any(lab == "PERSON" and "Gabriel Pereira" in t
               for lab, t in found(det, "Hi, FitZone Tampines, Gabriel Pereira here, how can I help?"))
    # the recogniser's garbled name: doubted words before "here" ("Kelvin Goh" as "be more")
    # (later in the call than its opening, where every word of the clause would be taken)
    garbled = Transcript.from_words([("renovation,", 10, 10.8), ("can", 10.9, 11.0), ("be", 11.0, 11.2, .31),
                                     ("more", 11.2, 11.5, .08), ("here.", 11.5, 11.8), ("Hi.", 12.0, 12.2)])
    assert [s.text for s in det.detect(garbled) if s.label == "PERSON"] == ["be more"]
    for text in ("Okay, come here.", "Wait, over here.", "Ya, I'm here.", "Sorry, not here.", "Okay, we are here.",
                 "Eh, sit here lah.", "The parcel, put it here.", "hello, I moved here, I'm at the bay",
                 "I live near here.", "Ok, can park here?"):
        assert not any(lab == "PERSON" for lab, _ in found(det, text)), text


@pytest.mark.parametrize("text,name", [
    ("Kallang Auto Care, morning, when can I, here.", "when can I"),  # "Wen Kai here", heard as sure words
    ("Hello, single plumbing, palpation, here.", "palpation"),  # a comma before "here"
    ("Hello, Hup Seng, tell mo, there?", "tell mo"),  # "here" heard as "there"
    ("FitZone, morning, a bill pray, hear.", "a bill pray"),  # ... or as "hear"
    ("Good morning, Orchid Bay Hotel, hurry up person, speaking.", "hurry up person"),  # greetings are left
    ("Hello, Hello, Mei Ling here, how can I help?", "Mei Ling"),
])
def test_a_clause_before_here_at_a_calls_opening_is_a_name_whatever_its_words(det, text, name):
    persons = [s.text for s in det.detect(make_transcript(text)) if s.label == "PERSON" and s.source == "opening"]
    assert persons == [name], persons
    # the same words later in the call are left to the rules that need a capital or a doubt
    later = make_transcript(text, t0=20.0)
    assert not any(s.source == "opening" for s in det.detect(later))


@pytest.mark.parametrize("text", [
    "Okay, come here.", "Ya, I'm here.", "Sorry, not here.", "The parcel, put it here.", "Hello, anybody there?",
    "Is your mother there?", "Is it there?", "Hello, can hear?", "Left it there.", "How about there?",
    "Really? Not there?", "Okay, we are here.", "Hello? Hello, you there?", "I stay there.",
    "Hello, I'm speaking.", "Good morning, hello, speaking.", "Hello, I can hear.", "Sorry, I cannot hear.",
])
def test_a_greeting_a_question_or_a_place_at_a_calls_opening_is_no_name(det, text):
    assert not any(lab == "PERSON" for lab, _ in found(det, text)), found(det, text)


@pytest.mark.parametrize("text", ["Sure, may I have your full name please? My name is",
                                  "first name please, and then the surname", "your full name please?"])
def test_please_after_a_name_question_is_no_name(det, text):
    assert not any(lab == "PERSON" and "please" in t.lower() for lab, t in found(det, text))


def test_an_introduction_answering_a_name_question_is_not_taken_for_the_name(det):
    persons = [t for lab, t in found(det, "may I have your full name please? My name is Tan Boon Huat.")
               if lab == "PERSON"]
    assert persons and not any("name" in t.lower() or t.lower().startswith("my") for t in persons), persons
    assert any("Tan Boon" in t for t in persons)


def test_a_doubted_word_in_a_name_slot_is_kept_and_a_plain_non_name_ends_it():
    from deid_speech.ner.spacy_ner import name_slot
    from deid_speech.types import Transcript

    tr = Transcript.from_words([("my", 0, .2), ("name", .2, .4), ("is", .4, .5), ("the", .5, .6, .2),
                                ("Boo", .6, .8, .3), ("Nuat,", .8, 1.0, .4), ("okay", 1.0, 1.2)])
    assert [w.text for w in name_slot(tr, tr.text.index("the"))] == ["the", "Boo", "Nuat,"]
    plain = Transcript.from_words([("name", 0, .2), ("is", .2, .3), ("on", .3, .5), ("the", .5, .6), ("list", .6, .9)])
    assert name_slot(plain, plain.text.index("on")) == []


def test_a_doubted_article_and_a_doubted_word_after_an_introduction_are_a_garbled_name(det):
    from deid_speech.types import Transcript

    def persons(items):
        return [s.text for s in det.detect(Transcript.from_words(items)) if s.label == "PERSON"]

    # "I'm Adrian Fernandez" on a fast telephone line (dev-fast)
    garbled = [("not", 0, .3), ("can.", .3, .7, .45), ("I'm", .9, 1.0, .81), ("a", 1.0, 1.1, .41),
               ("realtor", 1.1, 1.5, .17), ("madman.", 1.5, 2.1, .67), ("I'm", 2.2, 2.5, .72)]
    assert any(t.startswith("a realtor madman") for t in persons(garbled))
    # a description heard for sure is no name: a sure article, or a sure word after a doubted one
    for items in ([("I'm", 0, .2), ("a", .2, .3, .9), ("teacher", .3, .7, .3), ("lah.", .7, .9)],
                  [("this", 0, .2), ("is", .2, .3), ("the", .3, .4, .3), ("clinic", .4, .8, .95),
                   ("calling.", .8, 1.2)],
                  [("I", 0, .1), ("am", .1, .3), ("the", .3, .4, .2), ("ok", .6, .8)]):
        assert not any(t.lower().startswith(("a ", "the ")) for t in persons(items)), items


def test_a_number_after_call_me_is_no_name(det):
    assert not any(lab == "PERSON" for lab, _ in found(det, "Can call me at 9173 4482. Anytime can lah."))


@pytest.mark.parametrize("text,spelled", [
    ("my name Nur Hidayah, annual R H I D A Y A H, so the email", "R H I D A Y A H"),
    ("the cert name is February T H E V A R, first name", "T H E V A R"),
    ("shall ah, ah, is O N G? thank you", "O N G"),
])
def test_three_or_more_spelled_letters_are_redacted_whatever_comes_before(det, text, spelled):
    assert any(lab == "PERSON" and spelled in t for lab, t in found(det, text))


@pytest.mark.parametrize("text", ["vehicle S L A eight five two K was towed", "I said A B ok",
                                  "plate is 8 S L A ah", "who is speaking?"])
def test_letters_next_to_a_number_or_fewer_than_three_are_not_a_spelled_name(det, text):
    from deid_speech.ner.spacy_ner import spelled_runs

    assert spelled_runs(make_transcript(text).words) == []


@pytest.mark.parametrize("acronym,other,run", [
    ("my account with P -O -S -B lah", "my account with P -O -K -B lah", "P -O -K -B"),
    ("ninety cents, G S T included", "ninety cents, G S K included", "G S K"),
    ("the H S B C card", "the H S B K card", "H S B K"),
    ("FIN is F I N, I tell you", "FIN is F I K, I tell you", "F I K,"),  # "I" after a comma: the pronoun
])
def test_letters_that_spell_a_common_acronym_are_not_a_spelled_name(acronym, other, run):
    from deid_speech.ner.spacy_ner import spelled_runs

    assert spelled_runs(make_transcript(acronym).words) == []
    assert [" ".join(w.text for w in r) for r in spelled_runs(make_transcript(other).words)] == [run]


@pytest.mark.parametrize("text", [
    "four Queen of clubs, then the Jack of hearts",   # playing cards stay audible
    "the King of spades and the Queen of diamonds",
])
def test_playing_cards_are_not_names(det, text):
    assert [t for lab, t in found(det, text) if lab == "PERSON"] == [], found(det, text)


@pytest.mark.parametrize("text,name", [
    ("Jack called me yesterday about the Queen of clubs", "Jack"),
    ("Kevin of Club Med called you yesterday", "Kevin"),        # a name, not a rank, before "of" and a suit
])
def test_a_name_that_is_no_card_is_still_found(det, text, name):
    assert ("PERSON", name) in found(det, text), found(det, text)


@pytest.mark.parametrize("text,name", [("ok Mr Lor, your parcel is here", "Mr Lor"),
                                       ("this is Sia Kah Hui speaking", "Sia Kah Hui"),
                                       ("Madam Liao, your IC please", "Madam Liao")])
def test_particles_that_are_surnames_still_start_names(det, text, name):
    persons = [t for lab, t in found(det, text) if lab == "PERSON"]
    assert any(name in p for p in persons), found(det, text)


def test_a_name_is_cut_before_a_number_string_and_dropped_when_it_starts_with_one():
    from deid_speech.ner.spacy_ner import name_part
    from deid_speech.types import Span

    t = make_transcript("then Intercom Code 1 -2 -3 -4 ok")
    whole = Span(t.words[1].start, t.words[6].end, "PERSON", 0.8, "ner")
    cut = name_part(whole, t)
    assert (cut.start, cut.end, cut.text) == (t.words[1].start, t.words[2].end, "Intercom Code")
    assert name_part(Span(t.words[3].start, t.words[6].end, "PERSON", 0.8, "ner"), t) is None
    same = Span(t.words[1].start, t.words[2].end, "PERSON", 0.8, "ner")
    assert name_part(same, t) is same
    code = Span(t.words[3].start, t.words[6].end, "NRIC", 0.8, "ner")
    assert name_part(code, t) is code  # other labels as they are
    garbled = make_transcript("is Nerf 100 into snail")  # "Nur Farhana binte Ismail"
    one = Span(garbled.words[1].start, garbled.words[2].end, "PERSON", 0.8, "ner")
    assert name_part(one, garbled) is one  # one numeral word may be the garbled name


def test_a_rare_word_is_a_name_and_a_dictionary_word_is_not(det):
    """Whisper writes a name it does not know as a word its vocabulary spells in three or more
    pieces; a rare English word, a short word, a month or an acronym is no such name."""
    from deid_speech.ner.spacy_ner import _pieces, rare_words

    garbles = ["lankrishnan", "supermanium", "biometricion", "chellum"]
    text = "drive by a lankrishnan, want to see the supermanium and biometricion chellum ok"
    assert [w.text.strip(",") for w in rare_words(make_transcript(text).words)] == garbles
    assert all(_pieces()(w) >= 3 for w in garbles)
    plain = ("a superlative omelet in february at the ocbc worksheets renovation appointment, "
             "alamak so paiseh, go makan at the kopitiam")
    assert rare_words(make_transcript(plain).words) == []
    assert ("PERSON", "lankrishnan") in found(det, "drive by a lankrishnan, want to see you")
    # the recogniser's punctuation around a word, as every detector strips it (spoken.clean_token)
    assert [w.text for w in rare_words(make_transcript("(lankrishnan) said: supermanium; ok").words)] == \
        ["(lankrishnan)", "supermanium;"]


def test_an_everyday_word_behind_a_prefix_is_no_rare_word_name():
    """"Indian passport" heard as "Unpassport", "the recontract" as "recontracts": a prefix
    before a word Whisper spells in one piece; a name's garble behind the same letters is
    still one ("reginaldo", "unnikrishnan")."""
    from deid_speech.ner.spacy_ner import rare_words

    assert rare_words(make_transcript("my Unpassport expired, the recontracts ok").words) == []
    kept = [w.text for w in rare_words(make_transcript("uncle reginaldo and unnikrishnan came").words)]
    assert kept == ["reginaldo", "unnikrishnan"]


def test_doubted_words_after_a_title_are_a_name_whatever_they_spell(det):
    """The recogniser heard "Mr Ong Teck Seng hor" as "mister phone text saying hor": a title, then words the
    recogniser doubted ("phone" is a cue word, no name to the plain title rule). After a title
    with a comma ("ok uncle, sir"), an all-capital "title" ("at MS. sure", for "SMS") or a
    doubted function word ("uncle at ..."), or with words it was sure of, nothing is taken."""
    from deid_speech.types import Transcript

    def heard(words):
        t = 0.0
        items = []
        for w, p in words:
            items.append((w, t, t + 0.3, p))
            t += 0.35
        return [(s.label, s.text, s.source) for s in det.detect(Transcript.from_words(items))]

    assert ("PERSON", "phone text saying", "title-doubt") in heard(
        [("mister", .9), ("phone", .36), ("text", .42), ("saying", .33), ("hor", .71), ("your", .9), ("card", .9)])
    assert not any(s == "title-doubt" for *_, s in heard(
        [("mister", .9), ("phone", .9), ("text", .9), ("saying", .9), ("hor", .7)]))
    for words in ([("ok", .9), ("uncle,", .9), ("sir", .4), ("the", .9), ("transfer", .9)],
                  [("check", .9), ("at", .9), ("MS.", .8), ("sure,", .3), ("your", .9), ("name", .9)],
                  [("the", .9), ("boss", .9), ("uncle", .9), ("at", .3), ("Ambo", .4), ("dandas", .2)],
                  [("see", .9), ("the", .9), ("doctor", .9), ("tomorrow", .9), ("morning", .9)]):
        assert not any(s == "title-doubt" for *_, s in heard(words)), words


@pytest.mark.parametrize("text,run", [
    ("my surname is Tan, T for tango, A for alpha, N for November.", "T for tango, A for alpha, N for November."),
    ("the name is Lim, L for London, I for India, M for Mary, okay", "L for London, I for India, M for Mary,"),
    ("the email is J for John, K O H at gmail", "J for John, K O H"),
    ("reference sierra kilo bravo, thanks", "sierra kilo bravo,"),
    ("my name is Wong, double you O N G", "double you O N G"),
    # as the recogniser wrote "T for tango, A for alpha, N for November" in two voices
    ("My surname is Stan spelled T4 tango the for alpha and for November", "T4 tango the for alpha and for November"),
    ("my surname is Tan, spelled T four tango the four alpha, end for November",
     "T four tango the four alpha, end for November"),
])
def test_letters_spelled_with_words_are_a_spelled_run(text, run):
    from deid_speech.ner.spacy_ner import spelled_runs

    assert [" ".join(w.text for w in r) for r in spelled_runs(make_transcript(text).words)] == [run]


@pytest.mark.parametrize("text", [
    "sorry ah the last letter is A or H? A for apple",  # one letter spelled: no run
    "we played golf at the hotel with Mike",  # spelling-alphabet words apart are words
    "S for small, M for medium, L for large",  # sizes
    "we went for golf and for tango lessons",  # "for" and a spelling-alphabet word, no letter
    "call nine one two for Mike",
])
def test_words_that_spell_fewer_than_three_letters_are_no_spelled_run(text):
    from deid_speech.ner.spacy_ner import spelled_runs

    assert spelled_runs(make_transcript(text).words) == []
