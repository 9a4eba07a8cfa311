#!/usr/bin/env bash
# Print the path of a Python interpreter matching .python-version (3.13), or fail
# with a message that says how to get one. Used by the Makefile for the venv and,
# through the venv's bin/ on PATH, by `sam build` (which looks for python3.13).
set -euo pipefail
cd "$(dirname "$0")/.."
want=$(tr -d '[:space:]' < .python-version)
ok() { [ -n "$1" ] && [ -x "$1" ] && "$1" -c "import sys; sys.exit(0 if '%d.%d' % sys.version_info[:2] == '$want' else 1)" 2>/dev/null; }
candidates=()
[ -n "${PYTHON:-}" ] && candidates+=("$PYTHON")
if command -v pyenv >/dev/null 2>&1; then
  candidates+=("$(PYENV_VERSION=$want pyenv which "python$want" 2>/dev/null || true)")
fi
for d in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$want"*/bin; do candidates+=("$d/python$want"); done
candidates+=("$(command -v "python$want" || true)")
if command -v uv >/dev/null 2>&1; then candidates+=("$(uv python find "$want" 2>/dev/null || true)"); fi
for c in "${candidates[@]}"; do
  if ok "$c"; then echo "$c"; exit 0; fi
done
cat >&2 <<MSG
error: Python $want is required (Lambda runtime python$want) and was not found.
Install it with one of:
  pyenv install $want        # then re-run make
  uv python install $want
or point PYTHON at an interpreter: make PYTHON=/path/to/python$want ...
MSG
exit 1
