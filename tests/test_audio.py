import shutil

import numpy as np
import pytest
import soundfile as sf

from deid_speech.audio import Audio, load, resample, save
from deid_speech.errors import DeidError
from factories import tone

needs_flite = pytest.mark.skipif(shutil.which("flite") is None, reason="needs flite")


@pytest.mark.parametrize("ext,fmt,subtype", [(".wav", "WAV", "PCM_16"), (".flac", "FLAC", "PCM_24"),
                                             (".ogg", "OGG", "VORBIS"), (".wav", "WAV", "FLOAT")])
def test_round_trip_keeps_container_rate_channels_and_length(tmp_path, ext, fmt, subtype):
    p = tmp_path / f"a{ext}"
    sf.write(p, tone(1.5, 44100, channels=2), 44100, format=fmt, subtype=subtype)
    a = load(p)
    assert (a.sample_rate, a.channels, a.format, a.subtype) == (44100, 2, fmt, subtype)
    q = tmp_path / f"b{ext}"
    save(a, q)
    info = sf.info(q)
    assert (info.samplerate, info.channels, info.format, info.subtype, info.frames) == (
        44100, 2, fmt, subtype, a.samples.shape[0])


def test_mp3_is_read_when_libsndfile_supports_it(tmp_path):
    if "MP3" not in sf.available_formats():
        pytest.skip("libsndfile here has no MP3")
    p = tmp_path / "a.mp3"
    sf.write(p, tone(1.0, 44100), 44100, format="MP3", subtype="MPEG_LAYER_III")
    a = load(p)
    assert a.format == "MP3" and abs(a.duration - 1.0) < 0.1


def test_mono16k_mixes_down_and_resamples():
    x = tone(2.0, 48000, channels=2)
    m = Audio(x, 48000).mono16k()
    assert m.ndim == 1 and len(m) == 32000 and m.dtype == np.float32
    assert len(resample(np.zeros(8000, np.float32), 8000, 16000)) == 16000


def test_missing_empty_zero_length_and_garbage_files_give_one_line_errors(tmp_path):
    cases = {"missing.wav": None, "empty.wav": b"", "garbage.wav": b"this is not audio at all" * 10}
    for name, content in cases.items():
        p = tmp_path / name
        if content is not None:
            p.write_bytes(content)
        with pytest.raises(DeidError) as e:
            load(p)
        assert "\n" not in str(e.value) and name in str(e.value)
    z = tmp_path / "zero.wav"
    sf.write(z, np.zeros((0, 1), np.float32), 16000)
    with pytest.raises(DeidError, match="zero length"):
        load(z)
    with pytest.raises(DeidError, match="directory"):
        load(tmp_path)


def test_save_is_atomic_and_leaves_no_temp_files(tmp_path):
    a = Audio(tone(0.5, 16000), 16000, "WAV", "PCM_16")
    save(a, tmp_path / "x.wav")
    assert [p.name for p in tmp_path.iterdir()] == ["x.wav"]


def _wav_with_header(tmp_path, rate=None, channels=None):
    import struct

    p = tmp_path / "lie.wav"
    sf.write(p, np.zeros((1600, 1), np.float32), 16000, subtype="PCM_16")
    b = bytearray(p.read_bytes())
    if rate is not None:
        b[24:28] = struct.pack("<I", rate)
    if channels is not None:
        b[22:24] = struct.pack("<H", channels)
    p.write_bytes(bytes(b))
    return p


@pytest.mark.parametrize("rate,channels,msg", [(1000003, None, "claims 1000003 Hz"),
                                               (10000019, None, "claims 10000019 Hz"),
                                               (None, 129, "claims 129 channels")])
def test_a_header_that_lies_is_a_one_line_error(tmp_path, rate, channels, msg):
    from deid_speech.audio import load
    from deid_speech.errors import DeidError

    with pytest.raises(DeidError, match=msg):
        load(_wav_with_header(tmp_path, rate, channels))


def test_odd_rates_resample_with_a_small_filter():
    from deid_speech.audio import resample

    y = resample(np.ones(44101, np.float32), 44101, 16000)
    assert abs(len(y) - 16000) <= 20


def test_quiet_speech_is_raised_for_recognition_and_normal_speech_is_untouched():
    from deid_speech.audio import for_recognition

    t = np.arange(16000) / 16000
    normal = (0.1 * np.sin(2 * np.pi * 200 * t)).astype(np.float32)
    quiet = normal * 10 ** (-70 / 20)
    assert for_recognition(normal) is normal
    up = for_recognition(quiet)
    assert 0.03 < np.sqrt(np.mean(up ** 2)) < 0.1 and np.abs(up).max() < 1
    assert not for_recognition(np.zeros(16000, np.float32)).any()


def test_dc_offset_is_the_constant_under_the_signal():
    from deid_speech.audio import dc_offset

    t = np.arange(16000 * 5) / 16000
    speech = (0.3 * np.sin(2 * np.pi * 130 * t)).astype(np.float32)
    assert abs(dc_offset(speech)) < 1e-4
    assert dc_offset(speech + 0.01) == pytest.approx(0.01, abs=1e-4)
    bumped = speech + 0.01
    bumped[16000 * 2: 16000 * 2 + 3200] += 0.5  # a pop moves one second's mean, not the median
    assert dc_offset(bumped) == pytest.approx(0.01, abs=1e-4)
    assert dc_offset(np.full(800, -0.02, np.float32)) == pytest.approx(-0.02)  # under a second: its mean
    assert dc_offset(np.zeros(0, np.float32)) == 0.0


def test_an_offset_is_taken_off_for_recognition_and_a_negligible_one_left_as_it_is():
    from deid_speech.audio import DC_MAX, for_recognition

    t = np.arange(16000 * 3) / 16000
    speech = (0.1 * np.sin(2 * np.pi * 200 * t)).astype(np.float32)
    heard = for_recognition(speech + np.float32(0.02))
    assert heard.dtype == np.float32 and abs(float(heard.mean())) < 1e-5
    assert np.allclose(heard, speech, atol=1e-6)
    small = speech + np.float32(DC_MAX / 2)
    assert for_recognition(small) is small  # below DC_MAX: the very same samples
    # quiet speech under an offset is still found quiet, and raised
    quiet = speech * 10 ** (-70 / 20) + np.float32(0.01)
    up = for_recognition(quiet.astype(np.float32))
    assert 0.03 < np.sqrt(np.mean(up ** 2)) < 0.1 and abs(float(up.mean())) < 1e-3


def _syllables(seconds: float, level: float, seed: int = 0) -> np.ndarray:
    """Speech-like 16 kHz noise: 0.2 s bursts of rising and falling loudness, each up to
    12 dB under ``level`` RMS, with 0.1 s gaps."""
    rng = np.random.default_rng(seed)
    n = int(seconds * 16000)
    envelope = np.zeros(n)
    for k in range(0, n, 4800):
        m = min(3200, n - k)
        envelope[k: k + m] = np.hanning(3200)[:m] * 10 ** (-rng.uniform(0, 12) / 20) * np.sqrt(2)
    return (level * rng.standard_normal(n) * envelope).astype(np.float32)


def _db(x: np.ndarray) -> float:
    return 20 * np.log10(float(np.sqrt(np.mean(np.asarray(x, np.float64) ** 2))))


@pytest.mark.parametrize("down", [25, 50])  # a far caller; a passage the VAD hears nothing in
def test_a_passage_far_quieter_than_the_call_is_raised_to_its_level_and_the_rest_kept_as_it_was(down):
    from deid_speech.audio import for_recognition, quiet_stretches

    loud, quiet = _syllables(4.0, 0.1), _syllables(3.0, 0.1 * 10 ** (-down / 20), seed=1)
    pause = np.zeros(8000, np.float32)
    x = np.concatenate([loud, pause, quiet, pause, loud]).astype(np.float32)
    ((a, b, gain),) = quiet_stretches(x)
    assert 4.0 <= a / 16000 <= 4.1 and 7.9 <= b / 16000 <= 8.0  # the pauses around it, not the loud speech
    assert down - 5 < 20 * np.log10(gain) < down + 5
    heard = for_recognition(x)
    q0, q1 = int(4.5 * 16000), int(7.5 * 16000)
    assert abs(_db(heard[q0:q1]) - _db(x[:64000])) < 6  # about as loud as the rest
    assert np.array_equal(heard[:64000], x[:64000]) and np.array_equal(heard[-64000:], x[-64000:])
    assert np.abs(heard).max() < 1
    # the gain is ramped in: no step at the edges of the stretch
    assert np.abs(np.diff(heard[a - 10: a + 400])).max() < 0.05


def test_pauses_a_noisy_line_and_short_sounds_are_not_raised():
    from deid_speech.audio import for_recognition, quiet_stretches

    loud = _syllables(3.0, 0.1)
    hiss = (1e-4 * np.random.default_rng(2).standard_normal(16000)).astype(np.float32)  # a pause's floor
    paused = np.concatenate([loud, hiss, loud, hiss, loud])
    assert quiet_stretches(paused) == [] and for_recognition(paused) is paused
    # a passage under the line's noise is heard by no one: nothing to raise
    noise = (0.005 * np.random.default_rng(3).standard_normal(16000 * 9)).astype(np.float32)
    line = noise + np.concatenate([loud, _syllables(3.0, 0.1 * 10 ** (-50 / 20), seed=4), loud])
    assert quiet_stretches(line.astype(np.float32)) == []
    # a quiet sound of 0.3 s (a breath, a cough far away) in a long pause is no passage
    click = np.zeros(32000, np.float32)
    click[8000:12800] = _syllables(0.3, 0.1 * 10 ** (-45 / 20), seed=5)
    assert quiet_stretches(np.concatenate([loud, click, loud])) == []


def test_a_quiet_passage_with_an_offset_of_its_own_is_raised_without_it():
    from deid_speech.audio import for_recognition

    loud = _syllables(4.0, 0.1)
    quiet = _syllables(3.0, 0.1 * 10 ** (-50 / 20), seed=1) + np.float32(0.002)  # a louder offset than the speech
    heard = for_recognition(np.concatenate([loud, quiet, loud]).astype(np.float32))
    part = heard[int(4.2 * 16000): int(6.8 * 16000)]
    assert abs(float(part.mean())) < 1e-3 and _db(part) > -35  # from -77 dB


@pytest.mark.model
def test_an_nric_said_50_db_under_the_call_is_found_and_beeped(tmp_path):
    """A caller far quieter than the agent: the VAD heard no speech there, so nothing was
    decoded or beeped (session 57's sweep). Now the passage is raised for recognition."""
    from deid_speech import models
    from deid_speech.pipeline import RedactConfig, Redactor

    call = load(models.path("example"))
    sr = call.sample_rate
    x = call.samples[13 * sr: 33 * sr].copy()  # "Jason Lim", the NRIC at 6.67-9.29 s, the card
    x[int(6.5 * sr): int(9.5 * sr)] *= 10 ** (-50 / 20)
    result = Redactor(RedactConfig(verify=False)).redact(Audio(x, sr))
    assert any(s.label == "NRIC" and s.start <= 6.8 and s.end >= 9.2 for s in result.spans)
    out = result.audio.samples[:, 0] if result.audio.samples.ndim == 2 else result.audio.samples
    frames = np.abs(out - (x[:, 0] if x.ndim == 2 else x))[int(6.67 * sr): int(9.29 * sr)].reshape(-1, sr // 100)
    assert (frames.max(axis=1) > 1e-3).mean() > 0.95  # beeped through


@pytest.mark.model
@needs_flite
def test_the_vad_hears_speech_under_a_dc_offset():
    """Silero misses speech under a constant offset (a cheap recorder's): quiet speech with 0.05
    added lost 15 % of its speech regions before the offset was taken off for recognition."""
    from deid_speech.asr.whisper import speech_regions
    from deid_speech.audio import for_recognition
    from deid_speech.intervals import covered
    from deid_speech.tts.flite import FliteSynthesizer

    voice = FliteSynthesizer("kal")  # 8 kHz
    x = resample(voice.synthesize("Hello, this is Tan Wei Ming. My IC is S nine eight seven six five four three A, "
                                  "and my number is nine one two three, four five six seven."), voice.sample_rate, 16000)
    x = (x * 0.01 / np.sqrt(np.mean(x ** 2))).astype(np.float32)
    clean = speech_regions(for_recognition(x))
    speech = sum(b - a for a, b in clean)
    assert speech > 5
    shifted = speech_regions(for_recognition((x + np.float32(0.05)).astype(np.float32)))
    assert sum(covered(a, b, shifted) for a, b in clean) > 0.99 * speech


def test_a_flac_of_unknown_length_is_read_to_its_end(tmp_path):
    x = (0.3 * np.sin(2 * np.pi * 300 * np.arange(32000) / 16000)).astype(np.float32)
    sf.write(tmp_path / "z.flac", x, 16000, subtype="PCM_16")
    b = bytearray((tmp_path / "z.flac").read_bytes())
    b[21] &= 0xF0  # STREAMINFO total_samples (36 bits) = 0: "unknown", which is legal
    b[22:26] = b"\0\0\0\0"
    (tmp_path / "z0.flac").write_bytes(bytes(b))
    a = load(tmp_path / "z0.flac")
    assert a.samples.shape == (32000, 1) and a.format == "FLAC" and abs(a.samples[:, 0] - x).max() < 1e-3


def _stereo_48k(tmp_path, right: str, name: str = "s.wav", subtype: str = "FLOAT"):
    import soundfile as sf

    rng = np.random.default_rng(3)
    left = (0.2 * rng.standard_normal(48000 * 7)).astype(np.float32)
    other = {"other": (0.1 * rng.standard_normal(len(left))).astype(np.float32), "same": left, "negated": -left}[right]
    p = tmp_path / name
    sf.write(p, np.stack([left, other], axis=1), 48000, subtype=subtype)
    return p


@pytest.mark.parametrize("right", ["other", "same", "negated"])
def test_a_file_read_a_block_at_a_time_gives_what_the_whole_file_gives(tmp_path, monkeypatch, right):
    from deid_speech.audio import AudioFile, load
    from deid_speech.redact import speech_level

    monkeypatch.setattr(AudioFile, "BLOCK_S", 0.5)  # 14 blocks
    p = _stereo_48k(tmp_path, right)
    whole = load(p)
    stream = AudioFile.open(p)
    tracks, level = stream.tracks16k()
    tracks = list(tracks)  # an iterator: later channels are read when asked for
    expected = whole.tracks16k()
    assert [c for c, _ in tracks] == [c for c, _ in expected] == ([0, 1] if right == "other" else [None])
    for (_, a), (_, b) in zip(tracks, expected):
        assert a.shape == b.shape and np.abs(a - b).max() < 1e-6
    assert level == pytest.approx(speech_level(whole.samples, 48000), rel=1e-5)
    assert (stream.duration, stream.sample_rate, stream.channels) == (7.0, 48000, 2)


def test_a_codec_libsndfile_cannot_seek_in_is_read_and_written_a_block_at_a_time(tmp_path, monkeypatch):
    """GSM 6.10 in WAV (many call recorders' format): libsndfile refuses to seek in it,
    and reading blocks with a seek back for each one's context failed on it."""
    import soundfile as sf

    from deid_speech.audio import AudioFile, load
    from deid_speech.redact import Operator, RedactOptions, redact_audio, speech_level
    from deid_speech.types import Span

    monkeypatch.setattr(AudioFile, "BLOCK_S", 0.5)  # 9 blocks, at 8 kHz: resampled with context
    t = np.arange(int(4.3 * 8000)) / 8000
    x = (0.3 * np.sin(2 * np.pi * 300 * t) * (1 + np.sin(2 * np.pi * 3 * t))).astype(np.float32)
    p = tmp_path / "call.wav"
    sf.write(p, x, 8000, subtype="GSM610")
    with sf.SoundFile(p) as f:
        assert not f.seekable()
    whole = load(p)
    stream = AudioFile.open(p)
    assert stream is not None and stream.subtype == "GSM610"
    (channel, track), = list(stream.tracks16k()[0])
    expected = whole.mono16k()
    assert channel is None and track.shape == expected.shape and np.abs(track - expected).max() < 1e-6
    spans = [Span(0.45, 1.3, "PHONE")]  # across a block edge
    options = RedactOptions(labels=(("PHONE", Operator(audio="silence")),))
    stream.write_redacted(tmp_path / "out.wav", spans, options, speech_level(whole.samples, 8000))
    assert sf.info(tmp_path / "out.wav").subtype == "GSM610"
    got, sr = sf.read(tmp_path / "out.wav", dtype="float32")
    want = redact_audio(whole, spans, options).samples[:, 0]
    assert sr == 8000 and got.shape == want.shape
    inside = slice(int(0.5 * 8000), int(1.25 * 8000))
    assert np.abs(got[inside]).max() < 1e-3 < np.abs(whole.samples[inside, 0]).max()  # silenced in the GSM copy


def test_a_redacted_copy_written_a_block_at_a_time_equals_the_one_made_in_memory(tmp_path, monkeypatch):
    import soundfile as sf

    from deid_speech import redact
    from deid_speech.audio import AudioFile, load
    from deid_speech.redact import Operator, RedactOptions, redact_audio, speech_level
    from deid_speech.types import Span

    monkeypatch.setattr(AudioFile, "BLOCK_S", 0.5)
    p = _stereo_48k(tmp_path, "other")
    spans = [Span(0.4, 1.3, "PHONE"), Span(2.0, 2.2, "PERSON"), Span(6.8, 7.0, "EMAIL")]  # across block edges
    options = RedactOptions(labels=(("PERSON", Operator(audio="noise")), ("EMAIL", Operator(audio="silence"))))
    whole = load(p)
    expected = redact_audio(whole, spans, options)
    # each region's fill is made when the writer reaches it, not all before the first block
    read, made_at = [0], []
    blocks, fills = AudioFile._blocks, redact.region_fills

    def counted_blocks(self, align=1):
        for block in blocks(self, align):
            read[0] += 1
            yield block

    def noted_fills(*args):
        for a, b, fill in fills(*args):
            made_at.append((a / 48000, read[0]))
            yield a, b, fill

    monkeypatch.setattr(AudioFile, "_blocks", counted_blocks)
    monkeypatch.setattr(redact, "region_fills", noted_fills)
    AudioFile.open(p).write_redacted(tmp_path / "out.wav", spans, options, speech_level(whole.samples, 48000))
    assert len(made_at) == 3 and made_at[-1][0] > 6.0
    # the writer looks one region ahead: region k is made with the block that region k - 1 starts in
    assert [n for _, n in made_at] == [0] + [int(t // 0.5) + 1 for t, _ in made_at[:-1]]
    got, sr = sf.read(tmp_path / "out.wav", dtype="float32", always_2d=True)
    assert sr == 48000 and got.shape == expected.samples.shape
    assert np.abs(got - np.clip(expected.samples, -1, 1)).max() < 1e-6
    assert not np.allclose(got, whole.samples)  # something was beeped
    assert list(tmp_path.glob(".tmp-*")) == []


def test_a_stream_that_holds_nan_fails_with_one_line(tmp_path):
    import soundfile as sf

    from deid_speech.audio import AudioFile
    from deid_speech.errors import DeidError

    x = np.zeros((48000, 2), np.float32)
    x[30000, 1] = np.nan
    sf.write(tmp_path / "nan.wav", x, 48000, subtype="FLOAT")
    with pytest.raises(DeidError, match="NaN"):
        AudioFile.open(tmp_path / "nan.wav").tracks16k()


def test_dither_is_drawn_in_blocks_with_the_values_of_one_draw():
    from deid_speech.audio import DITHER, dither

    x = np.random.default_rng(3).standard_normal(50_001).astype(np.float32)
    whole = (x + DITHER * np.random.default_rng(9).standard_normal(len(x))).astype(np.float32)
    for block in (1, 4096, 1 << 20):
        got = dither(x, 9, block=block)
        assert got.dtype == np.float32 and np.array_equal(got, whole)
    assert not np.array_equal(dither(x, 9), dither(x, 10)) and np.abs(dither(x, 9) - x).max() < 1e-3
    y = x.copy()
    assert dither(y, 9, out=y, block=4096) is y and np.array_equal(y, whole)  # in place: the same values


def test_a_streamed_file_reads_a_further_channel_only_when_it_is_asked_for(tmp_path, monkeypatch):
    from deid_speech.audio import AudioFile, load

    p = _stereo_48k(tmp_path, "other")
    stream = AudioFile.open(p)
    reads = []
    real = AudioFile._channel16k
    monkeypatch.setattr(AudioFile, "_channel16k", lambda self, k: reads.append(k) or real(self, k))
    tracks, _ = stream.tracks16k()
    assert reads == []
    first = next(tracks)
    assert first[0] == 0 and reads == []  # the first channel came with the first pass
    second = next(tracks)
    assert second[0] == 1 and reads == [1] and next(tracks, None) is None
    expected = load(p).tracks16k()
    assert np.abs(second[1] - expected[1][1]).max() < 1e-6 and np.abs(first[1] - expected[0][1]).max() < 1e-6


def test_a_dithered_track_gives_every_slice_the_values_of_the_whole_dither():
    """The verifier's dithered pass reads its audio by slices (windows, seek pieces) and whole
    for the VAD: each must be what dither() of the whole track gives there, bit for bit, in
    any order of reading, without a dithered copy of the track."""
    from deid_speech.audio import DitheredTrack, dither

    x = np.random.default_rng(3).standard_normal(50_001).astype(np.float32)
    whole = dither(x, 9)
    for block in (1000, 4096, 1 << 20):
        t = DitheredTrack(x, 9, block=block)
        assert len(t) == len(x) and t.ndim == 1 and t.shape == x.shape
        for a, b in [(49000, 50001), (0, 10), (3000, 9000), (4095, 4097), (100, 100), (20000, 19000), (0, 50001),
                     (-500, None), (2000, 2500)]:  # backwards, forwards, empty, from the end
            got = t[a:b]
            assert got.dtype == np.float32 and np.array_equal(got, whole[a:b]), (block, a, b)
        assert np.array_equal(np.asarray(t), whole) and np.array_equal(np.ascontiguousarray(t, np.float32), whole)
    assert not np.array_equal(DitheredTrack(x, 10)[:], whole)
    assert np.array_equal(x, np.random.default_rng(3).standard_normal(50_001).astype(np.float32))  # x untouched
    with pytest.raises(TypeError):
        DitheredTrack(x, 9)[::2]
    with pytest.raises(ValueError):
        DitheredTrack(np.zeros((10, 2), np.float32), 9)


@pytest.mark.parametrize("streamed", [True, False])
def test_a_float_file_keeps_its_samples_beyond_full_scale_outside_the_redactions(tmp_path, streamed):
    """A float WAV may hold samples over 1.0 (a hot mix); its redacted copy clipped them, so
    audio outside every redaction changed."""
    import soundfile as sf

    from deid_speech.audio import AudioFile, load, save
    from deid_speech.redact import Operator, RedactOptions, redact_audio, speech_level
    from deid_speech.types import Span

    t = np.arange(3 * 16000) / 16000
    x = (3.0 * np.sin(2 * np.pi * 200 * t)).astype(np.float32)  # peaks at 3x full scale
    src, out = tmp_path / "hot.wav", tmp_path / "hot.redacted.wav"
    sf.write(src, x, 16000, subtype="FLOAT")
    spans = [Span(1.0, 1.5, "PHONE")]
    options = RedactOptions(labels=(("PHONE", Operator(audio="silence", pad_before=0.0, pad_after=0.0)),))
    whole = load(src)
    if streamed:
        AudioFile.open(src).write_redacted(out, spans, options, speech_level(whole.samples, 16000))
    else:
        save(redact_audio(whole, spans, options), out)
    got, _ = sf.read(out, dtype="float32")
    assert sf.info(out).subtype == "FLOAT"
    outside = np.r_[0:16000, 24000:48000]
    assert np.array_equal(got[outside], x[outside]) and np.abs(got).max() == pytest.approx(3.0, rel=1e-3)
    assert np.abs(got[16000:24000]).max() == 0.0
