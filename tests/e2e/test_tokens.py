"""The tags as special tokens: one id each, targets round-trip through the tokenizer."""
import pytest

from deid_speech.e2e.tags import TAG_TEXTS
from deid_speech.e2e.tokens import normalize_tagged, target_text


@pytest.fixture(scope="module")
def tagged_model(tokenizer_dir):
    from transformers import WhisperForConditionalGeneration, WhisperProcessor

    from deid_speech.e2e.tokens import add_tags_to_model

    src = tokenizer_dir
    processor = WhisperProcessor.from_pretrained(src)
    model = WhisperForConditionalGeneration.from_pretrained(src)
    before = model.get_input_embeddings().weight.detach().clone()
    ids = add_tags_to_model(model, processor)
    return model, processor, ids, before


def test_normalize_puts_one_space_around_tags_and_none_before_punctuation():
    assert normalize_tagged("at[PHONE]nine  eight [PHONE] . ok") == "at [PHONE] nine eight [PHONE]. ok"


def test_target_drops_the_space_before_each_tag():
    rec = {"tagged": "can call me at [PHONE] nine eight [PHONE] lah"}
    assert target_text(rec) == "can call me at[PHONE] nine eight[PHONE] lah"


def test_a_label_without_a_tag_token_is_refused_not_learnt_as_text():
    with pytest.raises(ValueError, match="SECRET has no tag token"):
        target_text({"tagged": "my OTP is [SECRET] four eight two nine [SECRET] ok"})
    assert "[SECRET]" not in TAG_TEXTS and len(TAG_TEXTS) == 9


def test_every_tag_is_one_new_id_and_the_embedding_grows(tagged_model):
    model, processor, ids, before = tagged_model
    assert len(set(ids)) == len(TAG_TEXTS) and min(ids) >= before.shape[0]
    assert model.get_input_embeddings().weight.shape[0] == len(processor.tokenizer) == before.shape[0] + 9
    for tag, i in zip(TAG_TEXTS, ids):
        assert processor.tokenizer.encode(tag, add_special_tokens=False) == [i]


def test_old_rows_are_untouched_and_new_rows_are_the_mean_of_their_pieces(tagged_model):
    import torch

    from deid_speech.e2e.tokens import piece_ids

    model, processor, ids, before = tagged_model
    emb = model.get_input_embeddings().weight.detach()
    assert torch.equal(emb[: before.shape[0]], before)
    pieces = piece_ids(processor.tokenizer, "[PHONE]")
    assert processor.tokenizer.convert_tokens_to_ids("Ġphone") in pieces
    assert torch.allclose(emb[ids[TAG_TEXTS.index("[PHONE]")]], before[pieces].mean(0))


@pytest.mark.parametrize("tagged", [
    "can call me at [PHONE] nine eight seven six five four three two [PHONE] lah",
    "[PERSON] Jason Lim [PERSON] here, my I C is [NRIC] S eight four one two G [NRIC].",
    "Plate [CAR_PLATE] S K B, eight seven three six, S [CAR_PLATE], card [CREDIT_CARD] four five [CREDIT_CARD]",
])
def test_tagged_target_round_trips_with_each_tag_one_id(tagged_model, tagged):
    from deid_speech.asr.hf import label_ids
    from deid_speech.e2e.tokens import decode_tagged

    _, processor, ids, _ = tagged_model
    labels = label_ids(processor, target_text({"tagged": tagged}))
    tag_positions = [k for k, i in enumerate(labels) if i in ids]
    assert len(tag_positions) == sum(tagged.count(t) for t in TAG_TEXTS)
    assert 220 not in labels[2:]  # no bare-space token before a tag (but Whisper's leading space)
    assert decode_tagged(processor.tokenizer, labels) == normalize_tagged(tagged)
