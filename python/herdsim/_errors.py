"""The exceptions herdsim raises: one taxonomy, as the command line's exit codes.

Bad input (exit code 2 on the command line) is a ``ValueError``:
``InputError``, and ``ScenarioError`` for a scenario that does not load or
validate, which names the file, the key and the line and column.
Anything else is a ``HerdsimError``.
"""

from __future__ import annotations


class HerdsimError(Exception):
    """A failure that is not the caller's input (a write that failed, ...)."""


class InputError(HerdsimError, ValueError):
    """Bad input: an argument, a file, a value (the command line's exit code 2)."""


class ScenarioError(InputError):
    """A scenario that does not load or validate.

    Attributes:
        file: the scenario's file (``"<dict>"`` for a dict).
        key: the dotted key at fault (``agents.0.count``), if one is.
        line: its line in the file (1-based), if known; never for a dict.
        column: its column (1-based), if known; never for a dict.
    """

    file: str
    key: str | None
    line: int | None
    column: int | None

    def __init__(
        self,
        message: str,
        file: str,
        key: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        super().__init__(message)
        self.file = file
        self.key = key
        self.line = line
        self.column = column
