"""The one exception type the CLI turns into a one-line message (no traceback)."""


class DeidError(Exception):
    """A user-facing failure: bad input, missing model, failed stage."""
