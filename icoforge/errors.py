"""User-facing errors: the CLI prints these as one line, without a traceback."""

from __future__ import annotations

import difflib


class IcoforgeError(Exception):
    """Base class for errors caused by bad input (names, files, shapes, schedules)."""


# Up to this many choices are listed in full; longer lists (78 programs) name the command that
# shows them instead of flooding the one-line error.
MAX_LISTED_CHOICES = 24  # every backend name (22 with the granule's roundtrip ones and GT4Py's *_plain objects) is listed


class UnknownNameError(IcoforgeError, KeyError):
    """A misspelt program, grid or backend name; the message suggests the closest names and
    lists the valid ones (or, for long lists, says where to find them: `see`)."""

    def __init__(self, kind: str, name: str, known: list[str] | tuple[str, ...], *, see: str | None = None):
        known = list(known)
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        if len(known) <= MAX_LISTED_CHOICES:
            choices = f" Valid: {', '.join(known)}." if known else ""
        else:
            choices = f" {len(known)} valid names" + (f": see `{see}`." if see else f", e.g. {', '.join(known[:5])}, ...")
        super().__init__(f"unknown {kind} {name!r}.{hint}{choices}")
        self.kind, self.name, self.suggestions, self.choices = kind, name, close, known

    def __str__(self) -> str:  # KeyError would otherwise print the repr
        return self.args[0]


class UnsupportedConstructError(IcoforgeError):
    """A GT4Py construct the icoforge backend does not lower (a compile-time error, never wrong numbers)."""


class CallArgumentError(IcoforgeError, ValueError):
    """A compiled program called with an argument of the wrong kind (e.g. a tuple of the wrong length)."""
