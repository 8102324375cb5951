"""The positional schemes, written from their formulas: sinusoidal tables, rotary
embeddings (RoPE), ALiBi's slopes and biases, T5's relative-position buckets. Tables and
angles are computed in float64 and rounded once to the caller's dtype; T5's bucket index
is computed in float32, as T5 defines it."""
from __future__ import annotations

import math
from typing import List, Tuple

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
