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
"greedy_margins", "encoder_output"}], "batch": {...}, "beam": [...]}. token_logprobs are
log_softmax (in float64) of the float32 logits, teacher-forced with decoder input
[decoder_start] + target[:-1]. encoder_output values are float32, printed with 9
significant digits (exact).

"batch" runs all the cases at once, as one padded batch (sources and decoder inputs
right-padded with pad_token_id, sources masked): {"sources": [each case's source_ids],
"targets": [each case's target_ids], "token_logprobs": [per case, OrdoModel.score_batch],
"greedy_max_length", "greedy_ids": [per case, OrdoModel.greedy_batch]}. The generator
checks that it equals the cases' one-at-a-time results (ids identical, log-probs within
1e-5 * max(1, |logprob|)).

"beam" has one entry per case, in case order: {"source_ids", "beam_size": 3,
"n_best": 3, "length_penalty": 1.0 for even case indices and 0.0 for odd ones,
"max_length": 10, "min_length": 0, "hypotheses": [{"ids", "score", "normalized_score",
"finished"}, ...] best first, "min_margin"}, from OrdoModel.beam_search (whose docstring
defines the search: scores are float64 sums of token log-probs, normalized_score =
score / len(ids) ** length_penalty, finished is false for a hypothesis cut at
max_length). min_margin is the smallest gap any of the search's decisions depended on.

Every greedy step's top1 - top2 logit margin is >= min_greedy_margin and every beam
entry's min_margin is >= MIN_BEAM_MARGIN (1e-3), so greedy and beam ids do not depend
on float rounding; sources (and if need be the model) are redrawn until that holds.
References are computed from the model as re-loaded from the files written, with
weights rounded to the file's dtype.

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
MIN_BEAM_MARGIN = 1e-3    # the C++ side compares beam scores within 1e-4
BEAM_SIZE = 3
BEAM_N_BEST = 3
BEAM_MAX_LENGTH = 10
BATCH_LOGPROB_TOLERANCE = 1e-5  # times max(1, |logprob|): float32 logits reach ~30
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


def beam_options(case_index: int) -> dict:
    """beam_search's arguments for the case at case_index (length_penalty alternates)."""
    return {"beam_size": BEAM_SIZE, "n_best": BEAM_N_BEST,
            "length_penalty": 1.0 if case_index % 2 == 0 else 0.0,
            "max_length": BEAM_MAX_LENGTH, "min_length": 0}


def robust(model: OrdoModel, source: list, case_index: int):
    """(greedy, beam) results of source if both are far from every rounding tie, else None."""
    greedy = model.greedy(source, GREEDY_MAX_LENGTH)
    if min(greedy[1]) < MIN_GREEDY_MARGIN:
        return None
    beam = model.beam_search(source, **beam_options(case_index))
    return (greedy, beam) if beam[1] >= MIN_BEAM_MARGIN else None


def build(name, cfg, bias, dtype, seed):
    """A model (rounded to dtype), its cases' (source, target), with robust greedy and
    beam search, and their (greedy, beam_search) results. Also returns the model attempt
    used and the number of sources drawn."""
    draws = 0
    for attempt in range(MODEL_ATTEMPTS):
        torch_gen = torch.Generator().manual_seed(_seed_int(seed, name, attempt) % 2**63)
        rng = random.Random(f"{seed}/{name}/{attempt}")
        model = OrdoModel(cfg, final_logits_bias=bias).eval()
        random_weights_(model, torch_gen)
        round_weights_(model, dtype)
        full = model.config
        lengths = [1, rng.randint(3, 7), rng.randint(9, 12)]
        cases, decided = [], []
        for index, length in enumerate(lengths):
            for _ in range(SOURCE_DRAWS if length > 1 else 1):
                source = draw_source(rng, length, full)
                draws += 1
                results = robust(model, source, index)
                if results is not None:
                    cases.append((source, draw_target(rng, full)))
                    decided.append(results)
                    break
            else:
                break  # no robust source at this length: re-seed the model
        if len(cases) == len(lengths):
            return model, cases, decided, attempt, draws
    raise RuntimeError(f"{name}: no model with greedy margins >= {MIN_GREEDY_MARGIN} and beam "
                       f"margins >= {MIN_BEAM_MARGIN} after {MODEL_ATTEMPTS} attempts")


def _f32(x: float) -> float:
    return float(f"{x:.9g}")  # shortest-ish decimal that round-trips a float32


@torch.no_grad()
def reference(model: OrdoModel, cases, name: str = "", full: bool = True,
              greedy=None) -> dict:
    """{"cases", "batch", "beam"} of reference.json (only "cases" unless full); checks
    that the batch equals the cases one at a time. greedy: the cases' greedy results if
    already known."""
    out = []
    for i, (source, target) in enumerate(cases):
        logprobs = model.score(source, target)
        ids, margins = greedy[i] if greedy else model.greedy(source, GREEDY_MAX_LENGTH)
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
    if not full:
        return {"cases": out}
    sources = [source for source, _ in cases]
    targets = [target for _, target in cases]
    batch_logprobs = model.score_batch(sources, targets)
    batch_ids, _ = model.greedy_batch(sources, GREEDY_MAX_LENGTH)
    for i, case in enumerate(out):
        if batch_ids[i] != case["greedy_ids"]:
            raise RuntimeError(f"{name}: case {i}: greedy_batch ids {batch_ids[i]} != greedy "
                               f"ids {case['greedy_ids']}")
        single = case["token_logprobs"]
        if len(batch_logprobs[i]) != len(single) or any(
                abs(a - b) > BATCH_LOGPROB_TOLERANCE * max(1.0, abs(b))
                for a, b in zip(batch_logprobs[i], single)):
            raise RuntimeError(f"{name}: case {i}: score_batch {batch_logprobs[i]} != score "
                               f"{single} (tolerance {BATCH_LOGPROB_TOLERANCE} relative)")
    batch = {"sources": sources, "targets": targets, "token_logprobs": batch_logprobs,
             "greedy_max_length": GREEDY_MAX_LENGTH, "greedy_ids": batch_ids}
    beam = []
    for i, source in enumerate(sources):
        options = beam_options(i)
        hypotheses, min_margin = model.beam_search(source, **options)
        if not min_margin >= MIN_BEAM_MARGIN:
            raise RuntimeError(f"{name}: case {i}: beam min_margin {min_margin} < "
                               f"{MIN_BEAM_MARGIN}")
        beam.append({"source_ids": source, **options, "hypotheses": hypotheses,
                     "min_margin": min_margin})
    return {"cases": out, "batch": batch, "beam": beam}


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
    beam_margins = []
    for name, cfg, bias, dtype in model_specs():
        model, cases, decided, attempt, draws = build(name, cfg, bias, dtype, args.seed)
        model_dir = args.out / name
        save_model_dir(model, model_dir, dtype=dtype)
        before = reference(model, cases, name, full=False, greedy=[g for g, _ in decided])
        loaded = load_model_dir(model_dir)
        after = reference(loaded, cases, name)
        beams = [(entry["hypotheses"], entry["min_margin"]) for entry in after["beam"]]
        if before["cases"] != after["cases"] or beams != [b for _, b in decided]:
            raise RuntimeError(f"{name}: outputs of the re-loaded model differ from the saved one")
        doc = {"model": name, "dtype": dtype, "min_greedy_margin": MIN_GREEDY_MARGIN,
               "cases": after["cases"], "batch": after["batch"], "beam": after["beam"]}
        (model_dir / "reference.json").write_text(json.dumps(doc, allow_nan=False) + "\n")
        names.append(name)
        beam_margins.extend(entry["min_margin"] for entry in after["beam"])
        note = f" (attempt {attempt})" if attempt else ""
        print(f"{name}: {len(cases)} cases, {draws} sources drawn{note}", flush=True)
    index = {"seed": args.seed, "min_greedy_margin": MIN_GREEDY_MARGIN, "models": names}
    (args.out / "index.json").write_text(json.dumps(index, indent=2) + "\n")
    print(f"{len(names)} models in {args.out} ({time.time() - start:.1f} s); beam min_margin "
          f"min {min(beam_margins):.3g}, median {sorted(beam_margins)[len(beam_margins) // 2]:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
