#!/usr/bin/env bash
# How many Python interpreters a set of tests starts (issue 58): the run under `strace -f`, every
# successful execve of a python binary counted (shebangs through /usr/bin/env and `sh -c` commands
# included: the shell's exec of python is one), pytest's own not. Forks are not execs: a command
# forked from a fork server (conftest's `forked`, compare --jobs' runs) is not counted, which is
# the point. One worker (-n 0) at a time; ptrace slows the run, so times under it mean nothing.
#   experiments/bench/interpreters.sh tests/test_jobs.py tests/test_leftovers.py
#   PY=/other/clone/.venv/bin/python experiments/bench/interpreters.sh ...   (another clone's: before)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
trace=$(mktemp)
trap 'rm -f "$trace"' EXIT
strace -f -qq -e trace=execve -e signal=none -o "$trace" "$PY" -m pytest -q -n 0 -p no:cacheprovider "$@" >&2 || true
started=$(grep -cE 'execve\("[^"]*python[0-9.]*", .* = 0$' "$trace" || true)
echo "$((started - 1)) interpreters started by: pytest $*"
