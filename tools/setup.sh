#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to ordo's showcase: installs the
# dependencies, builds Release with 2 jobs, and runs the default model.
#   tools/setup.sh [BUILD_DIR]     (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"

tools/install_deps.sh
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j2

echo
echo "\$ $build/ordo translate \"cats chase dogs\" \"dogs chase cats\""
"$build/ordo" translate "cats chase dogs" "dogs chase cats"
