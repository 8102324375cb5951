#!/usr/bin/env python3
"""Writes the random Marian-base-shaped model that `ordo bench --shape base` builds in memory,
as a model directory both ordo and tools/bench_peer.py can read:

    /usr/bin/python3 tools/make_bench_model.py --out /tmp/ordo-bench-base

config.json is bench_peer.BASE_CONFIG (plus defaults and a "bench_model" version stamp that
tools/bench.sh checks before reusing a directory); model.safetensors is F32, written by
ordo_torch.save_model_dir, each tensor filled by bench_peer.random_values: the same values,
bit for bit, as ordo's in-memory generator (tools/command_bench.cpp).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_peer import BASE_CONFIG, random_values  # noqa: E402  (no torch at import)

# Bump when BASE_CONFIG or random_values change, so that stale directories are rebuilt.
VERSION = "1"


def write_base_model(out: Path) -> None:
    import torch
    from ordo_torch import OrdoModel, save_model_dir

    model = OrdoModel(BASE_CONFIG)
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            values = random_values(name, tensor.numel()).reshape(tuple(tensor.shape))
            tensor.copy_(torch.from_numpy(values))
    save_model_dir(model, out, "F32", extra_config={"bench_model": VERSION})


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, type=Path, help="directory to write (created if needed)")
    args = p.parse_args()
    write_base_model(args.out)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
