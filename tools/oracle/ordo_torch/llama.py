"""LLaMA as Hugging Face's LlamaForCausalLM lays it out (`LlamaModel`; config:
`llama_config`; tensor names: LlamaModel's docstring), written from its formulas:
RMSNorm, SwiGLU, RoPE in the half (rotate_half) layout from position 0 (with the
config's rope_scaling, positions.rope_inv_freq), grouped-query attention."""
from __future__ import annotations

from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .attention import explicit_attention, repeat_kv
from .config import llama_config
from .positions import rope_rotate
from .search import GenerationMixin


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
        self.scaling, self.max_positions = cfg["rope_scaling"], cfg["max_position_embeddings"]
        self.q_proj = nn.Linear(hidden, self.heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, hidden, bias=bias)

    def forward(self, x: Tensor, padding: Optional[Tensor],
                rope_lengths: Optional[Tensor] = None) -> Tensor:
        B, T, _ = x.shape

        def split(t: Tensor, heads: int) -> Tensor:
            return t.view(B, T, heads, self.head_dim).transpose(1, 2)

        q = split(self.q_proj(x), self.heads)
        k = split(self.k_proj(x), self.kv_heads)
        v = split(self.v_proj(x), self.kv_heads)
        positions = torch.arange(T)
        q = rope_rotate(q, positions, self.theta, "half", self.scaling, self.max_positions,
                        rope_lengths)
        k = rope_rotate(k, positions, self.theta, "half", self.scaling, self.max_positions,
                        rope_lengths)
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

    def forward(self, h: Tensor, padding: Optional[Tensor],
                rope_lengths: Optional[Tensor] = None) -> Tensor:
        h = h + self.self_attn(self.input_layernorm(h), padding, rope_lengths)
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

    def lm_logits(self, ids: Tensor, padding: Optional[Tensor] = None,
                  rope_lengths: Optional[Tensor] = None) -> Tensor:
        """Logits [B, T, V] for ids [B, T] (positions 0..T-1); padding [B, T], True = pad.
        rope_lengths [B, T]: with rope_scaling, the sequence length row t's frequencies
        are those of (rope_rotate's seq_lens; None: T, one pass)."""
        table = self.model.embed_tokens.weight
        h = F.embedding(ids, table)
        for layer in self.model.layers:
            h = layer(h, padding, rope_lengths)
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
