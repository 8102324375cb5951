#!/usr/bin/env bash
# The installed package, used the way a program outside ordo's tree uses it:
#   1. cmake --install BUILD_DIR into a fresh temporary prefix;
#   2. the README's library example equals tests/consumer/main.cpp;
#   3. tests/consumer/ configured with find_package(ordo) against that prefix, built
#      (shared ordo::ordo and static ordo::ordo_static) and run: the shared one finds
#      the default model by itself in <prefix>/share/ordo (no path, no $ORDO_MODEL);
#   4. main.cpp built once more with pkg-config (ordo.pc) alone, no other flag, and run
#      without $LD_LIBRARY_PATH.
# Each program must print "Katzen jagen Hunde" for "cats chase dogs".
#   tests/consumer/run.sh SOURCE_DIR BUILD_DIR CXX
set -euo pipefail
source_dir="$1" build_dir="$2" cxx="$3"
work="$(mktemp -d "${TMPDIR:-/tmp}/ordo-consumer.XXXXXX")"
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
unset ORDO_MODEL

step() { echo "consumer: $*" >&2; }
fail() { echo "consumer: FAILED: $*" >&2; exit 1; }

# Checks a program's output: the example's translation first, then two more lines and
# the score.
check_output() {
  local what="$1" output="$2"
  [[ "$(sed -n 1p <<<"$output")" == "Katzen jagen Hunde" ]] || fail "$what printed: $output"
  [[ "$(sed -n 2p <<<"$output")" == "Hunde jagen Katzen" ]] || fail "$what printed: $output"
  [[ "$(sed -n 4p <<<"$output")" == "log p = "-* ]] || fail "$what printed: $output"
  step "$what: $(head -1 <<<"$output")"
}

step "installing into $prefix"
cmake --install "$build_dir" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; fail "install"; }
for f in include/ordo/ordo.hpp lib/libordo.so lib/libordo.a bin/ordo share/ordo/sinusoidal/config.json \
         share/ordo/tokenizer.model lib/cmake/ordo/ordoConfig.cmake lib/pkgconfig/ordo.pc; do
  [[ -e "$prefix/$f" ]] || fail "cmake --install did not install $f"
done
for f in share/ordo/data share/ordo/length-study share/ordo/README.md; do
  [[ ! -e "$prefix/$f" ]] || fail "cmake --install installed $f, which is not a shipped model"
done
if grep -rlE '#include +"(engine|models|tokenizer)/|nlohmann|cblas|sentencepiece' "$prefix/include"; then
  fail "an installed header shows the engine's internals"
fi

step "the README's example is tests/consumer/main.cpp"
# The ```cpp block right after the marker line in README.md's library section.
awk '/^<!-- tests\/consumer\/main.cpp -->$/ {found = 1; next}
     found && /^```cpp$/ {inside = 1; next}
     inside && /^```$/ {exit}
     inside {print}' "$source_dir/README.md" >"$work/readme_example.cpp"
diff -u "$source_dir/tests/consumer/main.cpp" "$work/readme_example.cpp" ||
  fail "README.md's library example differs from tests/consumer/main.cpp (keep them equal)"

step "find_package(ordo) against the prefix"
cmake -S "$source_dir/tests/consumer" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix" >"$work/configure.log" ||
  { cat "$work/configure.log"; fail "configure"; }
cmake --build "$work/build" -j2 >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "build"; }

# The shared build finds its model from libordo.so's place: <prefix>/share/ordo.
check_output "ordo::ordo (shared)" "$(cd "$work" && "$work/build/translate_cats")"
# A static build is part of the program, wherever that lives: it is told the model.
check_output "ordo::ordo_static" "$(ORDO_MODEL="$prefix/share/ordo/sinusoidal" "$work/build/translate_cats_static")"

step "pkg-config"
flags="$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs ordo)"
# The README's line, nothing more: ordo.pc itself brings -std=c++20 and the rpath that
# lets the program find libordo.so in a prefix outside the loader's path, so it runs
# without $LD_LIBRARY_PATH.
# shellcheck disable=SC2086  # the flags are words
"$cxx" -Wall -Wextra -Werror "$source_dir/tests/consumer/main.cpp" $flags -o "$work/translate_cats_pc"
check_output "pkg-config" "$(env -u LD_LIBRARY_PATH "$work/translate_cats_pc")"

# The installed CLI finds the installed model too.
[[ "$("$prefix/bin/ordo" translate "cats chase dogs")" == "Katzen jagen Hunde" ]] || fail "installed bin/ordo"
# ... and the other shipped models by name, from any directory (generate's default is
# the language model), and lists them.
[[ "$(cd "$work" && "$prefix/bin/ordo" generate --max-length 3 "Die Katze")" == "Die Katze"* ]] ||
  fail "installed bin/ordo generate (the shipped german-llama)"
[[ "$(cd "$work" && "$prefix/bin/ordo" translate --model rope "cats chase dogs")" == "Katzen jagen Hunde" ]] ||
  fail "installed bin/ordo translate --model rope"
"$prefix/bin/ordo" models | grep -q "^german-llama .* llama .* decoder-only .* rope" || fail "installed bin/ordo models"
step "passed"
