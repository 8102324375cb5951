#!/usr/bin/env python3
"""Writes the random model that `ordo bench --shape SHAPE` builds in memory, as a model
directory both ordo and tools/bench/bench_peer.py can read:

    /usr/bin/python3 tools/bench/make_bench_model.py --out /tmp/ordo-bench-base
    /usr/bin/python3 tools/bench/make_bench_model.py --shape llama --out /tmp/ordo-bench-llama
    /usr/bin/python3 tools/bench/make_bench_model.py --shape llama --tokenizer --out /tmp/ordo-bench-llama
    /usr/bin/python3 tools/bench/make_bench_model.py --position-encoding alibi --out /tmp/ordo-bench-alibi

--position-encoding gives the base shape another scheme (its tensors, such as T5's bias
tables, filled the same way), to measure what a scheme costs; `ordo bench --model DIR`
then measures it (bench_peer.py knows only the shipped shapes' schemes).

--tokenizer also writes tokenizer.model, a SentencePiece model of exactly the shape's
vocab_size pieces that all decode (tools/bench/bench_tokenizer.py), so that the model
reads and writes text: tools/bench/serve_load.py's completions on the llama shape. The
weights, config.json and its stamp are the same with or without it.

Shapes: ordo's. `ordo bench --list-shapes --json` prints each shape's config.json, and
this script reads them from the ordo binary it is given (--ordo, else $ORDO, else the
source tree's build/ordo, as tools/bench/bench.sh picks it) rather than keeping copies:
base, Marian's transformer-base encoder-decoder (ordo's format, 240 MB); llama, a
decoder-only model in Hugging Face's LLaMA layout (99,496,704 parameters, 398 MB).

config.json is the shape's config (plus defaults and a "bench_model" stamp, stamp(shape),
that tools/bench/bench.sh checks before reusing a directory); model.safetensors is F32, written
by ordo_torch.save_model_dir (base) or save_llama_dir (llama), each tensor filled by
bench_peer.random_values: the same values, bit for bit, as ordo's in-memory generator
(tools/cli/bench/random_numbers.h).
"""
from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "oracle"))  # ordo_torch, the PyTorch oracle

from bench_peer import random_values  # noqa: E402  (no torch at import)
from bench_tokenizer import save_tokenizer, tokenizer_model  # noqa: E402

# Bump when random_values change, so that stale directories are rebuilt (a changed shape
# config changes the stamp by itself: it holds a digest of the config).
VERSION = "1"


def default_ordo() -> Path:
    """The ordo binary bench.sh runs: $ORDO, else the source tree's build/ordo."""
    return Path(os.environ.get("ORDO") or Path(__file__).resolve().parents[2] / "build" / "ordo")


@functools.lru_cache(maxsize=None)
def bench_shapes(ordo: Path | None = None) -> dict:
    """{name: config.json} of every `ordo bench --shape`, as `ordo` itself lists them."""
    ordo = Path(ordo or default_ordo())
    fix = "build it (cmake --build build --target ordo_cli), or give --ordo PATH or ORDO=PATH"
    if not (ordo.is_file() and os.access(ordo, os.X_OK)):
        raise SystemExit(f"make_bench_model.py: no ordo binary at {ordo}: {fix}")
    run = subprocess.run([str(ordo), "bench", "--list-shapes", "--json"], capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"make_bench_model.py: {ordo} bench --list-shapes --json failed "
                         f"(exit {run.returncode}): {run.stderr.strip()}; an ordo older than the shape "
                         f"listing cannot be used: {fix}")
    shapes = {}
    for line in run.stdout.splitlines():
        shape = json.loads(line)
        shapes[shape["name"]] = shape["config"]
    return shapes


def shape_config(shape: str, ordo: Path | None = None) -> dict:
    """The config.json of `shape`; SystemExit naming the known shapes for another name."""
    shapes = bench_shapes(ordo)
    if shape not in shapes:
        raise SystemExit(f"make_bench_model.py: --shape: '{shape}' is not a known shape "
                         f"(known: {', '.join(shapes)})")
    return dict(shapes[shape])


def stamp(shape: str, position_encoding: str | None = None, ordo: Path | None = None) -> str:
    """The "bench_model" value of a directory of `shape`: the shape, VERSION and a digest
    of its config (and the position scheme when it is not the shape's own)."""
    config = json.dumps(shape_config(shape, ordo), sort_keys=True)
    digest = hashlib.sha256(config.encode()).hexdigest()[:12]
    return f"{shape}-{VERSION}-{digest}" + (f"-{position_encoding}" if position_encoding else "")


def write_model(shape: str, out: Path, position_encoding: str | None = None, ordo: Path | None = None,
                tokenizer: bool = False) -> None:
    import torch
    from ordo_torch import LlamaModel, OrdoModel, save_llama_dir, save_model_dir

    config = shape_config(shape, ordo)
    llama = config.get("model_type") == "llama"
    if position_encoding:
        if llama:
            raise SystemExit("--position-encoding: the llama shape is RoPE by definition")
        config["position_encoding"] = position_encoding
    spm_model = tokenizer_model(config) if tokenizer else None  # before the weights: fail fast
    model = (LlamaModel if llama else OrdoModel)(config)
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            values = random_values(name, tensor.numel()).reshape(tuple(tensor.shape))
            tensor.copy_(torch.from_numpy(values))
    save = save_llama_dir if llama else save_model_dir
    save(model, out, "F32", extra_config={"bench_model": stamp(shape, position_encoding, ordo)})
    if spm_model is not None:
        save_tokenizer(spm_model, out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", default="base", help="which model (default: base; `ordo bench --list-shapes` lists them)")
    p.add_argument("--out", required=True, type=Path, help="directory to write (created if needed)")
    p.add_argument("--position-encoding", choices=["sinusoidal", "learned", "rope", "none", "alibi", "t5_relative"],
                   help="base shape only: this scheme instead of sinusoidal")
    p.add_argument("--ordo", type=Path, default=None,
                   help="the ordo binary whose shapes to write (default: $ORDO, else build/ordo)")
    p.add_argument("--tokenizer", action="store_true",
                   help="also write tokenizer.model: the shape's vocab_size pieces, every one decodable")
    args = p.parse_args()
    try:
        write_model(args.shape, args.out, args.position_encoding, args.ordo, args.tokenizer)
    except ValueError as e:
        raise SystemExit(f"make_bench_model.py: {e}") from None
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
