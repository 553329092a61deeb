"""`train e2e` through the shared Whisper trainer: a random tiny model learns to write tags."""
from pathlib import Path

import pytest

from deid_speech.e2e.tags import TAG_TEXTS


def greedy_ids(model, processor, records):
    import torch

    from deid_speech.asr.hf import features, load_audio

    model.eval()
    with torch.inference_mode():
        feats = features(processor, [load_audio(r["audio"]) for r in records])
        return model.generate(input_features=feats, max_new_tokens=40, num_beams=1, do_sample=False).tolist()


def test_random_tiny_whisper_learns_to_emit_tag_tokens(tiny_whisper_dir, clip_records, tmp_path):
    from transformers import WhisperForConditionalGeneration, WhisperProcessor

    from deid_speech.asr.hf import load_base
    from deid_speech.asr.trainer import FinetuneOptions, finetune
    from deid_speech.e2e.tokens import add_tags_to_model, decode_tagged, init_tag_embedding, target_text

    model, processor = load_base(str(tiny_whisper_dir))
    ids = set(add_tags_to_model(model, processor))
    before = greedy_ids(model, processor, clip_records)
    assert not any(i in ids for row in before for i in row)

    opts = FinetuneOptions(out=tmp_path / "run", base=str(tiny_whisper_dir), max_steps=60, batch_size=2,
                           lr=3e-3, warmup_steps=0, eval_every=1000, eval_at_start=False, patience=0,
                           ct2=False, threads=2)
    summary = finetune(clip_records, clip_records, opts, target_fn=target_text, extra_tokens=TAG_TEXTS,
                       init_token=init_tag_embedding, dev_score=lambda m, p, r: 0.0)
    assert summary["added_tokens"] == list(TAG_TEXTS)
    losses = [x for _, x in summary["train_losses"]]
    assert losses[-1] < losses[0] / 3

    trained = WhisperForConditionalGeneration.from_pretrained(tmp_path / "run")
    proc = WhisperProcessor.from_pretrained(tmp_path / "run")
    after = greedy_ids(trained, proc, clip_records)
    assert all(any(i in ids for i in row) for row in after)
    assert any(t in decode_tagged(proc.tokenizer, after[0]) for t in TAG_TEXTS)


def test_train_e2e_cli_rejects_a_missing_manifest_in_one_line(tmp_path):
    from deid_speech.cli import main

    assert main(["train", "e2e", "--train", str(tmp_path / "nope.jsonl"), "--dev", str(tmp_path / "nope.jsonl"),
                 "--out", str(tmp_path / "out")]) == 1


def test_train_e2e_cli_lora_without_peft_is_a_one_line_error(tmp_path, clip_records, capsys):
    from deid_speech.cli import main

    manifest = str(Path(clip_records[0]["audio"]).parent / "manifest.jsonl")
    rc = main(["train", "e2e", "--train", manifest, "--dev", manifest, "--out", str(tmp_path / "o"), "--lora"])
    assert rc == 1 and "peft" in capsys.readouterr().err


@pytest.mark.parametrize("device, backend", [("cpu", "ct2"), ("cuda", "hf")])
def test_dev_score_decodes_on_the_gpu_with_the_model_itself(monkeypatch, device, backend):
    """On a GPU the dev score decodes with the training model (no CTranslate2 copy, whose
    int8 decoding runs on the CPU); on the CPU with the int8 copy that `redact` runs."""
    from types import SimpleNamespace

    from deid_speech.e2e import train as e2e_train
    from deid_speech.eval.overlap import OverlapScore

    seen = []

    def fake_score_model(model, processor, records, backend="ct2"):
        seen.append(backend)
        return {"agnostic": OverlapScore(), "exact": OverlapScore()}

    class Model:
        def parameters(self):
            yield SimpleNamespace(device=SimpleNamespace(type=device))

    monkeypatch.setattr(e2e_train, "score_model", fake_score_model)
    assert e2e_train.dev_score(Model(), None, []) == pytest.approx(1.01)  # nothing to find, nothing found
    assert seen == [backend]


def test_train_e2e_cli_refuses_a_dev_set_that_is_the_train_set_and_zero_steps(tmp_path, clip_records, capsys):
    from deid_speech.cli import main

    manifest = str(Path(clip_records[0]["audio"]).parent / "manifest.jsonl")
    assert main(["train", "e2e", "--train", manifest, "--dev", manifest, "--out", str(tmp_path / "o")]) == 1
    assert "--dev shares 2 of its 2 records with --train" in capsys.readouterr().err
    import json

    train, dev = tmp_path / "train.jsonl", tmp_path / "dev.jsonl"
    train.write_text(json.dumps(clip_records[0]) + "\n")
    dev.write_text(json.dumps(clip_records[1]) + "\n")
    assert main(["train", "e2e", "--train", str(train), "--dev", str(dev), "--out", str(tmp_path / "o"),
                 "--max-steps", "0"]) == 1
    err = capsys.readouterr().err
    assert "max_steps must be >= 1" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_an_unfinished_run_is_refused_at_inference_until_it_is_resumed(tiny_whisper_dir, clip_records, tmp_path):
    from deid_speech.asr.trainer import CHECKPOINT, SUMMARY, FinetuneOptions, finetune
    from deid_speech.e2e.infer import check_model_dir
    from deid_speech.e2e.tokens import init_tag_embedding, target_text
    from deid_speech.errors import DeidError

    assert (CHECKPOINT, SUMMARY) == ("checkpoint", "training.json")  # the names check_model_dir looks for
    out = tmp_path / "run"
    opts = FinetuneOptions(out=out, base=str(tiny_whisper_dir), max_steps=2, batch_size=2, eval_every=1,
                           eval_at_start=False, patience=0, ct2=False, threads=1)

    def train(progress=None):
        return finetune(clip_records, clip_records, opts, target_fn=target_text, extra_tokens=TAG_TEXTS,
                        init_token=init_tag_embedding, dev_score=lambda m, p, r: 0.0, progress=progress)

    def stop(step, total):
        if step == 2:  # after the step-1 checkpoint and best model
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(stop)
    assert (out / "model.safetensors").is_file() and not (out / "training.json").exists()
    with pytest.raises(DeidError, match="training did not finish; rerun the same `deid-speech train e2e` command"):
        check_model_dir(out)
    assert train()["resumed_from_step"] == 1
    assert check_model_dir(out) == out
