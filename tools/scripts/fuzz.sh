#!/usr/bin/env bash
# Fuzzes every parser of untrusted input: builds the libFuzzer targets of tests/fuzz
# with clang (ASan + UBSan) in build-fuzz and runs each for SECONDS from its committed
# seed corpus (tests/fuzz/corpus/<target>), as many at once as there are cores. Fails
# on any finding: a crash, a sanitizer report, a leak, an exception other than
# ordo::Error, an input slower than 25 s or one that needs more than 2 GB. Prints each target's executions (libFuzzer's final stats).
#   tools/scripts/fuzz.sh [SECONDS_PER_TARGET]     (default 60)
# New inputs go to build-fuzz/corpus/<target> (kept between runs, never committed);
# a finding is saved as build-fuzz/findings/<target>-crash-... with the log beside it.
# Reproduce one with:  build-fuzz/tests/fuzz/fuzz_<target> FILE
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-60}"
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "tools/scripts/fuzz.sh: SECONDS_PER_TARGET must be a whole number > 0, got '$seconds'" >&2
  exit 2
fi
build=build-fuzz
# The targets as tests/fuzz/CMakeLists.txt lists them (ORDO_FUZZ_TARGETS): one list.
read -r -a targets < <(sed -n 's/^set(ORDO_FUZZ_TARGETS \(.*\))$/\1/p' tests/fuzz/CMakeLists.txt)
if ((${#targets[@]} == 0)); then
  echo "tools/scripts/fuzz.sh: no ORDO_FUZZ_TARGETS line in tests/fuzz/CMakeLists.txt" >&2
  exit 1
fi

tools/scripts/install_deps.sh --fuzz
cmake -S . -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug -DORDO_FUZZ=ON \
  -DORDO_BUILD_TESTS=OFF -DORDO_BUILD_TOOLS=OFF >/dev/null
if ! cmake --build "$build" -j2 --target "${targets[@]/#/fuzz_}" >"$build/build.log" 2>&1; then
  cat "$build/build.log" >&2
  exit 1
fi

mkdir -p "$build/findings"
# UBSan stops at its first report (the build has -fno-sanitize-recover) with a stack.
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1"
# fuzz_one TARGET: runs one target and writes its line of the summary to
# $build/findings/TARGET.summary, prefixed "ok" or "FINDING".
fuzz_one() {
  local target="$1"
  local corpus="$build/corpus/$target" log="$build/findings/$target.log"
  local status=0 note="" runs speed timeout_input
  mkdir -p "$corpus"
  # The first corpus directory receives new inputs; the committed seeds are only read.
  "$build/tests/fuzz/fuzz_$target" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$build/findings/$target-" \
    "$corpus" "tests/fuzz/corpus/$target" >"$log" 2>&1 || status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  # A timeout is a finding only if its input is slow again on its own: on a loaded
  # machine the whole process can stall for a minute (seen locally with inputs that
  # then ran in 5 ms), which says nothing about ordo.
  timeout_input=$(sed -n "s/^.*Test unit written to \(.*-timeout-[0-9a-f]*\)$/\1/p" "$log" | tail -1)
  if [[ $status -ne 0 && -n "$timeout_input" ]] &&
    "$build/tests/fuzz/fuzz_$target" -timeout=25 "$timeout_input" >"$log.rerun" 2>&1; then
    echo "fuzz_$target: the timeout did not recur (the input runs in" \
      "$(sed -n 's/^Executed .* in \([0-9]* ms\)$/\1/p' "$log.rerun")): a stalled process, not a finding" >&2
    mv "$timeout_input" "$timeout_input.stall"
    status=0
    note="  (cut short by a stall)"
  fi
  if [[ $status -ne 0 ]]; then
    grep -E "ERROR|SUMMARY|runtime error|Test unit written|==[0-9]+==" "$log" | head -20 >&2 || true
    printf 'FINDING %-12s FINDING (exit %d), see %s\n' "$target" "$status" "$log"
  else
    printf 'ok %-12s %12s executions  %8s/s%s\n' "$target" "${runs:-?}" "${speed:-?}" "$note"
  fi >"$build/findings/$target.summary"
}

# One target a core at a time (a fuzzer runs on one thread): on CI's two cores the
# eight targets take four rounds of SECONDS instead of eight, each as many executions.
parallel=$(nproc)
for target in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= parallel)); do wait -n || true; done
  echo "== fuzz_$target: ${seconds} s" >&2
  rm -f "$build/findings/$target.summary"
  fuzz_one "$target" &
done
wait

failed=()
summary=()
for target in "${targets[@]}"; do
  line=$(cat "$build/findings/$target.summary" 2>/dev/null || echo "FINDING $target: the fuzzer's run ended without a summary")
  [[ "$line" == ok* ]] || failed+=("$target")
  summary+=("${line#* }")
done

echo "fuzz: ${seconds} s per target"
printf '  %s\n' "${summary[@]}"
if ((${#failed[@]} > 0)); then
  echo "fuzz: findings in ${failed[*]}" >&2
  exit 1
fi
