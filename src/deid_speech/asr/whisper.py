"""Whisper transcription with word timestamps, in windows, decoded in batches.

Backends: faster-whisper (CTranslate2 folders; int8 on CPU) and openai-whisper
(``.pt`` checkpoints). A call of any length is planned into windows of at most
``window_s`` seconds (:func:`plan_windows`): the Silero voice activity detector
(:mod:`deid_speech.asr.vad`) finds the speech, windows are cut in its pauses, and a pause
of ``skip_silence_s`` or more that no window needs is not decoded at all. Speech that runs
longer than a window without a pause is cut at its quietest point and decoded with
``overlap_s`` of context on both sides; each window keeps only the words whose midpoint
falls inside its own stretch, so no word is lost or duplicated at a boundary (Whisper's
own seeking across 30 s windows was seen to skip 20 s of speech on the shipped example).

The windows are independent, so they are decoded ``batch_size`` at a time in one
CTranslate2 call (faster-whisper's batched pipeline: one pass per window, no temperature
fallback), greedily by default. Windows whose decoding loops are decoded again together
with no 3-gram written twice, and one that still loops on its own with beam search and the
words before it as the prompt; speech that no word covers afterwards is decoded again on
its own the same way (:func:`uncovered_speech`), and so is speech under a word that Whisper's
word timing stretched far past what a word can last (:func:`unstretched`). A decoding stops at
a last word that ends less than ``TAIL_S`` before its audio does: faster-whisper would seek on
and decode that sliver as a 30 s window of its own (an encoder pass and a decoding each: a fifth
of tiny.en's time on the 108 s call), and no such sliver on the dev part gave a word.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

import numpy as np

from deid_speech import heap, timing
from deid_speech.asr.models import ResolvedModel, resolve_model
from deid_speech.asr.vad import VadOptions
from deid_speech.audio import MODEL_RATE, frame_rms
from deid_speech.errors import DeidError
from deid_speech.types import Recognition, Span, Transcript


@dataclass(frozen=True)
class AsrOptions:
    model: str = "tiny.en"
    batched: bool = False  # decode the windows in batches, independently (fast; see docs/results.md §0f:
    # on the held-out test calls it leaked more than one window at a time with the prompt)
    beam_size: int = 5
    fallback: bool = True  # Whisper's temperature fallback on an unsure window (without: dev leak 23.7 % not 20.0 %)
    max_temperature: float = 0.4  # the fallback samples at 0.2, 0.4, ... up to this temperature (with
    # the second opinion on, 0.6-1.0 bought no leak over four dev draws and cost the 110 s call 3.4 s, §0l)
    # the fallback's samples per temperature: 1 since the second opinion is on by default (5,
    # faster-whisper's default, bought no leak then and cost the 110 s call twice the time; §0j)
    best_of: int = 1
    batch_size: int = 8  # batched: windows decoded together
    timestamps: bool = True  # batched: write timestamp tokens too (dev calls, greedy: leak 47 % without, 39 % with)
    logprob_threshold: float | None = -1.0  # the fallback also redoes a window whose mean token
    # log-probability is lower (Whisper's default -1.0); None: only a window that loops
    seek: bool = False  # one pass over the speech stretches, Whisper seeking from segment to segment
    # (faster-whisper's own long-form loop, no prompt) instead of windows cut at pauses (CTranslate2
    # models, not batched; an openai-whisper checkpoint decodes windows)
    seek_chunk_s: float = 300.0  # seeking: this much audio at a time (see seek_chunks)
    prompt_windows: bool = True  # one window at a time: the words before a window are its prompt
    second_chance_fallback: bool = True  # speech no word covers, decoded again alone: with the
    # temperature fallback too (when ``fallback``); False: at temperature 0 only
    retry_logprob: float | None = None  # a window decoded with a lower mean token log-probability is
    # decoded again (as a looping one is); None: only a window that loops is
    window_s: float = 27.0  # a cut piece of speech is decoded with overlap_s more on each side
    overlap_s: float = 1.0  # context on both sides of a cut inside speech
    skip_silence_s: float = 1.0  # a pause at least this long between windows is not decoded
    compute_type: str = "int8"
    device: str = "cpu"
    language: str | None = "en"
    threads: int = 0  # CTranslate2 threads; 0: one per core this process may use
    initial_prompt: str = ""  # Whisper's prompt (it biases spelling and vocabulary), before the words
    # of the window before it: every window decoded on its own gets it (its retry without those words
    # too); seeking, only the first 30 s of each piece (faster-whisper drops it after the first window
    # when it does not condition on previous text); "": none
    vad: VadOptions = field(default_factory=VadOptions)

    def __post_init__(self) -> None:
        if self.window_s < 5 or self.overlap_s < 0 or self.overlap_s * 4 > self.window_s:
            raise ValueError("window_s must be >= 5 s and overlap_s <= window_s / 4")
        if self.window_s + 2 * self.overlap_s > 30.0 + 1e-9:
            raise ValueError("window_s + 2 * overlap_s must fit in one 30 s Whisper window")
        if self.beam_size < 1 or self.batch_size < 1 or self.best_of < 1 or self.threads < 0:
            raise ValueError("beam_size, batch_size and best_of must be >= 1, threads >= 0")
        if not 0.0 <= self.max_temperature <= 1.0:
            raise ValueError("max_temperature must be between 0 and 1")
        if self.seek_chunk_s < 30.0:
            raise ValueError("seek_chunk_s must be at least one 30 s Whisper window")
        if self.batched and self.initial_prompt.strip():
            raise ValueError("initial_prompt is for decodings one window at a time or seeking, not batched ones")

    def temperatures(self, fallback: bool) -> tuple[float, ...]:
        """Temperature 0, then (``fallback``) the fallback's up to ``max_temperature``."""
        steps = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0) if fallback else (0.0,)
        return tuple(t for t in steps if t <= self.max_temperature + 1e-9)

    @classmethod
    def fast(cls, **kw) -> AsrOptions:
        """The batched, greedy decoding (``--fast-asr``)."""
        return cls(**{"batched": True, "beam_size": 1, **kw})

    @classmethod
    def second_opinion(cls, **kw) -> AsrOptions:
        """The verifier's decoding (``--verify``): faster-whisper's own seeking over the speech
        (``seek``; half the time of the windows on the 110 s call, the same dev leak over four
        draws, docs/results.md §0k) and two samples per fallback temperature (with one, the
        dev leak rose from 3.1 to 3.5 %, §0j; five, faster-whisper's default, leaked the same as
        two with the two-model verifier over the dev and test parts' draws, and held 115 MB
        more of base-sg's decoding, §0ag)."""
        return cls(**{"best_of": 2, "seek": True, "max_temperature": 1.0, **kw})


RawWord = tuple[str, float, float, float]  # text, start, end, probability
FRAME_S = 0.05
PROMPT_WORDS = 40  # words before an uncovered stretch given as its prompt


MAX_COMPRESSION = 2.4  # whisper's own threshold for a repetitive (hallucinated) decoding
MAX_WORDS_PER_S = 6.0  # fast speech is ~4 words/s
TAIL_S = 0.2  # audio left after a decoding's last word that is not decoded on its own (see _decode_unlocked)


def hallucinated(words: list[RawWord], seconds: float) -> bool:
    """A decoding that loops or invents: its text compresses more than whisper allows
    (``gzip`` ratio over :data:`MAX_COMPRESSION`, texts of 60+ characters), or it has more
    words than speech could hold in ``seconds``. A decoding that passes may still hold a loop
    in part: :func:`mark_loops` marks it, and the transcript goes without it."""
    import zlib

    text = " ".join(w[0].strip() for w in words).encode("utf-8")
    if len(text) >= 60 and len(text) / len(zlib.compress(text)) > MAX_COMPRESSION:
        return True
    return seconds > 0 and len(words) > MAX_WORDS_PER_S * seconds and len(words) >= 12


LOOP_REPEATS = {1: 6, 2: 4, 3: 4, 4: 4, 5: 4, 6: 4}  # n-gram size -> times in a row that make a loop


def loops(words: list[RawWord]) -> list[tuple[int, int]]:
    """Loops inside a decoding that is otherwise fine, which the whole window's compression
    ratio does not show, as (first, last + 1) word indices: one word six times in a row
    ("s s s s s s", "-0 -0 -0 ...", "hot hot hot ..."), or two to six words four times
    ("8 upon 8 upon 8 upon 8 upon", "dot com dot s g" four times). Case and punctuation do
    not count. Speech repeats a word four times at most ("words words words words" on the
    real-speech set)."""
    toks = [re.sub(r"[^\w']", "", w[0].lower()) for w in words]
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(toks):
        end = i
        for n, times in LOOP_REPEATS.items():
            k = i + n
            while k < len(toks) and toks[k] == toks[k - n]:
                k += 1
            if k - i >= n * times:
                end = max(end, k)
        if end > i:
            out.append((i, end))
            i = end
        else:
            i += 1
    return out


LOOPED = -1.0  # the probability given to a word of a loop (mark_loops); never a real one


def mark_loops(words: list[RawWord]) -> list[RawWord]:
    """``words`` of one decoding with the words of its loops (:func:`loops`), every repeat,
    marked by the probability :data:`LOOPED`. They stay in place while the decoding is
    judged as a whole (:func:`hallucinated`) and while the uncovered-speech pass looks for
    speech with no word, then are cut from the transcript (:func:`cut_loops`): their speech
    is left with no word, so redact beeps it as unchecked speech (fails closed). Marking
    each decoding as a whole finds a loop that windowing splits between two windows. A
    number said with six equal digits in a row is rare; taken for a loop, it is redacted."""
    cuts = loops(words)
    if not cuts:
        return words
    drop = {k for a, b in cuts for k in range(a, b)}
    return [(t, a, b, LOOPED) if k in drop else (t, a, b, p) for k, (t, a, b, p) in enumerate(words)]


def cut_loops(words: list[RawWord]) -> list[RawWord]:
    """``words`` without those :func:`mark_loops` marked."""
    return [w for w in words if w[3] != LOOPED]


WORD_S = 1.5  # a word lasts at most this, plus WORD_SYMBOL_S for each letter or digit it writes
WORD_SYMBOL_S = 0.35  # ("553247802174." read out digit by digit: 5.1 s, under its 5.7)
UNCOVERED_MIN_S = 1.0  # speech no word covers, shorter than this, is not decoded again or beeped
COVER_MARGIN_S = 0.3  # a word covers this much speech on either side of it


def unstretched(words: list[RawWord], regions: list[tuple[float, float]],
                min_speech: float = UNCOVERED_MIN_S) -> list[RawWord]:
    """``words`` with each word that Whisper stretched over speech it skipped cut back to what
    a word can last (:data:`WORD_S` + :data:`WORD_SYMBOL_S` per letter or digit) after its
    start, where the rest holds at least ``min_speech`` s of speech (``regions``). When tiny.en
    gives up on a stretch of fast telephone speech it writes a word or two and its word
    timing stretches one of them over all of it ("a" over 46.5-56.8 s, a passport number and
    two sentences under it; "filletino" over 19 s): the word covered speech that no word
    was heard in, which the second chance (:func:`uncovered_speech`) then never decoded and
    the redaction never beeped as unchecked, and a name found in the word was beeped for all
    of its 19 s. A word stretched over a pause, or over too little speech for the second
    chance to take (its margins, :data:`COVER_MARGIN_S`, off), is left as it is: its true
    place may be at either end."""
    from deid_speech.intervals import intersect

    out = []
    for w in words:
        most = WORD_S + WORD_SYMBOL_S * max(1, sum(c.isalnum() for c in w[0]))
        if w[2] - w[1] > most:
            rest = intersect(regions, [(w[1] + most + COVER_MARGIN_S, w[2] - COVER_MARGIN_S)])
            if sum(b - a for a, b in rest) >= min_speech:
                w = (w[0], w[1], w[1] + most, w[3])
        out.append(w)
    return out


_BLAS = None
_DECODING = threading.Lock()  # one decoding at a time in the process (the sampler's seed is process-wide)


def one_blas_thread():
    """A context in which numpy's BLAS runs on one thread. faster-whisper's log-mel features
    are a matrix product whose last bit depends on how many threads computed it, and the
    word times follow them (1.24 s against 1.26 s): decoding under this context gives the same
    transcript, and the same redaction, in a 1-core worker and on a 16-core machine."""
    global _BLAS
    if _BLAS is None:
        from threadpoolctl import ThreadpoolController

        _BLAS = ThreadpoolController()
    return _BLAS.limit(limits=1, user_api="blas")


class _SamplerWatch:
    """A CTranslate2 Whisper model that notes when a decoding sampled (faster-whisper's
    temperature fallback asks ``generate`` for ``sampling_topk=0``). CTranslate2 seeds a
    worker thread's sampler once, at its first draw, from the process-wide seed of that
    moment (``static thread_local std::mt19937``): after one draw, ``set_random_seed``
    no longer reaches it, and what a later decoding samples depends on every decoding
    before it in the process. The Transcriber rebuilds a model that has sampled (a new
    worker thread, about 0.1 s for tiny), so each decoding samples from its own audio's
    seed, whatever the process decoded before."""

    def __init__(self, build, model):
        self._build, self._model = build, model  # ``model``: the one already built, used until it samples
        self.sampled = False

    def __getattr__(self, name):
        if self._model is None:  # released: built again when first needed
            self.fresh()
        return getattr(self._model, name)

    def generate(self, *args, **kwargs):
        if kwargs.get("sampling_topk", 1) != 1:
            self.sampled = True
        return self._model.generate(*args, **kwargs)

    def fresh(self) -> None:
        """Rebuild the model if it has sampled since it was built (or was released)."""
        if self.sampled:
            self._model, self.sampled = None, False
            self._model = self._build()

    def release(self) -> None:
        """Let go of the weights; :meth:`fresh` builds them again, as after a sampling."""
        self._model, self.sampled = None, True


def audio_seed(audio: np.ndarray) -> int:
    """A random seed that is a function of the samples alone."""
    digest = hashlib.sha1(np.ascontiguousarray(audio, dtype=np.float32).data).digest()  # the samples, not a copy
    return int.from_bytes(digest[:4], "little")


def cpu_threads(requested: int = 0) -> int:
    """Threads for CTranslate2: ``requested``, or one per core this process may run on
    (its affinity: a worker pinned to one core gets one)."""
    if requested:
        return requested
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def cut_points(audio: np.ndarray, sr: int, window_s: float, search_s: float | None = None) -> list[float]:
    """Boundaries (seconds, incl. 0 and the end) such that no stretch is longer than
    ``window_s``; each cut sits on the quietest 50 ms frame of the last ``search_s``
    seconds (default: a third of the window) before the limit."""
    dur = len(audio) / sr
    search_s = window_s / 3 if search_s is None else search_s
    cuts = [0.0]
    frame = int(FRAME_S * sr)
    while dur - cuts[-1] > window_s:
        hi_t = cuts[-1] + window_s
        lo, hi = int(max(hi_t - search_s, cuts[-1] + 1) * sr), int(hi_t * sr)
        energy = frame_rms(audio[lo:hi], sr, FRAME_S)
        t = hi_t
        if energy.size:
            t = (lo + int(np.argmin(energy)) * frame + frame // 2) / sr
        cuts.append(t)
    cuts.append(dur)
    return cuts


class Window(NamedTuple):
    """A stretch to decode: the audio ``clip`` (seconds) and the part of the timeline it
    ``own``s (its words are those whose midpoint falls there)."""
    clip: tuple[float, float]
    own: tuple[float, float]


def speech_stretches(regions: list[tuple[float, float]], skip_silence_s: float) -> list[tuple[float, float]]:
    """The speech ``regions`` joined where the pause between them is shorter than ``skip_silence_s``."""
    out: list[list[float]] = []
    for a, b in regions:
        if out and a - out[-1][1] < skip_silence_s:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def cut_stretch(audio: np.ndarray, a: float, b: float, piece_s: float, sr: int = MODEL_RATE,
                ) -> list[tuple[float, float]]:
    """The stretch ``a``-``b`` of ``audio`` cut at its quietest points (:func:`cut_points`)
    into consecutive pieces of at most ``piece_s``, from ``a`` to exactly ``b``."""
    cuts = [a + c for c in cut_points(audio[int(a * sr): int(b * sr)], sr, piece_s)]
    cuts[-1] = b
    return list(zip(cuts, cuts[1:]))


SEEK_CHUNK_S = 300.0  # seeking: the call is decoded this much audio at a time (memory flat in its length)


def seek_chunks(audio: np.ndarray, stretches: list[tuple[float, float]], chunk_s: float = SEEK_CHUNK_S,
                sr: int = MODEL_RATE) -> list[tuple[float, float, list[tuple[float, float]]]]:
    """Pieces of at most ``chunk_s`` of audio, each ``(lo, hi, clips)``: the speech stretches
    inside it as clip times relative to ``lo``. Whole stretches are packed together; one longer
    than a piece is cut at its quietest points (:func:`cut_stretch`)."""
    parts: list[tuple[float, float]] = []
    for a, b in stretches:
        if b - a <= chunk_s:
            parts.append((a, b))
            continue
        parts += cut_stretch(audio, a, b, chunk_s, sr)
    chunks: list[list[tuple[float, float]]] = []
    for a, b in parts:
        if chunks and b - chunks[-1][0][0] <= chunk_s:
            chunks[-1].append((a, b))
        else:
            chunks.append([(a, b)])
    return [(c[0][0], c[-1][1], [(a - c[0][0], b - c[0][0]) for a, b in c]) for c in chunks]


def plan_windows(audio: np.ndarray, regions: list[tuple[float, float]], window_s: float, overlap_s: float,
                 skip_silence_s: float, sr: int = MODEL_RATE) -> list[Window]:
    """Windows over the speech ``regions`` of ``audio``: regions closer than
    ``skip_silence_s`` are one stretch; stretches are packed into windows of at most
    ``window_s`` (a window may hold a pause, which costs nothing: Whisper encodes 30 s
    whatever the length); a stretch longer than a window is cut at its quietest points
    (:func:`cut_points`) into pieces of at most ``window_s`` decoded with ``overlap_s`` of
    context on each side (``window_s + 2 * overlap_s`` fits one Whisper window). The owned
    parts tile the whole call: a boundary between windows sits in the middle of the pause."""
    total = len(audio) / sr
    stretches = speech_stretches(regions, skip_silence_s)
    pieces: list[tuple[float, float, bool, bool]] = []  # (lo, hi, cut inside speech at lo, at hi)
    for a, b in stretches:
        if b - a <= window_s:
            pieces.append((a, b, False, False))
            continue
        cut = cut_stretch(audio, a, b, window_s, sr)
        pieces += [(x, y, k > 0, k < len(cut) - 1) for k, (x, y) in enumerate(cut)]
    groups: list[list[tuple[float, float, bool, bool]]] = []
    for p in pieces:  # whole stretches are packed together; a piece of a cut stretch is a window alone
        g = groups[-1] if groups else None
        if g and not (p[2] or p[3] or g[-1][2] or g[-1][3]) and p[1] - g[0][0] <= window_s:
            g.append(p)
        else:
            groups.append([p])
    windows: list[Window] = []
    for k, g in enumerate(groups):
        lo, hi, cut_lo, cut_hi = g[0][0], g[-1][1], g[0][2], g[-1][3]
        own_lo = 0.0 if k == 0 else lo if cut_lo else (groups[k - 1][-1][1] + lo) / 2
        own_hi = total if k == len(groups) - 1 else hi if cut_hi else (hi + groups[k + 1][0][0]) / 2
        clip = (max(0.0, lo - overlap_s) if cut_lo else lo, min(total, hi + overlap_s) if cut_hi else hi)
        windows.append(Window(clip, (own_lo, own_hi)))
    return windows


def speech_regions(audio: np.ndarray, options: VadOptions | None = None) -> list[tuple[float, float]]:
    """The speech regions of 16 kHz mono ``audio`` by the shared Silero VAD."""
    from deid_speech.asr import vad

    return vad.shared(options or VadOptions()).regions(audio)


BLANK_JOIN_S = 2.0  # uncovered stretches that redact beeps: a pause shorter than this between two joins them


def uncovered_speech(audio: np.ndarray, sr: int, words: list[RawWord] | tuple, min_len: float = UNCOVERED_MIN_S,
                     margin: float = COVER_MARGIN_S, regions: list[tuple[float, float]] | None = None,
                     join_s: float = 0.5) -> list[tuple[float, float]]:
    """Stretches of at least ``min_len`` s that the voice activity detector calls speech
    (``regions``; by default the shared Silero VAD's) but that no word (padded by
    ``margin``) covers. Pauses under ``join_s`` with no word in them join two stretches (0.5 s for the
    recogniser's second chance; :data:`BLANK_JOIN_S` for what ``redact`` beeps: the VAD
    missed 1.3 s of an account number read between two stretches that got no words)."""
    if sr != MODEL_RATE:
        raise ValueError("uncovered_speech expects 16 kHz audio")
    regions = speech_regions(audio) if regions is None else regions
    from deid_speech.intervals import subtract

    cover = [(max(0.0, (w[1] if isinstance(w, tuple) else w.start) - margin),
              (w[2] if isinstance(w, tuple) else w.end) + margin) for w in words]
    gaps = subtract(regions, cover)
    merged: list[tuple[float, float]] = []
    for a, b in gaps:
        if merged and a - merged[-1][1] <= join_s and not any(x < a and merged[-1][1] < y for x, y in cover):
            merged[-1] = (merged[-1][0], b)
        else:
            merged.append((a, b))
    return [(round(a, 3), round(b, 3)) for a, b in merged if b - a >= min_len]


class Transcriber:
    """Loads a Whisper model once; ``transcribe`` turns 16 kHz mono audio into a Transcript,
    ``recognize`` into a :class:`Recognition` (Whisper tags no entities). Safe to share
    between threads: one decoding runs at a time in the process, whichever model runs it,
    because the fallback decoding seeds its sampler through a process-wide seed."""

    def __init__(self, options: AsrOptions = AsrOptions()):
        self.options = options
        self.resolved: ResolvedModel = resolve_model(options.model)
        with timing.stage("loading"):
            self._model = self._load()
        self._lock = _DECODING

    @property
    def name(self) -> str:
        return self.resolved.name

    def _load(self):
        r = self.resolved
        try:
            if r.kind == "ct2":
                import ctranslate2
                from faster_whisper import WhisperModel

                o, threads = self.options, cpu_threads(self.options.threads)
                from deid_speech.asr.features import FrugalFeatureExtractor
                from deid_speech.asr.models import int8_copy

                # stored as int8 loads it: the same weights without a float copy beside them
                path = str(int8_copy(r.path) if (o.compute_type, o.device) == ("int8", "cpu") else r.path)
                model = WhisperModel(path, device=o.device, compute_type=o.compute_type, cpu_threads=threads)
                model.feature_extractor = FrugalFeatureExtractor(**model.feat_kwargs)  # the same features, 1/3 the memory
                model.model = _SamplerWatch(lambda: ctranslate2.models.Whisper(
                    path, device=o.device, compute_type=o.compute_type, intra_threads=threads), model.model)
                return model
            from deid_speech.asr.convert import load_openai_model  # applies stored alignment heads

            return load_openai_model(str(r.path), device=self.options.device)
        except ImportError as e:
            raise DeidError(f"ASR backend for {r.name} is not installed ({e.name}); run `make demo`") from None
        except Exception as e:
            raise DeidError(f"cannot load Whisper model {r.path}: {str(e).splitlines()[0] if str(e) else e}") from None

    def _decode(self, audio: np.ndarray, prompt: str | None = None, fallback: bool = False,
                clips: list[float] | None = None) -> tuple[list[RawWord], list[tuple[float, float]]]:
        """One clip on its own, with beam search and the prompt: each window in the default
        mode (``fallback``: Whisper's temperature fallback too); in the batched mode, a
        window whose batched decoding looped twice, with beam 5 and no fallback (on the
        dev call that needed it, the fallback took 7.9 s to return the words that
        temperature 0 gave in 2.4 s); speech no word covers, in both."""
        with self._lock, timing.stage("decoding"), one_blas_thread():
            try:
                return self._decode_unlocked(audio, prompt, fallback, clips)
            finally:
                heap.give_back()  # the window's buffers: a long call's peak is not their sum

    def _decode_unlocked(self, audio: np.ndarray, prompt: str | None, fallback: bool,
                         clips: list[float] | None = None) -> tuple[list[RawWord], list[tuple[float, float]]]:
        o = self.options
        beam = max(o.beam_size, 5) if o.batched else o.beam_size
        temperature = o.temperatures(fallback)
        prompt = " ".join(x for x in (o.initial_prompt.strip(), (prompt or "").strip()) if x)
        if self.resolved.kind == "ct2":
            # the temperature fallback samples: seed it from the audio, so the same input gives
            # the same transcript (and the same redaction) on every run
            import ctranslate2

            with timing.stage("loading"):
                self._model.model.fresh()  # a sampler that has drawn is not reseeded (_SamplerWatch)
            ctranslate2.set_random_seed(audio_seed(audio))
            segments, _ = self._model.transcribe(
                audio, language=o.language if self._multilingual() else None, beam_size=beam,
                word_timestamps=True, condition_on_previous_text=False, vad_filter=False,
                initial_prompt=prompt or None, temperature=temperature, best_of=o.best_of,
                log_prob_threshold=o.logprob_threshold, clip_timestamps=clips or "0")
            words: list[RawWord] = []
            segs: list[tuple[float, float]] = []
            total = len(audio) / MODEL_RATE
            end = min(clips[-1], total) if clips else total  # faster-whisper stops at the shorter
            for s in segments:
                if clips and s.compression_ratio > MAX_COMPRESSION:
                    continue  # seeking: a 30 s window that looped at every temperature
                segs.append((s.start, s.end))
                words.extend((w.word, w.start, w.end, w.probability) for w in (s.words or []))
                if s.words and end - s.words[-1].end < TAIL_S:
                    # faster-whisper seeks on from the last word's end: what is left would be
                    # a 30 s window of its own (a whole encoder pass and a decoding) for under
                    # TAIL_S of audio; none of the 51 such tails of tiny.en's windows on the dev
                    # calls, dev-fast and dev utterances gave a word (docs/results.md §0au)
                    break
            return words, segs
        import torch

        torch.manual_seed(audio_seed(audio))
        result = self._model.transcribe(audio, language=o.language, beam_size=beam,
                                        word_timestamps=True, condition_on_previous_text=False,
                                        fp16=False, initial_prompt=prompt or None, temperature=temperature,
                                        best_of=o.best_of, logprob_threshold=o.logprob_threshold)
        words = [(w["word"], w["start"], w["end"], w.get("probability", 1.0))
                 for s in result["segments"] for w in s.get("words", [])]
        return words, [(s["start"], s["end"]) for s in result["segments"]]

    def _decode_batch(self, clips: list[np.ndarray], no_repeat: int = 0,
                      ) -> list[tuple[list[RawWord], list[tuple[float, float]], float]]:
        """Clips of at most 30 s, decoded together in one pass each (faster-whisper's
        batched pipeline; CTranslate2 models only): the words, segments
        (times relative to each clip) and mean token log-probability of each."""
        from faster_whisper import BatchedInferencePipeline

        o = self.options
        # the pipeline takes one array and clip times that do not overlap: lay the clips end
        # to end, and map the words back by the offset of the clip they fall in
        starts = np.cumsum([0] + [len(c) for c in clips])
        joined = np.concatenate(clips).astype(np.float32, copy=False)
        stamps = [{"start": starts[k] / MODEL_RATE, "end": starts[k + 1] / MODEL_RATE} for k in range(len(clips))]
        out: list[tuple[list[RawWord], list[tuple[float, float]], float]] = [([], [], 0.0) for _ in clips]
        with self._lock, timing.stage("decoding"), one_blas_thread():
            segments, _ = BatchedInferencePipeline(self._model).transcribe(
                joined, language=o.language if self._multilingual() else None, beam_size=o.beam_size,
                batch_size=len(clips), word_timestamps=True, without_timestamps=not o.timestamps, vad_filter=False,
                clip_timestamps=stamps, log_progress=False, no_repeat_ngram_size=no_repeat)
            for s in segments:
                mid = (s.start + s.end) / 2 * MODEL_RATE  # segment times are rounded: the midpoint is safe
                k = min(int(np.searchsorted(starts, mid, side="right")) - 1, len(clips) - 1)
                off = starts[k] / MODEL_RATE
                words, segs, _ = out[k]
                out[k] = (words, segs, s.avg_logprob)
                segs.append((s.start - off, s.end - off))
                words.extend((w.word, w.start - off, w.end - off, w.probability) for w in (s.words or []))
        return out

    def release(self) -> None:
        """Let go of the model's weights until the next decoding, which builds them again
        (about 0.1 s, as after every decoding that sampled; the transcript is the same). A
        verifier whose models take turns by pass holds one at a time (:func:`take_turn`)."""
        watch = getattr(self._model, "model", None)
        if isinstance(watch, _SamplerWatch):
            with self._lock:
                watch.release()
                heap.give_back()

    def _multilingual(self) -> bool:
        m = self._model
        return bool(getattr(m, "model", None) is not None and m.model.is_multilingual)

    def recognize(self, audio: np.ndarray, progress=None) -> Recognition:
        """The :class:`~deid_speech.types.Recognizer` protocol: a transcript, no spans."""
        return Recognition(self.transcribe(audio, progress))

    def transcribe(self, audio: np.ndarray, progress=None) -> Transcript:
        """Transcribe 16 kHz mono float32 audio. ``progress(done_s, total_s)`` if given. The
        words' times are corrected for the model's lag (:func:`unlag`)."""
        return unlag(self.transcribe_raw(audio, progress), self.resolved.lag_s, len(audio) / MODEL_RATE)

    def transcribe_raw(self, audio: np.ndarray, progress=None) -> Transcript:
        """:meth:`transcribe` with the words' times as faster-whisper gives them."""
        if audio.ndim != 1:
            raise ValueError("transcribe expects mono 16 kHz audio")
        o, sr = self.options, MODEL_RATE
        total = len(audio) / sr
        with timing.stage("vad"):
            regions = speech_regions(audio, o.vad)
            seeking = o.seek and not o.batched and self.resolved.kind == "ct2"
            windows = [] if seeking else plan_windows(audio, regions, o.window_s, o.overlap_s, o.skip_silence_s)
        words: list[RawWord] = []
        segs: list[Span] = []
        failed: list[tuple[float, float]] = []
        if seeking:
            self._seeking(audio, regions, words, segs, progress)
        elif not o.batched or self.resolved.kind != "ct2":
            self._one_at_a_time(audio, windows, words, segs, failed, progress)
        else:
            self._in_batches(audio, windows, words, segs, failed, progress)
        # second chance for speech that no word covers (Whisper skipped it): decode the
        # stretch alone, with the words before it as the prompt, which tiny.en needs to
        # recognise a short isolated phrase (seen on the shipped example)
        words = sorted(unstretched(words, regions), key=lambda w: (w[1], w[2]))
        for a, b in uncovered_speech(audio, sr, words, regions=regions):
            if any(a < y and x < b for x, y in failed):
                continue
            before = [x[0].strip() for x in words if x[2] <= a + 1e-6][-PROMPT_WORDS:]
            lo, hi = max(0.0, a - o.overlap_s), min(total, b + o.overlap_s)
            n, m = len(words), len(segs)
            dw, ds = self._decode(audio[int(lo * sr): int(hi * sr)], " ".join(before),
                                  fallback=o.fallback and o.second_chance_fallback and not o.batched)
            self._keep_owned(Window((lo, hi), (a, b)), dw, ds, total, words, segs)
            words[n:] = cut_loops(words[n:])
            if hallucinated(words[n:], b - a):
                del words[n:], segs[m:]
        # a loop's words go last, after the second chance: its speech is left with no word,
        # and redact beeps it as unchecked (a loop is often a number the recogniser could
        # not read: decoded again, it came back as other words and leaked, test calls)
        words = sorted(unstretched(cut_loops(words), regions), key=lambda w: (w[1], w[2]))
        segs.sort()
        return Transcript.from_words(words, segments=segs)

    def _seeking(self, audio: np.ndarray, regions: list[tuple[float, float]], words: list[RawWord],
                 segs: list[Span], progress) -> None:
        """The speech stretches in faster-whisper's own long-form loop (``seek``): Whisper
        seeks from the end of one decoded segment to the next 30 s window, with no prompt,
        over the stretches only (``clip_timestamps``; pauses of ``skip_silence_s`` or more are
        skipped). A 30 s window that loops at every temperature of the fallback is dropped
        (:meth:`_decode_unlocked`): its speech is left to the uncovered-speech pass. At most
        ``seek_chunk_s`` of audio is decoded at a time."""
        o, sr, total = self.options, MODEL_RATE, len(audio) / MODEL_RATE
        for lo, hi, clips in seek_chunks(audio, speech_stretches(regions, o.skip_silence_s), o.seek_chunk_s):
            flat = [round(x, 3) for ab in clips for x in ab]
            dw, ds = self._decode(audio[int(lo * sr): int(hi * sr)], None, fallback=o.fallback, clips=flat)
            words += [(t, a + lo, min(b + lo, total), p) for t, a, b, p in mark_loops(dw)]
            segs += [Span(a + lo, min(b + lo, total), source="asr") for a, b in ds if b >= a]
            if progress:
                progress(min(hi, total), total)

    def _one_at_a_time(self, audio: np.ndarray, windows: list[Window], words: list[RawWord], segs: list[Span],
                       failed: list[tuple[float, float]], progress) -> None:
        """Each window in order, with the words before it as its prompt (context across
        windows). A window that loops ("-0 -0 -0 ...", ".co .co ...") is decoded again
        without the prompt (a loop must not be fed forward); if it still loops, its words
        are dropped and its speech is left uncovered (redacted or failed by the caller,
        never passed as checked)."""
        o, sr, total = self.options, MODEL_RATE, len(audio) / MODEL_RATE
        for w in windows:
            clip = audio[int(w.clip[0] * sr): int(w.clip[1] * sr)]
            for prompt in (True, False) if o.prompt_windows else (False,):
                n, m = len(words), len(segs)
                before = [x[0].strip() for x in words if x[2] <= w.own[0] + 1e-6][-PROMPT_WORDS:] if prompt else []
                self._keep_owned(w, *self._decode(clip, " ".join(before), fallback=o.fallback), total, words, segs)
                if not hallucinated(words[n:], w.own[1] - w.own[0]):
                    break
                del words[n:], segs[m:]
            else:
                failed.append(w.own)
            if progress:
                progress(min(w.own[1], total), total)

    def _in_batches(self, audio: np.ndarray, windows: list[Window], words: list[RawWord], segs: list[Span],
                    failed: list[tuple[float, float]], progress) -> None:
        """``batch_size`` windows at a time in one batched pass each, independently (no
        prompt across windows)."""
        o, sr, total = self.options, MODEL_RATE, len(audio) / MODEL_RATE
        for i in range(0, len(windows), o.batch_size):
            part = windows[i: i + o.batch_size]
            decoded = self._decode_batch([audio[int(w.clip[0] * sr): int(w.clip[1] * sr)] for w in part])
            # a window that loops ("-0 -0 -0 ...", ".co .co ...") or that the model is unsure of is
            # decoded again: first all of them together, greedily with no 3-gram written twice;
            # one that still loops on its own, with beams and the words
            # before it as the prompt; if it still loops, its words are dropped and its speech is
            # left uncovered (redacted or failed by the caller, never passed as checked)
            redo = [k for k, (w, (dw, _, logprob)) in enumerate(zip(part, decoded))
                    if hallucinated(dw, w.own[1] - w.own[0])
                    or (o.retry_logprob is not None and dw and logprob < o.retry_logprob)]
            if redo:
                again = self._decode_batch([audio[int(part[k].clip[0] * sr): int(part[k].clip[1] * sr)]
                                            for k in redo], no_repeat=3)
                for k, d in zip(redo, again):
                    decoded[k] = d
            for w, (dw, ds, _) in zip(part, decoded):
                n, m = len(words), len(segs)
                self._keep_owned(w, dw, ds, total, words, segs)
                if not hallucinated(words[n:], w.own[1] - w.own[0]):
                    continue
                del words[n:], segs[m:]
                before = [x[0].strip() for x in words if x[2] <= w.own[0] + 1e-6][-PROMPT_WORDS:]
                self._keep_owned(w, *self._decode(audio[int(w.clip[0] * sr): int(w.clip[1] * sr)], " ".join(before)),
                                 total, words, segs)
                if hallucinated(words[n:], w.own[1] - w.own[0]):
                    del words[n:], segs[m:]
                    failed.append(w.own)
            if progress:
                progress(min(part[-1].own[1], total), total)

    @staticmethod
    def _keep_owned(w: Window, decoded: list[RawWord], decoded_segs: list[tuple[float, float]], total: float,
                    words: list[RawWord], segs: list[Span]) -> None:
        """Add the words of ``decoded`` (times relative to ``w.clip``) whose midpoint ``w``
        owns, its loops marked (:func:`mark_loops`); a word already kept from a neighbouring
        window (the same word decoded by both, a little apart) is kept once."""
        lo = w.clip[0]
        own_lo, own_hi = w.own
        last = own_hi >= total - 1e-6
        recent = [x for x in words[-40:] if x[2] > lo]
        for text, ws, we, p in mark_loops(decoded):
            ws, we = ws + lo, max(min(we + lo, total), ws + lo)
            mid = (ws + we) / 2
            if not (own_lo <= mid < own_hi or (last and mid >= own_hi)):
                continue
            if any(min(we, x[2]) - max(ws, x[1]) > 0.5 * min(we - ws, x[2] - x[1]) for x in recent):
                continue
            words.append((text, ws, we, p))
        for a, b in decoded_segs:
            a, b = a + lo, min(b + lo, total)
            if b > own_lo and a < own_hi and b >= a:
                segs.append(Span(max(a, own_lo), min(b, own_hi), source="asr"))


# AsrOptions fields added after caches were written, with the values decoding had then: left
# out of the cache key at those values, so a cache written before them stays valid
_ADDED_LATER = {"max_temperature": 1.0, "best_of": 5, "logprob_threshold": -1.0, "prompt_windows": True,
                "seek": False, "initial_prompt": "", "seek_chunk_s": 300.0,
                "second_chance_fallback": True}


def unlag(transcript: Transcript, lag_s: float, total_s: float) -> Transcript:
    """``transcript`` with its words and segments moved ``lag_s`` seconds earlier (a model's
    word times come late by a constant of its architecture:
    :data:`~deid_speech.asr.models.WORD_LAG_S`), kept within ``[0, total_s]``."""
    if not lag_s:
        return transcript

    def move(t: float) -> float:
        return min(max(0.0, t - lag_s), total_s)

    return Transcript(transcript.text,
                      tuple(replace(w, start=move(w.start), end=move(w.end)) for w in transcript.words),
                      tuple(replace(g, start=move(g.start), end=move(g.end)) for g in transcript.segments))


class CachedTranscriber:
    """A :class:`Transcriber` whose transcripts are kept in a JSONL file, keyed by the
    audio's samples, the model's files and the decoding options, so the same audio is
    decoded once across runs (an experiment scores many NER models on one transcript of
    each test file). A last line cut short by an interrupted run is dropped; a file of anything
    else is refused, never appended to. The model is loaded
    only when some audio is not in the cache yet."""

    def __init__(self, options: AsrOptions, path: Path):
        from deid_speech.asr.models import _identity

        self.options, self.path = options, Path(path)
        self.resolved: ResolvedModel = resolve_model(options.model)
        key = {k: v for k, v in asdict(options).items() if _ADDED_LATER.get(k, object()) != v}
        ident = json.dumps([_identity(str(self.resolved.path)), key], sort_keys=True)
        self.model_key = hashlib.sha1(ident.encode()).hexdigest()[:16]
        self.items: dict[str, dict] = {}
        self.hits = self.misses = 0
        self.decoding_s = 0.0  # wall time spent decoding what the cache did not hold
        self._transcriber: Transcriber | None = None
        from deid_speech.manifest import read_resumable  # drops (and truncates away) a line cut short

        for d in read_resumable(self.path, lambda d: isinstance(d, dict) and {"model", "audio", "transcript"} <= set(d),
                                "a transcript cache record ({model, audio, transcript}): not an ASR cache"):
            self.items[f"{d['model']}:{d['audio']}"] = d["transcript"]

    @property
    def name(self) -> str:
        return self.resolved.name

    def _key(self, audio: np.ndarray) -> str:
        return hashlib.sha1(np.ascontiguousarray(audio, dtype=np.float32).tobytes()).hexdigest()

    def cached(self, audio: np.ndarray) -> Transcript | None:
        """The transcript kept for ``audio``, as :meth:`Transcriber.transcribe` gives it (the file
        keeps the words' times as decoded; the model's lag is taken off on reading)."""
        d = self.items.get(f"{self.model_key}:{self._key(audio)}")
        return unlag(Transcript.from_dict(d), self.resolved.lag_s, len(audio) / MODEL_RATE) if d is not None else None

    def recognize(self, audio: np.ndarray, progress=None) -> Recognition:
        return Recognition(self.transcribe(audio, progress))

    def transcribe(self, audio: np.ndarray, progress=None) -> Transcript:
        hit = self.cached(audio)
        if hit is not None:
            self.hits += 1
            return hit
        self.misses += 1
        if self._transcriber is None:
            self._transcriber = Transcriber(self.options)
        start = time.perf_counter()
        tr = self._transcriber.transcribe_raw(audio, progress=progress)
        self.decoding_s += time.perf_counter() - start
        d, key = tr.to_dict(), self._key(audio)
        self.items[f"{self.model_key}:{key}"] = d
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"model": self.model_key, "audio": key, "transcript": d}) + "\n")
        return unlag(tr, self.resolved.lag_s, len(audio) / MODEL_RATE)


def transcriber(options: AsrOptions, cache: Path | str | None = None) -> Transcriber | CachedTranscriber:
    """A Whisper transcriber with ``options``, its transcripts kept in ``cache`` when one is given
    (eval's ``--asr-cache``, and the tuning scripts' under bench/)."""
    return CachedTranscriber(options, cache) if cache is not None else Transcriber(options)


TURN_RELEASE_S = 60.0  # audio at least this long: models taking turns are held one at a time


def let_go(transcribers: list, audio_s: float, keep=None) -> None:
    """For audio of ``TURN_RELEASE_S`` or more, the weights of ``transcribers`` other than
    ``keep`` are let go (:meth:`Transcriber.release`; one that cannot, a cached one, is left
    as it is). The rebuild costs 0.1-0.4 s a model (a 10 s utterance's verification took
    15-30 % longer), so shorter audio keeps them."""
    if audio_s >= TURN_RELEASE_S:
        for t in transcribers:
            if t is not keep and callable(getattr(t, "release", None)):
                t.release()


def take_turn(transcribers: list, k: int, audio_s: float):
    """Pass ``k``'s decoder of several that take turns by pass (``--verifier A,B``): the
    (k mod n)-th, the others' weights let go first on long audio (:func:`let_go`), so that
    one model is held at a time beside the audio: on the 21-minute stereo call the helper's
    peak fell from 865 to 655 MB (docs/results.md §0ag)."""
    turn = transcribers[k % len(transcribers)]
    let_go(transcribers, audio_s, keep=turn)
    return turn
