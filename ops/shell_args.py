"""Run a command with the extra arguments ``$ARGS`` names, never letting a shell read them.

    ARGS='--tenant-isolation --no-seed' python -m ops.shell_args <program> [<arg>...]

``make dev ARGS=...`` and ``make deploy ARGS=...`` pass their extra command
line arguments this way: the Makefile puts ``ARGS`` into the recipe's
environment (never into its text), and this splits it into words as a POSIX
shell would (quotes and backslashes group and escape) with :func:`shlex.split`,
which expands nothing: no `` `…` `` or ``$(…)`` runs, no ``$VAR`` is
replaced, no ``*`` matches a file. Then it replaces itself with
``<program> <arg>... <ARGS' words>`` (same process: Ctrl-C and the exit status
are the program's). ARGS that do not split (an unbalanced quote) are a
one-line error and exit status 1, before anything runs.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping, Sequence

VARIABLE = "ARGS"


class ArgsError(ValueError):
    """``$ARGS`` does not split into words."""


def command(argv: Sequence[str], environ: Mapping[str, str]) -> list[str]:
    """``argv`` followed by the words of ``environ["ARGS"]`` (none when it is unset or blank)."""
    if not argv:
        raise ArgsError("usage: python -m ops.shell_args <program> [<arg>...]")
    try:
        extra = shlex.split(environ.get(VARIABLE, ""), comments=False, posix=True)
    except ValueError as exc:
        raise ArgsError(f"{VARIABLE} {environ.get(VARIABLE, '')!r}: {exc}") from None
    return [*argv, *extra]


def main(argv: Sequence[str] | None = None) -> int:
    try:
        words = command(sys.argv[1:] if argv is None else argv, os.environ)
    except ArgsError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    sys.stdout.flush()
    os.execvp(words[0], words)  # noqa: S606 - the Makefile's own program, with ARGS' words as its arguments


if __name__ == "__main__":
    raise SystemExit(main())
