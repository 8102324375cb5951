#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs dependencies (with PyTorch, the
# oracle), builds, and runs CTest. CTest first regenerates the PyTorch reference models
# (tools/oracle/make_parity_models.py) so the oracle really runs.
#   tools/scripts/run_tests.sh [BUILD_DIR]     (default: build)
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build}"

tools/scripts/install_deps.sh --test
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j2
ctest --test-dir "$build" --output-on-failure -j2
