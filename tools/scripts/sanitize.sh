#!/usr/bin/env bash
# ordo under the sanitizers, each in a build of its own (the CMake option ORDO_SANITIZE):
#   asan  build-asan: the whole suite (library, CLI, tests) with AddressSanitizer and
#         UndefinedBehaviorSanitizer, -O1, assertions on; runs all of CTest but the
#         tests of the Python tools, the PyTorch parity tests included (the oracle is
#         Python, the C++ side is instrumented).
#   tsan  build-tsan: ThreadSanitizer; builds (the library and the test binary, no CLI)
#         and runs only the suites where threads share one model, translator,
#         generator or thread pool (test_shared_model, test_translator, test_kernels).
#   tools/scripts/sanitize.sh [asan|tsan|all]      (default all)
# Every report stops the test that made it (halt_on_error, -fno-sanitize-recover), so a
# finding fails CTest and this script.
set -euo pipefail
cd "$(dirname "$0")/../.."
which="${1:-all}"
case "$which" in
  asan | tsan | all) ;;
  *) echo "tools/scripts/sanitize.sh: expected asan, tsan or all, got '$which'" >&2; exit 2 ;;
esac

tools/scripts/install_deps.sh --test
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"

if [[ "$which" != tsan ]]; then
  echo "== ASan + UBSan: build-asan, all of CTest" >&2
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DORDO_SANITIZE=address,undefined >/dev/null
  cmake --build build-asan -j2
  # The python.* tests check the Python tools alone (no ordo code runs in them) and
  # already ran in tools/scripts/run_tests.sh; the oracle fixture stays, the parity tests need it.
  # Also left to that Release run: the accuracy tests that translate the shipped models'
  # held-out sets, the same code paths the parity tests take, over hundreds of sentences
  # (under ASan 284 s and about 85 s for each of nine schemes: three quarters of this
  # run). One scheme's stays, so that quantized translation of a whole file runs here too.
  accuracy_runs='^Showcase\.ModelsWithPositionsTranslateHeldOutAndSwappedSentences$'
  accuracy_runs+='|^Shipped/QuantizedTranslatorAccuracy\.ExactMatchWithinTheBounds/'
  accuracy_runs+='(sinusoidal|sinusoidal_split|marian|t5|t5_relative|learned|none|alibi)( |$)'
  ASAN_OPTIONS="halt_on_error=1:detect_leaks=1" \
    ctest --test-dir build-asan --output-on-failure -j2 --no-tests=error -E "^python\.|$accuracy_runs"
fi

if [[ "$which" != asan ]]; then
  echo "== TSan: build-tsan, the shared-model and thread-pool tests" >&2
  cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DORDO_SANITIZE=thread >/dev/null
  cmake --build build-tsan -j2 --target ordo_tests
  # This build holds only the threaded suites (tests/CMakeLists.txt); the Python tests
  # are not ordo's code. No suppressions: TSan reports nothing, not even inside the
  # uninstrumented OpenBLAS and SentencePiece (OpenBLAS runs single-threaded).
  TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1" \
    ctest --test-dir build-tsan --output-on-failure --no-tests=error -E '^(oracle|python)\.'
fi
