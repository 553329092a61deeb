"""Forced alignment with pocketsphinx (BSD; the CMU en-us model ships in the PyPI wheel).

The text is split into words; each word is looked up in the CMU dictionary after
normalisation. Words the dictionary lacks get a pronunciation anyway, so the audio of
a Singlish name or an acronym is not swallowed by its neighbours:

* digits are read out (``S1234567D`` -> ``s one two ... d``) as several dictionary words
  that together time the one original word;
* short all-capital words (``NRIC``, ``DBS``) are spelled letter by letter;
* anything else (``syafiq``, ``lah``) gets a rough letter-to-phone pronunciation
  (:func:`guess_phones`) added to the decoder's dictionary.

pocketsphinx reports 10 ms frames; the times of a word are the union of its parts.
"""
from __future__ import annotations

import re

import numpy as np

from deid_speech.align.base import SAMPLE_RATE, norm_word, register
from deid_speech.errors import DeidError
from deid_speech.spoken import verbalize
from deid_speech.types import Transcript

# letter -> CMU phones, digraphs first; vowels get their commonest short reading
_DIGRAPHS = {"sh": "SH", "ch": "CH", "th": "TH", "ng": "NG", "ph": "F", "ck": "K", "ee": "IY",
             "oo": "UW", "ai": "EY", "ay": "EY", "ei": "EY", "ea": "IY", "ou": "AW", "ow": "OW",
             "au": "AO", "aw": "AO", "oi": "OY", "oy": "OY", "qu": "K W", "kh": "K", "gh": "G",
             "sy": "SH", "ny": "N Y", "ie": "IY", "ue": "UW"}
_LETTERS = {"a": "AA", "b": "B", "c": "K", "d": "D", "e": "EH", "f": "F", "g": "G", "h": "HH",
            "i": "IH", "j": "JH", "k": "K", "l": "L", "m": "M", "n": "N", "o": "OW", "p": "P",
            "q": "K", "r": "R", "s": "S", "t": "T", "u": "UH", "v": "V", "w": "W", "x": "K S",
            "y": "Y", "z": "Z"}
_ALNUM = re.compile(r"[a-z0-9']+")
_BEAMS = ({}, {"beam": 1e-100, "wbeam": 1e-80, "pbeam": 1e-100})


def guess_phones(word: str) -> str:
    """A rough CMU phone string for an out-of-dictionary word (alignment needs only its length)."""
    w, out, i = re.sub(r"[^a-z]", "", word.lower()), [], 0
    while i < len(w):
        if w[i:i + 2] in _DIGRAPHS:
            out.append(_DIGRAPHS[w[i:i + 2]])
            i += 2
            continue
        if not (out and i and w[i] == w[i - 1]):  # doubled consonant: one phone
            out.append(_LETTERS[w[i]])
        i += 1
    return " ".join(out) or "AH"


class SphinxAligner:
    """Forced alignment of known text; ``align(audio, text)`` -> Transcript with word times."""

    name = "pocketsphinx"

    def __init__(self) -> None:
        try:
            from pocketsphinx import Decoder
        except ImportError:
            raise DeidError("pocketsphinx is not installed (pip install pocketsphinx)") from None
        from deid_speech import models

        models.path("sphinx-en-us")  # the acoustic model, LM and dictionary: checked before first use
        # batch CMN: the cepstral mean of each utterance itself, so an alignment never
        # depends on what the decoder heard before (live CMN adapts across calls)
        self._decoders = [Decoder(samprate=SAMPLE_RATE, loglevel="FATAL", cmn="batch", **beams)
                          for beams in _BEAMS]
        self._decoder = self._decoders[0]  # dictionary lookups
        self._added: set[str] = set()

    def _known(self, w: str) -> bool:
        return w in self._added or self._decoder.lookup_word(w) is not None

    def _add(self, w: str, phones: str) -> None:
        for dec in self._decoders:
            dec.add_word(w, phones, True)
        self._added.add(w)

    def _parts(self, word: str) -> list[str]:
        """Dictionary words that speak ``word`` (adding guessed ones to the dictionary)."""
        core = word.strip(".,!?;:\"()[]")
        if any(ch.isdigit() for ch in core):
            return [p for t in verbalize(re.sub(r"[^A-Za-z0-9]", "", core)).split()
                    for p in self._parts(t)]
        w = norm_word(core).replace("_", "")
        if not w:
            return []
        if self._known(w):
            return [w]
        if core.isupper() and 1 < len(core) <= 5 and core.isalpha():
            return [c for c in w]
        pieces = _ALNUM.findall(w)
        if len(pieces) > 1:
            return [p for piece in pieces for p in self._parts(piece)]
        self._add(w, guess_phones(w))
        return [w]

    def align(self, audio: np.ndarray, text: str) -> Transcript:
        words = text.split()
        parts = [self._parts(w) for w in words]
        flat = [p for ps in parts for p in ps]
        if not flat:
            return Transcript.from_words([])
        pcm = (np.clip(np.asarray(audio, dtype=np.float32).reshape(-1), -1, 1) * 32767).astype(np.int16)
        segs: list[tuple[str, float, float]] = []
        for dec in self._decoders:  # default beams first, then wider ones
            segs = self._run(dec, pcm, flat)
            if [w for w, _, _ in segs] == flat:
                break
        else:
            raise DeidError("pocketsphinx could not align the text to the audio "
                            f"({len(segs)} of {len(flat)} words placed)")
        out, k = [], 0
        for w, ps in zip(words, parts):
            if not ps:  # a bare punctuation token: zero length at the previous word's end
                t = out[-1][2] if out else 0.0
                out.append((w, t, t))
                continue
            mine = segs[k:k + len(ps)]
            k += len(ps)
            out.append((w, mine[0][1], mine[-1][2]))
        return Transcript.from_words(out)

    def _run(self, dec, pcm: np.ndarray, flat: list[str]) -> list[tuple[str, float, float]]:
        dec.reinit_feat()  # feature state carries over from the last utterance otherwise
        dec.set_align_text(" ".join(flat))
        dec.start_utt()
        dec.process_raw(pcm.tobytes(), full_utt=True)
        dec.end_utt()
        return [(re.sub(r"\(\d+\)$", "", s.word), s.start_frame / 100.0, (s.end_frame + 1) / 100.0)
                for s in dec.seg() or []
                if s.word not in ("<s>", "</s>", "<sil>") and not s.word.startswith("[")]


register("pocketsphinx")(SphinxAligner)
