#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to ordo's showcase: installs the
# dependencies, builds Release with 2 jobs, and runs the shipped models on two
# sentences with the same words in a different order.
#   tools/scripts/setup.sh [BUILD_DIR]     (default: build)
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build}"

tools/scripts/install_deps.sh
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
# The CLI and the Python package (PYTHONPATH=$build/python /usr/bin/python3 -c "import ordo").
cmake --build "$build" -j2 --target ordo_cli ordo_python

run() {  # shows the command as one would type it, quotes included
  local shown="" arg
  for arg in "$@"; do
    [[ $arg == *" "* ]] && arg="\"$arg\""
    shown+=" $arg"
  done
  printf '\n$%s\n' "$shown"
  "$@"
}
run "$build/ordo" translate "cats chase dogs" "dogs chase cats"
run "$build/ordo" compare "cats chase dogs" "dogs chase cats"
