#!/usr/bin/env bash
# Installs what ordo needs from Debian's apt, skipping what is already there.
#   tools/install_deps.sh          build dependencies
#   tools/install_deps.sh --test   plus PyTorch/NumPy/SentencePiece for Python (the test oracle)
set -euo pipefail

packages=(build-essential cmake pkg-config libopenblas-dev libsentencepiece-dev sentencepiece
          libcli11-dev nlohmann-json3-dev libgtest-dev libgmock-dev)
if [[ "${1:-}" == "--test" ]]; then
  packages+=(python3 python3-torch python3-numpy python3-sentencepiece)
fi

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
