#!/usr/bin/env python3
"""Writes the random model that `ordo bench --shape SHAPE` builds in memory, as a model
directory both ordo and tools/bench/bench_peer.py can read:

    /usr/bin/python3 tools/bench/make_bench_model.py --out /tmp/ordo-bench-base
    /usr/bin/python3 tools/bench/make_bench_model.py --shape llama --out /tmp/ordo-bench-llama
    /usr/bin/python3 tools/bench/make_bench_model.py --position-encoding alibi --out /tmp/ordo-bench-alibi

--position-encoding gives the base shape another scheme (its tensors, such as T5's bias
tables, filled the same way), to measure what a scheme costs; `ordo bench --model DIR`
then measures it (bench_peer.py knows only the shipped shapes' schemes).

Shapes (bench_peer.SHAPES): base, Marian's transformer-base encoder-decoder
(bench_peer.BASE_CONFIG, ordo's format, 240 MB); llama, a decoder-only model in Hugging
Face's LLaMA layout (bench_peer.LLAMA_CONFIG: hidden 768, 8 layers, 12 heads over 4 K/V
heads, SwiGLU 2048, vocab 32000, untied lm_head; 99,496,704 parameters, 398 MB).

config.json is the shape's config (plus defaults and a "bench_model" stamp, stamp(shape),
that tools/bench/bench.sh checks before reusing a directory); model.safetensors is F32, written
by ordo_torch.save_model_dir (base) or save_llama_dir (llama), each tensor filled by
bench_peer.random_values: the same values, bit for bit, as ordo's in-memory generator
(tools/command_bench.cpp).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "oracle"))  # ordo_torch, the PyTorch oracle

from bench_peer import SHAPES, random_values  # noqa: E402  (no torch at import)

# Bump when a shape's config or random_values change, so that stale directories are rebuilt.
VERSION = "1"


def stamp(shape: str, position_encoding: str | None = None) -> str:
    """The "bench_model" value of a directory of `shape`: the shape and VERSION (and the
    position scheme when it is not the shape's own)."""
    return f"{shape}-{VERSION}" + (f"-{position_encoding}" if position_encoding else "")


def write_model(shape: str, out: Path, position_encoding: str | None = None) -> None:
    import torch
    from ordo_torch import LlamaModel, OrdoModel, save_llama_dir, save_model_dir

    llama = shape == "llama"
    config = dict(SHAPES[shape])
    if position_encoding:
        if llama:
            raise SystemExit("--position-encoding: the llama shape is RoPE by definition")
        config["position_encoding"] = position_encoding
    model = (LlamaModel if llama else OrdoModel)(config)
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            values = random_values(name, tensor.numel()).reshape(tuple(tensor.shape))
            tensor.copy_(torch.from_numpy(values))
    save = save_llama_dir if llama else save_model_dir
    save(model, out, "F32", extra_config={"bench_model": stamp(shape, position_encoding)})


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", choices=sorted(SHAPES), default="base", help="which model (default: base)")
    p.add_argument("--out", required=True, type=Path, help="directory to write (created if needed)")
    p.add_argument("--position-encoding", choices=["sinusoidal", "learned", "rope", "none", "alibi", "t5_relative"],
                   help="base shape only: this scheme instead of sinusoidal")
    args = p.parse_args()
    write_model(args.shape, args.out, args.position_encoding)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
