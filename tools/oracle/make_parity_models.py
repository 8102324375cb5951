#!/usr/bin/python3
"""Small random ordo models with PyTorch reference outputs, for the C++ parity tests.

    /usr/bin/python3 tools/oracle/make_parity_models.py --out DIR [--seed 7]

Writes DIR/<name>/{config.json, model.safetensors, reference.json} for every
position encoding x {post-norm, pre-norm} x {F32, F16, BF16} (42 models), and
DIR/index.json {"seed": ..., "min_greedy_margin": ..., "models": [names],
"generation_models": [names], "marian_models": [names], "torch_bin_models": {twin:
name}} (see GENERATION MODELS below, and MARIAN_MODELS; each Marian model has a twin
DIR/<name>-bin whose weights torch.save wrote as pytorch_model.bin, write_torch_bin_twin).

Model names are <positions>-<norm>-<dtype>, positions one of sin (interleaved,
vaswani), sin-split (split, vaswani), sin-t2t (tensor2tensor frequencies; split layout
for post-norm, interleaved for pre-norm), learned, rope-half, rope-interleaved, none.
On top of that each model gets one of six "flavours" (config variants: activations,
separate/untied vocabularies, layernorm_embedding, position_offset, final_logits_bias,
scale_embedding, eps, asymmetric encoder/decoder shapes, ...), rotated so that every
position encoding meets every flavour. See FLAVOURS.

THE ORACLE COMPUTES IN FLOAT64 (ORACLE_DTYPE): the models' weights are exactly what the
files hold (F32, F16 or BF16 values), and every reference is computed from them in
float64. PyTorch's float32 kernels depend on the CPU (ATEN_CPU_CAPABILITY) and round
batched and single computations differently by up to ~5e-5 here; in float64 these
differences are ~1e-13, so the references are the same on every machine, and what the
C++ tests measure against them is ordo's own float32 rounding.

reference.json: {"model", "dtype", "min_greedy_margin", "cases": [{"source_ids",
"target_ids", "token_logprobs", "logprob", "greedy_max_length", "greedy_ids",
"greedy_margins", "encoder_output"}], "batch": {...}, "beam": [...]}. token_logprobs are
log_softmax of the float64 logits, teacher-forced with decoder input
[decoder_start] + target[:-1]. encoder_output values are float64 (17 significant
digits, exact).

"batch" runs all the cases at once, as one padded batch (sources and decoder inputs
right-padded with pad_token_id, sources masked): {"sources": [each case's source_ids],
"targets": [each case's target_ids], "token_logprobs": [per case, OrdoModel.score_batch],
"greedy_max_length", "greedy_ids": [per case, OrdoModel.greedy_batch]}. The generator
checks that it equals the cases' one-at-a-time results (ids identical, log-probs within
BATCH_LOGPROB_TOLERANCE = 1e-10 * max(1, |logprob|)).

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

GENERATION MODELS. index.json also lists "generation_models": [names] (decoder-only;
"models" lists only the encoder-decoders above), written to the same DIR/<name>/:

- 14 decoder-only ordo models `lm-<positions>-<norm>-<dtype>` (positions and norms as
  above, encoder_layers 0, dtype rotated: (position index + norm index) % 3 over
  f32/f16/bf16), each with one of six LM_FLAVOURS ((2 * position index + norm index)
  % 6): num_key_value_heads < decoder_attention_heads (ratio 2), position_offset
  (learned-pre has learned + offset 2), separate untied 37-token decoder vocabulary
  with final_logits_bias (EOS_BOOST added to its eos entry), layernorm_embedding, ...
  Most leave out encoder_attention_heads/encoder_ffn_dim; flavour 3 keeps them.
  Written by save_model_dir: config.json + model.safetensors.
- 6 LLaMA models (ordo_torch.LlamaModel, Hugging Face layout, save_llama_dir):

      llama-kv4-tied-f32                          4 heads / 4 kv, tied
      llama-kv2-untied-bias-f16-sharded           2 kv, attention_bias, 2 shards
      llama-kv1-untied-eos2-bf16                  1 kv, eos_token_id [1, 3], pad null,
                                                  rope_theta 500, rms_norm_eps 1e-5
      llama-kv2-tied-bias-mlpbias-bf16-sharded    attention_bias + mlp_bias, 3 shards
      llama-kv2-untied-headdim12-f32-sharded      head_dim 12 != hidden 32 / 4 heads, 2 shards
      llama-kv1-tied-bias-f16                     3 layers, attention_bias

  kv<N>: num_key_value_heads = N of 4 attention heads (ratios 1, 2, 4). All have
  vocab 40, hidden 32, bos 2, eos 1 (or [1, 3]); pad 0 unless said (absent in the
  mlpbias model). A sharded model has model-0000i-of-0000N.safetensors and
  model.safetensors.index.json instead of model.safetensors.
- 7 RoPE-scaling models (ROPE_SCALING_LLAMA_MODELS, ROPE_SCALING_LM_MODELS): linear,
  dynamic, yarn (defaults; and every parameter given, with the older key "type"),
  llama3 on LLaMA; dynamic (interleaved, position_offset 3) and yarn on ordo's format.
  Their prompts are longer (ROPE_SCALING_PROMPT_LENGTHS, up to 48 tokens against a
  trained length of 16), and every greedy and beam reference rotates each token as a
  KV-cached decode does (search.py's _rope_lengths; only dynamic scaling tells the
  difference).

A generation model's reference.json: {"model", "family": "ordo" | "llama", "dtype",
"sharded", "min_greedy_margin", "cases": [{"prompt_ids", "continuation_ids",
"token_logprobs", "greedy_max_length", "greedy_ids", "greedy_margins"}], "batch":
{"prompts", "sequences", "token_logprobs", "greedy_max_length", "greedy_ids"}, "beam":
[...]}. Five cases, prompt lengths drawn from PROMPT_LENGTHS (1, 2-4, 5-7, 8-10,
11-12 tokens; a LLaMA prompt starts with bos_token_id; prompt tokens are never eos or
pad). The decoder's input is the prompt itself, positions from 0 (+ position_offset).
token_logprobs = lm_score(prompt_ids + continuation_ids): log p(x[t] | x[:t]) for
t = 1 .. n - 1 (n - 1 values, the first prompt token is not scored); continuations have
1-8 tokens, about half ending with an eos. greedy_ids: lm_greedy(prompt_ids,
greedy_max_length), the generated tokens only, stopping after any eos id (included).
"batch" = all cases in one right-padded batch: sequences[i] = prompts[i] +
continuation_ids, token_logprobs[i] = lm_score_batch, greedy_ids[i] = lm_greedy_batch
(checked against the cases as for the encoder-decoders). "beam" entries are those of
the encoder-decoders with "prompt_ids" instead of "source_ids", from lm_beam_search:
the same search with a beam's decoder input = prompt + prefix, eos = any eos id,
hypothesis ids = the generated tokens only. Margins, redraws and the re-load check as
above.

QUANTIZED MODELS. index.json also lists "quantized_models": [names] (23; in no other
list) and "dequantized_twins": {"<name>-dequantized": name}: ordo's encoder-decoders
with every position scheme (quantized_ordo_specs), decoder-only ordo and LLaMA models
(quantized_generation_specs), Marian, NLLB and T5 models (QUANTIZED_MARIAN,
QUANTIZED_M2M100, QUANTIZED_T5), each int8 (a scale a row, or groups of 8) or int4
(groups of 32; every width a multiple of 32 but q4-llama-kv2-mixed's 48, int8 inside). The random model is made to hold its
dequantized weights (quantization.quantize_weights_) before its cases are drawn, saved
as F32 (kept as the twin: fl32 of each q x scale), then rewritten quantized
(quantize_model_dir); the references are computed from the quantized files as re-loaded
(exact q x scale in float64) and must equal the in-memory model's. reference.json is the
family's, with "quantization": {"type", "group_size"} (null in the other models').
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import shutil
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ordo_torch import (  # noqa: E402
    LlamaModel, M2M100Model, MarianMTModel, MarianTokenizerOracle, NllbTokenizerOracle, OrdoModel,
    load_llama_dir, load_m2m100_dir, nllb_generation_config, save_m2m100_dir, write_nllb_tokenizer,
    load_marian_dir, load_model_dir, marian_generation_config, round_weights_, save_llama_dir,
    save_marian_dir, save_model_dir, write_marian_tokenizer)
from ordo_torch.t5 import T5ForConditionalGeneration  # noqa: E402
from ordo_torch.t5_dirs import (T5TokenizerOracle, load_t5_dir, save_t5_dir,  # noqa: E402
                                t5_generation_config, write_t5_tokenizer)
from ordo_torch.marian_dirs import hf_tied_aliases  # noqa: E402
from ordo_torch.model_dirs import read_weight_files  # noqa: E402
from ordo_torch.quantization import quantize_model_dir, quantize_weights_  # noqa: E402

ORACLE_DTYPE = torch.float64  # see THE ORACLE COMPUTES IN FLOAT64 above
MIN_GREEDY_MARGIN = 1e-2  # the contract is >= 1e-3; keep headroom
GREEDY_MAX_LENGTH = 10
MIN_BEAM_MARGIN = 1e-3    # the C++ side compares beam scores within 1e-4
BEAM_SIZE = 3
BEAM_N_BEST = 3
BEAM_MAX_LENGTH = 10
# Times max(1, |logprob|). Batched and single differ only in float64 summation order:
# logits reach ~30, so ~1e-13 relative after a few hundred roundings of 1.1e-16 each;
# 1e-10 leaves room and still catches any float32 rounding (6e-8) that slipped in.
BATCH_LOGPROB_TOLERANCE = 1e-10
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
    "alibi": {"position_encoding": "alibi"},
    # 16 buckets up to distance 20: these short sequences reach the exact buckets, the
    # logarithmic ones and the last (T5's 32 / 128 are checked by hand in C++).
    "t5": {"position_encoding": "t5_relative", "relative_attention_num_buckets": 16,
           "relative_attention_max_distance": 20},
}
NORMS = {"post": False, "pre": True}
DTYPES = {"f32": "F32", "f16": "F16", "bf16": "BF16"}
OFFSETS = {"learned": 2, "sinusoidal": 1, "rope": 3, "none": 2, "alibi": 1, "t5_relative": 3}

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
        elif "relative_attention_bias" in name:  # large enough to reorder attention
            std, mean = 1.0, 0.0
        elif "embed_tokens" in name or name == "model.shared.weight":
            std, mean = emb_std, 0.0
        elif "layer_norm" in name or "layernorm" in name:
            std, mean = 0.2, (1.0 if leaf == "weight" else 0.0)
        elif leaf == "bias":
            std, mean = 0.2, 0.0
        else:
            std, mean = 0.4, 0.0
        p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype) * std + mean)


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


def _ordo_model(cfg, bias, dtype):
    """A random OrdoModel factory for `build`: (model, the config tokens are drawn from)."""
    def make(torch_gen):
        model = OrdoModel(cfg, final_logits_bias=bias).to(ORACLE_DTYPE).eval()
        random_weights_(model, torch_gen)
        round_weights_(model, dtype)
        return model, model.config
    return make


def build(name, cfg, bias, dtype, seed, make_model=None):
    """A model (rounded to dtype), its cases' (source, target), with robust greedy and
    beam search, and their (greedy, beam_search) results. Also returns the model attempt
    used and the number of sources drawn. make_model(torch generator) -> (model, draw
    config) replaces the OrdoModel of (cfg, bias, dtype) (the Marian models)."""
    make_model = make_model or _ordo_model(cfg, bias, dtype)
    draws = 0
    for attempt in range(MODEL_ATTEMPTS):
        torch_gen = torch.Generator().manual_seed(_seed_int(seed, name, attempt) % 2**63)
        rng = random.Random(f"{seed}/{name}/{attempt}")
        model, full = make_model(torch_gen)
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
            "encoder_output": enc.tolist(),
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


# ----------------------------------------------------------------------------------------
# Generation models: decoder-only ordo models and LLaMA
# ----------------------------------------------------------------------------------------

PROMPT_LENGTHS = ((1, 1), (2, 4), (5, 7), (8, 10), (11, 12))  # one case per range
EOS_BOOST = 2.0  # added to final_logits_bias[eos] of decoder-only ordo models that have one

LM_BASE = {
    "vocab_size": 40, "d_model": 16, "encoder_layers": 0, "decoder_layers": 2,
    "decoder_attention_heads": 2, "decoder_ffn_dim": 32, "max_position_embeddings": 32,
    "pad_token_id": 0, "eos_token_id": 1, "decoder_start_token_id": 0,
}
# As FLAVOURS, for decoder-only models; flavour (2 * position index + norm index) % 6.
LM_FLAVOURS = [
    {"activation_function": "relu", "num_key_value_heads": 1},
    {"activation_function": "gelu", "scale_embedding": True, "offset": True},
    {"activation_function": "swish", "share_encoder_decoder_embeddings": False,
     "decoder_vocab_size": 37, "tie_word_embeddings": False, "final_logits_bias": True},
    {"activation_function": "relu", "layernorm_embedding": True, "layer_norm_eps": 1e-6,
     "d_model": 32, "decoder_attention_heads": 4, "num_key_value_heads": 2,
     "decoder_ffn_dim": 48, "decoder_layers": 3,
     "encoder_attention_heads": 4, "encoder_ffn_dim": 64},  # unused encoder keys, kept
    {"activation_function": "gelu", "offset": True, "num_key_value_heads": 1,
     "bos_token_id": 2, "rope_theta": 100.0},
    {"activation_function": "swish", "tie_word_embeddings": False, "scale_embedding": True,
     "d_model": 32, "decoder_attention_heads": 4, "decoder_ffn_dim": 40},
]

LLAMA_BASE = {
    "model_type": "llama", "vocab_size": 40, "hidden_size": 32, "intermediate_size": 48,
    "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 64,
    "rms_norm_eps": 1e-6, "bos_token_id": 2, "eos_token_id": 1,
}
# name -> (config overrides, dtype, shards). kv<N>: N = num_key_value_heads of 4 heads.
LLAMA_MODELS = {
    "llama-kv4-tied-f32": ({"num_key_value_heads": 4, "tie_word_embeddings": True,
                            "pad_token_id": 0}, "F32", 1),
    "llama-kv2-untied-bias-f16-sharded": ({"num_key_value_heads": 2, "attention_bias": True,
                                           "pad_token_id": 0}, "F16", 2),
    "llama-kv1-untied-eos2-bf16": ({"num_key_value_heads": 1, "eos_token_id": [1, 3],
                                    "pad_token_id": None, "rope_theta": 500.0,
                                    "rms_norm_eps": 1e-5}, "BF16", 1),
    "llama-kv2-tied-bias-mlpbias-bf16-sharded": ({"num_key_value_heads": 2,
                                                  "tie_word_embeddings": True,
                                                  "attention_bias": True, "mlp_bias": True},
                                                 "BF16", 3),
    "llama-kv2-untied-headdim12-f32-sharded": ({"num_key_value_heads": 2, "head_dim": 12,
                                                "intermediate_size": 56, "pad_token_id": 0},
                                               "F32", 2),
    "llama-kv1-tied-bias-f16": ({"num_key_value_heads": 1, "tie_word_embeddings": True,
                                 "attention_bias": True, "num_hidden_layers": 3,
                                 "pad_token_id": 0}, "F16", 1),
}

# RoPE scaling (models/rope_scaling_config.h), each type on LLaMA and two on ordo's format.
# The trained length is 16 (max_position_embeddings for linear and dynamic, the original
# for yarn and llama3), and the prompts reach 48 tokens with 10 more generated: positions
# from 0 to 3.6x the trained length. A dynamic model's prompts of 6-10 and 14-18 tokens
# cross its threshold mid-generation, a KV-cached decode's case (search.py's
# _rope_lengths). yarn and llama3 use head_dim 16 and theta 100, whose wavelengths (6.3 to
# 353 positions) fall in every band of their ramps: kept, mixed and interpolated.
ROPE_SCALING_PROMPT_LENGTHS = ((1, 1), (6, 10), (14, 18), (24, 32), (40, 48))
_BANDS = {"head_dim": 16, "rope_theta": 100.0, "max_position_embeddings": 64}
ROPE_SCALING_LLAMA_MODELS = {
    "llama-rope-linear-f32": ({"num_key_value_heads": 2, "max_position_embeddings": 16,
                               "rope_scaling": {"rope_type": "linear", "factor": 4.0}}, "F32", 1),
    "llama-rope-dynamic-bf16": ({"num_key_value_heads": 2, "max_position_embeddings": 16,
                                 "rope_scaling": {"type": "dynamic", "factor": 2.0}}, "BF16", 1),
    "llama-rope-yarn-f32": (dict(_BANDS, num_key_value_heads=2, rope_scaling={
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}), "F32", 1),
    "llama-rope-yarn-explicit-f16": (dict(_BANDS, num_key_value_heads=1, rope_scaling={
        "type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16,
        "beta_fast": 8.0, "beta_slow": 0.5, "attention_factor": 1.2, "truncate": False}),
        "F16", 1),
    "llama-rope-llama3-f32": (dict(_BANDS, num_key_value_heads=4, rope_scaling={
        "rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 2.0,
        "original_max_position_embeddings": 16}), "F32", 1),
}
ROPE_SCALING_LM_MODELS = {  # ordo's format: decoder-only, pre-norm, theta 100
    "lm-rope-interleaved-dynamic-pre-f32": {
        "rope_layout": "interleaved", "position_offset": 3, "max_position_embeddings": 16,
        "rope_scaling": {"rope_type": "dynamic", "factor": 3.0}},
    "lm-rope-half-yarn-pre-f32": {
        "rope_layout": "half", "max_position_embeddings": 64,
        "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                         "original_max_position_embeddings": 16}},
}


def generation_specs():
    """[(name, family, config, options)] in a fixed order; options: dtype, shards,
    final_logits_bias."""
    specs = []
    dtypes = list(DTYPES.items())
    for p, (pos_name, pos) in enumerate(POSITIONS.items()):
        for n, (norm_name, pre) in enumerate(NORMS.items()):
            dtype_name, dtype = dtypes[(p + n) % len(dtypes)]
            flavour = dict(LM_FLAVOURS[(2 * p + n) % len(LM_FLAVOURS)])
            cfg = dict(LM_BASE, **pos, normalize_before=pre)
            if pos_name == "sin-t2t":
                cfg["sinusoidal_layout"] = "split" if norm_name == "post" else "interleaved"
            if flavour.pop("offset", False):
                cfg["position_offset"] = OFFSETS[cfg["position_encoding"]]
            theta = flavour.pop("rope_theta", None)
            if theta is not None and cfg["position_encoding"] == "rope":
                cfg["rope_theta"] = theta
            bias = flavour.pop("final_logits_bias", False)
            cfg.update(flavour)
            specs.append((f"lm-{pos_name}-{norm_name}-{dtype_name}", "ordo", cfg,
                          {"dtype": dtype, "shards": 1, "final_logits_bias": bias}))
    for name, (overrides, dtype, shards) in LLAMA_MODELS.items():
        specs.append((name, "llama", dict(LLAMA_BASE, **overrides),
                      {"dtype": dtype, "shards": shards, "final_logits_bias": False}))
    long = {"prompt_lengths": ROPE_SCALING_PROMPT_LENGTHS}
    for name, (overrides, dtype, shards) in ROPE_SCALING_LLAMA_MODELS.items():
        specs.append((name, "llama", dict(LLAMA_BASE, **overrides),
                      {"dtype": dtype, "shards": shards, "final_logits_bias": False, **long}))
    for name, overrides in ROPE_SCALING_LM_MODELS.items():
        cfg = dict(LM_BASE, position_encoding="rope", normalize_before=True, rope_theta=100.0,
                   **overrides)
        specs.append((name, "ordo", cfg,
                      {"dtype": "F32", "shards": 1, "final_logits_bias": False, **long}))
    return specs


@torch.no_grad()
def random_llama_weights_(model: LlamaModel, generator: torch.Generator) -> None:
    """Token embeddings N(0, 1), RMSNorm weights 1 + N(0, 0.2), biases N(0, 0.2), other
    weights N(0, 0.3)."""
    for name, p in model.named_parameters():
        if name == "model.embed_tokens.weight":
            std, mean = 1.0, 0.0
        elif name.endswith("norm.weight"):
            std, mean = 0.2, 1.0
        elif name.endswith(".bias"):
            std, mean = 0.2, 0.0
        else:
            std, mean = 0.3, 0.0
        p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype) * std + mean)


def _eos_ids(family: str, cfg: dict) -> list:
    eos = cfg["eos_token_id"]
    return list(eos) if isinstance(eos, list) else [eos]


def _token_range(family: str, cfg: dict) -> int:
    return cfg["vocab_size"] if family == "llama" else cfg["decoder_vocab_size"]


def draw_prompt(rng: random.Random, length: int, family: str, cfg: dict) -> list:
    """LLaMA: [bos] + tokens; ordo: tokens. Tokens are in [2, V), never an eos."""
    eos = _eos_ids(family, cfg)
    V = _token_range(family, cfg)
    pool = [t for t in range(2, V) if t not in eos]
    head = [cfg["bos_token_id"]] if family == "llama" else []
    return head + [rng.choice(pool) for _ in range(length - len(head))]


def draw_continuation(rng: random.Random, family: str, cfg: dict) -> list:
    """1 to 8 tokens; every other one ends with an eos."""
    eos = _eos_ids(family, cfg)
    V = _token_range(family, cfg)
    pool = [t for t in range(2, V) if t not in eos]
    ids = [rng.choice(pool) for _ in range(rng.randint(1, 8))]
    if rng.random() < 0.5:
        ids[-1] = rng.choice(eos)
    return ids


def make_generation_model(family: str, cfg: dict, options: dict, generator: torch.Generator):
    if family == "llama":
        model = LlamaModel(cfg).to(ORACLE_DTYPE).eval()
        random_llama_weights_(model, generator)
    else:
        model = OrdoModel(cfg, final_logits_bias=options["final_logits_bias"])
        model = model.to(ORACLE_DTYPE).eval()
        random_weights_(model, generator)
        if options["final_logits_bias"]:
            with torch.no_grad():  # eos now and then: sequences of a batch stop apart
                model.final_logits_bias[0, model.config["eos_token_id"]] += EOS_BOOST
    return quantized(round_weights_(model, options["dtype"]), options.get("quantization"))


def robust_lm(model, prompt: list, case_index: int):
    """(greedy, beam) of a prompt if both are far from every rounding tie, else None."""
    greedy = model.lm_greedy(prompt, GREEDY_MAX_LENGTH)
    if min(greedy[1]) < MIN_GREEDY_MARGIN:
        return None
    beam = model.lm_beam_search(prompt, **beam_options(case_index))
    return (greedy, beam) if beam[1] >= MIN_BEAM_MARGIN else None


def build_generation(name, family, cfg, options, seed):
    """As `build`, for a generation model: (model, [(prompt, continuation)], decided,
    attempt, draws), one case per PROMPT_LENGTHS range (options["prompt_lengths"]
    instead when given)."""
    draws = 0
    for attempt in range(MODEL_ATTEMPTS):
        torch_gen = torch.Generator().manual_seed(_seed_int(seed, name, attempt) % 2**63)
        rng = random.Random(f"{seed}/{name}/{attempt}")
        model = make_generation_model(family, cfg, options, torch_gen)
        full = model.config
        lengths = [rng.randint(lo, hi)
                   for lo, hi in options.get("prompt_lengths", PROMPT_LENGTHS)]
        cases, decided = [], []
        for index, length in enumerate(lengths):
            for _ in range(SOURCE_DRAWS):
                prompt = draw_prompt(rng, length, family, full)
                draws += 1
                results = robust_lm(model, prompt, index)
                if results is not None:
                    cases.append((prompt, draw_continuation(rng, family, full)))
                    decided.append(results)
                    break
            else:
                break  # no robust prompt of this length: re-seed the model
        if len(cases) == len(lengths):
            return model, cases, decided, attempt, draws
    raise RuntimeError(f"{name}: no model with greedy margins >= {MIN_GREEDY_MARGIN} and beam "
                       f"margins >= {MIN_BEAM_MARGIN} after {MODEL_ATTEMPTS} attempts")


@torch.no_grad()
def generation_reference(model, cases, name: str = "", full: bool = True,
                         greedy=None) -> dict:
    """{"cases", "batch", "beam"} of a generation model's reference.json (only "cases"
    unless full); checks that the batch equals the cases one at a time."""
    out = []
    for i, (prompt, continuation) in enumerate(cases):
        ids, margins = greedy[i] if greedy else model.lm_greedy(prompt, GREEDY_MAX_LENGTH)
        out.append({
            "prompt_ids": prompt,
            "continuation_ids": continuation,
            "token_logprobs": model.lm_score(prompt + continuation),
            "greedy_max_length": GREEDY_MAX_LENGTH,
            "greedy_ids": ids,
            "greedy_margins": margins,
        })
    if not full:
        return {"cases": out}
    prompts = [prompt for prompt, _ in cases]
    sequences = [prompt + continuation for prompt, continuation in cases]
    batch_logprobs = model.lm_score_batch(sequences)
    batch_ids, _ = model.lm_greedy_batch(prompts, GREEDY_MAX_LENGTH)
    for i, case in enumerate(out):
        if batch_ids[i] != case["greedy_ids"]:
            raise RuntimeError(f"{name}: case {i}: lm_greedy_batch ids {batch_ids[i]} != "
                               f"lm_greedy ids {case['greedy_ids']}")
        single = case["token_logprobs"]
        if len(batch_logprobs[i]) != len(single) or any(
                abs(a - b) > BATCH_LOGPROB_TOLERANCE * max(1.0, abs(b))
                for a, b in zip(batch_logprobs[i], single)):
            raise RuntimeError(f"{name}: case {i}: lm_score_batch {batch_logprobs[i]} != "
                               f"lm_score {single} (tolerance {BATCH_LOGPROB_TOLERANCE} relative)")
    batch = {"prompts": prompts, "sequences": sequences, "token_logprobs": batch_logprobs,
             "greedy_max_length": GREEDY_MAX_LENGTH, "greedy_ids": batch_ids}
    beam = []
    for i, prompt in enumerate(prompts):
        options = beam_options(i)
        hypotheses, min_margin = model.lm_beam_search(prompt, **options)
        if not min_margin >= MIN_BEAM_MARGIN:
            raise RuntimeError(f"{name}: case {i}: beam min_margin {min_margin} < "
                               f"{MIN_BEAM_MARGIN}")
        beam.append({"prompt_ids": prompt, **options, "hypotheses": hypotheses,
                     "min_margin": min_margin})
    return {"cases": out, "batch": batch, "beam": beam}


def write_generation_model(out: Path, name, family, cfg, options, seed) -> list:
    """Builds, writes and checks one generation model; returns its beam min_margins."""
    model, cases, decided, attempt, draws = build_generation(name, family, cfg, options, seed)
    model_dir = out / name
    if family == "llama":
        save_llama_dir(model, model_dir, dtype=options["dtype"], shards=options["shards"])
        finish_quantized(model_dir, options.get("quantization"), model)
        loaded = load_llama_dir(model_dir, ORACLE_DTYPE)
    else:
        save_model_dir(model, model_dir, dtype=options["dtype"])
        finish_quantized(model_dir, options.get("quantization"), model)
        loaded = load_model_dir(model_dir, ORACLE_DTYPE)
    before = generation_reference(model, cases, name, full=False,
                                  greedy=[g for g, _ in decided])
    after = generation_reference(loaded, cases, name)
    beams = [(entry["hypotheses"], entry["min_margin"]) for entry in after["beam"]]
    if before["cases"] != after["cases"] or beams != [b for _, b in decided]:
        raise RuntimeError(f"{name}: outputs of the re-loaded model differ from the saved one")
    doc = {"model": name, "family": family, "dtype": options["dtype"],
           "quantization": options.get("quantization"), "sharded": options["shards"] > 1, "min_greedy_margin": MIN_GREEDY_MARGIN,
           "cases": after["cases"], "batch": after["batch"], "beam": after["beam"]}
    (model_dir / "reference.json").write_text(json.dumps(doc, allow_nan=False) + "\n")
    note = f" (attempt {attempt})" if attempt else ""
    print(f"{name}: {len(cases)} cases, {draws} prompts drawn{note}", flush=True)
    return [entry["min_margin"] for entry in after["beam"]]


# ----------------------------------------------------------------------------------------
# Marian models: Hugging Face's MarianMTModel layout, with its tokenizer files
# ----------------------------------------------------------------------------------------

CORPUS = Path(__file__).resolve().parents[2] / "weights" / "data" / "train.tsv"
CORPUS_LINES = 3000   # of the showcase corpus, to train each side's SentencePiece model
MARIAN_PIECES = 80    # pieces of each SentencePiece model
LANGUAGE_TOKENS = (">>deu<<", ">>nds<<")  # a multilingual opus-mt model's target tokens
MARIAN_BASE = {
    "d_model": 16, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 2,
    "decoder_attention_heads": 4, "encoder_ffn_dim": 32, "decoder_ffn_dim": 24,
    "max_position_embeddings": 40,
}
# name -> (config overrides, dtype, shards, sinusoid tables in the file, separate vocabularies)
MARIAN_MODELS = {
    "marian-shared-tied-positions-f32": (
        {"activation_function": "swish", "scale_embedding": True}, "F32", 1, True, False),
    "marian-shared-untied-f16": (
        {"activation_function": "gelu", "tie_word_embeddings": False}, "F16", 1, False, False),
    "marian-separate-tied-positions-bf16-sharded": (
        {"activation_function": "relu", "share_encoder_decoder_embeddings": False,
         "scale_embedding": True}, "BF16", 2, True, True),
    "marian-separate-untied-f32-sharded": (
        {"activation_function": "gelu_new", "share_encoder_decoder_embeddings": False,
         "tie_word_embeddings": False, "decoder_layers": 3}, "F32", 3, False, True),
}
# Texts whose ids the C++ tokenizer must reproduce: pieces in and out of the vocabulary, a
# language token (known, unknown), characters no piece covers, spacing SentencePiece
# normalizes.
TOKENIZATION_SOURCES = [
    "The clever young teachers chase dogs", ">>deu<< the man feeds a horse.",
    ">>xyz<< cats", "Ω and ✓ are unknown", "  two  spaces\tand a tab ", "a 42-year-old cat",
]
TOKENIZATION_TARGETS = ["Die klugen jungen Lehrer jagen Hunde", "Füße über Ärger, Ω."]


def corpus_sides():
    lines = CORPUS.read_text(encoding="utf-8").splitlines()[:CORPUS_LINES]
    pairs = [line.split("\t") for line in lines]
    return [a for a, _ in pairs], [b for _, b in pairs]


@torch.no_grad()
def random_marian_weights_(model: MarianMTModel, generator: torch.Generator) -> None:
    """As random_weights_ for OrdoModel, leaving a stored sinusoid table as it is (a
    published file holds the sinusoids)."""
    scaled = model.config["scale_embedding"]
    for name, p in model.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        if "embed_positions" in name:
            continue
        if name == "final_logits_bias":
            std, mean = 0.5, 0.0
        elif "embed_tokens" in name or name == "model.shared.weight":
            std, mean = (0.5 if scaled else 1.0), 0.0
        elif "layer_norm" in name:
            std, mean = 0.2, (1.0 if leaf == "weight" else 0.0)
        elif leaf == "bias":
            std, mean = 0.2, 0.0
        else:
            std, mean = 0.4, 0.0
        p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype) * std + mean)


def tokenization_reference(directory: Path) -> list:
    oracle = MarianTokenizerOracle(directory)
    return ([{"text": t, "as": "source", "ids": oracle.encode_source(t)} for t in TOKENIZATION_SOURCES]
            + [{"text": t, "as": "target", "ids": oracle.encode_target(t)} for t in TOKENIZATION_TARGETS])


def write_marian_model(out: Path, name: str, seed: int, spec=None, quantization=None):
    """Builds, writes and checks one Marian model directory (tokenizer files,
    config.json, generation_config.json, weights, reference.json with the encoder-decoder
    cases plus "tokenization"); returns its beam min_margins and the model."""
    overrides, dtype, shards, positions, separate = spec or MARIAN_MODELS[name]
    model_dir = out / name
    sources, targets = corpus_sides()
    tokens = write_marian_tokenizer(model_dir, sources, targets, MARIAN_PIECES,
                                    separate_vocabs=separate, language_tokens=LANGUAGE_TOKENS)
    cfg = dict(MARIAN_BASE, **tokens, **overrides)

    def make(torch_gen):
        model = MarianMTModel(cfg, positions_in_file=positions).to(ORACLE_DTYPE).eval()
        random_marian_weights_(model, torch_gen)
        quantized(round_weights_(model, dtype), quantization)
        # Tokens are drawn from [2, pad): never eos, unk or pad.
        return model, dict(model.config, vocab_size=tokens["pad_token_id"],
                           decoder_vocab_size=tokens["pad_token_id"])

    model, cases, decided, attempt, draws = build(name, cfg, False, dtype, seed, make_model=make)
    save_marian_dir(model, model_dir, dtype=dtype, shards=shards,
                    generation=marian_generation_config(model.config))
    finish_quantized(model_dir, quantization, model)
    before = reference(model, cases, name, full=False, greedy=[g for g, _ in decided])
    loaded = load_marian_dir(model_dir, ORACLE_DTYPE)
    after = reference(loaded, cases, name)
    beams = [(entry["hypotheses"], entry["min_margin"]) for entry in after["beam"]]
    if before["cases"] != after["cases"] or beams != [b for _, b in decided]:
        raise RuntimeError(f"{name}: outputs of the re-loaded model differ from the saved one")
    doc = {"model": name, "family": "marian", "dtype": dtype, "quantization": quantization, "sharded": shards > 1,
           "positions_in_file": positions, "separate_vocabs": separate,
           "min_greedy_margin": MIN_GREEDY_MARGIN, "cases": after["cases"],
           "batch": after["batch"], "beam": after["beam"],
           "tokenization": tokenization_reference(model_dir)}
    (model_dir / "reference.json").write_text(json.dumps(doc, allow_nan=False, ensure_ascii=False) + "\n")
    note = f" (attempt {attempt})" if attempt else ""
    print(f"{name}: {len(cases)} cases, {draws} sources drawn{note}", flush=True)
    return [entry["min_margin"] for entry in after["beam"]], model


def write_torch_bin_twin(out: Path, name: str, model: MarianMTModel) -> str:
    """The directory `name`-bin: Marian model `name`'s files with its weights saved by
    torch.save instead, as transformers saved them before safetensors: pytorch_model.bin
    (or, for a sharded model, the same runs as pytorch_model-0000i-of-0000N.bin and
    pytorch_model.bin.index.json), each a state_dict() with its `_metadata` and the tied
    names transformers' model lists (hf_tied_aliases) sharing storage. The C++ test loads
    both directories and wants bit-identical outputs. Returns the twin's name."""
    _, dtype, shards, _, _ = MARIAN_MODELS[name]
    twin = f"{name}-bin"
    shutil.rmtree(out / twin, ignore_errors=True)
    shutil.copytree(out / name, out / twin, ignore=shutil.ignore_patterns(
        "*.safetensors", "model.safetensors.index.json", "reference.json"))
    save_marian_dir(model, out / twin, dtype=dtype, shards=shards,
                    generation=marian_generation_config(model.config), weights_format="bin")
    # What torch itself loads from the twin (weights_only: no code runs) is exactly what
    # the safetensors hold, tied names aside.
    _, want = read_weight_files(out / name)
    got = {}
    for file in sorted((out / twin).glob("*.bin")):
        got.update(torch.load(file, weights_only=True))
    aliases = hf_tied_aliases(model.config)
    if set(got) != set(want) | set(aliases) or any(
            got[k].dtype != v.dtype or not torch.equal(got[k], v) for k, v in want.items()):
        raise RuntimeError(f"{twin}: torch.load gives other tensors than {name}'s safetensors")
    print(f"{twin}: {len(got)} tensors ({len(aliases)} tied names) in "
          f"{len(list((out / twin).glob('*.bin')))} pytorch_model file(s)", flush=True)
    return twin


# ----------------------------------------------------------------------------------------
# M2M100 models: Hugging Face's M2M100ForConditionalGeneration with NLLB's tokenizer files
# ----------------------------------------------------------------------------------------

NLLB_PIECES = 120  # pieces of the BPE SentencePiece model
# A few of NLLB-200's language codes (its tokenizer lists 202), after the pieces.
NLLB_CODES = ("deu_Latn", "eng_Latn", "fra_Latn", "nds_Latn", "spa_Latn")
NLLB_SPARE_ROWS = 2  # the embedding has rows beyond the tokenizer's ids, as NLLB-200's (256206 > 256204)
M2M100_BASE = {
    "d_model": 16, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 2,
    "decoder_attention_heads": 4, "encoder_ffn_dim": 32, "decoder_ffn_dim": 24,
    "max_position_embeddings": 40,
}
# name -> (config overrides, dtype, shards, added_tokens_decoder in tokenizer_config.json,
# legacy_behaviour)
M2M100_MODELS = {
    "nllb-relu-f32": ({"activation_function": "relu"}, "F32", 1, True, False),
    "nllb-gelu-unscaled-legacy-bf16-sharded": (
        {"activation_function": "gelu", "scale_embedding": False, "decoder_layers": 3}, "BF16", 2, False, True),
    # F16, as "every family: F32/F16/BF16" asks, and swish, NLLB's other activation name.
    "nllb-swish-f16": ({"activation_function": "swish", "encoder_layers": 1}, "F16", 1, False, False),
}
NLLB_TEXTS = [  # (text, source code, target code)
    ("The clever young teachers chase dogs", "eng_Latn", "deu_Latn"),
    ("Die klugen jungen Lehrer jagen Hunde", "deu_Latn", "eng_Latn"),
    ("Ω and ✓ are unknown", "eng_Latn", "fra_Latn"),
    ("  two  spaces\tand a tab ", "eng_Latn", "nds_Latn"),
    ("a 42-year-old cat", "eng_Latn", "spa_Latn"),
]


@torch.no_grad()
def random_m2m100_weights_(model, generator: torch.Generator) -> None:
    """As random_marian_weights_ (M2M100 has no position table to keep)."""
    scaled = model.config["scale_embedding"]
    for name, p in model.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        if name == "model.shared.weight":
            std, mean = (0.5 if scaled else 1.0), 0.0
        elif "layer_norm" in name:
            std, mean = 0.2, (1.0 if leaf == "weight" else 0.0)
        elif leaf == "bias":
            std, mean = 0.2, 0.0
        else:
            std, mean = 0.4, 0.0
        p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype) * std + mean)


def pad_inside_reference(model, cases, name: str) -> dict:
    """Sources holding the pad id among their tokens (fed as tokens, not masked): the
    encoder's positions skip them (M2M100's non-pad positions). Their scores and encoder
    outputs, one at a time and in a padded batch with the plain cases."""
    pad = model.config["pad_token_id"]
    sources = []
    for i, (source, _) in enumerate(cases):
        if len(source) >= 3:
            sources.append(source[:1] + [pad] + source[1:])
            sources.append(source[:-2] + [pad, pad] + source[-2:])
    targets = [cases[i % len(cases)][1] for i in range(len(sources))]
    single = [model.score(s, t) for s, t in zip(sources, targets)]
    encoded = [model.encode(torch.tensor([s]))[0].tolist() for s in sources]
    all_sources = sources + [c[0] for c in cases]
    all_targets = targets + [c[1] for c in cases]
    batch = model.score_batch(all_sources, all_targets)
    for i, want in enumerate(single):
        if any(abs(a - b) > BATCH_LOGPROB_TOLERANCE * max(1.0, abs(b)) for a, b in zip(batch[i], want)):
            raise RuntimeError(f"{name}: pad-inside source {i}: batch {batch[i]} != single {want}")
    return {"sources": sources, "targets": targets, "token_logprobs": single, "encoder_output": encoded,
            "batch_sources": all_sources, "batch_targets": all_targets, "batch_token_logprobs": batch}


def translation_reference(model, directory: Path) -> list:
    """Texts translated as generate() translates them for NLLB: the source tokenized by
    NllbTokenizer with its code, greedy from decoder_start with the target code forced
    first. Kept when every decision is 1e-2 from a tie."""
    oracle = NllbTokenizerOracle(directory)
    out = []
    for text, source_lang, target_lang in NLLB_TEXTS:
        source = oracle.encode(text, source_lang)
        ids, margin = model.translate(source, oracle.codes[target_lang], GREEDY_MAX_LENGTH)
        if margin >= MIN_GREEDY_MARGIN:
            out.append({"text": text, "source_lang": source_lang, "target_lang": target_lang,
                        "source_ids": source, "ids": ids})
    if not out:
        raise RuntimeError(f"{directory.name}: no translation far enough from a tie")
    return out


def write_m2m100_model(out: Path, name: str, seed: int, spec=None, quantization=None) -> list:
    """Builds, writes and checks one NLLB-layout model directory (tokenizer files,
    config.json, generation_config.json, weights, reference.json with the encoder-decoder
    cases plus "pad_inside", "translations" and "tokenization"); returns its beam
    min_margins."""
    overrides, dtype, shards, added, legacy = spec or M2M100_MODELS[name]
    model_dir = out / name
    sources, targets = corpus_sides()
    tokens = write_nllb_tokenizer(model_dir, sources + targets, NLLB_PIECES, NLLB_CODES,
                                  added_tokens_decoder=added, legacy_behaviour=legacy)
    cfg = dict(M2M100_BASE, vocab_size=tokens["tokens"] + NLLB_SPARE_ROWS, **overrides)

    def make(torch_gen):
        model = M2M100Model(cfg).to(ORACLE_DTYPE).eval()
        random_m2m100_weights_(model, torch_gen)
        quantized(round_weights_(model, dtype), quantization)
        return model, dict(model.config, decoder_vocab_size=model.config["vocab_size"])

    model, cases, decided, attempt, draws = build(name, cfg, False, dtype, seed, make_model=make)
    save_m2m100_dir(model, model_dir, dtype=dtype, shards=shards, generation=nllb_generation_config(model.config))
    finish_quantized(model_dir, quantization, model)
    before = reference(model, cases, name, full=False, greedy=[g for g, _ in decided])
    loaded = load_m2m100_dir(model_dir, ORACLE_DTYPE)
    after = reference(loaded, cases, name)
    beams = [(entry["hypotheses"], entry["min_margin"]) for entry in after["beam"]]
    if before["cases"] != after["cases"] or beams != [b for _, b in decided]:
        raise RuntimeError(f"{name}: outputs of the re-loaded model differ from the saved one")
    oracle = NllbTokenizerOracle(model_dir)
    tokenization = [{"text": t, "as": side, "lang": code, "ids": oracle.encode(t, code)}
                    for t, source_lang, target_lang in NLLB_TEXTS
                    for side, code in (("source", source_lang), ("target", target_lang))]
    doc = {"model": name, "family": "m2m_100", "dtype": dtype, "quantization": quantization, "sharded": shards > 1,
           "added_tokens_decoder": added, "legacy_behaviour": legacy, "codes": tokens["codes"],
           "min_greedy_margin": MIN_GREEDY_MARGIN, "cases": after["cases"], "batch": after["batch"],
           "beam": after["beam"], "pad_inside": pad_inside_reference(loaded, cases, name),
           "translations": translation_reference(loaded, model_dir), "tokenization": tokenization}
    (model_dir / "reference.json").write_text(json.dumps(doc, allow_nan=False, ensure_ascii=False) + "\n")
    note = f" (attempt {attempt})" if attempt else ""
    print(f"{name}: {len(cases)} cases, {draws} sources drawn{note}", flush=True)
    return [entry["min_margin"] for entry in after["beam"]]


# ----------------------------------------------------------------------------------------
# T5 models: Hugging Face's T5ForConditionalGeneration layout, with spiece.model
# ----------------------------------------------------------------------------------------

T5_PIECES = 80  # pieces of spiece.model, trained on both sides of the corpus
T5_BASE = {"d_model": 16, "d_kv": 4, "num_heads": 4, "d_ff": 24, "num_layers": 2,
           "relative_attention_num_buckets": 8, "relative_attention_max_distance": 12}
# name -> (config overrides, dtype, shards, embed_tokens copies in the file,
# tokenizer_config.json's extra_ids: None writes no tokenizer_config.json)
T5_MODELS = {
    # T5 v1.0 (t5-small): relu, tied head scaled by d_model^-0.5, an older file that holds
    # the stacks' embed_tokens copies.
    "t5-relu-tied-f32": ({"model_type": "t5", "feed_forward_proj": "relu"}, "F32", 1, True, 100),
    # T5 v1.1 / Flan-T5: gated-gelu, untied, inner width 3 x 6 = 18 != d_model, one more
    # decoder layer, T5's default 32 buckets over 128.
    "t5-gated-gelu-untied-bf16-sharded": (
        {"model_type": "t5", "feed_forward_proj": "gated-gelu", "tie_word_embeddings": False,
         "num_heads": 3, "d_kv": 6, "num_decoder_layers": 3, "relative_attention_num_buckets": 32,
         "relative_attention_max_distance": 128}, "BF16", 2, False, None),
    # mT5: model_type mt5 (MT5Config's defaults: gated-gelu, untied), no sentinels.
    "mt5-gated-gelu-untied-f16": ({"model_type": "mt5", "num_heads": 2, "d_kv": 10}, "F16", 1, False, 0),
    # gated-silu with a tied head.
    "t5-gated-silu-tied-f32-sharded": (
        {"model_type": "t5", "feed_forward_proj": "gated-silu", "num_layers": 3, "num_decoder_layers": 1},
        "F32", 3, False, 100),
}
T5_TOKENIZATION_TEXTS = [
    "translate English to German: The clever young teachers chase dogs", "Die klugen jungen Lehrer jagen Hunde",
    "Ω and ✓ are unknown", "  two  spaces\tand a tab ", "a 42-year-old cat", "Füße über Ärger, Ω.",
]


@torch.no_grad()
def random_t5_weights_(model: T5ForConditionalGeneration, generator: torch.Generator) -> None:
    """Scales that keep a T5 model far from degenerate: with no 1/sqrt(d_kv) in the scores,
    q and k N(0, 0.25); other weights N(0, 0.4); the shared embedding N(0, 1) (a tied head
    reads it through d_model^-0.5); the bias tables N(0, 1); norms 1 + N(0, 0.2). The
    embed_tokens copies are the shared table, as a file that holds them holds it."""
    for name, p in model.named_parameters():
        if name.endswith("embed_tokens.weight"):
            continue
        if name == "shared.weight" or "relative_attention_bias" in name:
            std, mean = 1.0, 0.0
        elif "layer_norm" in name:
            std, mean = 0.2, 1.0
        elif name.endswith((".q.weight", ".k.weight")):
            std, mean = 0.25, 0.0
        else:
            std, mean = 0.4, 0.0
        p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype) * std + mean)
    for stack in (model.encoder, model.decoder):
        if hasattr(stack, "embed_tokens"):
            stack.embed_tokens.weight.copy_(model.shared.weight)


def t5_tokenization_reference(directory: Path) -> list:
    oracle = T5TokenizerOracle(directory)
    encoded = [{"text": t, "as": "source", "ids": oracle.encode(t)} for t in T5_TOKENIZATION_TEXTS]
    # Ids -> text with sentinels (the last ids of the tokenizer) between pieces.
    ids = oracle.encode("dogs chase cats")[:-1]
    last = oracle.vocab_size - 1
    decoded = []
    if oracle.extra_ids >= 2:
        for sequence in ([last] + ids, ids[:1] + [last] + ids[1:], ids + [last - 1, last], [last, last - 1]):
            decoded.append({"ids": sequence, "text": oracle.decode(sequence)})
    return encoded, decoded


def write_t5_model(out: Path, name: str, seed: int, spec=None, quantization=None) -> list:
    """Builds, writes and checks one T5 model directory (spiece.model, tokenizer_config.json,
    config.json, generation_config.json, weights, reference.json with the encoder-decoder
    cases plus "tokenization" and "detokenization"); returns its beam min_margins."""
    overrides, dtype, shards, copies, extra_ids = spec or T5_MODELS[name]
    model_dir = out / name
    sources, targets = corpus_sides()
    tokens = write_t5_tokenizer(model_dir, sources + targets, T5_PIECES, extra_ids)
    cfg = dict(T5_BASE, **tokens, **overrides)

    def make(torch_gen):
        model = T5ForConditionalGeneration(cfg, embed_copies_in_file=copies).to(ORACLE_DTYPE).eval()
        random_t5_weights_(model, torch_gen)
        quantized(round_weights_(model, dtype), quantization)
        # Sources and targets are drawn from [2, vocab_size), decoder_vocab_size for the latter.
        return model, dict(model.config, decoder_vocab_size=model.config["vocab_size"])

    model, cases, decided, attempt, draws = build(name, cfg, False, dtype, seed, make_model=make)
    save_t5_dir(model, model_dir, dtype=dtype, shards=shards, generation=t5_generation_config(model.config))
    finish_quantized(model_dir, quantization, model)
    before = reference(model, cases, name, full=False, greedy=[g for g, _ in decided])
    loaded = load_t5_dir(model_dir, ORACLE_DTYPE)
    after = reference(loaded, cases, name)
    beams = [(entry["hypotheses"], entry["min_margin"]) for entry in after["beam"]]
    if before["cases"] != after["cases"] or beams != [b for _, b in decided]:
        raise RuntimeError(f"{name}: outputs of the re-loaded model differ from the saved one")
    encoded, decoded = t5_tokenization_reference(model_dir)
    doc = {"model": name, "family": "t5", "dtype": dtype, "quantization": quantization, "sharded": shards > 1, "embed_copies_in_file": copies,
           "extra_ids": extra_ids, "min_greedy_margin": MIN_GREEDY_MARGIN, "cases": after["cases"],
           "batch": after["batch"], "beam": after["beam"], "tokenization": encoded, "detokenization": decoded}
    (model_dir / "reference.json").write_text(json.dumps(doc, allow_nan=False, ensure_ascii=False) + "\n")
    note = f" (attempt {attempt})" if attempt else ""
    print(f"{name}: {len(cases)} cases, {draws} sources drawn{note}", flush=True)
    return [entry["min_margin"] for entry in after["beam"]]


def write_ordo_model(out: Path, name, cfg, bias, dtype, seed, quantization=None) -> list:
    """Builds, writes and checks one encoder-decoder in ordo's format; returns its beam
    min_margins."""
    make = None
    if quantization:
        plain = _ordo_model(cfg, bias, dtype)

        def make(torch_gen):
            model, full = plain(torch_gen)
            return quantize_weights_(model, quantization), full
    model, cases, decided, attempt, draws = build(name, cfg, bias, dtype, seed, make_model=make)
    model_dir = out / name
    save_model_dir(model, model_dir, dtype=dtype)
    finish_quantized(model_dir, quantization, model)
    before = reference(model, cases, name, full=False, greedy=[g for g, _ in decided])
    loaded = load_model_dir(model_dir, ORACLE_DTYPE)
    after = reference(loaded, cases, name)
    beams = [(entry["hypotheses"], entry["min_margin"]) for entry in after["beam"]]
    if before["cases"] != after["cases"] or beams != [b for _, b in decided]:
        raise RuntimeError(f"{name}: outputs of the re-loaded model differ from the saved one")
    doc = {"model": name, "family": "ordo", "dtype": dtype, "quantization": quantization,
           "min_greedy_margin": MIN_GREEDY_MARGIN,
           "cases": after["cases"], "batch": after["batch"], "beam": after["beam"]}
    (model_dir / "reference.json").write_text(json.dumps(doc, allow_nan=False) + "\n")
    note = f" (attempt {attempt})" if attempt else ""
    print(f"{name}: {len(cases)} cases, {draws} sources drawn{note}", flush=True)
    return [entry["min_margin"] for entry in after["beam"]]


# ----------------------------------------------------------------------------------------
# Quantized models: every family stored int8 (a scale a row, or groups) and int4
# ----------------------------------------------------------------------------------------

INT8_ROW = {"type": "int8", "group_size": 0}
INT8_GROUP = {"type": "int8", "group_size": 8}  # divides every width of the small models
INT4 = {"type": "int4", "group_size": 32}
# int4 packs runs of 32 weights: its models have every width a multiple of 32 but one
# (q4-llama-kv2-mixed, whose 48-wide matrices are int8 in the int4 directory).
INT4_WIDTHS = {"d_model": 32, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64}
DEQUANTIZED_SUFFIX = "-dequantized"


def quantized(model, quantization):
    """`model` holding its dequantized weights (quantization None: as it is)."""
    return quantize_weights_(model, quantization) if quantization else model


def finish_quantized(model_dir: Path, quantization, model) -> None:
    """After a model holding dequantized weights was saved as float: its twin
    `<dir>-dequantized` (that float directory: fl32 of q x scale, what ordo's float path
    computes with) and the directory itself rewritten quantized."""
    if not quantization:
        return
    twin = model_dir.parent / (model_dir.name + DEQUANTIZED_SUFFIX)
    shutil.rmtree(twin, ignore_errors=True)
    shutil.copytree(model_dir, twin)
    quantize_model_dir(model_dir, quantization, model)


def quantized_ordo_specs():
    """[(name, config, final_logits_bias, quantization)]: every position scheme, int8
    (alternately a scale a row and groups of 8) and int4, post- and pre-norm, FLAVOURS
    rotated (tied, untied and separate heads, final_logits_bias)."""
    schemes = ["sin", "learned", "rope-half", "alibi", "t5", "none"]
    specs = []
    for p, pos_name in enumerate(schemes):
        for k, (label, quantization) in enumerate((("q8", INT8_ROW if p % 2 == 0 else INT8_GROUP), ("q4", INT4))):
            norm_name = ("post", "pre")[(p + k) % 2]
            flavour = dict(FLAVOURS[(p + 2 * k) % len(FLAVOURS)])
            cfg = dict(BASE, **POSITIONS[pos_name], normalize_before=NORMS[norm_name])
            if flavour.pop("offset", False):
                cfg["position_offset"] = OFFSETS[cfg["position_encoding"]]
            theta = flavour.pop("rope_theta", None)
            if theta is not None and cfg["position_encoding"] == "rope":
                cfg["rope_theta"] = theta
            bias = flavour.pop("final_logits_bias", False)
            cfg.update(flavour)
            if quantization["type"] == "int4":
                cfg.update(INT4_WIDTHS)
            specs.append((f"{label}-{pos_name}-{norm_name}", cfg, bias, quantization))
    return specs


def quantized_generation_specs():
    """[(name, family, config, options)] as generation_specs, with options["quantization"]."""
    lm = dict(LM_BASE, position_encoding="rope", normalize_before=True, num_key_value_heads=1)
    lm_int4 = dict(LM_BASE, position_encoding="alibi", normalize_before=False, d_model=32,
                   decoder_attention_heads=4, num_key_value_heads=2, decoder_ffn_dim=64,
                   share_encoder_decoder_embeddings=False, decoder_vocab_size=37,
                   tie_word_embeddings=False)
    options = {"dtype": "F32", "shards": 1, "final_logits_bias": False}
    return [
        ("q8-lm-rope-pre", "ordo", lm, dict(options, quantization=INT8_GROUP)),
        ("q4-lm-alibi-post", "ordo", lm_int4, dict(options, final_logits_bias=True, quantization=INT4)),
        ("q8-llama-kv2-untied-bias-sharded", "llama",
         dict(LLAMA_BASE, num_key_value_heads=2, attention_bias=True, pad_token_id=0),
         dict(options, shards=2, quantization=INT8_ROW)),
        ("q4-llama-kv1-tied", "llama",
         dict(LLAMA_BASE, num_key_value_heads=1, tie_word_embeddings=True, intermediate_size=64,
              pad_token_id=0), dict(options, quantization=INT4)),
        # intermediate_size 48, not a multiple of 32: the down projections are int8 with a
        # scale a row inside the int4 directory (as german-llama's 344), the rest int4.
        ("q4-llama-kv2-mixed", "llama",
         dict(LLAMA_BASE, num_key_value_heads=2, intermediate_size=48, pad_token_id=0),
         dict(options, quantization=INT4)),
    ]


# name -> (the family's table entry, quantization)
QUANTIZED_MARIAN = {
    "q8-marian-shared-tied-positions": (MARIAN_MODELS["marian-shared-tied-positions-f32"], INT8_GROUP),
    "q4-marian-separate-untied-sharded": (
        ({"activation_function": "gelu", "share_encoder_decoder_embeddings": False,
          "tie_word_embeddings": False, **INT4_WIDTHS}, "F32", 2, False, True), INT4),
}
QUANTIZED_M2M100 = {
    "q8-nllb-relu": (M2M100_MODELS["nllb-relu-f32"], INT8_ROW),
    "q4-nllb-gelu": (({"activation_function": "gelu", **INT4_WIDTHS}, "F32", 1, True, False), INT4),
}
QUANTIZED_T5 = {
    "q8-t5-gated-silu-tied-sharded": (
        ({"model_type": "t5", "feed_forward_proj": "gated-silu", "num_layers": 3, "num_decoder_layers": 1},
         "F32", 3, False, 100), INT8_GROUP),
    "q4-t5-gated-gelu-untied": (
        ({"model_type": "t5", "feed_forward_proj": "gated-gelu", "tie_word_embeddings": False, "d_model": 32,
          "num_heads": 4, "d_kv": 8, "d_ff": 64}, "F32", 1, False, 100), INT4),
}


def write_quantized_models(out: Path, seed: int):
    """Every quantized model; returns (names, beam min_margins)."""
    names, margins = [], []
    for name, cfg, bias, quantization in quantized_ordo_specs():
        margins.extend(write_ordo_model(out, name, cfg, bias, "F32", seed, quantization))
        names.append(name)
    for name, family, cfg, options in quantized_generation_specs():
        margins.extend(write_generation_model(out, name, family, cfg, options, seed))
        names.append(name)
    for name, (spec, quantization) in QUANTIZED_MARIAN.items():
        margins.extend(write_marian_model(out, name, seed, spec, quantization)[0])
        names.append(name)
    for name, (spec, quantization) in QUANTIZED_M2M100.items():
        margins.extend(write_m2m100_model(out, name, seed, spec, quantization))
        names.append(name)
    for name, (spec, quantization) in QUANTIZED_T5.items():
        margins.extend(write_t5_model(out, name, seed, spec, quantization))
        names.append(name)
    return names, margins


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
        beam_margins.extend(write_ordo_model(args.out, name, cfg, bias, dtype, args.seed))
        names.append(name)
    generation_names = []
    for name, family, cfg, options in generation_specs():
        beam_margins.extend(write_generation_model(args.out, name, family, cfg, options,
                                                   args.seed))
        generation_names.append(name)
    marian_names = []
    torch_bin_models = {}
    for name in MARIAN_MODELS:
        margins, model = write_marian_model(args.out, name, args.seed)
        beam_margins.extend(margins)
        marian_names.append(name)
        torch_bin_models[write_torch_bin_twin(args.out, name, model)] = name
    m2m100_names = []
    for name in M2M100_MODELS:
        beam_margins.extend(write_m2m100_model(args.out, name, args.seed))
        m2m100_names.append(name)
    t5_names = []
    for name in T5_MODELS:
        beam_margins.extend(write_t5_model(args.out, name, args.seed))
        t5_names.append(name)
    quantized_names, margins = write_quantized_models(args.out, args.seed)
    beam_margins.extend(margins)
    index = {"seed": args.seed, "min_greedy_margin": MIN_GREEDY_MARGIN, "models": names,
             "generation_models": generation_names, "marian_models": marian_names,
             "m2m100_models": m2m100_names, "t5_models": t5_names,
             "torch_bin_models": torch_bin_models, "quantized_models": quantized_names,
             "dequantized_twins": {name + DEQUANTIZED_SUFFIX: name for name in quantized_names}}
    (args.out / "index.json").write_text(json.dumps(index, indent=2) + "\n")
    print(f"{len(names)} + {len(generation_names)} + {len(marian_names)} + {len(m2m100_names)} + {len(t5_names)} "
          f"+ {len(quantized_names)} quantized "
          f"models in {args.out} "
          f"({time.time() - start:.1f} s); beam min_margin min {min(beam_margins):.3g}, "
          f"median {sorted(beam_margins)[len(beam_margins) // 2]:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
