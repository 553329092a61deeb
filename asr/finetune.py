"""`deid-speech train asr` (being written: the options and training live here)."""
from __future__ import annotations

import argparse

from deid_speech.errors import DeidError


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    return subparsers.add_parser("asr", help="(not available yet)")


def run(args: argparse.Namespace) -> int:
    raise DeidError("deid-speech train asr is not available in this version")
