"""The entity tags as special tokens of the Whisper tokenizer.

``[PERSON]`` ... ``[DATE]`` (one per label of :data:`deid_speech.types.PAPER_LABELS`) are added
as special tokens, one id each, by the shared trainer's ``add_tokens``. A new embedding
row starts as the mean of the embeddings of the tag's word pieces (``[CAR_PLATE]``:
`` car``, `` plate``, ``CAR``, ``_``, ``PL``...), so the decoder starts from a meaningful
place rather than from noise.

Targets are a manifest record's ``tagged`` field with whitespace normalised
(:func:`target_text`); :func:`decode_tagged` turns generated ids back into the
canonical tagged form (:func:`normalize_tagged`).
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from deid_speech.e2e.tags import TAG_TEXTS
from deid_speech.types import PAPER_LABELS, parse_tagged

# extra words per label for the embedding initialisation, besides the label itself
_WORDS = {
    "PERSON": "person name",
    "NRIC": "NRIC IC number",
    "PASSPORT_NUM": "passport number",
    "PHONE": "phone number",
    "EMAIL": "email",
    "CREDIT_CARD": "credit card",
    "CAR_PLATE": "car plate",
    "BANK_ACCOUNT": "bank account",
    "DATE": "date",
}
_SPACE_TAG = re.compile(r"\s*(" + "|".join(re.escape(t) for t in TAG_TEXTS) + r")\s*")
_SPACE_BEFORE_TAG = re.compile(r" (" + "|".join(re.escape(t) for t in TAG_TEXTS) + r")")
_TAG_PUNCT = re.compile(r"(" + "|".join(re.escape(t) for t in TAG_TEXTS) + r") ([,.!?;:])")


def normalize_tagged(text: str) -> str:
    """One space around each tag and between words, none before closing punctuation."""
    s = " ".join(_SPACE_TAG.sub(r" \1 ", text).split())
    return _TAG_PUNCT.sub(r"\1\2", s)


def target_text(record: dict) -> str:
    """The training target of a manifest record: its ``tagged`` text, normalised, with
    the space before each tag dropped (``me at[PHONE] nine eight[PHONE] lah``), so a tag
    is one token between Whisper's usual leading-space word pieces (`` at``, ``[PHONE]``,
    `` nine``) rather than a bare-space token plus the tag. A label the model has no tag
    token for (SECRET: :data:`deid_speech.types.PAPER_LABELS` only) is refused, not learnt
    as plain text."""
    other = [e.label for e in parse_tagged(record["tagged"])[1] if e.label not in PAPER_LABELS]
    if other:
        raise ValueError(f"label {other[0]} has no tag token of the end-to-end model "
                         f"(it knows {', '.join(PAPER_LABELS)})")
    return _SPACE_BEFORE_TAG.sub(r"\1", normalize_tagged(record["tagged"]))


def tag_ids(tokenizer: Any) -> list[int]:
    """Ids of the tags, in :data:`TAG_TEXTS` order; raises if the tokenizer lacks them."""
    vocab = tokenizer.get_vocab()
    missing = [t for t in TAG_TEXTS if t not in vocab]
    if missing:
        raise ValueError(f"tokenizer lacks the entity tag token(s) {', '.join(missing)}")
    return [vocab[t] for t in TAG_TEXTS]


def piece_ids(tokenizer: Any, token: str) -> list[int]:
    """Ids of the ordinary word pieces that spell a tag's label (for its initial embedding)."""
    label = token.strip("[]")
    texts = [" " + w for w in _WORDS.get(label, label.replace("_", " ").lower()).split()]
    texts += [" " + label.replace("_", " ").lower(), label]
    eot = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    ids = [i for t in texts for i in tokenizer.encode(t, add_special_tokens=False) if i < eot]
    if not ids:
        raise ValueError(f"no word pieces for {token}")
    return ids


def init_tag_embedding(model: Any, processor: Any, token: str) -> None:
    """Set a new tag's embedding row (and its output row, when not tied) to the mean of
    its word pieces' rows. Matches the shared trainer's ``init_token`` hook."""
    import torch

    tok = getattr(processor, "tokenizer", processor)
    tid = tok.convert_tokens_to_ids(token)
    pieces = piece_ids(tok, token)
    emb = model.get_input_embeddings().weight
    with torch.no_grad():
        emb[tid] = emb[pieces].mean(0)
        out = model.get_output_embeddings()
        if out is not None and out.weight.data_ptr() != emb.data_ptr():
            out.weight[tid] = out.weight[pieces].mean(0)


def add_tags_to_model(model: Any, processor: Any) -> list[int]:
    """Tags into the tokenizer, embeddings resized, new rows initialised, through the
    shared trainer's :func:`deid_speech.asr.hf.add_tokens` (which ``train e2e``
    uses too); returns the tag ids."""
    from deid_speech.asr.hf import add_tokens

    add_tokens(model, processor, TAG_TEXTS, init_tag_embedding)
    return tag_ids(getattr(processor, "tokenizer", processor))


def decode_tagged(tokenizer: Any, ids: Sequence[int] | Iterable[int]) -> str:
    """Generated ids -> tagged text: ordinary text pieces and tags kept, other special
    tokens (start, no-timestamps, end, timestamps) dropped; whitespace normalised."""
    tags = set(tag_ids(tokenizer))
    eot = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    keep = [int(i) for i in ids if int(i) < eot or int(i) in tags]
    return normalize_tagged(tokenizer.decode(keep, skip_special_tokens=False))
