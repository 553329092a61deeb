"""deid-speech: offline speech de-identification.

``import deid_speech`` stays light (no torch, no models); heavy imports happen where used.
"""
from deid_speech.types import LABELS, EntitySpan, Span, Transcript, Word, parse_tagged, render_tagged

__all__ = ["LABELS", "EntitySpan", "Span", "Transcript", "Word", "parse_tagged", "render_tagged"]
__version__ = "0.1.0"
