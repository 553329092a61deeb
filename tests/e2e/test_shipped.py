"""The shipped-model format: an int8 delta over the base weights rebuilds the fine-tuned model."""
import json

import numpy as np


def test_delta_over_the_base_rebuilds_the_finetuned_weights(tiny_whisper_dir, tmp_path, monkeypatch):
    import torch
    from safetensors.numpy import load_file

    from deid_speech.asr.hf import load_base
    from deid_speech.e2e.infer import check_model_dir
    from deid_speech.e2e.shipped import EMBED, make_delta
    from deid_speech.e2e.tokens import add_tags_to_model

    monkeypatch.setenv("DEID_SPEECH_CACHE", str(tmp_path / "cache"))
    model, processor = load_base(str(tiny_whisper_dir))
    add_tags_to_model(model, processor)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "encoder" not in name:  # like a frozen-encoder fine-tune
                p.add_(torch.randn(p.shape, generator=g) * 1e-3)
    ft = tmp_path / "ft"
    model.save_pretrained(ft)
    processor.save_pretrained(ft)

    meta = make_delta(ft, tmp_path / "ship", base=str(tiny_whisper_dir), embed_rows=51864)
    assert meta["max_abs_error"] < 1e-4
    rebuilt = check_model_dir(tmp_path / "ship")  # materialised into the cache, with ct2/
    assert (rebuilt / "ct2" / "model.bin").is_file()
    a, b = load_file(str(ft / "model.safetensors")), load_file(str(rebuilt / "model.safetensors"))
    assert set(a) == set(b)
    for k in a:
        assert a[k].shape == b[k].shape and np.abs(a[k] - b[k]).max() < 1e-4, k
    assert json.loads((tmp_path / "ship" / "e2e_delta.json").read_text())["base"] == str(tiny_whisper_dir)
    assert EMBED in a
