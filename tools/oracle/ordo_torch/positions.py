"""The positional schemes, written from their formulas: sinusoidal tables, rotary
embeddings (RoPE), ALiBi's slopes and biases, T5's relative-position buckets. Tables and
angles are computed in float64 and rounded once to the caller's dtype; T5's bucket index
is computed in float32, as T5 defines it."""
from __future__ import annotations

import math
from typing import List, Optional, Tuple

import torch
from torch import Tensor


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


def _plain_inv_freq(head_dim: int, theta: float) -> Tensor:
    """theta^(-2i/head_dim), i in [0, head_dim/2), float64."""
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return torch.pow(torch.tensor(float(theta), dtype=torch.float64), -2.0 * i / head_dim)


def rope_inv_freq(head_dim: int, theta: float, scaling: Optional[dict] = None,
                  max_position_embeddings: int = 0,
                  seq_len: Optional[int] = None) -> Tuple[Tensor, float]:
    """(inverse frequencies [head_dim/2] float64, attention factor) of RoPE under a
    `rope_scaling` dict (None or rope_type "default": plain), written from transformers'
    modeling_rope_utils.py:

    linear: theta^(-2i/d) / factor.
    dynamic: a sequence of seq_len positions, L = max(seq_len, max_position_embeddings),
      uses base theta * (factor L / max - (factor - 1))^(d / (d - 2)).
    yarn: with o = original_max_position_embeddings (default max_position_embeddings),
      dim(r) = d ln(o / (2 pi r)) / (2 ln theta), low = max(floor(dim(beta_fast)), 0),
      high = min(ceil(dim(beta_slow)), d - 1) (no rounding when truncate is false; high
      + 0.001 when equal), ramp_i = clamp((i - low) / (high - low), 0, 1):
      w_i = w_i / factor * ramp_i + w_i (1 - ramp_i); attention factor: the given one,
      else 0.1 ln(factor) + 1 (1 for factor <= 1). beta_fast 32, beta_slow 1.
    llama3: wavelength l_i = 2 pi / w_i; l < o / high_freq_factor: w kept; l > o /
      low_freq_factor: w / factor; between: s = (o / l - low) / (high - low),
      (1 - s) w / factor + s w.
    """
    w = _plain_inv_freq(head_dim, theta)
    kind = None if scaling is None else scaling.get("rope_type", scaling.get("type"))
    if kind in (None, "default"):
        return w, 1.0
    factor = float(scaling["factor"])
    if kind == "linear":
        return w / factor, 1.0
    if kind == "dynamic":
        L = max(seq_len or 0, max_position_embeddings)
        base = theta * (factor * L / max_position_embeddings - (factor - 1)) ** (
            head_dim / (head_dim - 2))
        return _plain_inv_freq(head_dim, base), 1.0
    if kind == "yarn":
        original = scaling.get("original_max_position_embeddings") or max_position_embeddings
        beta_fast = scaling.get("beta_fast") or 32.0
        beta_slow = scaling.get("beta_slow") or 1.0

        def dim_of(rotations):
            return head_dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))
        low, high = dim_of(beta_fast), dim_of(beta_slow)
        if scaling.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, head_dim - 1)
        if low == high:
            high += 0.001
        ramp = ((torch.arange(head_dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
        attention = scaling.get("attention_factor")
        if attention is None:
            attention = 1.0 if factor <= 1 else 0.1 * math.log(factor) + 1.0
        return w / factor * ramp + w * (1 - ramp), float(attention)
    if kind == "llama3":
        original = scaling["original_max_position_embeddings"]
        lo, hi = scaling["low_freq_factor"], scaling["high_freq_factor"]
        wavelength = 2 * math.pi / w
        smooth = (original / wavelength - lo) / (hi - lo)
        mixed = (1 - smooth) * w / factor + smooth * w
        out = torch.where(wavelength > original / lo, w / factor, mixed)
        return torch.where(wavelength < original / hi, w, out), 1.0
    raise ValueError(f"unknown rope_scaling type {kind!r}")


def _rope_cos_sin(positions: Tensor, head_dim: int, theta: float, scaling=None,
                  max_position_embeddings: int = 0,
                  seq_lens: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """cos, sin [len(positions), head_dim/2] of p * w_i (rope_inv_freq), times the
    attention factor, float64. Row t uses the frequencies of a sequence seq_lens[t] long
    (only dynamic scaling reads it; None: the longest position + 1, one pass)."""
    if seq_lens is None:
        seq_lens = torch.full((len(positions),), int(positions.max()) + 1 if len(positions) else 0)
    by_length = {n: rope_inv_freq(head_dim, theta, scaling, max_position_embeddings, n)
                 for n in set(seq_lens.tolist())}
    half = head_dim // 2
    angles = torch.zeros(len(positions), half, dtype=torch.float64)
    scale = torch.ones(len(positions), 1, dtype=torch.float64)
    for t, (p, n) in enumerate(zip(positions.tolist(), seq_lens.tolist())):
        w, attention = by_length[n]
        angles[t] = float(p) * w
        scale[t] = attention
    return torch.cos(angles) * scale, torch.sin(angles) * scale


def rope_rotate(x: Tensor, positions: Tensor, theta: float = 10000.0,
                layout: str = "half", scaling: Optional[dict] = None,
                max_position_embeddings: int = 0, seq_lens: Optional[Tensor] = None) -> Tensor:
    """Rotates x [..., T, head_dim] (row t at positions[t]) by RoPE.

    half: pairs (i, i + head_dim/2), i.e. x*cos + rotate_half(x)*sin with cos/sin
    repeated as cat([f, f]) (Hugging Face LLaMA). interleaved: pairs (2i, 2i+1).
    A pair (a, b) at angle t becomes (a cos t - b sin t, a sin t + b cos t), times the
    scaling's attention factor (yarn; 1 otherwise); frequencies from rope_inv_freq, row t
    with those of a sequence seq_lens[t] long ([T], or [B, T] for x [B, H, T, head_dim]:
    per sequence) (dynamic scaling: a KV-cached decode rotates each row with the length
    the sequence had when it was computed).
    cos/sin are computed in float64 and rounded to x's dtype; the rotation is in x's dtype.
    """
    head_dim = x.shape[-1]
    if seq_lens is not None and seq_lens.dim() == 2:  # [B, T]: each sequence its own lengths
        pairs = [_rope_cos_sin(positions, head_dim, theta, scaling, max_position_embeddings, n)
                 for n in seq_lens]
        cos = torch.stack([c for c, _ in pairs])[:, None]  # [B, 1, T, head_dim/2]
        sin = torch.stack([s for _, s in pairs])[:, None]
    else:
        cos, sin = _rope_cos_sin(positions, head_dim, theta, scaling, max_position_embeddings,
                                 seq_lens)
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
