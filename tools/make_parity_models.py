#!/usr/bin/python3
"""Small random ordo models with PyTorch reference outputs, for the C++ parity tests.

    /usr/bin/python3 tools/make_parity_models.py --out DIR [--seed 7]

Writes DIR/<name>/{config.json, model.safetensors, reference.json} for every
position encoding x {post-norm, pre-norm} x {F32, F16, BF16} (42 models), and
DIR/index.json {"seed": ..., "min_greedy_margin": ..., "models": [names]}.

Model names are <positions>-<norm>-<dtype>, positions one of sin (interleaved,
vaswani), sin-split (split, vaswani), sin-t2t (tensor2tensor frequencies; split layout
for post-norm, interleaved for pre-norm), learned, rope-half, rope-interleaved, none.
On top of that each model gets one of six "flavours" (config variants: activations,
separate/untied vocabularies, layernorm_embedding, position_offset, final_logits_bias,
scale_embedding, eps, asymmetric encoder/decoder shapes, ...), rotated so that every
position encoding meets every flavour. See FLAVOURS.

reference.json: {"model", "dtype", "min_greedy_margin", "cases": [{"source_ids",
"target_ids", "token_logprobs", "logprob", "greedy_max_length", "greedy_ids",
"greedy_margins", "encoder_output"}]}. token_logprobs are log_softmax (in float64) of
the float32 logits, teacher-forced with decoder input [decoder_start] + target[:-1].
encoder_output values are float32, printed with 9 significant digits (exact).
Every greedy step's top1 - top2 logit margin is >= min_greedy_margin, so greedy ids
do not depend on float rounding; sources (and if need be the model) are redrawn until
that holds. References are computed from the model as re-loaded from the files
written, with weights rounded to the file's dtype.

Deterministic for a given --seed (single-threaded torch).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ordo_torch import OrdoModel, load_model_dir, round_weights_, save_model_dir  # noqa: E402

MIN_GREEDY_MARGIN = 1e-2  # the contract is >= 1e-3; keep headroom
GREEDY_MAX_LENGTH = 10
SOURCE_DRAWS = 20         # source redraws per case before re-seeding the model
MODEL_ATTEMPTS = 50

POSITIONS = {  # name -> config
    "sin": {"position_encoding": "sinusoidal", "sinusoidal_layout": "interleaved"},
    "sin-split": {"position_encoding": "sinusoidal", "sinusoidal_layout": "split"},
    "sin-t2t": {"position_encoding": "sinusoidal", "sinusoidal_frequencies": "tensor2tensor"},
    "learned": {"position_encoding": "learned"},
    "rope-half": {"position_encoding": "rope", "rope_layout": "half"},
    "rope-interleaved": {"position_encoding": "rope", "rope_layout": "interleaved"},
    "none": {"position_encoding": "none"},
}
NORMS = {"post": False, "pre": True}
DTYPES = {"f32": "F32", "f16": "F16", "bf16": "BF16"}
OFFSETS = {"learned": 2, "sinusoidal": 1, "rope": 3, "none": 2}

BASE = {
    "vocab_size": 40, "d_model": 16, "encoder_layers": 2, "decoder_layers": 2,
    "encoder_attention_heads": 2, "decoder_attention_heads": 2,
    "encoder_ffn_dim": 32, "decoder_ffn_dim": 32, "max_position_embeddings": 32,
    "pad_token_id": 0, "eos_token_id": 1, "decoder_start_token_id": 0,
}
# Each flavour: config overrides, plus the non-config options "offset" (use the position
# encoding's OFFSETS value), "final_logits_bias", "rope_theta" (only for rope models).
FLAVOURS = [
    {"activation_function": "relu"},
    {"activation_function": "gelu", "scale_embedding": True, "offset": True},
    {"activation_function": "swish", "share_encoder_decoder_embeddings": False,
     "decoder_vocab_size": 37, "tie_word_embeddings": False, "final_logits_bias": True},
    {"activation_function": "relu", "layernorm_embedding": True, "layer_norm_eps": 1e-6,
     "d_model": 32, "encoder_attention_heads": 2, "decoder_attention_heads": 4,
     "encoder_ffn_dim": 48, "decoder_ffn_dim": 24, "encoder_layers": 3, "decoder_layers": 1},
    {"activation_function": "gelu", "share_encoder_decoder_embeddings": False,
     "decoder_vocab_size": 37, "offset": True, "layernorm_embedding": True,
     "decoder_start_token_id": 2, "bos_token_id": 2, "rope_theta": 100.0},
    {"activation_function": "swish", "tie_word_embeddings": False, "scale_embedding": True,
     "final_logits_bias": True, "layer_norm_eps": 1e-6, "d_model": 32,
     "encoder_attention_heads": 4, "decoder_attention_heads": 2, "encoder_ffn_dim": 40,
     "decoder_ffn_dim": 56},
]


def model_specs():
    """[(name, config, final_logits_bias, dtype)] in a fixed order."""
    specs = []
    for p, (pos_name, pos) in enumerate(POSITIONS.items()):
        for n, (norm_name, pre) in enumerate(NORMS.items()):
            for t, (dtype_name, dtype) in enumerate(DTYPES.items()):
                flavour = dict(FLAVOURS[(p + 3 * n + t) % len(FLAVOURS)])
                cfg = dict(BASE, **pos, normalize_before=pre)
                if pos_name == "sin-t2t":
                    cfg["sinusoidal_layout"] = "split" if norm_name == "post" else "interleaved"
                if flavour.pop("offset", False):
                    cfg["position_offset"] = OFFSETS[cfg["position_encoding"]]
                theta = flavour.pop("rope_theta", None)
                if theta is not None and cfg["position_encoding"] == "rope":
                    cfg["rope_theta"] = theta
                bias = flavour.pop("final_logits_bias", False)
                cfg.update(flavour)
                specs.append((f"{pos_name}-{norm_name}-{dtype_name}", cfg, bias, dtype))
    return specs


def _seed_int(*parts) -> int:
    return int.from_bytes(hashlib.sha256("/".join(map(str, parts)).encode()).digest()[:8], "little")


@torch.no_grad()
def random_weights_(model: OrdoModel, generator: torch.Generator) -> None:
    """Scales that keep outputs far from degenerate: weights N(0, 0.4), token embeddings
    N(0, 1) (N(0, 0.5) when scaled by sqrt(d)), learned positions N(0, 0.5), LayerNorm
    weights 1 + N(0, 0.2), biases N(0, 0.2), final_logits_bias N(0, 0.5)."""
    emb_std = 0.5 if model.config["scale_embedding"] else 1.0
    for name, p in model.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        if name == "final_logits_bias":
            std, mean = 0.5, 0.0
        elif "embed_positions" in name:
            std, mean = 0.5, 0.0
        elif "embed_tokens" in name or name == "model.shared.weight":
            std, mean = emb_std, 0.0
        elif "layer_norm" in name or "layernorm" in name:
            std, mean = 0.2, (1.0 if leaf == "weight" else 0.0)
        elif leaf == "bias":
            std, mean = 0.2, 0.0
        else:
            std, mean = 0.4, 0.0
        p.copy_(torch.randn(p.shape, generator=generator) * std + mean)


def draw_source(rng: random.Random, length: int, cfg: dict) -> list:
    return [rng.randrange(2, cfg["vocab_size"]) for _ in range(length - 1)] + [cfg["eos_token_id"]]


def draw_target(rng: random.Random, cfg: dict) -> list:
    n = rng.randint(1, 8)
    return [rng.randrange(2, cfg["decoder_vocab_size"]) for _ in range(n - 1)] + [cfg["eos_token_id"]]


def build(name, cfg, bias, dtype, seed):
    """A model (rounded to dtype) and its cases' (source, target), with robust greedy."""
    for attempt in range(MODEL_ATTEMPTS):
        torch_gen = torch.Generator().manual_seed(_seed_int(seed, name, attempt) % 2**63)
        rng = random.Random(f"{seed}/{name}/{attempt}")
        model = OrdoModel(cfg, final_logits_bias=bias).eval()
        random_weights_(model, torch_gen)
        round_weights_(model, dtype)
        full = model.config
        lengths = [1, rng.randint(3, 7), rng.randint(9, 12)]
        cases = []
        for length in lengths:
            for _ in range(SOURCE_DRAWS if length > 1 else 1):
                source = draw_source(rng, length, full)
                _, margins = model.greedy(source, GREEDY_MAX_LENGTH)
                if min(margins) >= MIN_GREEDY_MARGIN:
                    cases.append((source, draw_target(rng, full)))
                    break
            else:
                break  # no robust source at this length: re-seed the model
        if len(cases) == len(lengths):
            return model, cases, attempt
    raise RuntimeError(f"{name}: no model with greedy margins >= {MIN_GREEDY_MARGIN} "
                       f"after {MODEL_ATTEMPTS} attempts")


def _f32(x: float) -> float:
    return float(f"{x:.9g}")  # shortest-ish decimal that round-trips a float32


@torch.no_grad()
def reference(model: OrdoModel, cases) -> list:
    out = []
    for source, target in cases:
        logprobs = model.score(source, target)
        ids, margins = model.greedy(source, GREEDY_MAX_LENGTH)
        enc = model.encode(torch.tensor([source]))[0]
        out.append({
            "source_ids": source,
            "target_ids": target,
            "token_logprobs": logprobs,
            "logprob": math.fsum(logprobs),
            "greedy_max_length": GREEDY_MAX_LENGTH,
            "greedy_ids": ids,
            "greedy_margins": margins,
            "encoder_output": [[_f32(v) for v in row] for row in enc.tolist()],
        })
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    start = time.time()
    args.out.mkdir(parents=True, exist_ok=True)
    names = []
    for name, cfg, bias, dtype in model_specs():
        model, cases, attempt = build(name, cfg, bias, dtype, args.seed)
        model_dir = args.out / name
        save_model_dir(model, model_dir, dtype=dtype)
        before = reference(model, cases)
        loaded = load_model_dir(model_dir)
        after = reference(loaded, cases)
        if before != after:
            raise RuntimeError(f"{name}: outputs of the re-loaded model differ from the saved one")
        doc = {"model": name, "dtype": dtype, "min_greedy_margin": MIN_GREEDY_MARGIN,
               "cases": after}
        (model_dir / "reference.json").write_text(json.dumps(doc) + "\n")
        names.append(name)
        note = f" (attempt {attempt})" if attempt else ""
        print(f"{name}: {len(cases)} cases{note}", flush=True)
    index = {"seed": args.seed, "min_greedy_margin": MIN_GREEDY_MARGIN, "models": names}
    (args.out / "index.json").write_text(json.dumps(index, indent=2) + "\n")
    print(f"{len(names)} models in {args.out} ({time.time() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
