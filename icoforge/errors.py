"""User-facing errors: the CLI prints these as one line, without a traceback."""

from __future__ import annotations

import difflib


class IcoforgeError(Exception):
    """Base class for errors caused by bad input (names, files, shapes, schedules)."""


class UnknownNameError(IcoforgeError, KeyError):
    """A misspelt program, grid or backend name; the message suggests the closest names."""

    def __init__(self, kind: str, name: str, known: list[str] | tuple[str, ...]):
        close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        super().__init__(f"unknown {kind} {name!r}.{hint}")
        self.kind, self.name, self.suggestions = kind, name, close

    def __str__(self) -> str:  # KeyError would otherwise print the repr
        return self.args[0]


class UnsupportedConstructError(IcoforgeError):
    """A GT4Py construct the icoforge backend does not lower (a compile-time error, never wrong numbers)."""


class CallArgumentError(IcoforgeError, ValueError):
    """A compiled program called with an argument of the wrong kind (e.g. a tuple of the wrong length)."""
