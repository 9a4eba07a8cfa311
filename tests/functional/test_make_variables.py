"""The Makefile's targets hand every variable to their command as it was given:
no shell (and not make either) ever reads a value as a command.

Each target names the variables it takes (``$(call takes,<target>,<names>)``);
every one of them is run here through the real target, ``make <target>
<NAME>=<payload>``, with a payload that creates a file if anything evaluates
it (a ``"; ...; "``, a `` `...` ``, a ``$(...)``, make's ``$(shell ...)``).
The commands are stand-ins that record their arguments (``BIN=`` a directory
whose ``python`` and ``sam`` do that; ``STAMP=``: the venv is not looked at),
so each run takes milliseconds: the command must get ``--<name>=<payload>``,
the payload as it was written, and no file appears. A few targets run their
real command too, which refuses the payload with its one-line error: that
line names the payload as it was written, and ``make`` exits 2 after the
command's 1 (docs/operations.md, "Exit statuses")."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ops import offboard, shell_args, tenants
from stack_model.template import PROJECT_ROOT

MAKEFILE = PROJECT_ROOT / "Makefile"
TAKES = re.compile(r"^\$\(call takes,([a-z-]+),([A-Z_ ]+)\)$", re.MULTILINE)
# Variables of make itself, or of the make that runs these tests (`make test`).
MAKE_ENVIRONMENT = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "PYTHONPATH"}


def taken() -> dict[str, list[str]]:
    """Each target's variables, as the Makefile declares them."""
    return {target: names.split() for target, names in TAKES.findall(MAKEFILE.read_text(encoding="utf-8"))}


def every_variable() -> set[str]:
    return {name for names in taken().values() for name in names}


def payload(directory: Path) -> str:
    """A value that creates a file in ``directory`` wherever a shell or make evaluates it."""
    return (
        f'x"; touch {directory}/quote; echo " `touch {directory}/backquote` $(touch {directory}/dollar)'
        f" $(shell touch {directory}/make) ';touch {directory}/single;'"
    )


def args_payload(directory: Path) -> str:
    """ARGS' payload: words a shell would run, in quotes that must group them (and only that)."""
    return (
        f'--parameter "Name=a b" "x; touch {directory}/quote" \'`touch {directory}/backquote`\''
        f" $(touch {directory}/dollar) $(shell touch {directory}/make) ;touch {directory}/semicolon"
    )


def environment() -> dict[str, str]:
    """A terminal's: no make around it, no AWS, none of the Makefile's variables already set."""
    skipped = MAKE_ENVIRONMENT | every_variable()
    return {name: value for name, value in os.environ.items() if not name.startswith("AWS_") and name not in skipped}


RECORDER = """#!{python}
import json, os, sys

arguments = sys.argv[1:]
if arguments[:2] == ["-m", "ops.shell_args"]:  # make dev and make deploy's own wrapper: the real one
    from ops.shell_args import main

    raise SystemExit(main(arguments[2:]))
with open(os.environ["RECORD"], "a", encoding="utf-8") as record:
    record.write(json.dumps([os.path.basename(sys.argv[0]), *arguments]) + "\\n")
"""


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    """A ``BIN=`` whose ``python`` and ``sam`` record their arguments (and run ``ops.shell_args``)."""
    directory = tmp_path / "bin"
    directory.mkdir()
    for name in ("python", "sam"):
        program = directory / name
        program.write_text(RECORDER.format(python=sys.executable), encoding="utf-8")
        program.chmod(0o755)
    return directory


def make(*arguments: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - make, with the test's own arguments
        ["make", "--no-print-directory", "-C", str(PROJECT_ROOT), *arguments],  # noqa: S607 - make from PATH
        env=env or environment(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def recorded(record: Path) -> list[list[str]]:
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]


def evaluated(directory: Path) -> list[str]:
    """The files a payload made: what some shell or make ran."""
    return sorted(path.name for path in directory.iterdir())


def option(name: str) -> str:
    """The command line option a variable becomes: TENANT is --tenant, MOVE_WORKERS --move-workers."""
    return "--" + name.lower().replace("_", "-")


def test_every_target_that_takes_a_variable_is_covered() -> None:
    # The parametrization below comes from the Makefile: this guards the parsing.
    targets = taken()
    assert {"token", "onboard", "tenant", "dedicated", "export", "usage", "offboard", "reconcile"} <= set(targets)
    assert {"dev", "deploy", "delete", "help"} <= set(targets)
    assert {"TENANT", "USERS", "ADMINS", "MOVE_WORKERS", "DRAIN_SECONDS", "MOVE_RATE", "ARGS"} <= every_variable()
    # and no recipe splices a variable that reaches a shell: every $(NAME) of a recipe line is
    # one make evaluates itself ($(if $(NAME),...), $(filter ...,$(NAME))), never the value's text.
    text = MAKEFILE.read_text(encoding="utf-8")
    recipes = [line for line in text.splitlines() if line.startswith("\t")]
    for name in every_variable():
        for line in recipes:
            for used in re.finditer(rf"(?<!\$)\$\({name}\)", line):
                before = line[: used.start()]
                assert re.search(r"\$\((if|filter [^,]*,)\s*$", before), f"{name} spliced into: {line.strip()}"


# Taken as the others are, but not an option of the command: tested below, each on its own.
OWN_TESTS = {"ARGS", "TEST_WORKERS"}


@pytest.mark.parametrize(
    ("target", "name"), [(target, name) for target, names in taken().items() for name in names if name not in OWN_TESTS]
)
def test_a_variable_reaches_its_command_as_written(target: str, name: str, tmp_path: Path, bin_dir: Path) -> None:
    # Given a value that runs a command wherever a shell or make evaluates it
    evaluated_dir = tmp_path / "evaluated"
    evaluated_dir.mkdir()
    value = payload(evaluated_dir)
    record = tmp_path / "record"
    env = environment() | {"RECORD": str(record)}
    # When the target runs with it (its command a recorder)
    result = make(target, f"BIN={bin_dir}", "STAMP=", "RUNTIME=", f"{name}={value}", env=env)
    # Then nothing ran it, and the command got it as written, as the option of that name
    assert evaluated(evaluated_dir) == [], result
    assert result.returncode == 0, result.stderr
    if target == "help":
        assert f"http://127.0.0.1:{value}" in result.stdout
        return
    command = recorded(record)[-1]
    assert f"{option(name)}={value}" in command, (command, result.stdout)


@pytest.mark.parametrize("target", [target for target, names in taken().items() if "ARGS" in names])
def test_args_split_like_shell_words_and_nothing_in_them_runs(target: str, tmp_path: Path, bin_dir: Path) -> None:
    evaluated_dir = tmp_path / "evaluated"
    evaluated_dir.mkdir()
    value = args_payload(evaluated_dir)
    record = tmp_path / "record"
    result = make(
        target, f"BIN={bin_dir}", "STAMP=", "RUNTIME=", f"ARGS={value}", env=environment() | {"RECORD": str(record)}
    )
    assert evaluated(evaluated_dir) == [], result
    assert result.returncode == 0, result.stderr
    command = recorded(record)[-1]
    words = shlex.split(value)
    assert command[-len(words) :] == words
    assert words[:3] == ["--parameter", "Name=a b", f"x; touch {evaluated_dir}/quote"]  # quotes group, and only
    expected = {"dev": ["python", "-m", "local_stack", "serve", "--port=3000"], "deploy": ["sam", "deploy"]}
    assert command[: -len(words)] == expected[target]


@pytest.mark.parametrize(("cells", "added"), [(None, []), ("1", []), ("2", ["--cells=2"])])
def test_dev_is_one_stack_unless_cells_asks_for_several(
    cells: str | None, added: list[str], tmp_path: Path, bin_dir: Path
) -> None:
    record = tmp_path / "record"
    variables = [] if cells is None else [f"CELLS={cells}"]
    result = make("dev", f"BIN={bin_dir}", "STAMP=", *variables, env=environment() | {"RECORD": str(record)})
    assert result.returncode == 0, result.stderr
    assert recorded(record)[-1] == ["python", "-m", "local_stack", "serve", "--port=3000", *added]


def test_args_that_do_not_split_are_a_one_line_error(tmp_path: Path, bin_dir: Path) -> None:
    record = tmp_path / "record"
    result = make(
        "dev", f"BIN={bin_dir}", "STAMP=", "ARGS=--parameter 'unbalanced", env=environment() | {"RECORD": str(record)}
    )
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == 'error: ARGS "--parameter \'unbalanced": No closing quotation'
    assert recorded(record) == []  # the stack never started


@pytest.mark.parametrize("target", ["test", "test-deep"])
@pytest.mark.parametrize("given", [True, False], ids=["given", "default"])
def test_test_workers_reach_pytest_as_one_word(target: str, given: bool, tmp_path: Path) -> None:
    # Given the suite's programs as recorders, and a worker count that runs a command
    # wherever a shell or make evaluates it (or none: one worker more than the CPUs)
    directory = tmp_path / "bin"
    directory.mkdir()
    for name in ("python", "sam", "ruff", "mypy", "pytest"):
        program = directory / name
        program.write_text(RECORDER.format(python=sys.executable), encoding="utf-8")
        program.chmod(0o755)
    evaluated_dir = tmp_path / "evaluated"
    evaluated_dir.mkdir()
    value = payload(evaluated_dir)
    record = tmp_path / "record"
    given_workers = [f"TEST_WORKERS={value}"] if given else []
    # When the target runs (its prerequisites' installs left out)
    result = make(
        target,
        f"BIN={directory}",
        "STAMP=",
        "RUNTIME=",
        "ORACLE=",
        "CHECKOV=",
        *given_workers,
        env=environment() | {"RECORD": str(record)},
    )
    # Then nothing ran it, and pytest got it as written, as -n's one word
    assert evaluated(evaluated_dir) == [], result
    assert result.returncode == 0, result.stderr
    (pytest_run,) = [command for command in recorded(record) if command[0] == "pytest"]
    workers = value if given else str(len(os.sched_getaffinity(0)) + 1)
    assert pytest_run[:5] == ["pytest", "-n", workers, "--dist", "loadscope"]


def test_no_args_add_no_argument() -> None:
    assert shell_args.command(["sam", "deploy"], {}) == ["sam", "deploy"]
    assert shell_args.command(["sam", "deploy"], {"ARGS": "  "}) == ["sam", "deploy"]
    assert shell_args.command(["sam", "deploy"], {"ARGS": "--guided"}) == ["sam", "deploy", "--guided"]
    assert shell_args.command(["x"], {"ARGS": "'$HOME' *"}) == ["x", "$HOME", "*"]  # no expansion, no glob


# ---------------------------------------------------------------- the real commands


def real(target: str, *variables: str) -> subprocess.CompletedProcess[str]:
    """The target with its real command (the venv's), no stack running anywhere it looks."""
    return make(target, "STAMP=", *variables, env=environment() | {"LOCAL_STACK_STATE_DIR": "/nonexistent"})


def test_a_refused_value_is_the_commands_one_line_error_then_makes_own_and_make_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A tenant id a shell would have run, through make and to the command itself
    value = payload(tmp_path)
    through_make = real("tenant", f"TENANT={value}")
    direct = tenants.main([f"--tenant={value}", "--local"])
    assert evaluated(tmp_path) == []
    error = "error: tenant id must be 1-63 lowercase letters, digits or '-'"
    assert (direct, capsys.readouterr().err.splitlines()) == (1, [error])
    # make prints the command's line, then its own naming the command's status, and exits 2
    assert through_make.returncode == 2
    assert through_make.stdout == ""
    first, second = through_make.stderr.splitlines()
    assert first == error
    assert re.fullmatch(r"make: \*\*\* \[Makefile:\d+: tenant\] Error 1", second), second


@pytest.mark.parametrize(
    ("target", "variables", "name", "error"),
    [
        (
            "offboard",
            ["TENANT=acme", "CONFIRM=acme"],
            "KEY_WAITING_DAYS",
            "error: a key's waiting period is 7 to 30 days, not {value!r}",
        ),
        ("token", ["TENANT=acme"], "USER", "error: user name {value!r} must match {pattern}"),
        ("usage", [], "TENANT", "error: not a tenant id: {value!r}"),
    ],
)
def test_the_real_command_gets_the_value_as_written_and_refuses_it(
    target: str, variables: list[str], name: str, error: str, tmp_path: Path
) -> None:
    from support_tickets.core.keys import RESOLVER_PATTERN

    value = payload(tmp_path)
    result = real(target, *variables, f"{name}={value}")
    assert evaluated(tmp_path) == []
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == error.format(value=value, pattern=RESOLVER_PATTERN)


def test_onboard_splits_users_at_blanks_in_the_command_not_in_a_shell(tmp_path: Path) -> None:
    value = f"alice `touch {tmp_path}/backquote` $(touch {tmp_path}/dollar)"
    result = real("onboard", "TENANT=acme", f"USERS={value}")
    assert evaluated(tmp_path) == []
    assert result.returncode == 2
    from support_tickets.core.keys import RESOLVER_PATTERN

    # alice passes; the second word is the first refused, as written
    assert result.stderr.splitlines()[0] == f"error: user name '`touch' must match {RESOLVER_PATTERN}"


def test_dev_refuses_a_port_that_is_no_number_as_written(tmp_path: Path) -> None:
    value = payload(tmp_path)
    result = real("dev", f"PORT={value}")
    assert evaluated(tmp_path) == []
    assert result.returncode == 2
    assert f"argument --port: invalid int value: {value!r}" in result.stderr


# ---------------------------------------------------------------- the commands' own checks of those values


@pytest.mark.parametrize(
    ("options", "error"),
    [
        (["--move-workers", "0"], "--move-workers must be 1..64 (got '0')"),
        (["--move-workers", "`id`"], "--move-workers must be 1..64 (got '`id`')"),
        (["--drain-seconds", "nan"], "--drain-seconds must be a number >= 0 (got 'nan')"),
        (["--drain-seconds", "-1"], "--drain-seconds must be a number >= 0 (got '-1')"),
        (["--move-rate", "0"], "--move-rate must be a number > 0 (got '0')"),
        (["--move-rate", "$(id)"], "--move-rate must be a number > 0 (got '$(id)')"),
    ],
)
def test_a_moves_settings_out_of_range_are_a_one_line_error_before_anything(
    options: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # (no stack anywhere: the check comes first)
    code = tenants.main(
        ["--tenant", "acme", "--placement", "dedicated", *options, "--local-state", "/nonexistent", "--local"]
    )
    assert (code, capsys.readouterr().err) == (1, f"error: {error}\n")


@pytest.mark.parametrize("days", ["x", "7.5", "", "-7"])
def test_a_waiting_period_that_is_no_number_is_a_one_line_error(days: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = offboard.main(["--tenant", "acme", "--confirm", "acme", f"--key-waiting-days={days}", "--local"])
    assert (code, capsys.readouterr().err) == (1, f"error: a key's waiting period is 7 to 30 days, not {days!r}\n")
