"""Keypad tones (DTMF): read back from clean and telephone audio, never heard in speech or in
the other tones of a phone line, and beeped by redact with no key named."""
import json
import shutil

import numpy as np
import pytest
import soundfile as sf

from deid_speech.dtmf import JOIN_S, key_runs, key_tone, keypad_tones

needs_flite = pytest.mark.skipif(shutil.which("flite") is None, reason="needs flite")
SR = 16000


def keyed(keys: str, tone_s: float = 0.07, gap_s: float = 0.06, lead_s: float = 0.5, sr: int = SR, **kw):
    """Keys pressed one after another, after ``lead_s`` of near silence: (audio, [(start, end)])."""
    parts, times, t = [np.zeros(int(lead_s * sr), np.float32)], [], lead_s
    for k in keys:
        parts += [key_tone(k, tone_s, sr, **kw), np.zeros(int(round(gap_s * sr)), np.float32)]
        times.append((t, t + tone_s))
        t += tone_s + gap_s
    parts.append(np.zeros(int(0.5 * sr), np.float32))
    x = np.concatenate(parts)
    x += np.random.default_rng(0).normal(0, 1e-4, len(x)).astype(np.float32)  # a line's hiss
    return x, times


def test_every_key_is_read_back_at_its_time():
    x, times = keyed("0123456789*#")
    runs = key_runs(x)
    assert "".join(k for _, _, k in runs) == "0123456789*#"
    for (a, b, _), (s, e) in zip(runs, times):
        assert a <= s + 0.01 and b >= e - 0.01  # the whole tone
        assert a > s - 0.04 and b < e + 0.04  # and not much more
    (a, b), = keypad_tones(x)  # 60 ms apart: one number keyed in
    assert a <= times[0][0] and b >= times[-1][1]


def test_keys_far_apart_are_regions_of_their_own():
    x, times = keyed("12", gap_s=JOIN_S + 0.4)
    assert len(keypad_tones(x)) == 2


@pytest.mark.parametrize("kw", [dict(tone_s=0.045), dict(dbfs=-40.0), dict(twist_db=6.0), dict(twist_db=-6.0),
                                dict(detune=0.015), dict(detune=-0.015)])
def test_short_quiet_twisted_or_detuned_keys_through_a_phone_line_are_read(kw):
    from deid_speech.tts.channel import add_noise, telephone

    tone_s = kw.pop("tone_s", 0.08)
    x, _ = keyed("9123456780#*", tone_s=tone_s, **kw)
    y = telephone(add_noise(x, 30.0, np.random.default_rng(1)) if kw.get("dbfs", 0) > -30 else x)
    assert "".join(k for _, _, k in key_runs(y)) == "9123456780#*"


def test_tones_that_are_no_key_are_not_read_as_keys():
    t = np.arange(3 * SR) / SR

    def pair(f1, f2, amp=0.2):
        return (amp * (np.sin(2 * np.pi * f1 * t) + (np.sin(2 * np.pi * f2 * t) if f2 else 0))).astype(np.float32)

    others = {"beep (redact's own)": pair(1000, None), "dial tone": pair(350, 440), "ringback": pair(440, 480),
              "busy": pair(480, 620), "Singapore ringback": pair(425, None), "fourth column (A)": pair(697, 1633),
              "a row tone alone": pair(770, None), "a column tone alone": pair(1336, None)}
    for name, x in others.items():
        assert key_runs(x) == [], name
    short, _ = keyed("5", tone_s=0.02)  # 20 ms: ITU-T Q.24 lets a receiver refuse under 23 ms
    assert key_runs(short) == []


@pytest.mark.model
@needs_flite
@pytest.mark.parametrize("voice", ["kal", "slt", "awb", "rms"])
def test_speech_is_not_read_as_keys(voice):
    from deid_speech.audio import resample
    from deid_speech.tts.flite import FliteSynthesizer

    synth = FliteSynthesizer(voice)
    x = resample(synth.synthesize("My card is four one one one, two two two two, three three three three, nine nine "
                                  "nine nine. Please key in your PIN, then press the hash key. Oh, ah, hmm, "
                                  "eeee, mmmm, one, two, three, star, hash."), synth.sample_rate, SR)
    assert len(x) > 5 * SR and key_runs(x) == []


@pytest.mark.model
@needs_flite
def test_keys_a_voice_talks_over_are_found_beside_clear_ones():
    from deid_speech.audio import resample
    from deid_speech.dtmf import _runs, frame_keys
    from deid_speech.intervals import covered
    from deid_speech.tts.flite import FliteSynthesizer

    synth = FliteSynthesizer("slt")
    v = resample(synth.synthesize("Yes, I am keying it in now, hold on ah, one moment."), synth.sample_rate, SR)
    x, times = keyed("9876543210", tone_s=0.1, gap_s=0.1, dbfs=-25.0)
    a = int(times[3][0] * SR)  # the voice starts at the fourth key, louder than the tones
    v = (v * 10 ** (-19 / 20) / np.sqrt(np.mean(v ** 2)))[: len(x) - a]
    x[a:a + len(v)] += v
    assert len(v) / SR > times[-1][1] - times[3][0]  # every later key is talked over
    sure = "".join(k for *_, k in _runs(frame_keys(x)))
    assert sure != "9876543210"  # the full rules lose keys under the voice ...
    assert "".join(k for *_, k in key_runs(x)) == "9876543210"  # ... found beside the clear ones
    regions = keypad_tones(x)
    assert sum(covered(s, e, regions) for s, e in times) == pytest.approx(sum(e - s for s, e in times))


def test_redact_beeps_keypad_tones_names_no_key_and_says_so(tmp_path):
    from deid_speech.ner.patterns import PatternDetector
    from deid_speech.pipeline import RedactConfig, Redactor, redact_file
    from deid_speech.types import Transcript

    class NoWords:  # a recogniser that hears nothing: tones are no words
        name = "none"

        def transcribe(self, audio, progress=None):
            return Transcript("", [])

    x, times = keyed("4111111111111111", lead_s=2.0)
    stereo = np.stack([x, np.zeros_like(x)], axis=1)  # keyed on the caller's channel only
    src = tmp_path / "call.wav"
    sf.write(src, stereo, SR, subtype="PCM_16")
    for uncovered in ("beep", "warn"):  # beeped whatever --uncovered says
        r = Redactor(RedactConfig(verify=False, uncovered=uncovered), asr=NoWords(), detectors=[PatternDetector()])
        out, json_out, result = redact_file(r, src, tmp_path / uncovered, {src.resolve()})
        y, _ = sf.read(out, dtype="float32", always_2d=True)
        assert key_runs(x) and key_runs(y[:, 0]) == [] and key_runs(y[:, 1]) == []
        (a, b), = result.keypad
        assert a <= times[0][0] and b >= times[-1][1] and b - a < times[-1][1] - times[0][0] + 0.1
        report = json.loads(json_out.read_text())
        assert report["keypad_tones"] == [[round(a, 2), round(b, 2)]]
        assert "4111" not in json_out.read_text() and report["spans"] == []
        quiet = y[: int((times[0][0] - 0.3) * SR), 0]  # the lead before the keys (and their padding) is left alone
        assert np.abs(quiet).max() < 1e-3


def test_eval_counts_keypad_tones_as_beeped():
    from deid_speech.eval.run import Prediction, over_redaction_causes
    from deid_speech.redact import RedactOptions
    from deid_speech.types import Span, Transcript

    pred = Prediction([], Transcript("", []), "", RedactOptions(), [], [(3.0, 4.0)])
    causes = dict(over_redaction_causes([Span(0.0, 1.0, "PHONE")], pred, []))
    assert causes["keypad tones"] and causes["keypad tones"][0][0] <= 3.0 and causes["keypad tones"][0][1] >= 4.0


def _bench():
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("dtmf_bench", Path(__file__).resolve().parents[1] / "bench" / "dtmf.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _voices(folder, n=4):
    """A manifest of ``n`` speech-like files (a harmonic voice gliding in pitch), no keypad tone."""
    from pathlib import Path

    folder = Path(folder)
    (folder / "audio").mkdir(parents=True)
    lines = []
    for i in range(n):
        t = np.arange(int(2.0 * SR)) / SR
        f0 = 110 + 40 * i + 30 * np.sin(2 * np.pi * 0.7 * t)
        phase = 2 * np.pi * np.cumsum(f0) / SR
        x = sum(np.sin(h * phase) / h for h in range(1, 20)) * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t))
        sf.write(folder / "audio" / f"v{i}.wav", (0.1 * x).astype(np.float32), SR)
        lines.append(json.dumps({"id": f"v{i}", "audio": f"audio/v{i}.wav"}))
    (folder / "manifest.jsonl").write_text("\n".join(lines) + "\n")
    return folder / "manifest.jsonl"


def test_the_bench_finds_keyed_numbers_and_no_keys_in_voices(tmp_path, monkeypatch):
    bench = _bench()
    manifest = _voices(tmp_path / "dev" / "utterances")
    monkeypatch.setattr(bench, "CHANNELS", ("clean", "telephone", "talk-over"))
    out = tmp_path / "r.json"
    bench.main(["--trials", "3", "--speech", str(manifest), "--talk-off", str(manifest), "--out", str(out)])
    r = json.loads(out.read_text())
    for channel in ("clean", "telephone"):
        assert r["keyed"][channel]["keys"] >= 18 and r["keyed"][channel]["keys_read"] == 1.0
        assert r["keyed"][channel]["tone_leak_pct"] == 0.0 and r["keyed"][channel]["keys_read_back_after_beeping"] == 0
    assert r["talk_off"][str(manifest)]["key_runs"] == 0 and r["talk_off"][str(manifest)]["hours"] > 0


def test_the_bench_refuses_a_test_part(tmp_path):
    manifest = _voices(tmp_path / "test2" / "utterances", n=3)
    with pytest.raises(SystemExit, match="test part"):
        _bench().main(["--trials", "1", "--speech", str(manifest)])
