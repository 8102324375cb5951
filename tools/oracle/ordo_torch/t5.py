"""Hugging Face's T5ForConditionalGeneration (t5, T5 v1.1, Flan-T5, mT5), written from
transformers' modeling_t5.py and configuration_t5.py / configuration_mt5.py:
`t5_config` (T5Config's and MT5Config's keys and defaults) and `T5ForConditionalGeneration`,
whose state_dict() keys are the tensor names save_pretrained writes.

THE MODEL. Pre-norm, no biases anywhere, T5LayerNorm (RMS: x / sqrt(mean(x^2) + eps) *
weight, no mean, no bias), no position vectors and no embedding scaling:
    x = shared[ids]
    encoder block:  x = x + SelfAttention(LN(x), bias_enc);  x = x + FF(LN(x))
    decoder block:  x = x + SelfAttention(LN(x), bias_dec + causal mask);
                    x = x + EncDecAttention(LN(x), memory);  x = x + FF(LN(x))
    each stack ends with final_layer_norm
    logits = lm_head(x * d_model^-0.5) when tie_word_embeddings (lm_head is shared), else
             lm_head(x) with its own weight
Attention: q, k, v are Linear(d_model, num_heads * d_kv) (the inner width need not be
d_model), o is Linear(inner, d_model); scores = q k^T with NO 1/sqrt(d_kv) factor (T5
folds it into the initialisation), + position bias, + mask, softmax, times v.
FF (feed_forward_proj "ACT" or "gated-ACT"; "gated-gelu" means gelu_new):
    plain  DenseReluDense.wo(act(wi(x)))
    gated  DenseReluDense.wo(act(wi_0(x)) * wi_1(x))

RELATIVE POSITION BIAS. Block 0 of each stack holds relative_attention_bias, an
Embedding(num_buckets, num_heads); the bias it computes for the stack's length is added to
the self-attention scores of every block of the stack. For query i and key j,
relative_position = j - i is bucketed (_relative_position_bucket): bidirectional in the
encoder (half the buckets per side, keys after the query in the upper half, |rp|),
unidirectional in the decoder (-min(rp, 0): later keys in bucket 0); within a side,
distances below max_exact = side buckets / 2 are their own bucket, larger ones
max_exact + floor(log(d / max_exact) / log(max_distance / max_exact) * (side buckets -
max_exact)) computed in float32, capped at the side's last bucket. Cross-attention has no
bias.

EMBEDDINGS. One shared.weight [vocab_size, d_model]; encoder.embed_tokens and
decoder.embed_tokens are that same module, so save_pretrained leaves their keys out (as it
leaves lm_head.weight out when tied); files converted by older tools hold them as copies:
`embed_copies_in_file` makes them parameters that load and save (and are read by nothing).

Generation is Seq2SeqMixin's: the decoder starts from decoder_start_token_id (= pad = 0 in
every T5 checkpoint) and stops at eos_token_id (1).
"""
from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .marian import gelu_new
from .seq2seq import Seq2SeqMixin

# T5Config's keys with their defaults, as save_pretrained writes them (dense_act_fn and
# is_gated_act are what T5Config derives from feed_forward_proj; PretrainedConfig adds
# tie_word_embeddings, decoder_start_token_id).
T5_DEFAULTS = {
    "vocab_size": 32128, "d_model": 512, "d_kv": 64, "d_ff": 2048, "num_layers": 6,
    "num_decoder_layers": None, "num_heads": 8, "relative_attention_num_buckets": 32,
    "relative_attention_max_distance": 128, "dropout_rate": 0.1, "classifier_dropout": 0.0,
    "layer_norm_epsilon": 1e-6, "initializer_factor": 1.0, "feed_forward_proj": "relu",
    "is_encoder_decoder": True, "use_cache": True, "pad_token_id": 0, "eos_token_id": 1,
    "decoder_start_token_id": None, "tie_word_embeddings": True,
}
# MT5Config's own defaults over T5Config's.
MT5_DEFAULTS = dict(T5_DEFAULTS, vocab_size=250112, d_ff=1024, num_layers=8, num_heads=6,
                    feed_forward_proj="gated-gelu", tie_word_embeddings=False,
                    decoder_start_token_id=0, tokenizer_class="T5Tokenizer")

ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "gelu_new": gelu_new, "gelu_pytorch_tanh": gelu_new,
               "silu": F.silu, "swish": F.silu}


def t5_config(config: dict) -> dict:
    """config.json's keys over T5Config's defaults (MT5Config's for model_type "mt5"), with
    num_decoder_layers, decoder_start_token_id, dense_act_fn and is_gated_act resolved as
    the config classes resolve them. Raises ValueError for a feed_forward_proj that is not
    "ACT" or "gated-ACT" with an activation computed here."""
    model_type = config.get("model_type", "t5")
    cfg = dict(MT5_DEFAULTS if model_type == "mt5" else T5_DEFAULTS, **config)
    cfg["model_type"] = model_type
    if cfg["num_decoder_layers"] is None:
        cfg["num_decoder_layers"] = cfg["num_layers"]
    if cfg["decoder_start_token_id"] is None:
        cfg["decoder_start_token_id"] = cfg["pad_token_id"]
    parts = cfg["feed_forward_proj"].split("-")
    if (len(parts) > 1 and parts[0] != "gated") or len(parts) > 2:
        raise ValueError(f"feed_forward_proj {cfg['feed_forward_proj']!r} is not ACT or gated-ACT")
    act = "gelu_new" if cfg["feed_forward_proj"] == "gated-gelu" else parts[-1]
    if act not in ACTIVATIONS:
        raise ValueError(f"activation {act!r} is not one of {sorted(ACTIVATIONS)}")
    cfg["dense_act_fn"], cfg["is_gated_act"] = act, parts[0] == "gated"
    return cfg


def relative_position_bucket(relative_position: Tensor, bidirectional: bool, num_buckets: int,
                             max_distance: int) -> Tensor:
    """T5Attention._relative_position_bucket (see RELATIVE POSITION BIAS)."""
    buckets = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (relative_position > 0).long() * num_buckets
        distance = relative_position.abs()
    else:
        distance = -torch.minimum(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    large = max_exact + (torch.log(distance.to(torch.float32) / max_exact)
                         / math.log(max_distance / max_exact) * (num_buckets - max_exact)).long()
    large = torch.minimum(large, torch.full_like(large, num_buckets - 1))
    return buckets + torch.where(is_small, distance, large)


class T5LayerNorm(nn.Module):
    """RMS norm without mean or bias, the variance in float32 or wider."""

    def __init__(self, d: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        x = x.to(torch.promote_types(x.dtype, torch.float32))
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


class T5Attention(nn.Module):
    def __init__(self, cfg: dict, has_bias_table: bool, bidirectional: bool):
        super().__init__()
        d, self.heads, self.d_kv = cfg["d_model"], cfg["num_heads"], cfg["d_kv"]
        inner = self.heads * self.d_kv
        self.q = nn.Linear(d, inner, bias=False)
        self.k = nn.Linear(d, inner, bias=False)
        self.v = nn.Linear(d, inner, bias=False)
        self.o = nn.Linear(inner, d, bias=False)
        if has_bias_table:
            self.relative_attention_bias = nn.Embedding(cfg["relative_attention_num_buckets"], self.heads)
        self.bidirectional = bidirectional
        self.num_buckets = cfg["relative_attention_num_buckets"]
        self.max_distance = cfg["relative_attention_max_distance"]

    def compute_bias(self, query_length: int, key_length: int) -> Tensor:
        """[1, heads, query_length, key_length] from this block's table."""
        context = torch.arange(query_length)[:, None]
        memory = torch.arange(key_length)[None, :]
        buckets = relative_position_bucket(memory - context, self.bidirectional, self.num_buckets,
                                           self.max_distance)
        return self.relative_attention_bias(buckets).permute(2, 0, 1)[None]

    def forward(self, x: Tensor, keys: Tensor, bias: Tensor) -> Tensor:
        """bias [B or 1, heads, T, S]: position bias plus mask (-inf where masked)."""
        B, T, _ = x.shape

        def split(t: Tensor) -> Tensor:  # [B, L, inner] -> [B, heads, L, d_kv]
            return t.view(B, t.shape[1], self.heads, self.d_kv).transpose(1, 2)

        scores = torch.matmul(split(self.q(x)), split(self.k(keys)).transpose(3, 2)) + bias
        weights = torch.softmax(scores, dim=-1)
        out = torch.matmul(weights, split(self.v(keys)))
        return self.o(out.transpose(1, 2).reshape(B, T, self.heads * self.d_kv))


class _SelfAttentionLayer(nn.Module):  # T5LayerSelfAttention
    def __init__(self, cfg: dict, has_bias_table: bool, bidirectional: bool):
        super().__init__()
        self.SelfAttention = T5Attention(cfg, has_bias_table, bidirectional)
        self.layer_norm = T5LayerNorm(cfg["d_model"], cfg["layer_norm_epsilon"])

    def forward(self, x: Tensor, bias: Tensor) -> Tensor:
        h = self.layer_norm(x)
        return x + self.SelfAttention(h, h, bias)


class _CrossAttentionLayer(nn.Module):  # T5LayerCrossAttention
    def __init__(self, cfg: dict):
        super().__init__()
        self.EncDecAttention = T5Attention(cfg, False, True)
        self.layer_norm = T5LayerNorm(cfg["d_model"], cfg["layer_norm_epsilon"])

    def forward(self, x: Tensor, memory: Tensor, mask: Tensor) -> Tensor:
        return x + self.EncDecAttention(self.layer_norm(x), memory, mask)


class _DenseActDense(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        d, ff = cfg["d_model"], cfg["d_ff"]
        if cfg["is_gated_act"]:
            self.wi_0 = nn.Linear(d, ff, bias=False)
            self.wi_1 = nn.Linear(d, ff, bias=False)
        else:
            self.wi = nn.Linear(d, ff, bias=False)
        self.wo = nn.Linear(ff, d, bias=False)
        self.act = ACTIVATIONS[cfg["dense_act_fn"]]

    def forward(self, x: Tensor) -> Tensor:
        if hasattr(self, "wi_0"):
            return self.wo(self.act(self.wi_0(x)) * self.wi_1(x))
        return self.wo(self.act(self.wi(x)))


class _FeedForwardLayer(nn.Module):  # T5LayerFF
    def __init__(self, cfg: dict):
        super().__init__()
        self.DenseReluDense = _DenseActDense(cfg)
        self.layer_norm = T5LayerNorm(cfg["d_model"], cfg["layer_norm_epsilon"])

    def forward(self, x: Tensor) -> Tensor:
        return x + self.DenseReluDense(self.layer_norm(x))


class T5Block(nn.Module):
    def __init__(self, cfg: dict, first: bool, decoder: bool):
        super().__init__()
        layers = [_SelfAttentionLayer(cfg, first, not decoder)]
        if decoder:
            layers.append(_CrossAttentionLayer(cfg))
        layers.append(_FeedForwardLayer(cfg))
        self.layer = nn.ModuleList(layers)


class _Copy(nn.Module):
    """A stack's embed_tokens as an older file holds it: a copy, read by nothing."""

    def __init__(self, vocab: int, d: int):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(vocab, d))


class T5Stack(nn.Module):
    def __init__(self, cfg: dict, decoder: bool, embed_copy: bool):
        super().__init__()
        if embed_copy:
            self.embed_tokens = _Copy(cfg["vocab_size"], cfg["d_model"])
        n = cfg["num_decoder_layers"] if decoder else cfg["num_layers"]
        self.block = nn.ModuleList(T5Block(cfg, i == 0, decoder) for i in range(n))
        self.final_layer_norm = T5LayerNorm(cfg["d_model"], cfg["layer_norm_epsilon"])
        self.decoder = decoder

    def forward(self, x: Tensor, padding: Optional[Tensor], memory: Optional[Tensor] = None,
                memory_padding: Optional[Tensor] = None) -> Tensor:
        B, T = x.shape[0], x.shape[1]
        table = self.block[0].layer[0].SelfAttention
        bias = table.compute_bias(T, T).to(x.dtype)  # [1, H, T, T], shared by every block
        masked = torch.zeros(B, 1, T, T, dtype=torch.bool)
        if padding is not None:
            masked = masked | padding[:, None, None, :]
        if self.decoder:
            masked = masked | torch.ones(T, T, dtype=torch.bool).triu(1)[None, None]
        bias = bias.masked_fill(masked, float("-inf"))
        cross = None
        if memory is not None:
            S = memory.shape[1]
            cross = torch.zeros(B, 1, T, S, dtype=x.dtype)
            if memory_padding is not None:
                cross = cross.masked_fill(memory_padding[:, None, None, :], float("-inf"))
        for block in self.block:
            x = block.layer[0](x, bias)
            if self.decoder:
                x = block.layer[1](x, memory, cross)
            x = block.layer[-1](x)
        return self.final_layer_norm(x)


class T5ForConditionalGeneration(Seq2SeqMixin, nn.Module):
    """T5ForConditionalGeneration for inference (see the module docstring)."""

    def __init__(self, config: dict, embed_copies_in_file: bool = False):
        super().__init__()
        self.config = t5_config(config)
        cfg = self.config
        if not cfg["is_encoder_decoder"]:
            raise ValueError("T5ForConditionalGeneration is an encoder-decoder")
        self.shared = nn.Embedding(cfg["vocab_size"], cfg["d_model"])
        self.encoder = T5Stack(cfg, False, embed_copies_in_file)
        self.decoder = T5Stack(cfg, True, embed_copies_in_file)
        if not cfg["tie_word_embeddings"]:
            self.lm_head = nn.Linear(cfg["d_model"], cfg["vocab_size"], bias=False)

    @property
    def embed_copies_in_file(self) -> bool:
        return hasattr(self.encoder, "embed_tokens")

    def encode(self, src_ids: Tensor, src_padding: Optional[Tensor] = None) -> Tensor:
        return self.encoder(F.embedding(src_ids, self.shared.weight), src_padding)

    def decode(self, memory: Tensor, src_padding: Optional[Tensor], tgt_in_ids: Tensor,
               tgt_padding: Optional[Tensor] = None) -> Tensor:
        x = self.decoder(F.embedding(tgt_in_ids, self.shared.weight), tgt_padding, memory, src_padding)
        if self.config["tie_word_embeddings"]:
            return F.linear(x * self.config["d_model"] ** -0.5, self.shared.weight)
        return self.lm_head(x)

    def forward(self, src_ids: Tensor, tgt_in_ids: Tensor,
                src_padding: Optional[Tensor] = None) -> Tensor:
        return self.decode(self.encode(src_ids, src_padding), src_padding, tgt_in_ids)
