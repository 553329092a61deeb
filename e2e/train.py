"""`deid-speech train e2e` (being written: the options and training live here)."""
from __future__ import annotations

import argparse

from deid_speech.errors import DeidError


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    return subparsers.add_parser("e2e", help="(not available yet)")


def run(args: argparse.Namespace) -> int:
    raise DeidError("deid-speech train e2e is not available in this version")
