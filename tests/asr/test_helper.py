"""The verifier in a helper process: the same redaction as in this process, one-line errors,
and no re-import of the caller's script."""
import subprocess
import sys

import numpy as np
import pytest

from deid_speech import models
from deid_speech.errors import DeidError


@pytest.fixture(scope="module")
def clip():
    from deid_speech.audio import for_recognition, load

    return for_recognition(load(models.path("example")).mono16k())[: 25 * 16000]  # two names and an NRIC


@pytest.mark.model
def test_the_helper_decodes_bit_for_bit_as_this_process_does(clip):
    from deid_speech.asr.helper import HelperTranscriber
    from deid_speech.asr.whisper import AsrOptions, Transcriber
    from deid_speech.audio import dither

    options = AsrOptions.second_opinion(model="tiny.en-sg", threads=1)
    helper = HelperTranscriber(options)
    try:
        first, second = helper.submit(clip), helper.submit(clip[: 10 * 16000])  # queued, answered in order
        here = Transcriber(AsrOptions.second_opinion(model="tiny.en-sg"))  # two threads: the same words
        assert second.result().transcript == here.transcribe(clip[: 10 * 16000])
        assert first.result().transcript == here.transcribe(clip)
        assert helper.name == "tiny.en-sg"
        # passes of one audio: sent once, each dithered by the helper with its own seed
        plain, dithered = helper.submit_passes(clip[: 10 * 16000], (0, 1))
        assert dithered.result().transcript == here.transcribe(dither(clip[: 10 * 16000], 1))
        assert plain.result().transcript == second.result().transcript
        # a track in shared memory: mapped by the helper, not copied; the same words
        shared = helper.share(clip[: 10 * 16000])
        assert not shared.flags.writeable and np.array_equal(shared, clip[: 10 * 16000])
        again = helper.submit_passes(shared, (0, 1))
        assert [p.result().transcript for p in again] == [plain.result().transcript, dithered.result().transcript]
        assert np.array_equal(shared, clip[: 10 * 16000])  # the dithered pass wrote nothing into it
    finally:
        helper.close()
    assert helper._proc.returncode == 0


@pytest.mark.model
def test_a_helper_with_two_models_decodes_each_pass_with_its_turn(clip):
    """``--verifier tiny.en,tiny.en-sg`` in the helper: pass 0 by tiny.en, pass 1 (dithered) by
    tiny.en-sg, pass 2 by tiny.en again, each as that model decodes in this process; on audio
    this long the helper holds one model at a time (``take_turn``), so each pass after the first
    rebuilds its model, and the words are still the same."""
    from deid_speech.asr.helper import HelperTranscriber
    from deid_speech.asr.whisper import TURN_RELEASE_S, AsrOptions, Transcriber
    from deid_speech.audio import dither

    part = np.concatenate([clip, clip, clip])[: int((TURN_RELEASE_S + 1) * 16000)]
    names = ("tiny.en", "tiny.en-sg")
    helper = HelperTranscriber(tuple(AsrOptions.second_opinion(model=m, threads=1) for m in names))
    try:
        assert helper.name == "tiny.en,tiny.en-sg"
        got = [p.result().transcript for p in helper.submit_passes(part, (0, 1, 2))]
        assert [p.result().transcript for p in helper.submit_passes(helper.share(part), (0, 1, 2))] == got
    finally:
        helper.close()
    here = [Transcriber(AsrOptions.second_opinion(model=m)) for m in names]
    assert got[0] == here[0].transcribe(part)
    assert got[1] == here[1].transcribe(dither(part, 1))
    assert got[2] == here[0].transcribe(dither(part, 2))
    assert got[0] != here[1].transcribe(part)  # the models differ on this clip: the turn matters


@pytest.mark.model
def test_the_redaction_is_the_same_with_the_verifier_beside_or_after_the_first_decoder(clip):
    from deid_speech.pipeline import RedactConfig, Redactor

    found = {}
    for beside in (True, False):
        r = Redactor(RedactConfig(verify_in_helper=beside))
        try:
            if beside:  # three passes, all sent to the helper: this process may take back 0 and 2 (tiny.en-sg)
                assert type(r.verifier).__name__ == "Beside" and set(r.verifier.mine) == {0, 2}
                assert r.verifier.mine[0] is r.verifier.mine[2] and r.verifier.mine[0]._built is None  # built when used
                assert type(r.verifier.helper).__name__ == "HelperTranscriber" and r.verifier.others == [r.asr]
            else:
                assert type(r.verifier).__name__ == "ByPass"
            result = r.redact_tracks([(None, clip)], (25.0, 16000, 1))
        finally:
            r.close()
        found[beside] = ([(s.start, s.end, s.label, s.source) for s in result.spans], result.transcript,
                         result.verification)
    assert found[True] == found[False]
    assert found[True][2]["passes"] == 3 and any(label == "NRIC" for _, _, label, _ in found[True][0])


@pytest.mark.model
def test_a_result_nobody_asks_for_is_discarded_and_a_result_can_be_asked_again():
    import gc

    from deid_speech.asr.helper import HelperTranscriber
    from deid_speech.asr.whisper import AsrOptions

    helper = HelperTranscriber(AsrOptions(model="tiny.en", threads=1))
    try:
        silence = np.zeros(16000, np.float32)
        dropped = helper.submit(silence)  # the file failed before its verification asked
        kept = helper.submit(silence)
        del dropped
        gc.collect()
        first = kept.result()
        assert kept.result() is first  # asked again: the same result, no wait on the pipe
        assert helper._done == {} and helper._abandoned == set()  # nothing held for a dropped handle
        late = helper.submit(silence)
        third = helper.submit(silence)
        assert third.result().transcript.words == ()  # reads the second result first and keeps it
        assert list(helper._done) == [late._seq]
        del late
        gc.collect()
        assert helper._done == {} and helper._abandoned == set()
    finally:
        helper.close()


@pytest.mark.model
def test_abandoned_passes_and_the_passes_after_a_failed_one_are_not_decoded(clip):
    import gc

    from deid_speech.asr.helper import HelperTranscriber
    from deid_speech.asr.whisper import AsrOptions

    helper = HelperTranscriber(AsrOptions(model="tiny.en", threads=1))
    try:
        passes = helper.submit_passes(clip, (0, 1, 2))  # seconds each: the file fails before it asks
        del passes
        gc.collect()  # the helper is told at once, while it decodes (at most) the first pass
        assert helper.submit(np.zeros(16000, np.float32)).result().transcript.words == ()
        assert helper.skipped >= 2 and helper._abandoned == set() and helper._done == {}
        before = helper.skipped
        bad = helper.submit_passes(np.zeros((2, 2, 2), np.float32), (0, 1, 2))  # no mono audio
        errors = []
        for pending in bad:
            with pytest.raises(DeidError) as e:
                pending.result()
            errors.append(str(e.value))
        assert len(set(errors)) == 1 and "the second decoder failed" in errors[0]  # one failure, said thrice
        assert helper.skipped == before + 2  # passes 1 and 2 were not decoded
        assert helper.submit(np.zeros(16000, np.float32)).result().transcript.words == ()  # still serving
    finally:
        helper.close()
    assert helper._proc.returncode == 0


@pytest.mark.model
def test_a_pass_the_helper_has_not_begun_can_be_taken_back_and_one_it_has_begun_cannot(clip):
    """``Pending.claim``: the helper leaves a decoding it has not begun to this process (and
    writes nothing anybody waits for in its place); one it has begun, or finished, stays its."""
    import time

    from deid_speech.asr.helper import HelperTranscriber
    from deid_speech.asr.whisper import AsrOptions

    helper = HelperTranscriber(AsrOptions(model="tiny.en", threads=1))
    try:
        first = helper.submit(clip)  # seconds of decoding: the passes queue behind it
        part = clip[: 10 * 16000]
        passes = helper.submit_passes(part, (0, 1, 2))
        assert passes[2].claim() and passes[0].claim()  # not begun: taken back
        assert passes[2].claim()  # asked again: still this process's
        with pytest.raises(DeidError, match="taken back from the helper"):
            passes[0].result()
        assert first.result().transcript.words and not first.claim()  # decoded: the helper's
        kept = passes[1].result().transcript  # the pass between them is still the helper's, and in its place
        again = helper.submit_passes(part, (0, 1))
        assert again[1].result().transcript == kept and again[0].result().transcript.words
        assert helper.skipped == 0 and helper._done == {} and helper._abandoned == set()
        begun = helper.submit(part)
        time.sleep(1.0)  # the helper, idle, begins it at once
        assert not begun.claim()
        assert begun.result().transcript.words  # decoded there, as asked
    finally:
        helper.close()
    assert helper._proc.returncode == 0


def test_a_missing_model_is_a_one_line_error_before_any_process_starts(tmp_path):
    from deid_speech.asr.helper import HelperTranscriber
    from deid_speech.asr.whisper import AsrOptions

    with pytest.raises(DeidError) as e:
        HelperTranscriber(AsrOptions(model=str(tmp_path / "no-such-model")))
    assert "no-such-model" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.model
def test_a_helper_that_dies_fails_the_result_in_one_line(clip):
    from deid_speech.asr.helper import HelperTranscriber
    from deid_speech.asr.whisper import AsrOptions

    helper = HelperTranscriber(AsrOptions(model="tiny.en", threads=1))
    pending = helper.submit(clip)
    helper._proc.kill()
    with pytest.raises(DeidError, match="the helper process decoding with tiny.en stopped"):
        pending.result()
    with pytest.raises(DeidError, match="stopped"):
        helper.submit(clip).result()


@pytest.mark.model
def test_the_helper_reports_a_decoding_error_in_one_line_and_goes_on():
    from deid_speech.asr.helper import HelperTranscriber
    from deid_speech.asr.whisper import AsrOptions

    helper = HelperTranscriber(AsrOptions(model="tiny.en", threads=1))
    try:
        with pytest.raises(DeidError, match="the second decoder failed"):
            helper.submit(np.zeros((2, 2, 2), np.float32)).result()  # no mono audio
        assert helper.submit(np.zeros(16000, np.float32)).result().transcript.words == ()  # still serving
    finally:
        helper.close()


@pytest.mark.model
def test_a_script_without_a_main_guard_can_use_the_helper(tmp_path):
    script = tmp_path / "plain.py"  # no `if __name__ == "__main__"`: a spawned child would run it again
    script.write_text(
        "import numpy as np\n"
        "from deid_speech.asr.helper import HelperTranscriber\n"
        "from deid_speech.asr.whisper import AsrOptions\n"
        "print('started', flush=True)\n"
        "h = HelperTranscriber(AsrOptions(model='tiny.en', threads=1))\n"
        "print(len(h.recognize(np.zeros(16000, np.float32)).transcript.words))\n"
        "h.close()\n")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["started", "0"]  # the script ran once


def test_pools_give_each_worker_its_own_core_and_no_helper():
    from deid_speech.batch import one_process_each
    from deid_speech.pipeline import RedactConfig

    assert RedactConfig().verify_in_helper is None
    assert one_process_each(RedactConfig()).verify_in_helper is False


def test_results_are_written_while_nobody_reads_and_arrive_whole_and_in_order():
    """A pass over a ten-minute call pickles to more than a pipe holds: the helper must go on
    decoding while the parent is busy with its own decoding, not wait to write."""
    import os
    import pickle
    import threading

    from deid_speech.asr.helper import ResultWriter

    r, w = os.pipe()
    inp, out = os.fdopen(r, "rb"), os.fdopen(w, "wb")
    big = [("ok", bytes([k]) * (300 * 1024)) for k in range(3)]  # each over four times a pipe's 64 KiB
    writer = ResultWriter(out)
    done = threading.Event()

    def produce():
        for item in big:
            writer.put(item)
        done.set()

    try:
        threading.Thread(target=produce, daemon=True).start()
        assert done.wait(10), "put waited for the reader"
        got = [pickle.load(inp) for _ in big]
        writer.close()  # returns once all is written
        assert not writer._thread.is_alive() and not writer.broken.is_set()
        out.close()
        assert inp.read() == b""  # nothing after the last result
        assert got == big
    finally:
        inp.close()  # a writer still blocked on the pipe gets an error and ends
        writer._thread.join(10)


def test_a_writer_whose_reader_is_gone_drops_the_rest_and_closes():
    import os

    from deid_speech.asr.helper import ResultWriter

    r, w = os.pipe()
    os.close(r)
    writer = ResultWriter(os.fdopen(w, "wb"))
    for _ in range(3):
        writer.put(("ok", b"x" * 100_000))
    writer._queue.put(None)
    writer._thread.join(10)
    assert not writer._thread.is_alive() and writer.broken.is_set()  # the loop stops decoding for nobody
    assert writer._out.closed


def test_a_result_that_cannot_be_written_ends_the_stream_so_the_parent_fails_not_waits():
    """Before the writer thread, such an error ended the helper and the parent saw it stop; a
    dead writer thread must not leave the parent waiting on a pipe nobody fills."""
    import os
    import pickle
    import threading

    from deid_speech.asr.helper import ResultWriter

    r, w = os.pipe()
    inp = os.fdopen(r, "rb")
    writer = ResultWriter(os.fdopen(w, "wb"))
    try:
        writer.put(("ok", "fine"))
        writer.put(("ok", threading.Lock()))  # cannot be pickled
        writer.put(("ok", "never written"))
        writer._queue.put(None)
        writer._thread.join(10)
        assert not writer._thread.is_alive() and writer.broken.is_set()
        assert pickle.load(inp) == ("ok", "fine")
        with pytest.raises((EOFError, pickle.UnpicklingError)):  # the stream ends: "the helper stopped"
            pickle.load(inp)
    finally:
        inp.close()


def test_a_shared_track_is_read_only_mapped_by_its_descriptor_and_let_go_with_its_last_reference():
    import gc
    import os

    from deid_speech.asr.helper import _mapped, _shared_fd, share

    x = np.random.default_rng(1).standard_normal(48_000).astype(np.float32)
    track = share(x)
    if not hasattr(os, "memfd_create"):
        pytest.skip("no memfd here: the track goes through the pipe")
    assert np.array_equal(track, x) and track is not x and not track.flags.writeable
    fd = _shared_fd(track)
    assert fd is not None and _shared_fd(track[:]) is None and _shared_fd(x) is None  # a view is sent as a copy
    seen = _mapped(os.dup(fd), len(x))  # what the helper maps: the same pages, read-only
    assert np.array_equal(seen, x) and not seen.flags.writeable
    with pytest.raises((ValueError, TypeError)):
        seen[0] = 1.0
    del track
    gc.collect()
    with pytest.raises(OSError):
        os.fstat(fd)  # the descriptor is closed with the track
    assert np.array_equal(seen, x)  # a mapping outlives the descriptor (the helper's pass goes on)
