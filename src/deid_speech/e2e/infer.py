"""Inference with the end-to-end tagger: audio -> tagged transcript -> Transcript + Spans.

Audio is cut at quiet points into windows of at most ``window_s`` seconds (12 s: the
length of the training utterances)
(:func:`deid_speech.asr.whisper.cut_points`); the windows are decoded in batches
(greedy, ``torch.inference_mode``) by the fine-tuned Hugging Face Whisper model, which
writes the tags as special tokens. Each window's tagged text is parsed leniently
(:mod:`deid_speech.e2e.tags`: an entity boundary never crosses a window), and its
untagged words are timed by forced alignment of the text against the window's audio
(pocketsphinx, :func:`deid_speech.align.base.get_aligner`), the same aligner that times
the reference words of the voiced data; where pocketsphinx cannot place the text, the
model's cross-attention alignment (CTranslate2 ``align``) times it. A window that neither
can place gets its words spread over it in proportion to their length, and its entities
cover the whole window (a span that cannot be placed is widened, never dropped).

:class:`E2ETagger` is both the ASR (``transcribe``) and the detector (``detect``) of a
:class:`deid_speech.pipeline.Redactor`, so ``--system e2e`` writes the same audio and
JSON as the cascade.
"""
from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from deid_speech import timing
from deid_speech.errors import DeidError
from deid_speech.types import Recognition, Span, Transcript

log = logging.getLogger(__name__)

MODEL_RATE = 16000
# An entity in a window that pocketsphinx cannot place is timed by cross-attention and
# widened by this much on both sides. It used to cover the whole window (None): on the dev
# part of the unseen-voice benchmark, 40 of the 170 e2e spans then beeped a whole window;
# with 0.5 s, e2e+patterns leaked 8.7 % of entity time instead of 8.1 % and over-redacted
# 39.6 % of other speech instead of 47.6 % (1.0 s: 8.2 % / 42.8 %)
UNSURE_PAD_S: float | None = 0.5
CPU_BATCH, GPU_BATCH = 4, 16  # windows decoded at a time (a larger batch buys nothing on the CPU)
PAUSE_S = 0.3  # a silence this long between two words starts a new stretch (stray closing tags open there)


@dataclass(frozen=True)
class E2EOptions:
    model: str
    device: str = "cpu"
    window_s: float = 12.0  # the training clips' length: longer windows (27 s) tagged the example call worse
    batch_size: int | None = None  # windows decoded at a time; None: 4 on the CPU, GPU_BATCH on a GPU
    max_new_tokens: int = 220
    threads: int | None = None  # torch / CTranslate2 threads (default: their own choice)
    backend: str = "auto"  # ct2 (the model's ct2/ copy, int8) | hf | auto (ct2 when there is a copy)
    compute_type: str = "int8"  # CTranslate2 compute type
    quantize: bool = False  # hf backend: int8 dynamic quantisation of the Linear layers

    def __post_init__(self) -> None:
        if not 5 <= self.window_s <= 30:
            raise ValueError("window_s must be between 5 and 30 seconds")
        if (self.batch_size is not None and self.batch_size < 1) or self.max_new_tokens < 1:
            raise ValueError("batch_size and max_new_tokens must be >= 1")
        if self.backend not in ("auto", "ct2", "hf"):
            raise ValueError("backend must be auto, ct2 or hf")


@dataclass(frozen=True)
class Window:
    """One decoded stretch of audio: [start, end) seconds and the tagged text."""

    start: float
    end: float
    tagged: str


def default_model() -> str:
    """The shipped e2e model (checked by :mod:`deid_speech.models`), or a one-line DeidError."""
    from deid_speech import models

    return str(models.path("e2e"))


def check_model_dir(path: str | os.PathLike) -> Path:
    """A folder holding a fine-tuned e2e model (HF Whisper with the tag tokens), or a
    one-line DeidError."""
    from deid_speech.e2e.tags import TAG_TEXTS

    p = Path(path).expanduser()
    if not p.is_dir():
        raise DeidError(f"--model {p}: no such folder (train one with `deid-speech train e2e`)")
    from deid_speech.asr.models import unfinished_training

    if unfinished_training(p):
        raise DeidError(f"--model {p}: its training did not finish; rerun the same `deid-speech train e2e` "
                        "command to resume")
    from deid_speech.e2e.shipped import is_delta, materialize

    if is_delta(p):
        p = materialize(p)
    cfg, tok = p / "config.json", p / "tokenizer.json"
    try:
        model_type = json.loads(cfg.read_text(encoding="utf-8")).get("model_type") if cfg.is_file() else None
    except (json.JSONDecodeError, OSError):
        model_type = None
    if model_type != "whisper":
        raise DeidError(f"--model {p}: not an e2e model folder (no Whisper config.json)")
    try:
        added = {t["content"] for t in json.loads(tok.read_text(encoding="utf-8")).get("added_tokens", [])}
    except (json.JSONDecodeError, OSError, FileNotFoundError):
        raise DeidError(f"--model {p}: no readable tokenizer.json") from None
    if not set(TAG_TEXTS) <= added:
        raise DeidError(f"--model {p}: the tokenizer has no entity tag tokens; this is not an e2e model "
                        "(`deid-speech train e2e` makes one)")
    return p


def load_model(path: str | os.PathLike, device: str = "cpu") -> tuple[Any, Any]:
    """``(model, processor)`` of an e2e model folder (validated first)."""
    from deid_speech.asr.hf import load_hf_folder

    p = check_model_dir(path)
    model, processor = load_hf_folder(p, f"--model {p}")
    return model.to(device).eval(), processor


def windows_of(audio: np.ndarray, window_s: float) -> list[tuple[float, float]]:
    """Stretches of at most ``window_s`` seconds cut at quiet points."""
    from deid_speech.asr.whisper import cut_points

    cuts = cut_points(audio, MODEL_RATE, window_s)
    return [(a, b) for a, b in zip(cuts, cuts[1:]) if b - a > 0.05]


def generate_tagged(model: Any, processor: Any, clips: list[np.ndarray], max_new_tokens: int = 220,
                    batch_size: int = CPU_BATCH) -> list[str]:
    """Greedy tagged transcripts of ``clips`` (16 kHz mono, each at most 30 s)."""
    import torch

    from deid_speech.asr.hf import features, is_multilingual
    from deid_speech.e2e.tokens import decode_tagged

    dev = next(model.parameters()).device
    kwargs = {"language": "en", "task": "transcribe"} if is_multilingual(model) else {}
    out: list[str] = []
    with torch.inference_mode():
        for i in range(0, len(clips), batch_size):
            feats = features(processor, clips[i:i + batch_size]).to(dev, next(model.parameters()).dtype)
            ids = model.generate(input_features=feats, max_new_tokens=max_new_tokens, num_beams=1,
                                 do_sample=False, return_timestamps=False, **kwargs)
            out.extend(decode_tagged(processor.tokenizer, row) for row in ids.tolist())
    return out


class Ct2Decoder:
    """Greedy tagged decoding with CTranslate2 directly (not faster-whisper, whose text
    and segment code treat every id at or above end-of-text as a timestamp or drop it,
    so tags would vanish or corrupt the segment times)."""

    def __init__(self, folder: Path, processor: Any, compute_type: str = "int8", threads: int | None = None):
        import ctranslate2

        self.model = ctranslate2.models.Whisper(str(folder), device="cpu", compute_type=compute_type,
                                                intra_threads=threads or 0)
        self.processor = processor
        tok = processor.tokenizer
        self.prompt = [tok.convert_tokens_to_ids(t) for t in ("<|startoftranscript|>", "<|notimestamps|>")]

    def _features(self, clips: list[np.ndarray]):
        """Whisper log-mel features of ``clips`` as a CTranslate2 StorageView."""
        import ctranslate2

        feats = self.processor.feature_extractor(list(clips), sampling_rate=MODEL_RATE,
                                                 return_tensors="np").input_features
        return ctranslate2.StorageView.from_array(np.ascontiguousarray(feats, dtype=np.float32))

    def generate(self, clips: list[np.ndarray], max_new_tokens: int = 220) -> list[str]:
        from deid_speech.e2e.tokens import decode_tagged

        res = self.model.generate(self._features(clips), [self.prompt] * len(clips), beam_size=1,
                                  max_length=max_new_tokens + len(self.prompt))
        return [decode_tagged(self.processor.tokenizer, r.sequences_ids[0]) for r in res]

    def align_words(self, clip: np.ndarray, text: str) -> Transcript:
        """Word times of ``text`` from the model's cross-attention (CTranslate2 ``align``:
        dynamic time warping over the alignment heads, as faster-whisper's word
        timestamps): a word starts where the path first reaches its first token."""
        words = text.split()
        tok = self.processor.tokenizer
        per_word = [tok.encode(" " + w, add_special_tokens=False) for w in words]
        flat = [i for ids in per_word for i in ids]
        if not flat:
            return Transcript.from_words([])
        n_frames = max(1, min(len(clip) // 160, 3000))
        try:
            res = self.model.align(self._features([clip]), self.prompt, [flat], [n_frames])[0]
        except (RuntimeError, ValueError) as e:
            raise DeidError(f"cross-attention alignment failed ({e})") from None
        text_idx = np.array([a for a, _ in res.alignments])
        time_idx = np.array([b for _, b in res.alignments], dtype=float)
        if not text_idx.size:
            raise DeidError("no cross-attention alignment")
        jumps = np.pad(np.diff(text_idx), (1, 0), constant_values=1).astype(bool)
        jump_times = time_idx[jumps] / 50.0  # encoder frames of 20 ms
        edges = np.concatenate([[0], np.cumsum([len(ids) for ids in per_word])])
        edges = np.minimum(edges, len(jump_times) - 1)
        dur = len(clip) / MODEL_RATE
        return Transcript.from_words([(w, min(float(jump_times[a]), dur), min(float(jump_times[b]), dur))
                                      for w, a, b in zip(words, edges[:-1], edges[1:])])


def pauses_in(tr: Transcript, min_gap: float = PAUSE_S) -> list[int]:
    """Character offsets of words that follow a silence of at least ``min_gap`` seconds."""
    return [w.char_start for prev, w in zip(tr.words, tr.words[1:]) if w.start - prev.end >= min_gap]


def place(windows: list[Window], audio: np.ndarray, align: Callable[[np.ndarray, str], Transcript],
          fallback: Callable[[np.ndarray, str], Transcript] | None = None,
          unsure_pad: float | None = UNSURE_PAD_S) -> tuple[Transcript, list[Span]]:
    """Time the words of each window and turn its tags into Spans in seconds.

    ``align(window_audio, text)`` is tried first; where it raises DeidError,
    ``fallback`` (less precise) times the words, and each entity span is widened by
    ``unsure_pad`` seconds on both sides, or covers the whole window (``None``); where
    both fail, the words are spread over the window and each entity covers the window.
    Returns the whole Transcript (one segment per window) and the entity Spans (source
    ``e2e``)."""
    from deid_speech.align.base import project_words
    from deid_speech.e2e.tags import pair_tags, strip_tags

    words: list[tuple[str, float, float]] = []
    spans: list[Span] = []
    segments: list[Span] = []
    for w in windows:
        text, marks = strip_tags(w.tagged)
        if not text:
            continue
        clip = audio[int(w.start * MODEL_RATE): int(w.end * MODEL_RATE)]
        length = w.end - w.start
        pad: float | None = None
        tr = None
        for k, fn in enumerate((align, fallback)):
            if fn is None:
                continue
            try:
                tr = fn(clip, text)
                if tr.text != text or not tr.words:
                    raise DeidError("the aligner changed the text")
                pad = 0.0 if k == 0 else unsure_pad
                break
            except DeidError:
                tr = None
        if tr is None:
            tr, pad = project_words(text, [], duration=length), None
        segments.append(Span(w.start, w.end, source="e2e"))
        words.extend((x.text, w.start + x.start, w.start + x.end) for x in tr.words)
        for e in pair_tags(text, marks, pauses_in(tr)):
            ws = tr.words_in(e.char_start, e.char_end)
            if not ws:
                continue
            a, b = min(x.start for x in ws), max(x.end for x in ws)
            a, b = (0.0, length) if pad is None else (max(0.0, a - pad), min(length, max(a, b) + pad))
            spans.append(Span(w.start + a, w.start + max(a, b), e.label, 1.0, "e2e", text[e.char_start:e.char_end]))
    words.sort(key=lambda x: (x[1], x[2]))
    return Transcript.from_words(words, segments=sorted(segments)), sorted(spans)


class E2ETagger:
    """Loads a fine-tuned e2e model once. ``recognize(audio16k)`` returns the untagged
    Transcript and the entities the model tagged in it (a :class:`Recognition`): it is
    recogniser and detector in one call, and keeps no per-call state, so one tagger can
    serve several threads (the forced aligner, which is stateful, is locked)."""

    name = "e2e"

    def __init__(self, options: E2EOptions, model: Any = None, processor: Any = None):
        with timing.stage("loading"):
            self._init(options, model, processor)

    def _init(self, options: E2EOptions, model: Any, processor: Any) -> None:
        self.options = options
        if options.threads:
            import torch

            torch.set_num_threads(options.threads)
        self.ct2: Ct2Decoder | None = None
        if model is None:
            folder = check_model_dir(options.model)
            if options.backend in ("auto", "ct2") and options.device == "cpu" and (folder / "ct2" / "model.bin").is_file():
                from transformers import WhisperProcessor

                processor = WhisperProcessor.from_pretrained(str(folder))
                self.ct2 = Ct2Decoder(folder / "ct2", processor, options.compute_type, options.threads)
            elif options.backend == "ct2":
                raise DeidError(f"--model {folder}: no CTranslate2 copy (ct2/model.bin) for the ct2 backend")
            else:
                model, processor = load_model(folder, options.device)
        if model is not None and options.quantize:
            model = quantize_int8(model)
        self.model, self.processor = (model.eval() if model is not None else None), processor
        on_gpu = self.model is not None and next(self.model.parameters()).device.type == "cuda"
        self.batch_size = options.batch_size or (GPU_BATCH if on_gpu else CPU_BATCH)
        self.name = f"e2e:{options.model}"
        self._aligner = None
        self._no_aligner: DeidError | None = None
        self._align_lock = threading.Lock()

    def align(self, clip: np.ndarray, text: str) -> Transcript:
        """Word times of ``text`` in ``clip`` by pocketsphinx forced alignment (accurate to
        a few hundredths of a second where it succeeds; raises DeidError where not).
        Where the aligner cannot be built (pocketsphinx is not installed), that is said
        once on the log, and every window falls back to the model's own, wider times."""
        with self._align_lock:
            if self._no_aligner is not None:
                raise self._no_aligner
            if self._aligner is None:
                from deid_speech.align.base import get_aligner

                try:
                    self._aligner = get_aligner("pocketsphinx")
                except DeidError as e:
                    self._no_aligner = e
                    log.warning("e2e: no forced aligner (%s): word times come from the model's cross-attention "
                                "and each entity is widened by %s s on both sides; pip install 'deid-speech[e2e]' "
                                "for the precise times", e, UNSURE_PAD_S)
                    raise
            return self._aligner.align(clip, text)

    def tag_many(self, audios: list[np.ndarray], progress=None,
                 stretches: list[list[tuple[float, float]]] | None = None) -> list[list[Window]]:
        """Tagged text of each window of each 16 kHz mono recording (``stretches``: the
        windows to decode, default: the recording cut at quiet points); windows of all the
        recordings are decoded together in batches."""
        if stretches is None:
            stretches = [windows_of(audio, self.options.window_s) for audio in audios]
        jobs = [(k, a, b) for k, spans in enumerate(stretches) for a, b in spans]
        out: list[list[Window]] = [[] for _ in audios]
        step = self.batch_size
        total = jobs[-1][2] if len(audios) == 1 and jobs else float(len(jobs))
        for i in range(0, len(jobs), step):
            part = jobs[i:i + step]
            clips = [audios[k][int(a * MODEL_RATE): int(b * MODEL_RATE)] for k, a, b in part]
            with timing.stage("decoding"):
                texts = (self.ct2.generate(clips, self.options.max_new_tokens) if self.ct2 is not None else
                         generate_tagged(self.model, self.processor, clips, self.options.max_new_tokens, step))
            for (k, a, b), t in zip(part, texts):
                out[k].append(Window(a, b, t))
            if progress:
                progress(part[-1][2] if len(audios) == 1 else float(i + len(part)), total)
        return out

    def run_many(self, audios: list[np.ndarray], progress=None) -> list[tuple[Transcript, list[Span]]]:
        """(Transcript, entity Spans) of each 16 kHz mono recording. Speech that no word
        covers after the first pass (Whisper skipped it) is decoded again on its own, as
        the cascade's ASR does (:func:`deid_speech.asr.whisper.uncovered_speech`)."""
        from deid_speech.asr.whisper import uncovered_speech

        if any(a.ndim != 1 for a in audios):
            raise ValueError("the e2e tagger expects mono 16 kHz audio")
        fallback = self.ct2.align_words if self.ct2 is not None else None
        windows = self.tag_many(audios, progress)
        with timing.stage("alignment"):
            placed = [place(w, a, self.align, fallback) for w, a in zip(windows, audios)]
        with timing.stage("vad"):
            gaps = [uncovered_speech(a, MODEL_RATE, tr.words) for a, (tr, _) in zip(audios, placed)]
        redo = [k for k, g in enumerate(gaps) if g]
        if redo:
            extra = self.tag_many([audios[k] for k in redo], stretches=[gaps[k] for k in redo])
            for k, more in zip(redo, extra):
                with timing.stage("alignment"):
                    placed[k] = place(sorted(windows[k] + more, key=lambda w: w.start), audios[k], self.align, fallback)
        return placed

    def run(self, audio: np.ndarray, progress=None) -> tuple[Transcript, list[Span]]:
        return self.run_many([audio], progress)[0]

    def recognize(self, audio: np.ndarray, progress=None) -> Recognition:
        tr, spans = self.run(audio, progress)
        return Recognition(tr, tuple(spans))


def quantize_int8(model: Any) -> Any:
    """int8 dynamic quantisation of the Linear layers (CPU inference)."""
    import torch

    try:
        from torch.ao.quantization import quantize_dynamic
    except ImportError:
        return model
    return quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
