"""Training data for the Whisper trainer: manifest records, decoded clips, batches.

:func:`load_records` reads a ``deid-speech tts`` manifest; :func:`epoch_batches` groups
records by label length inside shuffled pools (the same arguments give the same batches,
so a resumed run skips exactly what was done); :func:`collate` pads a batch;
:func:`drop_fillers` takes hesitation sounds out of a target (Whisper's own transcripts
leave them out).
"""
from __future__ import annotations

import os
import random
import re
from collections.abc import Sequence

import numpy as np

from deid_speech.asr.hf import MAX_AUDIO_S, MODEL_RATE, features, load_audio


def load_records(manifest_path: str | os.PathLike, limit: int | None = None) -> list[dict]:
    """Records of a ``deid-speech tts`` manifest (:func:`deid_speech.manifest.read`: strict,
    ``audio`` absolute and present, ``id`` defaulting to ``<stem>-<line>``), as dicts."""
    from deid_speech import manifest

    return [r.to_dict() for r in manifest.read(manifest_path, need=("text", "audio"), limit=limit)]


# hesitation sounds Whisper leaves out of its transcripts. Singlish particles ("ah", "lah",
# "lor", "leh") are words of the sentence and stay; "eh" goes: as an opener it is a
# hesitation, and a model trained to write it inserts it at every pause of real speech.
FILLERS = ("uh", "uhm", "um", "umm", "er", "erm", "eh", "hmm", "mm")
_FILLER = re.compile(r"(?<![\w'-])(?:" + "|".join(FILLERS) + r")(?![\w'-]),?", re.IGNORECASE)


def drop_fillers(text: str) -> str:
    """``text`` without hesitation sounds (:data:`FILLERS`) and the comma after one;
    Whisper timestamp tokens (``<|1.20|>``) are kept in place:
    ``"<|0.00|> so, uh, my number is<|2.10|>"`` -> ``"<|0.00|> so, my number is<|2.10|>"``."""
    out = _FILLER.sub("", text)
    out = re.sub(r"[ \t]+", " ", out)
    out = re.sub(r" ([,.!?])", r"\1", out)          # "so , my" -> "so, my"
    out = re.sub(r",([.!?])", r"\1", out)           # "S1234567D, uh?" -> "S1234567D?"
    out = re.sub(r"(\|>) ?[,.!?]+ ?", r"\1 ", out)   # "<|0.00|> , so" -> "<|0.00|> so"
    out = re.sub(r"^[,.!?]+ ?", "", out.strip())
    out = re.sub(r",? ?(<\||$)", r"\1", out)         # no comma or space before a timestamp token or the end
    return out.strip()


def without_fillers(record: dict) -> dict:
    """A copy of ``record`` with :func:`drop_fillers` applied to ``text`` and ``timed``."""
    r = dict(record)
    for k in ("text", "timed"):
        if isinstance(r.get(k), str):
            r[k] = drop_fillers(r[k])
    return r


class AudioCache:
    """Decoded clips kept in memory up to ``max_bytes`` (then read from disk each time)."""

    def __init__(self, max_bytes: float = 1e9) -> None:
        self._d: dict[str, np.ndarray] = {}
        self._bytes, self.max_bytes = 0, max_bytes

    def __call__(self, path: str) -> np.ndarray:
        if path in self._d:
            return self._d[path]
        audio = load_audio(path)
        if self._bytes + audio.nbytes <= self.max_bytes:
            self._d[path] = audio
            self._bytes += audio.nbytes
        return audio


def epoch_batches(lengths: Sequence[int], batch_size: int, seed: int, epoch: int,
                  pool_batches: int = 50) -> list[list[int]]:
    """Index batches for one epoch: shuffle (seeded by ``seed`` and ``epoch``), sort by
    length inside pools of ``pool_batches`` batches, cut, shuffle the batch order. The
    same arguments give the same batches, so a resumed run skips exactly what was done."""
    rng = random.Random(seed * 1_000_003 + epoch)
    idx = list(range(len(lengths)))
    rng.shuffle(idx)
    pool = batch_size * pool_batches
    batches: list[list[int]] = []
    for k in range(0, len(idx), pool):
        chunk = sorted(idx[k:k + pool], key=lambda i: lengths[i])
        batches.extend(chunk[j:j + batch_size] for j in range(0, len(chunk), batch_size))
    rng.shuffle(batches)
    return batches


def pad_labels(seqs: Sequence[Sequence[int]], dev):
    import torch

    labels = torch.full((len(seqs), max(map(len, seqs))), -100, dtype=torch.long)
    for i, ids in enumerate(seqs):
        labels[i, :len(ids)] = torch.tensor(ids, dtype=torch.long)
    return labels.to(dev)


def collate(processor, items: list[tuple[np.ndarray, list[int]]], dev):
    feats = features(processor, [a[: int(MAX_AUDIO_S * MODEL_RATE)] for a, _ in items])
    return feats.to(dev), pad_labels([ids for _, ids in items], dev)
