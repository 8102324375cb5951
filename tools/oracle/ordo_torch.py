"""The ordo model format in PyTorch: the independent oracle for the C++ engine, and the
trainer's model; and the Hugging Face LLaMA layout, as published.

A model directory holds `config.json` (see `full_config`) and `model.safetensors`, whose
tensor names are exactly the `state_dict()` keys of `OrdoModel`. The forward pass is
written from the format's definition with torch's own building blocks
(F.multi_head_attention_forward, F.layer_norm, F.linear, ...); sinusoids and rotary
embeddings are written from their formulas, in float64, rounded once to the model's dtype.

DTYPES. A model computes in the dtype of its parameters, torch's default dtype unless
said otherwise: float32 for training and the speed peer, float64 for the oracle
(make_parity_models passes dtype=torch.float64; test_ordo_torch sets the default). PyTorch
picks its float32 kernels by the CPU (ATEN_CPU_CAPABILITY), and their rounding differs,
batched or not, by ~1e-5 on these models; in float64 the same differences are ~1e-12,
so the oracle's answer is the same on every machine. Nothing inside rounds to float32
but T5's bucket index, which T5 defines in float32 (an integer either way).

Requires only torch and numpy (the safetensors reader/writer is implemented here).

    model = OrdoModel({"vocab_size": 40, "d_model": 16, ...})
    logits = model(src_ids, tgt_in_ids, src_padding)       # [B, T, V], differentiable
    save_model_dir(model, "out/", dtype="F16")              # also rounds `model` to F16
    model = load_model_dir("out/")
    ids, margins = model.greedy([5, 7, 1], max_length=10)
    ids, margins = model.greedy_batch([[5, 7, 1], [9, 1]], max_length=10)  # per source
    logprobs = model.score_batch([[5, 7, 1], [9, 1]], [[4, 1], [6, 6, 1]])  # per pair
    hyps, min_margin = model.beam_search([5, 7, 1], beam_size=4, n_best=2,
                                         length_penalty=1.0, max_length=10)

The batched methods compute, in one padded batch, what greedy/score compute for one
source; beam_search's docstring is the definition of the beam search.

DECODER-ONLY ordo models. `encoder_layers: 0` in config.json: no model.encoder.*
tensors, no encoder_attn* tensors; decoder layers are [causal self-attention,
feed-forward]; encoder_attention_heads and encoder_ffn_dim may be absent. The token
table is model.shared.weight when share_encoder_decoder_embeddings (default) else
model.decoder.embed_tokens.weight; every other tensor is named as in an
encoder-decoder's decoder. The decoder's input is the prompt itself (no
decoder_start), token t at position position_offset + t.

GROUPED-QUERY attention. `num_key_value_heads` (optional, default
decoder_attention_heads, must divide it) is the number of K/V heads of the decoder's
self-attention only: its k_proj/v_proj weights are [num_key_value_heads * head_dim,
d_model] (biases [num_key_value_heads * head_dim]), head_dim = d_model /
decoder_attention_heads, and query head h reads K/V head h // (heads /
num_key_value_heads) (repeat_kv). Cross-attention and the encoder keep full heads.

Decoder-only models (and LlamaModel) generate with GenerationMixin:

    logprobs = lm.lm_score([5, 7, 9, 1])                    # log p(ids[t] | ids[:t]), t >= 1
    ids, margins = lm.lm_greedy([5, 7], max_length=10)      # generated tokens only
    ids, margins = lm.lm_greedy_batch([[5, 7], [9]], 10)    # one right-padded batch
    logprobs = lm.lm_score_batch([[5, 7, 9, 1], [9, 3]])
    hyps, min_margin = lm.lm_beam_search([5, 7], 3, 3, 1.0, 10)

LLAMA. `LlamaModel` is LLaMA as Hugging Face's LlamaForCausalLM lays it out (config:
`llama_config`; tensor names: LlamaModel's docstring), written from its formulas:
RMSNorm, SwiGLU, RoPE in the half (rotate_half) layout from position 0, grouped-query
attention. `save_llama_dir(model, dir, dtype, shards)` writes config.json and
model.safetensors, or for shards > 1 model-0000i-of-0000N.safetensors plus
model.safetensors.index.json; `load_llama_dir` reads either.
"""
from __future__ import annotations

import contextlib
import json
import math
import struct
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "full_config",
    "kv_heads",
    "OrdoModel",
    "GenerationMixin",
    "save_model_dir",
    "load_model_dir",
    "llama_config",
    "LlamaModel",
    "save_llama_dir",
    "load_llama_dir",
    "rms_norm",
    "repeat_kv",
    "round_weights_",
    "write_safetensors",
    "read_safetensors",
    "sinusoidal_positions",
    "rope_rotate",
    "alibi_slopes",
    "t5_relative_position_bucket",
]

# ----------------------------------------------------------------------------------------
# Configuration
# ----------------------------------------------------------------------------------------

_REQUIRED = object()
_ENUMS = {
    "activation_function": ("relu", "gelu", "swish"),
    "position_encoding": ("sinusoidal", "learned", "rope", "none", "alibi", "t5_relative"),
    "sinusoidal_layout": ("interleaved", "split"),
    "sinusoidal_frequencies": ("vaswani", "tensor2tensor"),
    "rope_layout": ("half", "interleaved"),
}
# (key, kind, default); kind is int | bool | float | str | enum | optional_int.
# Order is the order of config.json.
_SCHEMA = [
    ("model_type", "str", "ordo"),
    ("vocab_size", "int", _REQUIRED),
    ("decoder_vocab_size", "int", None),  # None: = vocab_size
    ("d_model", "int", _REQUIRED),
    ("encoder_layers", "int", _REQUIRED),
    ("decoder_layers", "int", _REQUIRED),
    ("encoder_attention_heads", "int", _REQUIRED),
    ("decoder_attention_heads", "int", _REQUIRED),
    ("num_key_value_heads", "optional_int", None),  # None: = decoder_attention_heads
    ("encoder_ffn_dim", "int", _REQUIRED),
    ("decoder_ffn_dim", "int", _REQUIRED),
    ("activation_function", "enum", "relu"),
    ("normalize_before", "bool", False),
    ("scale_embedding", "bool", False),
    ("layernorm_embedding", "bool", False),
    ("max_position_embeddings", "int", _REQUIRED),
    ("position_encoding", "enum", "sinusoidal"),
    ("sinusoidal_layout", "enum", "interleaved"),
    ("sinusoidal_frequencies", "enum", "vaswani"),
    ("position_offset", "int", 0),
    ("rope_theta", "float", 10000.0),
    ("rope_layout", "enum", "half"),
    ("relative_attention_num_buckets", "int", 32),
    ("relative_attention_max_distance", "int", 128),
    ("share_encoder_decoder_embeddings", "bool", True),
    ("tie_word_embeddings", "bool", True),
    ("layer_norm_eps", "float", 1e-5),
    ("pad_token_id", "int", _REQUIRED),
    ("bos_token_id", "optional_int", None),
    ("eos_token_id", "int", _REQUIRED),
    ("decoder_start_token_id", "int", _REQUIRED),
]
CONFIG_KEYS = tuple(key for key, _, _ in _SCHEMA)
_ENCODER_ONLY_KEYS = ("encoder_attention_heads", "encoder_ffn_dim")  # optional without encoder


def _check_type(key: str, kind: str, value):
    if kind in ("int", "optional_int"):
        if kind == "optional_int" and value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"config key '{key}' must be an integer, got {value!r}")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"config key '{key}' must be true or false, got {value!r}")
        return value
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"config key '{key}' must be a number, got {value!r}")
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"config key '{key}' must be finite, got {value!r}")
        return value
    if kind == "str":
        if not isinstance(value, str):
            raise ValueError(f"config key '{key}' must be a string, got {value!r}")
        return value
    if kind == "enum":
        if value not in _ENUMS[key]:
            choices = " | ".join(_ENUMS[key])
            raise ValueError(f"config key '{key}' must be one of {choices}, got {value!r}")
        return value
    raise AssertionError(kind)


def full_config(partial: dict) -> dict:
    """Returns a new dict with every key of the format, defaults filled in, validated.

    Raises ValueError naming the offending key. Keys that are not part of the format
    (descriptions, provenance, ...) are kept, after the format's keys. An absent or null
    bos_token_id is left out of the result, and so is an absent or null
    num_key_value_heads (it then means decoder_attention_heads: use `kv_heads(cfg)`).

    encoder_layers 0 makes a decoder-only model; encoder_attention_heads and
    encoder_ffn_dim are then optional (left out when absent, validated when given).
    num_key_value_heads (the K/V heads of the decoder's self-attention only) must divide
    decoder_attention_heads.
    """
    if not isinstance(partial, dict):
        raise ValueError(f"config must be a JSON object, got {type(partial).__name__}")
    cfg = {}
    for key, kind, default in _SCHEMA:
        if key in partial and partial[key] is not None:
            cfg[key] = _check_type(key, kind, partial[key])
        elif key in _ENCODER_ONLY_KEYS and cfg.get("encoder_layers") == 0:
            continue
        elif default is _REQUIRED:
            raise ValueError(f"config key '{key}' is required")
        elif key == "decoder_vocab_size":
            cfg[key] = cfg["vocab_size"]
        elif default is not None:
            cfg[key] = default
    for key, value in partial.items():
        if key not in cfg and key not in CONFIG_KEYS:
            cfg[key] = value

    def positive(key):
        if cfg[key] < 1:
            raise ValueError(f"config key '{key}' must be >= 1, got {cfg[key]}")

    if cfg["model_type"] != "ordo":
        raise ValueError(f"config key 'model_type' must be \"ordo\", got {cfg['model_type']!r}")
    if cfg["encoder_layers"] < 0:
        raise ValueError(f"config key 'encoder_layers' must be >= 0, got {cfg['encoder_layers']}")
    for key in ("vocab_size", "decoder_vocab_size", "d_model", "decoder_layers",
                "encoder_attention_heads", "decoder_attention_heads",
                "encoder_ffn_dim", "decoder_ffn_dim", "max_position_embeddings",
                "num_key_value_heads"):
        if key in cfg:
            positive(key)
    d = cfg["d_model"]
    for side in ("encoder", "decoder"):
        key = f"{side}_attention_heads"
        if key in cfg and d % cfg[key] != 0:
            raise ValueError(f"config key '{key}': d_model={d} is not divisible by {cfg[key]} heads")
    if "num_key_value_heads" in cfg and cfg["decoder_attention_heads"] % cfg["num_key_value_heads"]:
        raise ValueError(f"config key 'num_key_value_heads': decoder_attention_heads="
                         f"{cfg['decoder_attention_heads']} is not divisible by "
                         f"{cfg['num_key_value_heads']} key/value heads")
    if cfg["position_offset"] < 0:
        raise ValueError(f"config key 'position_offset' must be >= 0, got {cfg['position_offset']}")
    if cfg["rope_theta"] <= 0:
        raise ValueError(f"config key 'rope_theta' must be > 0, got {cfg['rope_theta']}")
    if cfg["layer_norm_eps"] <= 0:
        raise ValueError(f"config key 'layer_norm_eps' must be > 0, got {cfg['layer_norm_eps']}")
    if cfg["position_encoding"] == "sinusoidal":
        if d % 2 != 0:
            raise ValueError(f"config key 'd_model' must be even for sinusoidal positions, got {d}")
        if cfg["sinusoidal_frequencies"] == "tensor2tensor" and d < 4:
            raise ValueError("config key 'sinusoidal_frequencies': tensor2tensor needs d_model >= 4")
    if cfg["position_encoding"] == "rope":
        for side in ("encoder", "decoder"):
            key = f"{side}_attention_heads"
            if key in cfg and (d // cfg[key]) % 2 != 0:
                raise ValueError(f"config key '{key}': rope needs an even head_dim, "
                                 f"got d_model/heads = {d // cfg[key]}")
    if cfg["position_encoding"] == "t5_relative":
        buckets, distance = cfg["relative_attention_num_buckets"], cfg["relative_attention_max_distance"]
        if buckets < 4:
            raise ValueError(f"config key 'relative_attention_num_buckets': t5_relative needs at "
                             f"least 4 buckets, got {buckets}")
        if distance <= buckets // 2:
            raise ValueError(f"config key 'relative_attention_max_distance' must be more than "
                             f"relative_attention_num_buckets / 2 = {buckets // 2}, got {distance}")
    if cfg["share_encoder_decoder_embeddings"] and cfg["vocab_size"] != cfg["decoder_vocab_size"]:
        raise ValueError("config key 'share_encoder_decoder_embeddings' is true but vocab_size="
                         f"{cfg['vocab_size']} != decoder_vocab_size={cfg['decoder_vocab_size']}")
    both = min(cfg["vocab_size"], cfg["decoder_vocab_size"])
    for key, limit in (("pad_token_id", both), ("eos_token_id", both),
                       ("decoder_start_token_id", cfg["decoder_vocab_size"]),
                       ("bos_token_id", max(cfg["vocab_size"], cfg["decoder_vocab_size"]))):
        if key in cfg and not 0 <= cfg[key] < limit:
            raise ValueError(f"config key '{key}' must be in [0, {limit}), got {cfg[key]}")
    return cfg


def kv_heads(cfg: dict) -> int:
    """The number of K/V heads of the decoder's self-attention (num_key_value_heads,
    default decoder_attention_heads)."""
    return cfg.get("num_key_value_heads", cfg["decoder_attention_heads"])


# ----------------------------------------------------------------------------------------
# Positions
# ----------------------------------------------------------------------------------------

def sinusoidal_positions(positions: Tensor, dim: int, layout: str = "interleaved",
                         frequencies: str = "vaswani",
                         dtype: torch.dtype = torch.float32) -> Tensor:
    """Position vectors [len(positions), dim], computed in float64 and rounded to dtype.

    vaswani: w_i = 10000^(-2i/dim); tensor2tensor: w_i = exp(-i ln(10000) / (dim/2 - 1)),
    i in [0, dim/2). interleaved: pe[2i] = sin(p w_i), pe[2i+1] = cos(p w_i);
    split: pe[i] = sin(p w_i), pe[dim/2 + i] = cos(p w_i).
    """
    half = dim // 2
    i = torch.arange(half, dtype=torch.float64)
    if frequencies == "vaswani":
        w = torch.pow(torch.tensor(10000.0, dtype=torch.float64), -2.0 * i / dim)
    elif frequencies == "tensor2tensor":
        w = torch.exp(-i * math.log(10000.0) / (half - 1))
    else:
        raise ValueError(f"unknown sinusoidal frequencies {frequencies!r}")
    angles = positions.to(torch.float64)[:, None] * w[None, :]
    sin, cos = torch.sin(angles), torch.cos(angles)
    if layout == "interleaved":
        pe = torch.stack([sin, cos], dim=-1).reshape(len(positions), 2 * half)
    elif layout == "split":
        pe = torch.cat([sin, cos], dim=-1)
    else:
        raise ValueError(f"unknown sinusoidal layout {layout!r}")
    return pe.to(dtype)


def _rope_cos_sin(positions: Tensor, head_dim: int, theta: float) -> Tuple[Tensor, Tensor]:
    """cos, sin [len(positions), head_dim/2] of p * theta^(-2i/head_dim), float64."""
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    freq = torch.pow(torch.tensor(float(theta), dtype=torch.float64), -2.0 * i / head_dim)
    angles = positions.to(torch.float64)[:, None] * freq[None, :]
    return torch.cos(angles), torch.sin(angles)


def rope_rotate(x: Tensor, positions: Tensor, theta: float = 10000.0,
                layout: str = "half") -> Tensor:
    """Rotates x [..., T, head_dim] (row t at positions[t]) by RoPE.

    half: pairs (i, i + head_dim/2), i.e. x*cos + rotate_half(x)*sin with cos/sin
    repeated as cat([f, f]) (Hugging Face LLaMA). interleaved: pairs (2i, 2i+1).
    A pair (a, b) at angle t becomes (a cos t - b sin t, a sin t + b cos t).
    cos/sin are computed in float64 and rounded to x's dtype; the rotation is in x's dtype.
    """
    head_dim = x.shape[-1]
    cos, sin = _rope_cos_sin(positions, head_dim, theta)
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    if layout == "half":
        cos2, sin2 = torch.cat([cos, cos], dim=-1), torch.cat([sin, sin], dim=-1)
        x1, x2 = x[..., : head_dim // 2], x[..., head_dim // 2:]
        rotated_half = torch.cat([-x2, x1], dim=-1)
        return x * cos2 + rotated_half * sin2
    if layout == "interleaved":
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)
    raise ValueError(f"unknown rope layout {layout!r}")


def alibi_slopes(heads: int) -> List[float]:
    """ALiBi's head slopes, as Press et al. give them: for a power of two n, the geometric
    sequence starting at 2^(-8/n) with that ratio; otherwise the slopes of the closest
    lower power of two, then every other slope of twice that power."""
    def power_of_2(n: int) -> List[float]:
        start = 2.0 ** (-(2.0 ** -(math.log2(n) - 3)))
        return [start * start ** i for i in range(n)]
    if math.log2(heads).is_integer():
        return power_of_2(heads)
    closest = 2 ** math.floor(math.log2(heads))
    return power_of_2(closest) + alibi_slopes(2 * closest)[0::2][: heads - closest]


def alibi_bias(heads: int, length: int, causal: bool) -> Tensor:
    """[heads, length, length] in float64: -m_h |i - j| (an encoder), or -m_h (i - j)
    (causal; keys after the query are masked by the caller). The attention rounds it to
    the scores' dtype."""
    i = torch.arange(length)[:, None]
    j = torch.arange(length)[None, :]
    distance = (i - j) if causal else (i - j).abs()
    slopes = torch.tensor(alibi_slopes(heads), dtype=torch.float64)
    return -slopes[:, None, None] * distance[None].to(torch.float64)


def t5_relative_position_bucket(relative_position: Tensor, bidirectional: bool,
                                num_buckets: int, max_distance: int) -> Tensor:
    """T5's bucket of relative_position = key position - query position, ported from the
    T5 paper's reference code (mesh_tensorflow's _relative_position_bucket): half the
    buckets per direction when bidirectional (keys after the query in the upper half);
    otherwise only keys before the query are told apart. Small distances get a bucket
    each, larger ones logarithmically wider buckets up to max_distance; beyond it, the
    last. Computed in float32, as T5 does."""
    ret = torch.zeros_like(relative_position)
    n = -relative_position
    if bidirectional:
        num_buckets //= 2
        ret += (n < 0).to(torch.long) * num_buckets
        n = torch.abs(n)
    else:
        n = torch.max(n, torch.zeros_like(n))
    max_exact = num_buckets // 2
    is_small = n < max_exact
    val_if_large = max_exact + (
        torch.log(n.to(torch.float32) / max_exact) / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)).to(torch.long)
    val_if_large = torch.min(val_if_large, torch.full_like(val_if_large, num_buckets - 1))
    return ret + torch.where(is_small, n, val_if_large)


# ----------------------------------------------------------------------------------------
# Layers
# ----------------------------------------------------------------------------------------

def _layer_norm(x: Tensor, ln: nn.LayerNorm) -> Tensor:
    return F.layer_norm(x, ln.normalized_shape, ln.weight, ln.bias, ln.eps)


_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "swish": F.silu}


class Attention(nn.Module):
    """Multi-head attention with biased q/k/v/out projections, scale 1/sqrt(head_dim).

    Inputs are batch-first [B, T, D]. Without rope, with as many K/V heads as query
    heads, it is F.multi_head_attention_forward; otherwise (rope, self-attention only:
    q and k are rotated after projection; grouped-query: k_proj/v_proj have kv_heads *
    head_dim outputs and query head h reads K/V head h // (heads / kv_heads), see
    repeat_kv) attention is softmax(q k^T scale + mask) v written out.
    """

    def __init__(self, d_model: int, heads: int, kv_heads: Optional[int] = None):
        super().__init__()
        self.d_model, self.heads = d_model, heads
        self.kv_heads = heads if kv_heads is None else kv_heads
        self.head_dim = d_model // heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, self.kv_heads * self.head_dim)
        self.v_proj = nn.Linear(d_model, self.kv_heads * self.head_dim)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, query: Tensor, memory: Tensor, key_padding_mask: Optional[Tensor] = None,
                causal: bool = False, rope: Optional[Tuple[float, str, int]] = None,
                bias: Optional[Tensor] = None) -> Tensor:
        """rope: (theta, layout, offset) to rotate q and k of a self-attention; bias
        [heads, T, S] added to the scaled scores (ALiBi, T5 relative)."""
        if rope is not None or bias is not None or self.kv_heads != self.heads:
            return self._explicit(query, memory, key_padding_mask, causal, rope, bias)
        T, S = query.shape[1], memory.shape[1]
        attn_mask = _causal_mask(T, S, query.device) if causal else None
        # multi_head_attention_forward is sequence-first: [T, B, D].
        q, kv = query.transpose(0, 1), memory.transpose(0, 1)
        out, _ = F.multi_head_attention_forward(
            q, kv, kv, self.d_model, self.heads,
            in_proj_weight=None,
            in_proj_bias=torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias]),
            bias_k=None, bias_v=None, add_zero_attn=False, dropout_p=0.0,
            out_proj_weight=self.out_proj.weight, out_proj_bias=self.out_proj.bias,
            training=self.training, key_padding_mask=key_padding_mask, need_weights=False,
            attn_mask=attn_mask, use_separate_proj_weight=True,
            q_proj_weight=self.q_proj.weight, k_proj_weight=self.k_proj.weight,
            v_proj_weight=self.v_proj.weight)
        return out.transpose(0, 1)

    def _split(self, x: Tensor, heads: int) -> Tensor:  # [B, T, heads*hd] -> [B, heads, T, hd]
        B, T, _ = x.shape
        return x.view(B, T, heads, self.head_dim).transpose(1, 2)

    def _explicit(self, query, memory, key_padding_mask, causal, rope, bias=None):
        q = self._split(F.linear(query, self.q_proj.weight, self.q_proj.bias), self.heads)
        k = self._split(F.linear(memory, self.k_proj.weight, self.k_proj.bias), self.kv_heads)
        v = self._split(F.linear(memory, self.v_proj.weight, self.v_proj.bias), self.kv_heads)
        if rope is not None:
            theta, layout, offset = rope
            q = rope_rotate(q, offset + torch.arange(q.shape[2]), theta, layout)
            k = rope_rotate(k, offset + torch.arange(k.shape[2]), theta, layout)
        group = self.heads // self.kv_heads
        if group > 1:
            k, v = repeat_kv(k, group), repeat_kv(v, group)
        out = explicit_attention(q, k, v, key_padding_mask, causal, bias)
        B, H, T, hd = out.shape
        out = out.transpose(1, 2).reshape(B, T, H * hd)
        return F.linear(out, self.out_proj.weight, self.out_proj.bias)


def repeat_kv(x: Tensor, group: int) -> Tensor:
    """[B, KV, S, hd] -> [B, KV * group, S, hd]: head h is K/V head h // group, i.e. each
    K/V head serves `group` consecutive query heads (grouped-query attention)."""
    B, KV, S, hd = x.shape
    return x[:, :, None].expand(B, KV, group, S, hd).reshape(B, KV * group, S, hd)


def _causal_mask(T: int, S: int, device) -> Tensor:
    """Bool [T, S], True where query t may NOT attend key s (s > t)."""
    return torch.ones(T, S, dtype=torch.bool, device=device).triu(1)


def explicit_attention(q: Tensor, k: Tensor, v: Tensor, key_padding_mask: Optional[Tensor],
                       causal: bool, bias: Optional[Tensor] = None) -> Tensor:
    """softmax(q k^T / sqrt(hd) + bias + mask) v for q [B,H,T,hd], k/v [B,H,S,hd];
    bias [H,T,S] or None; key_padding_mask [B,S] True = pad."""
    scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
    if bias is not None:
        scores = scores + bias.to(scores.dtype)[None]
    if key_padding_mask is not None:
        scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
    if causal:
        scores = scores.masked_fill(_causal_mask(q.shape[2], k.shape[2], q.device), float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v)


class EncoderLayer(nn.Module):
    def __init__(self, cfg: dict, side: str = "encoder"):
        super().__init__()
        d, eps = cfg["d_model"], cfg["layer_norm_eps"]
        self.normalize_before = cfg["normalize_before"]
        self.activation = _ACTIVATIONS[cfg["activation_function"]]
        self.self_attn = Attention(d, cfg[f"{side}_attention_heads"],
                                   kv_heads(cfg) if side == "decoder" else None)
        self.self_attn_layer_norm = nn.LayerNorm(d, eps=eps)
        self.fc1 = nn.Linear(d, cfg[f"{side}_ffn_dim"])
        self.fc2 = nn.Linear(cfg[f"{side}_ffn_dim"], d)
        self.final_layer_norm = nn.LayerNorm(d, eps=eps)
        self.dropout = 0.0

    def _ffn(self, x: Tensor) -> Tensor:
        return F.linear(self.activation(F.linear(x, self.fc1.weight, self.fc1.bias)),
                        self.fc2.weight, self.fc2.bias)

    def _block(self, x: Tensor, ln: nn.LayerNorm, fn) -> Tensor:
        """One residual block: post-norm LN(x + f(x)) or pre-norm x + f(LN(x))."""
        if self.normalize_before:
            return x + F.dropout(fn(_layer_norm(x, ln)), self.dropout, self.training)
        return _layer_norm(x + F.dropout(fn(x), self.dropout, self.training), ln)

    def forward(self, x: Tensor, padding: Optional[Tensor], rope,
                bias: Optional[Tensor] = None) -> Tensor:
        x = self._block(x, self.self_attn_layer_norm,
                        lambda h: self.self_attn(h, h, key_padding_mask=padding, rope=rope,
                                                 bias=bias))
        return self._block(x, self.final_layer_norm, self._ffn)


class DecoderLayer(EncoderLayer):
    """[causal self-attention, cross-attention, feed-forward]; a decoder-only model's
    layers (encoder_layers 0) have no cross-attention: [causal self-attention,
    feed-forward]."""

    def __init__(self, cfg: dict):
        super().__init__(cfg, side="decoder")
        d, eps = cfg["d_model"], cfg["layer_norm_eps"]
        self.cross = cfg["encoder_layers"] > 0
        if self.cross:
            self.encoder_attn = Attention(d, cfg["decoder_attention_heads"])
            self.encoder_attn_layer_norm = nn.LayerNorm(d, eps=eps)

    def forward(self, x: Tensor, memory: Optional[Tensor], src_padding: Optional[Tensor], rope,
                self_padding: Optional[Tensor] = None, bias: Optional[Tensor] = None) -> Tensor:
        """self_padding [B, T] (True = pad) masks the decoder's own padded positions as keys;
        bias [heads, T, T] is the self-attention's score bias (cross-attention has none)."""
        x = self._block(x, self.self_attn_layer_norm,
                        lambda h: self.self_attn(h, h, key_padding_mask=self_padding,
                                                 causal=True, rope=rope, bias=bias))
        if self.cross:
            x = self._block(x, self.encoder_attn_layer_norm,
                            lambda h: self.encoder_attn(h, memory, key_padding_mask=src_padding))
        return self._block(x, self.final_layer_norm, self._ffn)


class Stack(nn.Module):
    """An encoder or decoder stack. Owns `embed_tokens` only when embeddings are not
    shared (then `model.shared` holds them)."""

    def __init__(self, cfg: dict, side: str, own_embeddings: bool):
        super().__init__()
        self.cfg, self.side = cfg, side
        d = cfg["d_model"]
        vocab = cfg["vocab_size"] if side == "encoder" else cfg["decoder_vocab_size"]
        if own_embeddings:
            self.embed_tokens = nn.Embedding(vocab, d)
        if cfg["position_encoding"] == "learned":
            self.embed_positions = nn.Embedding(
                cfg["max_position_embeddings"] + cfg["position_offset"], d)
        if cfg["position_encoding"] == "t5_relative":  # one table for all layers, as T5
            self.relative_attention_bias = nn.Embedding(cfg["relative_attention_num_buckets"],
                                                        cfg[f"{side}_attention_heads"])
        if cfg["layernorm_embedding"]:
            self.layernorm_embedding = nn.LayerNorm(d, eps=cfg["layer_norm_eps"])
        layer = EncoderLayer if side == "encoder" else DecoderLayer
        self.layers = nn.ModuleList(layer(cfg) for _ in range(cfg[f"{side}_layers"]))
        if cfg["normalize_before"]:
            self.layer_norm = nn.LayerNorm(d, eps=cfg["layer_norm_eps"])
        self.dropout = 0.0

    def rope(self):
        c = self.cfg
        if c["position_encoding"] != "rope":
            return None
        return (c["rope_theta"], c["rope_layout"], c["position_offset"])

    def score_bias(self, length: int) -> Optional[Tensor]:
        """The self-attention score bias [heads, length, length] for queries and keys at
        the same positions (bidirectional in the encoder, causal in the decoder), or None."""
        c = self.cfg
        heads = c[f"{self.side}_attention_heads"]
        causal = self.side == "decoder"
        if c["position_encoding"] == "alibi":
            return alibi_bias(heads, length, causal)
        if c["position_encoding"] == "t5_relative":
            positions = torch.arange(length)
            relative = positions[None, :] - positions[:, None]  # key - query
            buckets = t5_relative_position_bucket(relative, not causal,
                                                  c["relative_attention_num_buckets"],
                                                  c["relative_attention_max_distance"])
            return self.relative_attention_bias(buckets).permute(2, 0, 1)  # [heads, T, T]
        return None

    def embed(self, ids: Tensor, table: Tensor) -> Tensor:
        c = self.cfg
        x = F.embedding(ids, table)
        if c["scale_embedding"]:
            x = x * math.sqrt(c["d_model"])
        n = ids.shape[1]
        offset = c["position_offset"]
        if c["position_encoding"] == "sinusoidal":
            pe = sinusoidal_positions(offset + torch.arange(n), c["d_model"],
                                      c["sinusoidal_layout"], c["sinusoidal_frequencies"], x.dtype)
            x = x + pe.to(x.device)
        elif c["position_encoding"] == "learned":
            if n > c["max_position_embeddings"]:
                raise ValueError(f"{self.side} sequence of {n} steps is longer than "
                                 f"max_position_embeddings={c['max_position_embeddings']}")
            x = x + self.embed_positions.weight[offset: offset + n]
        if c["layernorm_embedding"]:
            x = _layer_norm(x, self.layernorm_embedding)
        return F.dropout(x, self.dropout, self.training)

    def finish(self, x: Tensor) -> Tensor:
        return _layer_norm(x, self.layer_norm) if self.cfg["normalize_before"] else x


class _Model(nn.Module):
    """The `model.` prefix of the tensor names."""

    def __init__(self, cfg: dict):
        super().__init__()
        shared = cfg["share_encoder_decoder_embeddings"]
        if shared:
            self.shared = nn.Embedding(cfg["vocab_size"], cfg["d_model"])
        if cfg["encoder_layers"] > 0:  # decoder-only models have no model.encoder.*
            self.encoder = Stack(cfg, "encoder", own_embeddings=not shared)
        self.decoder = Stack(cfg, "decoder", own_embeddings=not shared)

    def encoder_embeddings(self) -> Tensor:
        return self.shared.weight if hasattr(self, "shared") else self.encoder.embed_tokens.weight

    def decoder_embeddings(self) -> Tensor:
        return self.shared.weight if hasattr(self, "shared") else self.decoder.embed_tokens.weight


# ----------------------------------------------------------------------------------------
# Search, shared by every model
# ----------------------------------------------------------------------------------------

@contextlib.contextmanager
def _eval_mode(model: nn.Module):
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


def _check_beam_arguments(beam_size: int, n_best: int, max_length: int) -> None:
    K = int(beam_size)
    if K < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    if not 1 <= n_best <= K:
        raise ValueError(f"n_best must be in [1, beam_size={K}], got {n_best}")
    if max_length < 1:
        raise ValueError(f"max_length must be >= 1, got {max_length}")


def _beam_search(next_logits, eos_ids: Sequence[int], beam_size: int, n_best: int,
                 length_penalty: float, max_length: int,
                 min_length: int) -> Tuple[List[dict], float]:
    """OrdoModel.beam_search's BEAM SEARCH over next_logits(prefixes) -> the logits
    [len(prefixes), V] of the next token after each live prefix. A token is "eos" if it
    is any of eos_ids."""
    _check_beam_arguments(beam_size, n_best, max_length)
    K = int(beam_size)
    eos_set = set(eos_ids)
    eos_list = sorted(eos_set)
    alpha = float(length_penalty)
    gaps: List[float] = []
    pool: List[list] = []  # [ids, score, normalized, finished, counter]
    counter = 0

    def worst_index() -> int:
        return min(range(len(pool)), key=lambda i: (pool[i][2], -pool[i][4]))

    def offer(ids: List[int], score: float, finished: bool) -> None:
        nonlocal counter
        normalized = score / len(ids) ** alpha
        if len(pool) >= K:
            w = worst_index()
            gaps.append(abs(normalized - pool[w][2]))
            if not normalized > pool[w][2]:
                return
            rest = [e[2] for i, e in enumerate(pool) if i != w]
            if rest:  # which entry is evicted is a decision too
                gaps.append(abs(min(rest) - pool[w][2]))
            del pool[w]
        pool.append([ids, score, normalized, finished, counter])
        counter += 1

    live: List[Tuple[List[int], float]] = [([], 0.0)]
    while True:
        L = len(live[0][0])
        logits = next_logits([prefix for prefix, _ in live])
        lp = torch.log_softmax(logits.to(torch.float64), dim=-1)
        if L + 1 < min_length:
            lp[:, eos_list] = -math.inf
        V = lp.shape[-1]
        scores = torch.tensor([s for _, s in live], dtype=torch.float64)
        totals = (scores[:, None] + lp).flatten().numpy()
        if np.isnan(totals).any():
            raise FloatingPointError("NaN log-probabilities in beam search")
        keep = np.flatnonzero(totals != -np.inf)
        order = keep[np.lexsort((keep, -totals[keep]))]  # total desc, then b, v
        head = totals[order[: 2 * K + 1]]
        gaps.extend(np.abs(np.diff(head)).tolist())
        new_live: List[Tuple[List[int], float]] = []
        for r, flat in enumerate(order[: 2 * K].tolist()):
            b, v = divmod(flat, V)
            total = float(totals[flat])
            if v in eos_set:
                if r < K:
                    offer(live[b][0] + [v], total, True)
                continue
            new_live.append((live[b][0] + [v], total))
            if len(new_live) == K:
                break
        live = new_live
        if not live:
            break
        L = len(live[0][0])
        if L == max_length:
            for prefix, score in live:
                offer(prefix, score, False)
            break
        if len(pool) == K:
            bound = max(s for _, s in live) / L ** alpha
            worst = pool[worst_index()][2]
            gaps.append(abs(bound - worst))
            if bound <= worst:
                break
    ranked = sorted(pool, key=lambda e: (-e[2], e[4]))
    head = [e[2] for e in ranked[: n_best + 1]]
    gaps.extend(abs(x - y) for x, y in zip(head, head[1:]))
    hypotheses = [{"ids": list(e[0]), "score": e[1], "normalized_score": e[2],
                   "finished": e[3]} for e in ranked[:n_best]]
    return hypotheses, min(gaps, default=math.inf)


class GenerationMixin:
    """The generation API of a decoder-only language model (OrdoModel with encoder_layers
    0, LlamaModel). A prompt is the decoder's input as it is (nothing is prepended);
    every sequence's positions start at 0 (plus position_offset, for ordo).

    The model provides `lm_logits(ids [B, T], padding [B, T] or None) -> [B, T, V]`
    (causal: row t depends on ids[:, :t + 1] only; padding True = a right-padded slot,
    masked as a key), `eos_ids` (a tuple: emitting any of them ends a sequence) and
    `lm_pad_id` (the id right-padding is written with; padded slots are masked and
    their outputs never read, so it does not change any result).

    Log-probabilities are log_softmax in float64 of the model's logits (float64 in the
    oracle). Greedy ties go to the lowest id. The *_batch methods compute, in one
    right-padded batch, what the one-sequence methods compute for each sequence.
    """

    def _padded(self, rows: List[List[int]]) -> Tuple[Tensor, Optional[Tensor], Tensor]:
        """Right-padded ids [B, T] (lm_pad_id), padding [B, T] (True = pad; None for a
        batch of one), lengths [B]."""
        if any(not r for r in rows):
            raise ValueError("every sequence needs at least one token")
        T = max(map(len, rows))
        ids = torch.tensor([r + [self.lm_pad_id] * (T - len(r)) for r in rows], dtype=torch.long)
        lengths = torch.tensor([len(r) for r in rows])
        padding = None if len(rows) == 1 else torch.arange(T)[None, :] >= lengths[:, None]
        return ids, padding, lengths

    def lm_score(self, ids: Sequence[int]) -> List[float]:
        """[log p(ids[t] | ids[:t]) for t = 1 .. len(ids) - 1] (n - 1 values; ids needs
        at least one token)."""
        return self.lm_score_batch([ids])[0]

    def lm_score_batch(self, sequences: Sequence[Sequence[int]]) -> List[List[float]]:
        """lm_score of each sequence, all of them in one right-padded batch."""
        rows = [list(r) for r in sequences]
        if not rows:
            return []
        with _eval_mode(self):
            ids, padding, _ = self._padded(rows)
            logp = torch.log_softmax(self.lm_logits(ids, padding).to(torch.float64), dim=-1)
            nxt = torch.cat([ids[:, 1:], ids[:, :1]], dim=1)  # next token (last: unused)
            picked = logp.gather(2, nxt[:, :, None])[:, :, 0].tolist()
            return [row[:len(r) - 1] for row, r in zip(picked, rows)]

    def lm_greedy(self, prompt_ids: Sequence[int],
                  max_length: int) -> Tuple[List[int], List[float]]:
        """Greedy continuation of a prompt: up to max_length generated tokens (the prompt
        excluded), stopping after the first eos (included). Returns (ids, margins), the
        margin of a step being top1 - top2 of its logits. Each step runs the whole
        sequence so far (no cache)."""
        ids, margins = self.lm_greedy_batch([prompt_ids], max_length)
        return ids[0], margins[0]

    def lm_greedy_batch(self, prompts: Sequence[Sequence[int]],
                        max_length: int) -> Tuple[List[List[int]], List[List[float]]]:
        """lm_greedy of each prompt; each step runs every sequence (prompt + generated so
        far) as one right-padded batch and reads each one's logits at its own last token;
        a finished sequence stays in the batch unchanged and its outputs are ignored."""
        seqs = [list(p) for p in prompts]
        B = len(seqs)
        out: List[List[int]] = [[] for _ in range(B)]
        margins: List[List[float]] = [[] for _ in range(B)]
        if B == 0:
            return out, margins
        eos = set(self.eos_ids)
        done = [False] * B
        with _eval_mode(self):
            for _ in range(max_length):
                ids, padding, lengths = self._padded(seqs)
                logits = self.lm_logits(ids, padding)[torch.arange(B), lengths - 1]  # [B, V]
                best = torch.argmax(logits, dim=-1).tolist()  # first maximum
                if logits.shape[-1] > 1:
                    top2 = torch.topk(logits, 2).values
                    gaps = (top2[:, 0] - top2[:, 1]).tolist()
                else:
                    gaps = [math.inf] * B
                for b in range(B):
                    if done[b]:
                        continue
                    out[b].append(best[b])
                    margins[b].append(float(gaps[b]))
                    seqs[b].append(best[b])
                    done[b] = best[b] in eos
                if all(done):
                    break
        return out, margins

    def lm_beam_search(self, prompt_ids: Sequence[int], beam_size: int, n_best: int,
                       length_penalty: float, max_length: int,
                       min_length: int = 0) -> Tuple[List[dict], float]:
        """OrdoModel.beam_search's BEAM SEARCH (and min_margin) with a beam's decoder
        input = prompt + prefix instead of [decoder_start] + prefix, and eos = any of
        eos_ids. Hypothesis ids are the generated tokens only (prefix lengths, hence
        max_length, min_length and the length penalty, do not count the prompt)."""
        _check_beam_arguments(beam_size, n_best, max_length)
        prompt = list(prompt_ids)
        if not prompt:
            raise ValueError("lm_beam_search needs a prompt of at least one token")

        def next_logits(prefixes: List[List[int]]) -> Tensor:
            ids = torch.tensor([prompt + prefix for prefix in prefixes], dtype=torch.long)
            return self.lm_logits(ids, None)[:, -1]

        with _eval_mode(self):
            return _beam_search(next_logits, self.eos_ids, beam_size, n_best, length_penalty,
                                max_length, min_length)


class OrdoModel(GenerationMixin, nn.Module):
    """An ordo encoder-decoder, or with encoder_layers 0 a decoder-only language model.
    state_dict() keys are the model.safetensors tensor names.

    Construction initialises weights for training (reset_parameters); a model for
    inference comes from load_model_dir. `dropout` (residual and embedding dropout, as
    Vaswani et al.) is only active in training mode.

    An encoder-decoder has encode/decode/forward, greedy, score, their *_batch forms and
    beam_search; a decoder-only model has lm_logits and GenerationMixin's lm_* methods
    (eos_ids = (eos_token_id,), padding with pad_token_id). Each kind refuses the other's.
    """

    def __init__(self, config: dict, final_logits_bias: bool = False, dropout: float = 0.0):
        super().__init__()
        self.config = full_config(config)
        cfg = self.config
        self.model = _Model(cfg)
        if not cfg["tie_word_embeddings"]:
            self.lm_head = nn.Linear(cfg["d_model"], cfg["decoder_vocab_size"], bias=False)
        if final_logits_bias:
            self.final_logits_bias = nn.Parameter(torch.zeros(1, cfg["decoder_vocab_size"]))
        self.set_dropout(dropout)
        self.reset_parameters()

    def set_dropout(self, rate: float) -> None:
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {rate}")
        self.dropout = rate
        for m in self.modules():
            if isinstance(m, (Stack, EncoderLayer)):
                m.dropout = rate

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Training init: Xavier-uniform linear weights, zero biases, N(0, d^-1/2)
        embeddings (tokens, learned positions, lm_head), LayerNorm 1/0, zero logits bias."""
        std = self.config["d_model"] ** -0.5
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    m.bias.zero_()
            elif isinstance(m, nn.Embedding):
                m.weight.normal_(0.0, std)
            elif isinstance(m, nn.LayerNorm):
                m.weight.fill_(1.0)
                m.bias.zero_()
        if hasattr(self, "lm_head"):
            self.lm_head.weight.normal_(0.0, std)
        if hasattr(self, "final_logits_bias"):
            self.final_logits_bias.zero_()

    # -- forward ---------------------------------------------------------------------
    def padding_mask(self, ids: Tensor) -> Tensor:
        """ids == pad_token_id (True = pad), for src_padding."""
        return ids.eq(self.config["pad_token_id"])

    @property
    def decoder_only(self) -> bool:
        return self.config["encoder_layers"] == 0

    def encode(self, src_ids: Tensor, src_padding: Optional[Tensor] = None) -> Tensor:
        """[B, S] ids -> [B, S, D]. src_padding [B, S] bool, True = pad; None = no padding."""
        if self.decoder_only:
            raise ValueError("a decoder-only model (encoder_layers 0) has no encoder: "
                             "use lm_logits and the lm_* methods")
        enc = self.model.encoder
        x = enc.embed(src_ids, self.model.encoder_embeddings())
        rope, bias = enc.rope(), enc.score_bias(src_ids.shape[1])
        for layer in enc.layers:
            x = layer(x, src_padding, rope, bias)
        return enc.finish(x)

    def decode(self, memory: Optional[Tensor], src_padding: Optional[Tensor], tgt_in_ids: Tensor,
               tgt_padding: Optional[Tensor] = None) -> Tensor:
        """Logits [B, T, V] for decoder inputs [B, T] (causal), given encoder output (None
        for a decoder-only model). tgt_padding [B, T] (True = pad) masks padded decoder
        inputs as self-attention keys."""
        dec = self.model.decoder
        table = self.model.decoder_embeddings()
        x = dec.embed(tgt_in_ids, table)
        rope, bias = dec.rope(), dec.score_bias(tgt_in_ids.shape[1])
        for layer in dec.layers:
            x = layer(x, memory, src_padding, rope, tgt_padding, bias)
        x = dec.finish(x)
        logits = F.linear(x, self.lm_head.weight if hasattr(self, "lm_head") else table)
        if hasattr(self, "final_logits_bias"):
            logits = logits + self.final_logits_bias
        return logits

    def forward(self, src_ids: Tensor, tgt_in_ids: Tensor,
                src_padding: Optional[Tensor] = None) -> Tensor:
        return self.decode(self.encode(src_ids, src_padding), src_padding, tgt_in_ids)

    def lm_logits(self, ids: Tensor, padding: Optional[Tensor] = None) -> Tensor:
        """A decoder-only model's logits [B, T, V] for inputs [B, T]: the decoder with no
        cross-attention, positions position_offset + t. padding [B, T], True = pad."""
        if not self.decoder_only:
            raise ValueError("lm_logits needs a decoder-only model (encoder_layers 0); "
                             "an encoder-decoder decodes with decode/greedy/beam_search")
        return self.decode(None, None, ids, padding)

    @property
    def eos_ids(self) -> Tuple[int, ...]:
        return (self.config["eos_token_id"],)

    @property
    def lm_pad_id(self) -> int:
        return self.config["pad_token_id"]

    # -- inference -------------------------------------------------------------------
    @torch.no_grad()
    def greedy(self, src_ids: Sequence[int], max_length: int) -> Tuple[List[int], List[float]]:
        """Greedy decoding of one source. Returns the ids generated after
        decoder_start_token_id (stopping after eos, which is included) and, per step, the
        margin top1 - top2 of the logits. Ties go to the lowest id."""
        was_training = self.training
        self.eval()
        try:
            cfg = self.config
            src = torch.tensor([list(src_ids)], dtype=torch.long)
            memory = self.encode(src)
            tgt = [cfg["decoder_start_token_id"]]
            ids, margins = [], []
            for _ in range(max_length):
                logits = self.decode(memory, None, torch.tensor([tgt], dtype=torch.long))[0, -1]
                best = int(torch.argmax(logits))  # first maximum
                top2 = torch.topk(logits, 2).values if logits.numel() > 1 else None
                margins.append(float(top2[0] - top2[1]) if top2 is not None else math.inf)
                ids.append(best)
                tgt.append(best)
                if best == cfg["eos_token_id"]:
                    break
            return ids, margins
        finally:
            self.train(was_training)

    @torch.no_grad()
    def score(self, src_ids: Sequence[int], tgt_ids: Sequence[int]) -> List[float]:
        """Teacher-forced log-probabilities of each target token (decoder input is
        [decoder_start] + tgt[:-1]); log_softmax of the logits, in float64."""
        was_training = self.training
        self.eval()
        try:
            tgt = list(tgt_ids)
            if not tgt:
                return []
            src = torch.tensor([list(src_ids)], dtype=torch.long)
            tgt_in = torch.tensor([[self.config["decoder_start_token_id"]] + tgt[:-1]])
            logits = self(src, tgt_in)[0].to(torch.float64)
            logp = torch.log_softmax(logits, dim=-1)
            return logp.gather(1, torch.tensor(tgt)[:, None])[:, 0].tolist()
        finally:
            self.train(was_training)

    def _source_batch(self, sources: Sequence[Sequence[int]]) -> Tuple[Tensor, Tensor]:
        """Right-pads sources with pad_token_id into [B, S] ids and the [B, S] key padding
        mask (True = pad). The mask comes from the lengths, so a source that itself holds
        pad_token_id sees it as a token, exactly as `greedy` and `score` do."""
        rows = [list(s) for s in sources]
        if any(not r for r in rows):
            raise ValueError("every source needs at least one token")
        S = max(map(len, rows))
        pad = self.config["pad_token_id"]
        ids = torch.tensor([r + [pad] * (S - len(r)) for r in rows], dtype=torch.long)
        lengths = torch.tensor([len(r) for r in rows])
        return ids, torch.arange(S)[None, :] >= lengths[:, None]

    @torch.no_grad()
    def greedy_batch(self, sources: Sequence[Sequence[int]],
                     max_length: int) -> Tuple[List[List[int]], List[List[float]]]:
        """`greedy` for several sources at once, in one padded batch: sources right-padded
        with pad_token_id and masked in the encoder and the cross-attention; a sequence that
        has produced eos is fed pad_token_id and its outputs are ignored. Returns per source
        what `greedy` returns for it (ids, margins)."""
        was_training = self.training
        self.eval()
        try:
            cfg = self.config
            B = len(sources)
            ids: List[List[int]] = [[] for _ in range(B)]
            margins: List[List[float]] = [[] for _ in range(B)]
            if B == 0:
                return ids, margins
            src, src_padding = self._source_batch(sources)
            memory = self.encode(src, src_padding)
            tgt = torch.full((B, 1), cfg["decoder_start_token_id"], dtype=torch.long)
            done = [False] * B
            for _ in range(max_length):
                logits = self.decode(memory, src_padding, tgt)[:, -1]  # [B, V]
                best = torch.argmax(logits, dim=-1).tolist()  # first maximum
                if logits.shape[-1] > 1:
                    top2 = torch.topk(logits, 2).values
                    gaps = (top2[:, 0] - top2[:, 1]).tolist()
                else:
                    gaps = [math.inf] * B
                step = []
                for b in range(B):
                    if done[b]:
                        step.append(cfg["pad_token_id"])
                        continue
                    ids[b].append(best[b])
                    margins[b].append(float(gaps[b]))
                    step.append(best[b])
                    done[b] = best[b] == cfg["eos_token_id"]
                if all(done):
                    break
                tgt = torch.cat([tgt, torch.tensor(step, dtype=torch.long)[:, None]], dim=1)
            return ids, margins
        finally:
            self.train(was_training)

    @torch.no_grad()
    def score_batch(self, sources: Sequence[Sequence[int]],
                    targets: Sequence[Sequence[int]]) -> List[List[float]]:
        """`score` for several (source, target) pairs in one padded batch: sources as in
        `greedy_batch`, decoder inputs [decoder_start] + target[:-1] right-padded with
        pad_token_id (causal attention keeps the padding out of the real positions).
        Returns per pair the log-probabilities of its target tokens."""
        if len(sources) != len(targets):
            raise ValueError(f"{len(sources)} sources but {len(targets)} targets")
        was_training = self.training
        self.eval()
        try:
            cfg = self.config
            tgts = [list(t) for t in targets]
            T = max(map(len, tgts), default=0)
            if T == 0:
                return [[] for _ in tgts]
            pad, start = cfg["pad_token_id"], cfg["decoder_start_token_id"]
            src, src_padding = self._source_batch(sources)
            tgt_in = torch.tensor([([start] + t[:-1] + [pad] * T)[:T] for t in tgts],
                                  dtype=torch.long)
            tgt_out = torch.tensor([t + [pad] * (T - len(t)) for t in tgts], dtype=torch.long)
            logits = self(src, tgt_in, src_padding).to(torch.float64)
            logp = torch.log_softmax(logits, dim=-1).gather(2, tgt_out[:, :, None])[:, :, 0]
            return [row[:len(t)] for row, t in zip(logp.tolist(), tgts)]
        finally:
            self.train(was_training)

    @torch.no_grad()
    def beam_search(self, src_ids: Sequence[int], beam_size: int, n_best: int,
                    length_penalty: float, max_length: int,
                    min_length: int = 0) -> Tuple[List[dict], float]:
        """Beam search of one source (the reference definition; see BEAM SEARCH below).

        Returns (hypotheses, min_margin): the n_best best finished-pool entries, best first,
        each {"ids", "score", "normalized_score", "finished"}, and the smallest gap any
        decision depended on (math.inf if none).

        BEAM SEARCH. Live beams are (prefix, score = float64 sum of its token log-probs),
        starting with ([], 0); a beam's decoder input is [decoder_start] + prefix. The
        pool holds at most K = beam_size hypotheses (ids, score, normalized = score /
        len(ids) ** length_penalty, finished, insertion counter); an offered hypothesis
        is added while the pool has < K entries, else replaces the worst entry (lowest
        normalized; among equals the latest inserted) if its normalized score is strictly
        greater. A step: lp_b = log_softmax in float64 of beam b's logits, with
        lp_b[eos] = -inf while len(prefix) + 1 < min_length; candidates (b, v) with
        total = score_b + lp_b[v] > -inf, sorted by total descending, then b, then v; the
        first 2K are walked with rank r: eos is offered to the pool (finished) if r < K,
        else skipped; any other token extends prefix_b into the new live list, and the
        walk stops once that has K beams. Then: if the prefixes have max_length tokens,
        every live beam is offered (finished=False) and the search stops; otherwise it
        stops when no beam is live, or when the pool is full and best live score /
        L ** length_penalty <= the pool's worst normalized score (L: prefix length).
        The result is the pool sorted by normalized score descending, then insertion.

        min_margin is the minimum of: adjacent gaps between the first 2K + 1 sorted
        candidates' totals at every step; |new - worst| of every comparison with a full
        pool and, when that replaces, the gap between the worst and the second-worst
        entry; |bound - worst| of every stopping test evaluated; the adjacent gaps of
        the first n_best + 1 normalized scores of the final ranking.
        """
        _check_beam_arguments(beam_size, n_best, max_length)
        start = self.config["decoder_start_token_id"]
        with _eval_mode(self):
            memory = self.encode(torch.tensor([list(src_ids)], dtype=torch.long))

            def next_logits(prefixes: List[List[int]]) -> Tensor:
                tgt = torch.tensor([[start] + prefix for prefix in prefixes], dtype=torch.long)
                return self.decode(memory.expand(len(prefixes), -1, -1), None, tgt)[:, -1]

            return _beam_search(next_logits, (self.config["eos_token_id"],), beam_size, n_best,
                                length_penalty, max_length, min_length)


# ----------------------------------------------------------------------------------------
# The Hugging Face LLaMA layout
# ----------------------------------------------------------------------------------------

_LLAMA_DTYPES = ("float32", "float16", "bfloat16")
# (key, kind, default); kind as _SCHEMA's, plus "eos" (an int or a non-empty list of
# ints) and "nullable_int" (absent, null or an int: kept exactly as given).
_LLAMA_SCHEMA = [
    ("model_type", "str", _REQUIRED),
    ("vocab_size", "int", _REQUIRED),
    ("hidden_size", "int", _REQUIRED),
    ("intermediate_size", "int", _REQUIRED),
    ("num_hidden_layers", "int", _REQUIRED),
    ("num_attention_heads", "int", _REQUIRED),
    ("num_key_value_heads", "optional_int", None),  # None: = num_attention_heads
    ("head_dim", "optional_int", None),             # None: = hidden_size / num_attention_heads
    ("hidden_act", "str", "silu"),
    ("max_position_embeddings", "int", 2048),
    ("rms_norm_eps", "float", 1e-6),
    ("rope_theta", "float", 10000.0),
    ("rope_scaling", "null", None),
    ("attention_bias", "bool", False),
    ("mlp_bias", "bool", False),
    ("tie_word_embeddings", "bool", False),
    ("bos_token_id", "nullable_int", None),
    ("eos_token_id", "eos", _REQUIRED),
    ("pad_token_id", "nullable_int", None),
    ("torch_dtype", "str", "float32"),
]
LLAMA_CONFIG_KEYS = tuple(key for key, _, _ in _LLAMA_SCHEMA)


def llama_config(partial: dict) -> dict:
    """A Hugging Face LLaMA config.json, validated, defaults filled in ([default]):
    model_type "llama", vocab_size, hidden_size, intermediate_size, num_hidden_layers,
    num_attention_heads, num_key_value_heads [= heads, must divide them], head_dim
    [hidden_size / heads; any even size], hidden_act ["silu", the only one],
    max_position_embeddings [2048, informational: RoPE has no table], rms_norm_eps
    [1e-6], rope_theta [10000], rope_scaling [null, the only one], attention_bias
    [false], mlp_bias [false], tie_word_embeddings [false], bos_token_id and
    pad_token_id (absent, null or an id: kept as given), eos_token_id (an id or a
    non-empty list of ids; required), torch_dtype ["float32" | "float16" | "bfloat16",
    informational]. Other keys (architectures, transformers_version, ...) are kept after
    these. Raises ValueError naming the offending key.
    """
    if not isinstance(partial, dict):
        raise ValueError(f"config must be a JSON object, got {type(partial).__name__}")
    cfg = {}
    for key, kind, default in _LLAMA_SCHEMA:
        present = key in partial
        value = partial.get(key)
        if kind == "nullable_int":
            if present:
                cfg[key] = None if value is None else _check_type(key, "int", value)
        elif kind == "null":
            if value is not None:
                raise ValueError(f"config key '{key}' must be null (not supported), got {value!r}")
            cfg[key] = None
        elif kind == "eos":
            if value is None:
                raise ValueError(f"config key '{key}' is required")
            ids = value if isinstance(value, list) else [value]
            if not ids:
                raise ValueError(f"config key '{key}' must be an id or a non-empty list of ids")
            for v in ids:
                _check_type(key, "int", v)
            cfg[key] = list(value) if isinstance(value, list) else value
        elif value is not None:
            cfg[key] = _check_type(key, kind, value)
        elif default is _REQUIRED:
            raise ValueError(f"config key '{key}' is required")
        elif key == "num_key_value_heads":
            cfg[key] = cfg["num_attention_heads"]
        elif key == "head_dim":
            if cfg["hidden_size"] % cfg["num_attention_heads"] != 0:
                raise ValueError(f"config key 'num_attention_heads': hidden_size="
                                 f"{cfg['hidden_size']} is not divisible by "
                                 f"{cfg['num_attention_heads']} heads (or give head_dim)")
            cfg[key] = cfg["hidden_size"] // cfg["num_attention_heads"]
        else:
            cfg[key] = default
    for key, value in partial.items():
        if key not in cfg and key not in LLAMA_CONFIG_KEYS:
            cfg[key] = value
    if cfg["model_type"] != "llama":
        raise ValueError(f"config key 'model_type' must be \"llama\", got {cfg['model_type']!r}")
    for key in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                "num_attention_heads", "num_key_value_heads", "head_dim",
                "max_position_embeddings"):
        if cfg[key] < 1:
            raise ValueError(f"config key '{key}' must be >= 1, got {cfg[key]}")
    if cfg["num_attention_heads"] % cfg["num_key_value_heads"] != 0:
        raise ValueError(f"config key 'num_key_value_heads': num_attention_heads="
                         f"{cfg['num_attention_heads']} is not divisible by "
                         f"{cfg['num_key_value_heads']}")
    if cfg["head_dim"] % 2 != 0:
        raise ValueError(f"config key 'head_dim': rope needs an even head_dim, "
                         f"got {cfg['head_dim']}")
    if cfg["hidden_act"] != "silu":
        raise ValueError(f"config key 'hidden_act' must be \"silu\", got {cfg['hidden_act']!r}")
    if cfg["torch_dtype"] not in _LLAMA_DTYPES:
        raise ValueError(f"config key 'torch_dtype' must be one of {' | '.join(_LLAMA_DTYPES)}, "
                         f"got {cfg['torch_dtype']!r}")
    for key in ("rms_norm_eps", "rope_theta"):
        if cfg[key] <= 0:
            raise ValueError(f"config key '{key}' must be > 0, got {cfg[key]}")
    V = cfg["vocab_size"]
    eos = cfg["eos_token_id"]
    for key, ids in (("bos_token_id", [cfg.get("bos_token_id")]),
                     ("pad_token_id", [cfg.get("pad_token_id")]),
                     ("eos_token_id", eos if isinstance(eos, list) else [eos])):
        for v in ids:
            if v is not None and not 0 <= v < V:
                raise ValueError(f"config key '{key}' must be in [0, {V}), got {v}")
    return cfg


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """weight * (x / sqrt(mean(x^2) + eps)) over the last dimension, in float32 or wider
    (x's dtype if that is wider: float64 in the oracle) (Zhang & Sennrich 2019; no mean
    subtraction, no bias)."""
    x = x.to(torch.promote_types(x.dtype, torch.float32))
    return weight * (x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps))


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        return rms_norm(x, self.weight, self.eps)


class LlamaAttention(nn.Module):
    """q_proj [heads*head_dim, hidden], k_proj/v_proj [kv_heads*head_dim, hidden], o_proj
    [hidden, heads*head_dim] (biases when attention_bias). q and k are rotated per head by
    RoPE (half layout, positions 0..T-1); query head h reads K/V head h // (heads /
    kv_heads); softmax(q k^T / sqrt(head_dim) + causal and padding masks) v."""

    def __init__(self, cfg: dict):
        super().__init__()
        hidden, bias = cfg["hidden_size"], cfg["attention_bias"]
        self.heads, self.kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        self.head_dim, self.theta = cfg["head_dim"], cfg["rope_theta"]
        self.q_proj = nn.Linear(hidden, self.heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, hidden, bias=bias)

    def forward(self, x: Tensor, padding: Optional[Tensor]) -> Tensor:
        B, T, _ = x.shape

        def split(t: Tensor, heads: int) -> Tensor:
            return t.view(B, T, heads, self.head_dim).transpose(1, 2)

        q = split(self.q_proj(x), self.heads)
        k = split(self.k_proj(x), self.kv_heads)
        v = split(self.v_proj(x), self.kv_heads)
        positions = torch.arange(T)
        q = rope_rotate(q, positions, self.theta, "half")
        k = rope_rotate(k, positions, self.theta, "half")
        group = self.heads // self.kv_heads
        if group > 1:
            k, v = repeat_kv(k, group), repeat_kv(v, group)
        out = explicit_attention(q, k, v, padding, causal=True)
        return self.o_proj(out.transpose(1, 2).reshape(B, T, self.heads * self.head_dim))


class LlamaMLP(nn.Module):
    """SwiGLU (Shazeer 2020): down_proj(silu(gate_proj(x)) * up_proj(x)),
    silu(z) = z * sigmoid(z); biases when mlp_bias."""

    def __init__(self, cfg: dict):
        super().__init__()
        hidden, inner, bias = cfg["hidden_size"], cfg["intermediate_size"], cfg["mlp_bias"]
        self.gate_proj = nn.Linear(hidden, inner, bias=bias)
        self.up_proj = nn.Linear(hidden, inner, bias=bias)
        self.down_proj = nn.Linear(inner, hidden, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.self_attn = LlamaAttention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.mlp = LlamaMLP(cfg)

    def forward(self, h: Tensor, padding: Optional[Tensor]) -> Tensor:
        h = h + self.self_attn(self.input_layernorm(h), padding)
        return h + self.mlp(self.post_attention_layernorm(h))


class _LlamaBody(nn.Module):
    """The `model.` prefix of the tensor names."""

    def __init__(self, cfg: dict):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = nn.ModuleList(LlamaDecoderLayer(cfg) for _ in range(cfg["num_hidden_layers"]))
        self.norm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])


class LlamaModel(GenerationMixin, nn.Module):
    """A LLaMA decoder (Touvron et al. 2023, as Hugging Face's LlamaForCausalLM lays it
    out); state_dict() keys are the Hugging Face tensor names: model.embed_tokens.weight,
    model.layers.{i}.{input_layernorm, post_attention_layernorm}.weight,
    model.layers.{i}.self_attn.{q,k,v,o}_proj.weight (+ .bias when attention_bias),
    model.layers.{i}.mlp.{gate,up,down}_proj.weight (+ .bias when mlp_bias),
    model.norm.weight, lm_head.weight (absent when tie_word_embeddings: the logits then
    use model.embed_tokens.weight).

    h = embed(ids); per layer h = h + attn(RMSNorm(h)), h = h + mlp(RMSNorm(h));
    logits = lm_head(RMSNorm(h)). No dropout, no scaled embedding, no position table.
    Generation: GenerationMixin, eos = any of eos_token_id's ids, padding written with
    pad_token_id (0 when it is absent or null).
    """

    def __init__(self, config: dict):
        super().__init__()
        self.config = llama_config(config)
        cfg = self.config
        self.model = _LlamaBody(cfg)
        if not cfg["tie_word_embeddings"]:
            self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self, std: float = 0.02) -> None:
        """Training init (Hugging Face's): linear weights and embeddings N(0, std), biases
        0, RMSNorm weights 1."""
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                m.weight.normal_(0.0, std)
                if getattr(m, "bias", None) is not None:
                    m.bias.zero_()
            elif isinstance(m, RMSNorm):
                m.weight.fill_(1.0)

    def lm_logits(self, ids: Tensor, padding: Optional[Tensor] = None) -> Tensor:
        """Logits [B, T, V] for ids [B, T] (positions 0..T-1); padding [B, T], True = pad."""
        table = self.model.embed_tokens.weight
        h = F.embedding(ids, table)
        for layer in self.model.layers:
            h = layer(h, padding)
        h = self.model.norm(h)
        return F.linear(h, self.lm_head.weight if hasattr(self, "lm_head") else table)

    def forward(self, ids: Tensor, padding: Optional[Tensor] = None) -> Tensor:
        return self.lm_logits(ids, padding)

    @property
    def eos_ids(self) -> Tuple[int, ...]:
        eos = self.config["eos_token_id"]
        return tuple(eos) if isinstance(eos, list) else (eos,)

    @property
    def lm_pad_id(self) -> int:
        pad = self.config.get("pad_token_id")
        return 0 if pad is None else pad


# ----------------------------------------------------------------------------------------
# safetensors
# ----------------------------------------------------------------------------------------

_ST_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool,
}
_ST_NAMES = {v: k for k, v in _ST_DTYPES.items()}
_NP_DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<i2", "I64": "<i8", "I32": "<i4",
    "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?",
}


def _tensor_bytes(t: Tensor) -> bytes:
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    arr = t.numpy()
    return arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()


def write_safetensors(path, tensors: Dict[str, Tensor],
                      metadata: Optional[Dict[str, str]] = None) -> None:
    """Writes a safetensors file: u64 LE header length N, an N-byte JSON header
    {name: {dtype, shape, data_offsets}} (plus "__metadata__" when given) padded with
    spaces to a multiple of 8, then the tensors' bytes in sorted-name order, contiguous."""
    header = {}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        if name == "__metadata__":
            raise ValueError("'__metadata__' is not a valid tensor name")
        t = tensors[name]
        if t.dtype not in _ST_NAMES:
            raise ValueError(f"tensor '{name}': unsupported dtype {t.dtype}")
        blob = _tensor_bytes(t)
        header[name] = {"dtype": _ST_NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    if metadata:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise ValueError("safetensors metadata must map str to str")
        header = {"__metadata__": dict(metadata), **header}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def read_safetensors(path) -> Dict[str, Tensor]:
    """Reads and validates a safetensors file (any tensor order; entries must tile the
    data exactly). Returns {name: tensor} in the file's dtypes; "__metadata__" is skipped."""
    data = Path(path).read_bytes()
    if len(data) < 8:
        raise ValueError(f"{path}: too short for a safetensors header")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise ValueError(f"{path}: header length {n} exceeds the file size {len(data)}")
    try:
        header = json.loads(data[8: 8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: header is not JSON: {e}") from None
    if not isinstance(header, dict):
        raise ValueError(f"{path}: header is not a JSON object")
    body = memoryview(data)[8 + n:]
    out, spans = {}, []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if dtype not in _ST_DTYPES:
            raise ValueError(f"{path}: tensor '{name}' has unsupported dtype {dtype!r}")
        if not (isinstance(shape, list) and all(isinstance(s, int) and s >= 0 for s in shape)):
            raise ValueError(f"{path}: tensor '{name}' has a bad shape {shape!r}")
        if not (isinstance(offsets, list) and len(offsets) == 2
                and all(isinstance(o, int) for o in offsets) and 0 <= offsets[0] <= offsets[1]):
            raise ValueError(f"{path}: tensor '{name}' has bad data_offsets {offsets!r}")
        begin, end = offsets
        numel = math.prod(shape)
        np_dtype = np.dtype(_NP_DTYPES[dtype])
        if end - begin != numel * np_dtype.itemsize:
            raise ValueError(f"{path}: tensor '{name}' spans {end - begin} bytes, "
                             f"but {dtype}{shape} needs {numel * np_dtype.itemsize}")
        if end > len(body):
            raise ValueError(f"{path}: tensor '{name}' ends at {end}, past the end of the "
                             f"data ({len(body)} bytes)")
        spans.append((begin, end, name))
        arr = np.frombuffer(body[begin:end], dtype=np_dtype).astype(np_dtype.newbyteorder("="))
        t = torch.from_numpy(arr.reshape(shape).copy())
        if dtype == "BF16":
            t = t.view(torch.bfloat16)
        out[name] = t
    position = 0
    for begin, end, name in sorted(spans):
        if begin != position:
            raise ValueError(f"{path}: tensor '{name}' starts at {begin}, expected {position} "
                             "(gap or overlap)")
        position = end
    if position != len(body):
        raise ValueError(f"{path}: tensors end at {position} but the data is {len(body)} bytes")
    return out


# ----------------------------------------------------------------------------------------
# Model directories
# ----------------------------------------------------------------------------------------

_SAVE_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


@torch.no_grad()
def round_weights_(model: nn.Module, dtype: str) -> nn.Module:
    """Rounds every parameter in place to `dtype` (F32 | F16 | BF16) and back to its own
    dtype, so the model computes with exactly what a file of that dtype holds."""
    if dtype not in _SAVE_DTYPES:
        raise ValueError(f"dtype must be one of {' | '.join(_SAVE_DTYPES)}, got {dtype!r}")
    target = _SAVE_DTYPES[dtype]
    for name, p in model.state_dict().items():
        if target is torch.float16 and p.abs().max() > torch.finfo(torch.float16).max:
            raise ValueError(f"tensor '{name}' overflows F16")
        p.copy_(p.to(target).to(p.dtype))
    return model


def save_model_dir(model: OrdoModel, out_dir, dtype: str = "F32",
                   extra_config: Optional[dict] = None) -> None:
    """Writes out_dir/config.json (the full config plus extra_config, pretty) and
    out_dir/model.safetensors (state_dict in `dtype`). For F16/BF16 the in-memory model
    is rounded to that dtype first (round_weights_), so it matches the file exactly."""
    round_weights_(model, dtype)
    config = dict(model.config)
    for key, value in (extra_config or {}).items():
        if key in CONFIG_KEYS and config.get(key) != value:
            raise ValueError(f"extra_config key '{key}' conflicts with the model's config "
                             f"({value!r} != {config.get(key)!r})")
        config[key] = value
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    target = _SAVE_DTYPES[dtype]
    tensors = {k: v.detach().to(target) for k, v in model.state_dict().items()}
    write_safetensors(out / "model.safetensors", tensors, metadata={"format": "pt"})


def load_model_dir(path, dtype: Optional[torch.dtype] = None) -> OrdoModel:
    """Loads a model directory into an OrdoModel in eval mode that computes in `dtype`
    (default: torch's default dtype; float64 for the oracle, see DTYPES). The file must hold exactly the tensors the
    config implies (final_logits_bias optional), with their shapes."""
    path = Path(path)
    config = full_config(json.loads((path / "config.json").read_text()))
    tensors = read_safetensors(path / "model.safetensors")
    model = OrdoModel(config, final_logits_bias="final_logits_bias" in tensors)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise ValueError(f"{path / 'model.safetensors'}: missing tensors {missing}, "
                         f"unexpected tensors {unexpected}")
    for name, t in tensors.items():
        if tuple(t.shape) != tuple(expected[name].shape):
            raise ValueError(f"{path / 'model.safetensors'}: tensor '{name}' has shape "
                             f"{list(t.shape)}, expected {list(expected[name].shape)}")
        if not t.is_floating_point():
            raise ValueError(f"{path / 'model.safetensors'}: tensor '{name}' is {t.dtype}")
    dtype = dtype or torch.get_default_dtype()
    model.to(dtype).load_state_dict({k: v.to(dtype) for k, v in tensors.items()}, strict=True)
    return model.eval()


_TORCH_DTYPE_NAMES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}
LLAMA_INDEX = "model.safetensors.index.json"


def _shard_name(i: int, n: int) -> str:
    return f"model-{i:05d}-of-{n:05d}.safetensors"


def save_llama_dir(model: LlamaModel, out_dir, dtype: str = "F32", shards: int = 1,
                   extra_config: Optional[dict] = None) -> None:
    """Writes a Hugging Face-style LLaMA directory: config.json (the full config, with
    torch_dtype set to dtype's name, plus extra_config) and the state_dict in `dtype`
    (F32 | F16 | BF16; the in-memory model is rounded to it first, as round_weights_).

    shards=1: model.safetensors. shards=N>1: the tensors, in state_dict order, cut into N
    contiguous runs of about equal bytes, written as model-0000i-of-0000N.safetensors
    (i = 1..N, 5 digits each, as Hugging Face names them), plus model.safetensors.index.json
    = {"metadata": {"total_size": bytes of all tensors' data}, "weight_map": {tensor
    name: shard file name}} (keys sorted, indent 2). Every safetensors file carries
    the metadata {"format": "pt"}.
    """
    round_weights_(model, dtype)
    tensors = {k: v.detach().to(_SAVE_DTYPES[dtype]) for k, v in model.state_dict().items()}
    if not 1 <= shards <= len(tensors):
        raise ValueError(f"shards must be in [1, {len(tensors)}], got {shards}")
    config = dict(model.config, torch_dtype=_TORCH_DTYPE_NAMES[dtype])
    for key, value in (extra_config or {}).items():
        if key in LLAMA_CONFIG_KEYS and config.get(key) != value:
            raise ValueError(f"extra_config key '{key}' conflicts with the model's config "
                             f"({value!r} != {config.get(key)!r})")
        config[key] = value
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    if shards == 1:
        write_safetensors(out / "model.safetensors", tensors, metadata={"format": "pt"})
        return
    names = list(tensors)
    sizes = [tensors[n].numel() * tensors[n].element_size() for n in names]
    total = sum(sizes)
    groups: List[List[str]] = [[]]
    filled = 0
    for i, (name, size) in enumerate(zip(names, sizes)):
        # Start the next shard once this one holds its share, while enough tensors remain
        # for the shards still to come; never leave a shard empty.
        must_start = len(names) - i == shards - len(groups)
        if groups[-1] and len(groups) < shards and (filled >= total * len(groups) / shards
                                                    or must_start):
            groups.append([])
        groups[-1].append(name)
        filled += size
    assert len(groups) == shards and all(groups)
    weight_map = {}
    for i, group in enumerate(groups, start=1):
        file = _shard_name(i, shards)
        write_safetensors(out / file, {n: tensors[n] for n in group}, metadata={"format": "pt"})
        weight_map.update({n: file for n in group})
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (out / LLAMA_INDEX).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")


def load_llama_dir(path, dtype: Optional[torch.dtype] = None) -> LlamaModel:
    """Loads a LLaMA directory (model.safetensors, or when there is none, the shards named
    by model.safetensors.index.json) into a LlamaModel in eval mode that computes in
    `dtype` (default: torch's default dtype; float64 for the oracle, see DTYPES). The files
    must hold exactly the tensors the config implies, with their shapes; with an index,
    every shard's tensors must be mapped to that shard, every mapped tensor must be in
    its shard, and total_size must be the bytes of all tensors' data."""
    path = Path(path)
    config = llama_config(json.loads((path / "config.json").read_text()))
    if (path / "model.safetensors").exists():
        source = path / "model.safetensors"
        tensors = read_safetensors(source)
    elif (path / LLAMA_INDEX).exists():
        source = path / LLAMA_INDEX
        index = json.loads(source.read_text())
        weight_map = index.get("weight_map") if isinstance(index, dict) else None
        if not (isinstance(weight_map, dict) and weight_map
                and all(isinstance(v, str) for v in weight_map.values())):
            raise ValueError(f"{source}: 'weight_map' must map tensor names to file names")
        tensors, total = {}, 0
        for file in sorted(set(weight_map.values())):
            if Path(file).name != file:
                raise ValueError(f"{source}: shard '{file}' is not a file name in the directory")
            for name, t in read_safetensors(path / file).items():
                if weight_map.get(name) != file:
                    raise ValueError(f"{path / file}: tensor '{name}' is not mapped to this "
                                     f"file by {LLAMA_INDEX}")
                tensors[name] = t
                total += t.numel() * t.element_size()
        absent = sorted(set(weight_map) - set(tensors))
        if absent:
            raise ValueError(f"{source}: tensors {absent} are not in the shards they are mapped to")
        declared = (index.get("metadata") or {}).get("total_size")
        if declared is not None and declared != total:
            raise ValueError(f"{source}: metadata.total_size is {declared}, but the tensors "
                             f"hold {total} bytes")
    else:
        raise ValueError(f"{path}: neither model.safetensors nor {LLAMA_INDEX}")
    model = LlamaModel(config)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise ValueError(f"{source}: missing tensors {missing}, unexpected tensors {unexpected}")
    for name, t in tensors.items():
        if tuple(t.shape) != tuple(expected[name].shape):
            raise ValueError(f"{source}: tensor '{name}' has shape {list(t.shape)}, "
                             f"expected {list(expected[name].shape)}")
        if not t.is_floating_point():
            raise ValueError(f"{source}: tensor '{name}' is {t.dtype}")
    dtype = dtype or torch.get_default_dtype()
    model.to(dtype).load_state_dict({k: v.to(dtype) for k, v in tensors.items()}, strict=True)
    return model.eval()
