#!/usr/bin/env bash
# Installs what ordo needs from Debian's apt, skipping what is already there.
#   tools/scripts/install_deps.sh          build dependencies
#   tools/scripts/install_deps.sh --test   plus PyTorch/NumPy/SentencePiece for Python (the test oracle),
#                                  tmux (the progress bar's test), pytest (the bindings' tests) and
#                                  nginx (ordo serve's replicas behind it, tests/deploy)
#   tools/scripts/install_deps.sh --fuzz   plus clang and its runtime libraries (libFuzzer, the
#                                  sanitizers' runtimes), for tools/scripts/fuzz.sh
# Flags combine: tools/scripts/install_deps.sh --test --fuzz.
set -euo pipefail

# libpng, FreeType, fontconfig and a font: the pictures of ordo viz (tools/viz/font.h).
# pybind11, the Python headers and NumPy: the Python bindings (tools/python/), built by default.
# cpp-httplib: ordo serve's HTTP server (and its tests' client).
# libzip: the zip torch.save writes (pytorch_model.bin).
packages=(build-essential cmake pkg-config libopenblas-dev libsentencepiece-dev sentencepiece
          libcli11-dev nlohmann-json3-dev libgtest-dev libgmock-dev
          libpng-dev libfreetype-dev libfontconfig-dev fonts-dejavu-core
          python3-dev pybind11-dev python3-pybind11 python3-numpy libcpp-httplib-dev libzip-dev)
for flag in "$@"; do
  case "$flag" in
    # tmux: the progress bar's test reads a real terminal's screen.
    # pytest: the Python bindings' suite (tools/python/tests).
    # nginx: two ordo serve replicas behind it (tests/deploy/two_replicas.py); the test runs
    # it as the current user with its own prefix, never the system's service.
    # matplotlib: the length study's plot (tools/training/test_length_study.py draws it).
    --test) packages+=(python3 python3-torch python3-numpy python3-sentencepiece tmux python3-pytest nginx
                       python3-matplotlib) ;;
    # libclang-rt-14-dev (libFuzzer) is only a Recommends of clang, which
    # --no-install-recommends below would skip.
    --fuzz) packages+=(clang libclang-rt-14-dev) ;;
    *) echo "tools/scripts/install_deps.sh: unknown flag $flag (expected --test or --fuzz)" >&2; exit 2 ;;
  esac
done

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "ordo: installing ${missing[*]}" >&2
sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
