"""deid_speech.options: argparse flags and a --config TOML file from one dataclass."""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from deid_speech.errors import DeidError
from deid_speech.options import add_options, build


@dataclass(frozen=True)
class Opts:
    out: Path = field(metadata={"help": "where to write"})
    epochs: int = field(default=3, metadata={"help": "passes over the data"})
    lr: float = 1e-5
    max_steps: int | None = None
    mode: str = field(default="fast", metadata={"choices": ("fast", "slow")})
    resume: bool = True
    freeze: bool = False

    def __post_init__(self) -> None:
        if self.epochs < 1:
            raise ValueError("epochs must be >= 1")


def _parser(**kw) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="t")
    add_options(p, Opts, **kw)
    return p


def _build(argv: list[str], **kw) -> Opts:
    return build(_parser(**kw).parse_args(argv), Opts)


def _toml(tmp_path: Path, text: str) -> str:
    f = tmp_path / "c.toml"
    f.write_text(text)
    return str(f)


def test_defaults_and_flags() -> None:
    assert _build(["--out", "o"]) == Opts(out=Path("o"))
    o = _build(["--out", "o", "--epochs", "5", "--lr", "0.1", "--max-steps", "7", "--mode", "slow"])
    assert (o.epochs, o.lr, o.max_steps, o.mode) == (5, 0.1, 7, "slow") and isinstance(o.out, Path)


def test_bool_fields_are_flag_pairs() -> None:
    assert _build(["--out", "o"]).resume and not _build(["--out", "o"]).freeze
    o = _build(["--out", "o", "--no-resume", "--freeze"])
    assert not o.resume and o.freeze


def test_flags_override_the_file_which_overrides_the_defaults(tmp_path: Path) -> None:
    cfg = _toml(tmp_path, 'out = "from-file"\nepochs = 9\nlr = 1\nresume = false\n')
    o = _build(["--config", cfg])
    assert (o.out, o.epochs, o.lr, o.resume, o.mode) == (Path("from-file"), 9, 1.0, False, "fast")
    assert isinstance(o.lr, float)
    o = _build(["--config", cfg, "--epochs", "3", "--resume", "--out", "flag"])  # a flag equal to the default wins too
    assert (o.out, o.epochs, o.resume) == (Path("flag"), 3, True)


def test_parser_defaults_replace_field_defaults(tmp_path: Path) -> None:
    assert _build(["--out", "o"], defaults={"epochs": 5}).epochs == 5
    assert _build(["--config", _toml(tmp_path, "epochs = 2\n"), "--out", "o"], defaults={"epochs": 5}).epochs == 2
    assert "(default 5)" in _parser(defaults={"epochs": 5}).format_help()


@pytest.mark.parametrize("text, match", [
    ("epoch = 3\n", "unknown option.*epoch"),
    ('epochs = "3"\n', "epochs must be int"),
    ("epochs = 3.5\n", "epochs must be int"),
    ("resume = 1\n", "resume must be bool"),
    ('mode = "medium"\n', "mode must be one of fast, slow"),
    ("lr = [1]\n", "lr must be float"),
    ("epochs = \n", "not valid TOML"),
    ("epochs = 0\n", "epochs must be >= 1"),  # the dataclass's own check, as a DeidError
])
def test_bad_config_files_are_one_line_errors(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(DeidError, match=match) as e:
        _build(["--config", _toml(tmp_path, 'out = "o"\n' + text)])
    assert "\n" not in str(e.value)


def test_missing_file_and_missing_required_value(tmp_path: Path) -> None:
    with pytest.raises(DeidError, match="--config"):
        _build(["--config", str(tmp_path / "none.toml"), "--out", "o"])
    with pytest.raises(DeidError, match="--out is required"):
        _build([])


def test_excluded_fields_have_no_flag_and_no_key(tmp_path: Path) -> None:
    p = _parser(exclude=("freeze",))
    assert "--freeze" not in p.format_help()
    with pytest.raises(DeidError, match="unknown option"):
        build(p.parse_args(["--out", "o", "--config", _toml(tmp_path, "freeze = true\n")]), Opts)


def test_help_text_shows_help_choices_and_defaults() -> None:
    text = " ".join(_parser().format_help().split())
    assert "--out OUT where to write (required)" in text
    assert "--epochs EPOCHS passes over the data (default 3)" in text
    assert "--mode {fast,slow}" in text and "--resume, --no-resume" in text and "--config FILE" in text


# ------------------------------------------------------------------------------ training commands
@pytest.mark.parametrize("target", ["asr", "e2e"])
def test_training_commands_read_a_config_file(tmp_path: Path, capsys, target: str) -> None:
    from deid_speech.cli import main

    cfg = _toml(tmp_path, f'train = "{tmp_path / "none.jsonl"}"\ndev = "{tmp_path / "none.jsonl"}"\n'
                          f'out = "{tmp_path / "out"}"\nepochs = 2\n')
    assert main(["train", target, "--config", cfg]) == 1  # train, dev and out from the file
    assert f"--train {tmp_path / 'none.jsonl'}: no such manifest" in capsys.readouterr().err
    bad = _toml(tmp_path, "epochz = 2\n")
    assert main(["train", target, "--config", bad, "--train", "a", "--dev", "b", "--out", "c"]) == 1
    err = capsys.readouterr().err
    assert "unknown option(s) epochz" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("target, epochs, lr", [("asr", 3, 1e-5), ("e2e", 5, 1e-4)])
def test_training_command_defaults(target: str, epochs: int, lr: float) -> None:
    from deid_speech.asr.trainer import FinetuneOptions
    from deid_speech.cli import build_parser

    args = build_parser().parse_args(["train", target, "--train", "t", "--dev", "d", "--out", "o"])
    opts = build(args, FinetuneOptions)
    assert (opts.epochs, opts.lr, opts.out, opts.resume, opts.ct2) == (epochs, lr, Path("o"), True, True)
    args = build_parser().parse_args(["train", target, "--train", "t", "--dev", "d", "--out", "o",
                                      "--no-resume", "--no-ct2", "--freeze-encoder", "--max-steps", "4"])
    opts = build(args, FinetuneOptions)
    assert (opts.resume, opts.ct2, opts.freeze_encoder, opts.max_steps) == (False, False, True, 4)


@pytest.mark.parametrize("command", [["augment", "--out", "o.jsonl", "--backend", "template"],
                                     ["tts", "--in", "x.jsonl", "--out-dir", "o"],
                                     ["train", "ner", "--train", "a.jsonl", "--dev", "b.jsonl", "--out", "o"],
                                     ["train", "asr"], ["train", "e2e"]])
def test_every_training_and_data_command_takes_a_config_file(command, tmp_path, capsys) -> None:
    from deid_speech.cli import main

    cfg = tmp_path / "c.toml"
    cfg.write_text("no_such_option = 1\n")
    assert main([*command, "--config", str(cfg)]) == 1
    err = capsys.readouterr().err
    assert "unknown option(s) no_such_option" in err and len(err.strip().splitlines()) == 1


def test_data_command_options_come_from_the_file(tmp_path) -> None:
    import argparse

    from deid_speech.augment.llm import BackendOptions
    from deid_speech.augment.run import AugmentOptions
    from deid_speech.cli import build_parser
    from deid_speech.tts.cli import VoiceOptions

    cfg = tmp_path / "c.toml"
    cfg.write_text('n = 7\nstrategy = "diverse"\nbackend = "template"\n')
    args = build_parser().parse_args(["augment", "--out", "o", "--config", str(cfg), "--n", "9"])
    assert (build(args, AugmentOptions).n, build(args, AugmentOptions).strategy, build(args, BackendOptions).backend) \
        == (9, "diverse", "template")
    cfg.write_text('workers = 2\naugment = "telephone"\n')
    args = build_parser().parse_args(["tts", "--in", "x", "--out-dir", "o", "--config", str(cfg)])
    v = build(args, VoiceOptions)
    assert (v.workers, v.augment, v.voices) == (2, "telephone", "default") and "flite" in v.held_out
    cfg.write_text('augment = "loud"\n')
    with pytest.raises(DeidError, match="augment must be one of"):
        build(build_parser().parse_args(["tts", "--in", "x", "--out-dir", "o", "--config", str(cfg)]), VoiceOptions)
    assert isinstance(args, argparse.Namespace)
