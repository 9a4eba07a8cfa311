"""The pages' command lines, run as a reader runs them, against the session's
local stack: a page that says what is no longer true fails here.

Every ```` ```bash ```` block of README.md and docs/*.md runs, in its page's
order, in one bash per page (a reader's terminal: variables carry from one
block to the next) with ``set -euo pipefail``, so an undefined variable, a
missing tool or a failing command fails the page; unless the line before the
block says why it cannot run here::

    <!-- not run by tests/e2e/test_doc_commands.py: <why> -->

(``make dev`` itself, a deployed stack, a container engine...). A command
line naming ``STACK=`` works on a deployed stack: it is left out. Every
``curl`` must answer the status its comment starts with (``# 403: ...``), or a
2xx when its comment names none.

What differs from a reader's terminal, and only that:

- the ``make`` lines find the session's stack, not ``.local/``:
  ``LOCAL_STACK_STATE_DIR`` names its state directory (local_stack.running_stack);
- ``127.0.0.1:3000`` is the session stack's API, and any other
  ``127.0.0.1:<port>`` (with the ``--port <port>`` of the command that
  listens there) a free port;
- the commands run in a directory of links to the project's files, so what
  they write (``acme.jsonl``, ``usage.png``) lands there, not in your
  checkout;
- a command whose comment names another terminal (``# terminal 2: ...``) runs
  in the background until its page ends; the page waits for its
  ``--port`` to answer;
- a command that already ran, word for word, on this page or an earlier one
  is not run again (``make tenant TENANT=acme STATUS=SUSPENDED`` is in the
  README and again in operations.md: each is a Python start, seconds of a
  loaded machine's CPU), unless it sets a variable (each page's shell is its
  own).

The pages run in one test, README first, then docs/ by name, as a reader
who follows them in that order: their lines share the demo tenants.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import pytest

from stack_model.template import PROJECT_ROOT
from tests.doc_pages import PAGES, blocks
from tests.e2e.conftest import RunningStack, delete_webhooks

# About 20 commands, each a Python start (make token, make tenant...): a minute and more of a
# loaded 2-core machine's wall clock, where the suite's default is 300 s for any test.
pytestmark = pytest.mark.timeout(900)

DOC_API_PORT = 3000
PAGE_TIMEOUT_S = 300
# Each curl's final status line, appended to $DOCS_STATUSES; failures still fail the page.
PRELUDE = r"""set -euo pipefail
BACKGROUND=()
trap 'for pid in "${BACKGROUND[@]}"; do kill "$pid" 2>/dev/null || true; done' EXIT
curl() {
  local headers status=0 code
  headers=$(mktemp)
  command curl --dump-header "$headers" "$@" || status=$?
  code=$(grep -a '^HTTP/' "$headers" | tail -n 1 | cut -d ' ' -f 2 || true)
  echo "${code:-000}" >> "$DOCS_STATUSES"
  rm -f "$headers"
  return "$status"
}
wait_for_port() {
  for _ in $(seq 300); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "nothing listens on port $1" >&2
  return 1
}
"""


def commands(text: str) -> list[str]:
    """The block's command lines, a backslash-continued command joined into one."""
    joined: list[str] = []
    pending = ""
    for line in text.splitlines():
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    return [line for line in joined if line.strip()]


def split_comment(command: str) -> tuple[str, str]:
    """The command and its trailing comment (a ``#`` outside quotes, after a blank or at the start)."""
    quote = ""
    for position, char in enumerate(command):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (position == 0 or command[position - 1].isspace()):
            return command[:position].rstrip(), command[position + 1 :].strip()
    return command.rstrip(), ""


def free_port() -> int:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        port: int = listener.getsockname()[1]
        return port


@dataclass
class Script:
    """A page's runnable lines as one bash script, and the status each of its curls must answer."""

    text: str
    expected: list[str]  # "201", or "2xx"
    ran: list[str]  # the command lines it runs, as written in the page


def page_script(page: Path, api_port: int, already_run: set[str]) -> Script | None:
    """The script of the page's runnable lines; ``already_run`` (the commands of earlier
    pages) gets this page's."""
    runnable = [block for block in blocks(page) if block.not_run is None]
    if not runnable:
        return None
    source = "\n".join(block.text for block in runnable)
    ports = {int(port) for port in re.findall(r"127\.0\.0\.1:(\d+)", source)}
    ports_here = {port: api_port if port == DOC_API_PORT else free_port() for port in ports}

    def here(command: str) -> str:
        for doc_port, port in ports_here.items():
            command = re.sub(rf"(127\.0\.0\.1:|--port ){doc_port}\b", rf"\g<1>{port}", command)
        return command

    lines, expected, ran = [PRELUDE], [], []
    for block in runnable:
        lines.append(f"# {page.name}:{block.line}")
        for command in commands(block.text):
            if "STACK=" in command:  # a deployed stack
                continue
            code, comment = split_comment(command)
            words = " ".join(code.split())
            if not code or (words in already_run and not re.match(r"\w+=", words)):
                continue
            already_run.add(words)
            ran.append(command)
            status = re.match(r"(\d{3})\b", comment)
            expected += [status[1] if status else "2xx"] * len(re.findall(r"(?:^|[\s(|;&])curl\s", code))
            if re.match(r"terminal \d", comment):
                lines.append(f"{here(code)} > {shlex.quote(comment.split(':')[0])}.log 2>&1 &")
                lines.append('BACKGROUND+=("$!")')
                lines += [f"wait_for_port {port}" for port in re.findall(r"--port (\d+)", here(code))]
            else:
                lines.append(here(code))
    return Script("\n".join(lines) + "\n", expected, ran)


def project_links(directory: Path, state_dir: Path) -> Path:
    """A directory of links to the project's files, its ``.local`` the session stack's state directory."""
    directory.mkdir()
    for entry in PROJECT_ROOT.iterdir():
        if entry.name not in {".local", ".git"}:
            (directory / entry.name).symlink_to(entry)
    (directory / ".local").symlink_to(state_dir)
    return directory


def run_page(page: Path, stack: RunningStack, workdir: Path, already_run: set[str]) -> str | None:
    """Run the page's lines; the failure, described, or ``None``."""
    api_port = urllib.parse.urlsplit(stack.api_url).port
    assert api_port is not None
    script = page_script(page, api_port, already_run)
    if script is None:
        return None
    shown = page.relative_to(PROJECT_ROOT)
    statuses = workdir / f"{page.stem}.statuses"
    statuses.write_text("")
    (workdir / f"{page.stem}.sh").write_text(script.text)
    # A reader's terminal: no AWS credentials, no make of ours around it.
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("AWS_") and name not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PYTHONPATH"}
    }
    env.update(LOCAL_STACK_STATE_DIR=str(stack.state_dir), DOCS_STATUSES=str(statuses))
    result = subprocess.run(  # noqa: S603 - the pages' own lines, against the local stack
        ["bash", f"{page.stem}.sh"],  # noqa: S607 - bash from PATH, as a reader's
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=PAGE_TIMEOUT_S,
        check=False,
    )
    answered = statuses.read_text().split()
    matches = len(answered) == len(script.expected) and all(
        got == want or (want == "2xx" and got.startswith("2"))
        for got, want in zip(answered, script.expected, strict=True)
    )
    if result.returncode == 0 and matches:
        return None
    ran = "\n".join(script.ran)
    return (
        f"{shown}: exit {result.returncode}, curl statuses {answered}, expected {script.expected}\n"
        f"--- its lines:\n{ran}\n--- stdout:\n{result.stdout[-3000:]}\n--- stderr:\n{result.stderr[-3000:]}"
    )


def test_every_pages_command_lines_run_as_written(stack: RunningStack, tmp_path: Path) -> None:
    workdir = project_links(tmp_path / "project", stack.state_dir)
    started = time.monotonic()
    already_run: set[str] = set()
    try:
        failures = [failure for page in PAGES if (failure := run_page(page, stack, workdir, already_run))]
    finally:
        # The pages register webhooks to receivers that stop with their page: none left to retry.
        delete_webhooks(stack, "acme", "ada")
    assert failures == [], "\n\n".join(failures) + f"\n({time.monotonic() - started:.1f} s)"
