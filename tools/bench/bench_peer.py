#!/usr/bin/env python3
"""The PyTorch peer of `ordo bench`: the same workload, the same numbers, the same JSON keys,
run eagerly in PyTorch the way a careful user would write it.

    /usr/bin/python3 tools/bench/bench_peer.py --model DIR --batch 16 --src-len 32 --new-tokens 32 \\
        --threads 2 [--beam K] [--repeats 5] [--warmup 1] [--json]
    /usr/bin/python3 tools/bench/bench_peer.py --shape base ...   # the model make_bench_model.py writes
    /usr/bin/python3 tools/bench/bench_peer.py --shape llama ...  # its decoder-only LLaMA-layout model
    /usr/bin/python3 tools/bench/bench_peer.py --shape llama --quantize int8 ...  # quantize_dynamic

--shape NAME is one of ordo's shapes, read from the ordo binary (--ordo, else $ORDO, else
build/ordo: `ordo bench --list-shapes --json`), as make_bench_model.py writes it.

THREADS. torch.set_num_threads(T), and OpenBLAS/OpenMP/MKL capped at T threads with
OMP_WAIT_POLICY=PASSIVE: these are read when the libraries load, so when the environment
does not already say so the script re-executes itself with it, before importing torch.

THE WORKLOAD (as ordo bench runs it: tools/cli/bench/workload.h):
  - B sources (decoder-only models: prompts) of S ids: token t of source b is
    3 + splitmix64(SOURCE_SEED, b*S + t) % (vocab - 3) (all of [0, vocab) if vocab <= 3), where
    splitmix64(seed, j) = mix(seed + (j + 1) * GOLDEN mod 2^64), SplitMix64's output j.
  - encode: the encoder over [B, S]; decoder-only: the prompt prefill into the KV cache,
    the last row's logits and the first choice of tokens.
  - decode: exactly N one-token decoder steps per sequence, eos ignored. Encoder-decoder:
    KV caches allocated and the cross-attention K/V projected once per source, then N steps
    from decoder_start. Greedy takes the argmax. With --beam K each source runs K sequences:
    each step ranks score + log_softmax over the K x V continuations of each source, keeps
    the K best and reorders the caches to them (a first step from K identical beams counts
    only the first: the others start at -inf); nothing is reordered after the last step.
  - medians of --repeats runs after --warmup runs; load_s is the median of as many loads.
  - probes, after the workload (the peak RSS is read before them): a streaming read of
    256 MiB with T threads, all repetitions after a 0.25 s pause (BLAS threads spin for
    ~0.1 s after a call), then a 1024^3 sgemm.
  - decode_bound_tok_s = bandwidth / bytes of the weights one decode step reads (decoder
    layers without the cross-attention K/V projections, the norms, the output projection;
    float32); encode_gflops counts the encode phase's matrix products (linear layers,
    q k^T and p v, causal prefill S(S+1)/2 pairs, a prefill's last-row output projection).

--quantize int8: the peer's quantized row (issue 23), what a PyTorch user runs on a CPU:
torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8) over
every linear layer and the output projection (each (weight, bias) pair becomes an
nn.Linear, quantized: int8 weights with one scale a tensor, activations quantized per
call, fbgemm's int8 GEMM). load_s includes the quantization, as ordo's --compute-type
int8 converts at load; decode_weight_bytes counts those weights 1 byte each. The token
embeddings stay float32 (quantize_dynamic takes linears only; a tied head is an int8 copy).

THE PEER'S MODEL. The configs come from tools/oracle/ordo_torch/ (full_config, llama_config), the
weights from a memory mapping of the safetensors files, as ordo reads them (F32 uncopied;
F16/BF16 converted to float32); the transformer is written here with plain torch ops:
a preallocated KV cache per layer ([rows, kv_heads, capacity, head_dim], written in place
each step), cross-attention K/V computed once per source, position tables (sinusoids,
RoPE cos/sin) computed once, grouped-query attention without copying K/V, the caches
reordered with index_select as Hugging Face's reorder_cache does. ordo's format (every
position scheme, pre/post-norm, decoder-only) and the Hugging Face LLaMA layout.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

TOOLS = Path(__file__).resolve().parent

# ---- deterministic numbers, identical in tools/cli/bench/random_numbers.h ------------

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
SOURCE_SEED = 0x6F72646F62656E63  # "ordobenc"
MIX1, MIX2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def splitmix64(seed: int, j: int) -> int:
    """Output j of the SplitMix64 stream seeded with `seed` (random access)."""
    z = (seed + (j + 1) * GOLDEN) & MASK
    z = ((z ^ (z >> 30)) * MIX1) & MASK
    z = ((z ^ (z >> 27)) * MIX2) & MASK
    return z ^ (z >> 31)


def fnv1a64(text: str) -> int:
    h = 0xCBF29CE484222325
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * 0x100000001B3) & MASK
    return h


def source_ids(batch: int, length: int, vocab: int) -> list:
    """[batch][length] ids, as the docstring defines them."""
    low = 3 if vocab > 3 else 0
    return [[low + splitmix64(SOURCE_SEED, b * length + t) % (vocab - low) for t in range(length)]
            for b in range(batch)]


def is_norm_weight(name: str) -> bool:
    """LayerNorm weights (*_layer_norm, layer_norm, layernorm_embedding) and LLaMA's RMSNorm
    weights (input_layernorm, post_attention_layernorm, model.norm)."""
    return name.endswith("norm.weight") or name.endswith("layernorm_embedding.weight")


def random_values(name: str, count: int):
    """Value j of tensor `name` in a bench model: u = (splitmix64(fnv1a64(name), j) >> 40)
    / 2^24, v = (2u - 1) * 0.05 in float64 (1 + that for norm weights), rounded to float32.
    A numpy float32 array; vectorized SplitMix64 (uint64 arrays wrap mod 2^64)."""
    import numpy as np

    seed = np.uint64(fnv1a64(name))
    one = 1.0 if is_norm_weight(name) else 0.0
    out = np.empty(count, dtype=np.float32)
    chunk = 1 << 22
    for first in range(0, count, chunk):
        j = np.arange(first + 1, min(count, first + chunk) + 1, dtype=np.uint64)
        z = seed + j * np.uint64(GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(MIX1)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(MIX2)
        z = z ^ (z >> np.uint64(31))
        u = (z >> np.uint64(40)).astype(np.float64) * 2.0 ** -24
        out[first: first + len(j)] = (one + (2.0 * u - 1.0) * 0.05).astype(np.float32)
    return out


# The bench shapes (base, llama) are ordo's: make_bench_model.py reads their configs from
# the ordo binary (`ordo bench --list-shapes --json`) instead of keeping copies here.

# The probes' sizes, as tools/cli/bench/probes.h has them.
GEMM_SIZE = 1024
STREAM_BYTES = 256 << 20


# ---- arguments and threads ------------------------------------------------------------

def parse_args(argv):
    def positive(text):
        value = int(text)
        if value < 1:
            raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
        return value

    def non_negative(text):
        value = int(text)
        if value < 0:
            raise argparse.ArgumentTypeError(f"must be at least 0, got {value}")
        return value

    p = argparse.ArgumentParser(description="The PyTorch peer of `ordo bench` (see the docstring).")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", help="model directory (ordo format or Hugging Face LLaMA)")
    which.add_argument("--shape",
                       help="a random model of one of ordo's shapes (`ordo bench --list-shapes` lists "
                            "them), as make_bench_model.py writes it")
    p.add_argument("--ordo", type=Path, default=None,
                   help="with --shape: the ordo binary whose shapes to use (default: $ORDO, else build/ordo)")
    p.add_argument("--batch", type=positive, default=1)
    p.add_argument("--src-len", type=positive, default=32)
    p.add_argument("--new-tokens", type=positive, default=32)
    p.add_argument("--beam", type=positive, default=1)
    p.add_argument("--threads", type=positive, default=os.cpu_count() or 1)
    p.add_argument("--repeats", type=positive, default=5)
    p.add_argument("--warmup", type=non_negative, default=1)
    p.add_argument("--quantize", choices=("none", "int8"), default="none",
                   help="int8: quantize_dynamic's qint8 linears and output projection (see the docstring)")
    p.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    return p.parse_args(argv)


def ensure_thread_env(threads: int) -> None:
    """Re-executes this script unless BLAS and OpenMP are capped at `threads` with passive
    waiting: those variables are only read when the libraries load."""
    wanted = {"OPENBLAS_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads),
              "MKL_NUM_THREADS": str(threads), "OMP_WAIT_POLICY": "PASSIVE"}
    if all(os.environ.get(k) == v for k, v in wanted.items()):
        return
    if os.environ.get("ORDO_BENCH_PEER_REEXEC") == "1":
        sys.exit("bench_peer.py: the thread environment did not survive re-executing; "
                 f"set {' '.join(f'{k}={v}' for k, v in wanted.items())} yourself")
    env = dict(os.environ, **wanted, ORDO_BENCH_PEER_REEXEC="1")
    os.execve(sys.executable, [sys.executable, str(Path(__file__).resolve())] + sys.argv[1:], env)


# ---- the model ---------------------------------------------------------------------------

_DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def map_safetensors(path: Path) -> dict:
    """The tensors of a safetensors file as float32: F32 as views of a private mapping of
    the file (not copied, as ordo maps it), F16/BF16 converted. (ordo_torch's
    read_safetensors validates more but reads and copies the whole file twice.)"""
    import mmap
    import struct

    import torch

    with open(path, "rb") as f:
        mapping = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)  # writable for torch, never written
    (n,) = struct.unpack("<Q", mapping[:8])
    header = json.loads(mapping[8: 8 + n])
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in _DTYPES:
            sys.exit(f"bench_peer.py: {path}: tensor '{name}' is {info['dtype']}, not a float type")
        dtype = getattr(torch, _DTYPES[info["dtype"]])
        begin, end = info["data_offsets"]
        count = (end - begin) // torch.empty((), dtype=dtype).element_size()
        t = torch.frombuffer(mapping, dtype=dtype, count=count, offset=8 + n + begin).view(info["shape"])
        tensors[name] = t if dtype == torch.float32 else t.float()
    return tensors


def read_tensors(directory: Path) -> dict:
    """model.safetensors, or every shard model.safetensors.index.json names."""
    if (directory / "model.safetensors").exists():
        files = [directory / "model.safetensors"]
    else:
        index = json.loads((directory / "model.safetensors.index.json").read_text())
        files = [directory / f for f in sorted(set(index["weight_map"].values()))]
    tensors = {}
    for f in files:
        tensors.update(map_safetensors(f))
    return tensors


def ordo_spec(cfg: dict, t: dict) -> dict:
    """An ordo-format model as the peer runs it: per layer (weight, bias) pairs."""
    from ordo_torch import kv_heads

    def lin(name):
        return (t[name + ".weight"], t.get(name + ".bias"))

    def layers(stack, count, cross):
        out = []
        for i in range(count):
            p = f"model.{stack}.layers.{i}."
            layer = {"q": lin(p + "self_attn.q_proj"), "k": lin(p + "self_attn.k_proj"),
                     "v": lin(p + "self_attn.v_proj"), "o": lin(p + "self_attn.out_proj"),
                     "norm1": lin(p + "self_attn_layer_norm"), "ffn_in": lin(p + "fc1"),
                     "ffn_up": None, "ffn_out": lin(p + "fc2"), "norm2": lin(p + "final_layer_norm")}
            if cross:
                layer["cross"] = {"q": lin(p + "encoder_attn.q_proj"), "k": lin(p + "encoder_attn.k_proj"),
                                  "v": lin(p + "encoder_attn.v_proj"), "o": lin(p + "encoder_attn.out_proj"),
                                  "norm": lin(p + "encoder_attn_layer_norm")}
            out.append(layer)
        return out

    encoder = cfg["encoder_layers"] > 0
    shared = t.get("model.shared.weight")

    def stack(side, heads, kv):
        s = {"table": shared if shared is not None else t[f"model.{side}.embed_tokens.weight"],
             "heads": heads, "kv_heads": kv, "head_dim": cfg["d_model"] // heads,
             "positions": t.get(f"model.{side}.embed_positions.weight"),
             "embed_norm": lin(f"model.{side}.layernorm_embedding") if cfg["layernorm_embedding"] else None,
             "final_norm": lin(f"model.{side}.layer_norm") if cfg["normalize_before"] else None}
        s["layers"] = layers(side, cfg[f"{side}_layers"], cross=encoder and side == "decoder")
        return s

    dec = stack("decoder", cfg["decoder_attention_heads"], kv_heads(cfg))
    dec["head"] = t["lm_head.weight"] if "lm_head.weight" in t else dec["table"]
    dec["logits_bias"] = t.get("final_logits_bias")
    return {
        "d": cfg["d_model"], "rms": False, "eps": cfg["layer_norm_eps"],
        "pre_norm": cfg["normalize_before"], "activation": cfg["activation_function"],
        "scale": math.sqrt(cfg["d_model"]) if cfg["scale_embedding"] else 1.0,
        "positions": cfg["position_encoding"], "offset": cfg["position_offset"],
        "sinusoidal": (cfg["sinusoidal_layout"], cfg["sinusoidal_frequencies"]),
        "rope": (cfg["rope_theta"], cfg["rope_layout"]),
        "decoder_start": cfg["decoder_start_token_id"],
        "encoder": stack("encoder", cfg["encoder_attention_heads"], cfg["encoder_attention_heads"]) if encoder else None,
        "decoder": dec,
    }


def llama_spec(cfg: dict, t: dict) -> dict:
    """A Hugging Face LLaMA model: pre-norm RMSNorm, SwiGLU, RoPE (half layout, from 0)."""
    def lin(name):
        return (t[name + ".weight"], t.get(name + ".bias"))

    layers = []
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        layers.append({"q": lin(p + "self_attn.q_proj"), "k": lin(p + "self_attn.k_proj"),
                       "v": lin(p + "self_attn.v_proj"), "o": lin(p + "self_attn.o_proj"),
                       "norm1": lin(p + "input_layernorm"), "ffn_in": lin(p + "mlp.gate_proj"),
                       "ffn_up": lin(p + "mlp.up_proj"), "ffn_out": lin(p + "mlp.down_proj"),
                       "norm2": lin(p + "post_attention_layernorm")})
    table = t["model.embed_tokens.weight"]
    dec = {"table": table, "heads": cfg["num_attention_heads"], "kv_heads": cfg["num_key_value_heads"],
           "head_dim": cfg["head_dim"], "positions": None, "embed_norm": None,
           "final_norm": lin("model.norm"), "layers": layers,
           "head": t.get("lm_head.weight", table), "logits_bias": None}
    return {"d": cfg["hidden_size"], "rms": True, "eps": cfg["rms_norm_eps"], "pre_norm": True,
            "activation": "swish", "scale": 1.0, "positions": "rope", "offset": 0,
            "sinusoidal": None, "rope": (cfg["rope_theta"], "half"), "decoder_start": None,
            "encoder": None, "decoder": dec}


def load_spec(directory: Path) -> dict:
    """Directory open to ready: config, every tensor as float32, bound to the spec."""
    from ordo_torch import full_config, llama_config

    raw = json.loads((directory / "config.json").read_text())
    if raw.get("model_type") == "llama":
        return llama_spec(llama_config(raw), read_tensors(directory))
    return ordo_spec(full_config(raw), read_tensors(directory))


def numel(pair) -> int:
    if pair is None:
        return 0
    return sum(x.numel() for x in pair if x is not None)


LINEARS = ("q", "k", "v", "o", "ffn_in", "ffn_up", "ffn_out")


def decode_weight_bytes(spec: dict, linear_bytes: int = 4) -> float:
    """What one decode step reads (see the docstring): float32, the linear layers' and the
    output projection's weights `linear_bytes` each (1: --quantize int8)."""
    dec = spec["decoder"]
    total = 0.0

    def linear(pair):
        return 0 if pair is None else pair[0].numel() * linear_bytes + numel(pair[1:]) * 4

    for layer in dec["layers"]:
        total += sum(linear(layer[k]) for k in LINEARS) + 4 * (numel(layer["norm1"]) + numel(layer["norm2"]))
        if "cross" in layer:
            total += linear(layer["cross"]["q"]) + linear(layer["cross"]["o"]) + 4 * numel(layer["cross"]["norm"])
    total += 4 * (numel(dec["embed_norm"]) + numel(dec["final_norm"])) + dec["head"].numel() * linear_bytes
    if dec["logits_bias"] is not None:
        total += 4 * dec["logits_bias"].numel()
    return float(total)


def quantize_linears(spec: dict) -> None:
    """quantize_dynamic (qint8) on every linear of `spec` and its output projection, in
    place: each (weight, bias) pair, and the head, becomes a quantized nn.Linear module
    (Peer.linear calls it)."""
    import torch

    holders = []  # (dict, key): where each linear's pair is held
    for stack in (spec["encoder"], spec["decoder"]):
        if stack is None:
            continue
        for layer in stack["layers"]:
            holders += [(layer, k) for k in LINEARS if layer[k] is not None]
            if "cross" in layer:
                holders += [(layer["cross"], k) for k in ("q", "k", "v", "o")]
    modules = torch.nn.ModuleList()
    for holder, key in holders:
        weight, bias = holder[key]
        module = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
        module.weight = torch.nn.Parameter(weight, requires_grad=False)
        if bias is not None:
            module.bias = torch.nn.Parameter(bias, requires_grad=False)
        modules.append(module)
    head = torch.nn.Linear(spec["decoder"]["head"].shape[1], spec["decoder"]["head"].shape[0], bias=False)
    head.weight = torch.nn.Parameter(spec["decoder"]["head"], requires_grad=False)
    modules.append(head)
    quantized = torch.ao.quantization.quantize_dynamic(modules, {torch.nn.Linear}, dtype=torch.qint8)
    for (holder, key), module in zip(holders, quantized):
        holder[key] = module
    spec["decoder"]["head"] = quantized[-1]


def encode_flops(spec: dict, batch: int, length: int) -> float:
    prefill = spec["encoder"] is None
    stack = spec["decoder"] if prefill else spec["encoder"]
    rows = batch * length
    pairs = batch * length * (length + 1) / 2 if prefill else batch * length * length
    flops = 0.0
    for layer in stack["layers"]:
        for k in ("q", "k", "v", "o", "ffn_in", "ffn_up", "ffn_out"):
            if layer[k] is not None:
                flops += 2.0 * rows * layer[k][0].numel()
        flops += 4.0 * pairs * layer["q"][0].shape[0]
    if prefill:
        flops += 2.0 * batch * stack["head"].numel()
    return flops


class Peer:
    """The forward passes over a spec, with position tables sized for `steps` positions."""

    def __init__(self, spec: dict, steps: int):
        import torch
        import torch.nn.functional as F
        from ordo_torch import sinusoidal_positions

        self.torch, self.F, self.spec = torch, F, spec
        self.activation = {"relu": F.relu, "gelu": F.gelu, "swish": F.silu}[spec["activation"]]
        positions = spec["offset"] + torch.arange(steps)
        self.pe = None
        if spec["positions"] == "sinusoidal":
            layout, frequencies = spec["sinusoidal"]
            self.pe = sinusoidal_positions(positions, spec["d"], layout, frequencies)
        self.cos_sin = {}
        if spec["positions"] == "rope":
            theta = spec["rope"][0]
            for stack in (spec["encoder"], spec["decoder"]):
                if stack is None or stack["head_dim"] in self.cos_sin:
                    continue
                hd = stack["head_dim"]
                freq = torch.pow(torch.tensor(float(theta), dtype=torch.float64),
                                 -2.0 * torch.arange(hd // 2, dtype=torch.float64) / hd)
                angles = positions.to(torch.float64)[:, None] * freq[None, :]
                self.cos_sin[hd] = (torch.cos(angles).float(), torch.sin(angles).float())

    # -- pieces
    def linear(self, x, pair):
        if isinstance(pair, self.torch.nn.Module):  # --quantize int8: a quantized nn.Linear
            return pair(x)
        return self.F.linear(x, pair[0], pair[1])

    def norm(self, x, pair):
        if self.spec["rms"]:
            return pair[0] * (x * self.torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.spec["eps"]))
        return self.F.layer_norm(x, (x.shape[-1],), pair[0], pair[1], self.spec["eps"])

    def residual(self, x, norm, fn):
        if self.spec["pre_norm"]:
            return x + fn(self.norm(x, norm))
        return self.norm(x + fn(x), norm)

    def ffn(self, x, layer):
        h = self.activation(self.linear(x, layer["ffn_in"]))
        if layer["ffn_up"] is not None:
            h = h * self.linear(x, layer["ffn_up"])
        return self.linear(h, layer["ffn_out"])

    def embed(self, ids, stack, first):
        x = self.F.embedding(ids, stack["table"])
        if self.spec["scale"] != 1.0:
            x = x * self.spec["scale"]
        T = ids.shape[1]
        if self.pe is not None:
            x = x + self.pe[first: first + T]
        elif stack["positions"] is not None:
            o = self.spec["offset"] + first
            x = x + stack["positions"][o: o + T]
        if stack["embed_norm"] is not None:
            x = self.norm(x, stack["embed_norm"])
        return x

    def rotate(self, x, first):
        """RoPE of x [B, H, T, hd] at positions first.. (ordo_torch.rope_rotate's formula)."""
        if self.spec["positions"] != "rope":
            return x
        T, hd = x.shape[2], x.shape[3]
        cos, sin = (t[first: first + T] for t in self.cos_sin[hd])
        if self.spec["rope"][1] == "half":
            x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
            return self.torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
        a, b = x[..., 0::2], x[..., 1::2]
        return self.torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)

    def heads(self, x, count, hd):  # [B, T, count*hd] -> [B, count, T, hd]
        B, T, _ = x.shape
        return x.view(B, T, count, hd).transpose(1, 2)

    def attend(self, q, k, v, mask):
        """softmax(q k^T / sqrt(hd) + mask) v; q [B, H, T, hd], k/v [B, Hkv, L, hd]. Query
        heads are grouped per K/V head as rows, so grouped-query K/V are never copied."""
        B, H, T, hd = q.shape
        kv = k.shape[1]
        q = q.reshape(B, kv, (H // kv) * T, hd)
        scores = self.torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(hd))
        if mask is not None:
            scores = scores.masked_fill(mask.repeat(H // kv, 1), float("-inf"))
        out = self.torch.matmul(self.torch.softmax(scores, dim=-1), v)
        return out.view(B, H, T, hd)

    def merge(self, x):  # [B, H, T, hd] -> [B, T, H*hd]
        B, H, T, hd = x.shape
        return x.transpose(1, 2).reshape(B, T, H * hd)

    # -- stacks
    def encode(self, ids):
        enc = self.spec["encoder"]
        H, hd = enc["heads"], enc["head_dim"]
        x = self.embed(ids, enc, 0)
        for layer in enc["layers"]:
            def attention(h):
                q = self.rotate(self.heads(self.linear(h, layer["q"]), H, hd), 0)
                k = self.rotate(self.heads(self.linear(h, layer["k"]), H, hd), 0)
                v = self.heads(self.linear(h, layer["v"]), H, hd)
                return self.linear(self.merge(self.attend(q, k, v, None)), layer["o"])
            x = self.residual(x, layer["norm1"], attention)
            x = self.residual(x, layer["norm2"], lambda h: self.ffn(h, layer))
        if enc["final_norm"] is not None:
            x = self.norm(x, enc["final_norm"])
        return x

    def start(self, rows: int, capacity: int, memory=None, beam: int = 1) -> dict:
        """Decoder state: empty KV caches [rows, kv_heads, capacity, hd] per layer and, for
        an encoder-decoder, each layer's cross-attention K/V of memory [B, S, d], projected
        once per source and repeated for its `beam` sequences."""
        dec = self.spec["decoder"]
        torch = self.torch
        shape = (rows, dec["kv_heads"], capacity, dec["head_dim"])
        state = {"k": [torch.empty(shape) for _ in dec["layers"]],
                 "v": [torch.empty(shape) for _ in dec["layers"]], "cross": [], "length": 0}
        if memory is not None:
            H, hd = dec["heads"], dec["head_dim"]
            for layer in dec["layers"]:
                c = layer["cross"]
                k = self.heads(self.linear(memory, c["k"]), H, hd)
                v = self.heads(self.linear(memory, c["v"]), H, hd)
                if beam > 1:
                    k, v = k.repeat_interleave(beam, dim=0), v.repeat_interleave(beam, dim=0)
                state["cross"].append((k, v))
        return state

    def feed(self, state, ids, last_only: bool = True):
        """Feeds ids [rows, T] at the next positions; returns the last row's logits [rows, V]."""
        dec = self.spec["decoder"]
        H, kv, hd = dec["heads"], dec["kv_heads"], dec["head_dim"]
        first, T = state["length"], ids.shape[1]
        end = first + T
        mask = None
        if T > 1:  # causal within the new rows: row t sees keys <= first + t
            mask = self.torch.arange(end)[None, :] > (first + self.torch.arange(T))[:, None]
        x = self.embed(ids, dec, first)
        for i, layer in enumerate(dec["layers"]):
            def attention(h):
                q = self.rotate(self.heads(self.linear(h, layer["q"]), H, hd), first)
                k = self.rotate(self.heads(self.linear(h, layer["k"]), kv, hd), first)
                v = self.heads(self.linear(h, layer["v"]), kv, hd)
                state["k"][i][:, :, first:end] = k
                state["v"][i][:, :, first:end] = v
                out = self.attend(q, state["k"][i][:, :, :end], state["v"][i][:, :, :end], mask)
                return self.linear(self.merge(out), layer["o"])

            def cross(h):
                k, v = state["cross"][i]
                q = self.heads(self.linear(h, layer["cross"]["q"]), H, hd)
                return self.linear(self.merge(self.attend(q, k, v, None)), layer["cross"]["o"])

            x = self.residual(x, layer["norm1"], attention)
            if "cross" in layer:
                x = self.residual(x, layer["cross"]["norm"], cross)
            x = self.residual(x, layer["norm2"], lambda h: self.ffn(h, layer))
        state["length"] = end
        x = x[:, -1]
        if dec["final_norm"] is not None:
            x = self.norm(x, dec["final_norm"])
        logits = self.linear(x, (dec["head"], None) if isinstance(dec["head"], self.torch.Tensor) else dec["head"])
        if dec["logits_bias"] is not None:
            logits = logits + dec["logits_bias"]
        return logits

    def reorder(self, state, parents):
        state["k"] = [k.index_select(0, parents) for k in state["k"]]
        state["v"] = [v.index_select(0, parents) for v in state["v"]]


class NextTokens:
    """Greedy argmax, or the fixed beam step of the docstring."""

    def __init__(self, torch, sources: int, beam: int):
        self.torch, self.sources, self.beam = torch, sources, beam
        self.scores = None

    def reset(self, live: int):
        scores = self.torch.full((self.sources, live), float("-inf"))
        scores[:, 0] = 0.0
        self.scores = scores.flatten()

    def choose(self, logits):
        """-> (tokens [sources * beam], parents or None)."""
        if self.beam == 1:
            return logits.argmax(dim=-1), None
        torch = self.torch
        V = logits.shape[-1]
        live = logits.shape[0] // self.sources
        totals = (self.scores[:, None] + torch.log_softmax(logits, dim=-1)).view(self.sources, live * V)
        best, flat = totals.topk(self.beam, dim=-1)
        parents = (flat // V + torch.arange(self.sources)[:, None] * live).flatten()
        self.scores = best.flatten()
        return (flat % V).flatten(), parents


class Workload:
    def __init__(self, peer: Peer, args, vocab: int):
        import torch

        self.torch, self.peer, self.args = torch, peer, args
        self.ids = torch.tensor(source_ids(args.batch, args.src_len, vocab), dtype=torch.long)
        self.decoder_only = peer.spec["encoder"] is None
        self.next = NextTokens(torch, args.batch, args.beam)
        self.memory = self.state = self.inputs = None
        self.history = []

    def encode(self) -> float:
        start = time.perf_counter()
        if self.decoder_only:
            self.prefill()
        else:
            self.memory = self.peer.encode(self.ids)
        return time.perf_counter() - start

    def prefill(self):
        a = self.args
        self.state = self.peer.start(a.batch, a.src_len + a.new_tokens)
        logits = self.peer.feed(self.state, self.ids)
        self.next.reset(1)
        self.inputs, parents = self.next.choose(logits)
        if parents is not None:
            self.peer.reorder(self.state, parents)

    def decode(self) -> float:
        a, peer = self.args, self.peer
        start = time.perf_counter()
        if not self.decoder_only:
            rows = a.batch * a.beam
            self.state = peer.start(rows, a.new_tokens, self.memory, a.beam)
            self.next.reset(a.beam)
            self.inputs = self.torch.full((rows,), peer.spec["decoder_start"], dtype=self.torch.long)
        self.history = []
        for step in range(a.new_tokens):
            logits = peer.feed(self.state, self.inputs[:, None])
            self.inputs, parents = self.next.choose(logits)
            self.history.append((self.inputs, parents))
            if parents is not None and step + 1 < a.new_tokens:
                peer.reorder(self.state, parents)
        return time.perf_counter() - start

    def best_sequence(self) -> list:
        ids, at = [], 0
        for tokens, parents in reversed(self.history):
            ids.append(int(tokens[at]))
            if parents is not None:
                at = int(parents[at])
        return ids[::-1]


# ---- probes and the run -------------------------------------------------------------

def peak_rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def gemm_gflops(torch, a, b, c) -> float:
    start = time.perf_counter()
    for _ in range(3):
        torch.mm(a, b.t(), out=c)
    return 3 * 2.0 * GEMM_SIZE ** 3 / (time.perf_counter() - start) / 1e9


def bandwidth_gbs(buffer) -> float:
    start = time.perf_counter()
    buffer.sum()
    return STREAM_BYTES / (time.perf_counter() - start) / 1e9


def timed_loads(directory: Path, args, loads: list):
    """(spec, decode weight bytes, encode FLOPs): the model loaded warmup + repeats times
    (and quantized: --quantize), its sizes measured on the float weights, off the clock."""
    spec = None
    for i in range(args.warmup + args.repeats):
        spec = None  # one model at a time
        start = time.perf_counter()
        spec = load_spec(directory)
        elapsed = time.perf_counter() - start
        sizes = (decode_weight_bytes(spec, 1 if args.quantize == "int8" else 4),
                 encode_flops(spec, args.batch, args.src_len))
        start = time.perf_counter()
        if args.quantize == "int8":
            quantize_linears(spec)
        if i >= args.warmup:
            loads.append(elapsed + time.perf_counter() - start)
    return (spec, *sizes)


def check_lengths(spec: dict, directory: Path, args) -> None:
    cfg = json.loads((directory / "config.json").read_text())
    learned = cfg.get("position_encoding") == "learned"
    most = min(cfg.get("max_position_embeddings", 4096) if learned else 4096, 4096)
    if spec["encoder"] is None and args.src_len + args.new_tokens > most:
        sys.exit(f"bench_peer.py: --src-len/--new-tokens: a prompt of {args.src_len} plus "
                 f"{args.new_tokens} new tokens is more than the {most} positions this model has")
    if spec["encoder"] is not None and args.src_len > most:
        sys.exit(f"bench_peer.py: --src-len: {args.src_len} is more than the {most} source positions this model has")
    if spec["encoder"] is not None and args.new_tokens > most:
        sys.exit(f"bench_peer.py: --new-tokens: {args.new_tokens} is more than the {most} target positions this model has")


def run(args, directory: Path, name: str) -> dict:
    import torch

    torch.set_num_threads(args.threads)
    loads = []
    with torch.inference_mode():
        spec, weight_bytes, flops = timed_loads(directory, args, loads)
        check_lengths(spec, directory, args)
        decoder_only = spec["encoder"] is None
        vocab = spec["decoder" if decoder_only else "encoder"]["table"].shape[0]
        positions = args.src_len + args.new_tokens if decoder_only else max(args.src_len, args.new_tokens)
        workload = Workload(Peer(spec, positions), args, vocab)
        encodes, decodes = [], []
        for i in range(args.warmup + args.repeats):
            e, d = workload.encode(), workload.decode()
            if i >= args.warmup:
                encodes.append(e)
                decodes.append(d)
        rss = peak_rss_mb()
        # As ordo does: the reads first, after a pause in which BLAS threads still spinning
        # after the workload's last call go to sleep, then the sgemms.
        stream = torch.ones(STREAM_BYTES // 4)
        time.sleep(0.25)
        bandwidths = [bandwidth_gbs(stream) for _ in range(args.warmup + args.repeats)][args.warmup:]
        gen = torch.Generator().manual_seed(0)
        a, b = (torch.rand(GEMM_SIZE, GEMM_SIZE, generator=gen) for _ in range(2))
        c = torch.empty(GEMM_SIZE, GEMM_SIZE)
        gemms = [gemm_gflops(torch, a, b, c) for _ in range(args.warmup + args.repeats)][args.warmup:]
    bandwidth = statistics.median(bandwidths)
    return {
        "engine": "pytorch", "torch": torch.__version__, "model": name, "decoder_only": decoder_only,
        "compute_type": "int8 (quantize_dynamic)" if args.quantize == "int8" else "f32",
        "batch": args.batch, "src_len": args.src_len, "new_tokens": args.new_tokens, "beam": args.beam,
        "threads": args.threads, "repeats": args.repeats, "warmup": args.warmup,
        "load_s": statistics.median(loads),
        "encode_tok_s": args.batch * args.src_len / statistics.median(encodes),
        "decode_tok_s": args.batch * args.new_tokens / statistics.median(decodes),
        "peak_rss_mb": rss,
        "gemm_gflops": statistics.median(gemms),
        "encode_gflops": flops / statistics.median(encodes) / 1e9,
        "bandwidth_gbs": bandwidth,
        "decode_bound_tok_s": bandwidth * 1e9 / weight_bytes,
        "decode_weight_bytes": weight_bytes, "encode_flops": flops,
        "sample_ids": workload.best_sequence(),
    }


def print_table(r: dict) -> None:
    kind = "prompt" if r["decoder_only"] else "source"
    print(f"bench_peer (PyTorch {r['torch']}): {r['model']}{' (decoder-only)' if r['decoder_only'] else ''}, "
          f"weights as {r['compute_type']}\n"
          f"  batch {r['batch']}, {kind} {r['src_len']} tokens, {r['new_tokens']} new tokens, beam {r['beam']}, "
          f"{r['threads']} threads; medians of {r['repeats']} runs after {r['warmup']} warm-up\n")
    rows = [("load", f"{r['load_s']:.4f} s", "directory open to ready"),
            ("encode", f"{r['encode_tok_s']:.1f} tok/s", f"{r['encode_gflops']:.2f} GFLOP/s of matrix products"),
            ("decode", f"{r['decode_tok_s']:.1f} tok/s", "generated tokens, all sequences of the batch"),
            ("decode bound", f"{r['decode_bound_tok_s']:.1f} tok/s",
             f"per sequence: bandwidth / {r['decode_weight_bytes']:.0f} bytes of weights per step"),
            ("sgemm", f"{r['gemm_gflops']:.2f} GFLOP/s", f"{GEMM_SIZE}^3, the compute ceiling"),
            ("bandwidth", f"{r['bandwidth_gbs']:.2f} GB/s", "streaming read of 256 MB"),
            ("peak RSS", f"{r['peak_rss_mb']:.1f} MB", "before the probes")]
    for label, value, note in rows:
        print(f"  {label:<14}{value:>20}   {note}")


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    ensure_thread_env(args.threads)
    sys.path.insert(0, str(TOOLS))
    sys.path.insert(0, str(TOOLS.parent / "oracle"))  # ordo_torch
    if args.shape:
        import make_bench_model
        make_bench_model.shape_config(args.shape, args.ordo)  # an unknown shape fails before the work
        with tempfile.TemporaryDirectory(prefix="ordo-bench-peer-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as tmp:
            make_bench_model.write_model(args.shape, Path(tmp), ordo=args.ordo)
            result = run(args, Path(tmp), f"{args.shape} (random, written to /dev/shm)")
    else:
        directory = Path(args.model)
        if not (directory / "config.json").is_file():
            sys.exit(f"bench_peer.py: --model: {directory} has no config.json")
        result = run(args, directory, args.model)
    if args.json:
        print(json.dumps(result), flush=True)
    else:
        print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
