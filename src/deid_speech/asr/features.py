"""Whisper's log-Mel features for a long stretch of audio, a few thousand frames at a time.

faster-whisper's ``FeatureExtractor`` computes the short-time Fourier transform of the whole
audio it is given in one go: for the 300 s that the seeking decoder takes at a time
(``whisper.SEEK_CHUNK_S``) that is about 250 MB of frames and spectra, briefly, in every
process that decodes, for a 9.6 MB result. :class:`FrugalFeatureExtractor` gives the same
array bit for bit: each frame's spectrum does not depend on the other frames, so the power
spectra are computed :data:`FRAMES_PER_BLOCK` frames at a time into one float32 array (24 MB
for 300 s), laid out in memory as faster-whisper's is; the Mel product runs once over all of
them (BLAS sums a block of columns, or another layout, in another order than the whole: one
unit in the last place apart), then the floor 8 decades under the loudest value, as
faster-whisper does.
Installed on each faster-whisper model (:meth:`deid_speech.asr.whisper.Transcriber._load`).
"""
from __future__ import annotations

import numpy as np
from faster_whisper.feature_extractor import FeatureExtractor

FRAMES_PER_BLOCK = 3000  # 30 s of 10 ms frames: about 25 MB of intermediates


class FrugalFeatureExtractor(FeatureExtractor):
    """faster-whisper's extractor (same settings, same output), computed in blocks of frames."""

    def __call__(self, waveform: np.ndarray, padding=160, chunk_length=None):
        if chunk_length is not None:
            self.n_samples = chunk_length * self.sampling_rate
            self.nb_max_frames = self.n_samples // self.hop_length
        if waveform.dtype is not np.float32:
            waveform = waveform.astype(np.float32)
        if padding:
            waveform = np.pad(waveform, (0, padding))
        half = self.n_fft // 2
        if len(waveform) + 2 * half < self.n_fft or len(waveform) <= half:
            return super().__call__(waveform, padding=0)  # too short to block (and its errors are faster-whisper's)
        padded = np.pad(waveform, (half, half), mode="reflect")  # stft's centring
        del waveform
        window = np.hanning(self.n_fft + 1)[:-1].astype("float32")
        frames = 1 + (len(padded) - self.n_fft) // self.hop_length
        kept = frames - 1  # the last frame is dropped (``stft[..., :-1]``)
        # column-major, as faster-whisper's (a transposed FFT): BLAS then takes the same path for the
        # Mel product (a row-major copy was 1 ulp off for an 11-frame clip on an AVX-512 machine)
        magnitudes = np.empty((self.n_fft // 2 + 1, kept), np.float32, order="F")
        for f0 in range(0, kept, FRAMES_PER_BLOCK):
            f1 = min(f0 + FRAMES_PER_BLOCK, kept)
            part = padded[f0 * self.hop_length: (f1 - 1) * self.hop_length + self.n_fft]
            cols = np.lib.stride_tricks.as_strided(part, (f1 - f0, self.n_fft), (self.hop_length * part.strides[0],
                                                                                  part.strides[0]))
            spectrum = np.fft.rfft(cols * window, n=self.n_fft, axis=-1).T.astype("complex64")
            magnitudes[:, f0:f1] = np.abs(spectrum) ** 2
        del padded
        # one product over all frames: BLAS sums a block of columns in another order than the whole
        log_spec = np.log10(np.clip(self.mel_filters @ magnitudes, a_min=1e-10, a_max=None))
        del magnitudes
        log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
        return (log_spec + 4.0) / 4.0
