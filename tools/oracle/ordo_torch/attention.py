"""Scaled dot-product attention, shared by both model families: ordo's multi-head
`Attention` layer, `explicit_attention` (the softmax written out, for rotary, biased and
grouped-query attention) and `repeat_kv` (grouped-query attention's K/V heads, each
serving a group of query heads)."""
from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .positions import rope_rotate


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
        """rope: (theta, layout, offset[, rope_scaling, max_position_embeddings, seq_lens
        (None, or [B, T]: the sequence length each row's frequencies are those of; see
        rope_rotate)]) to rotate q and k of a self-attention; bias
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
            theta, layout, offset = rope[:3]  # the scaling part is optional
            scaling, max_positions, seq_lens = rope[3:] if len(rope) > 3 else (None, 0, None)
            q = rope_rotate(q, offset + torch.arange(q.shape[2]), theta, layout, scaling,
                            max_positions, seq_lens)
            k = rope_rotate(k, offset + torch.arange(k.shape[2]), theta, layout, scaling,
                            max_positions, seq_lens)
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
