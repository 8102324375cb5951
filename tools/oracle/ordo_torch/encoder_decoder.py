"""ordo's model format in PyTorch (`OrdoModel`): an encoder-decoder, or with
encoder_layers 0 a decoder-only language model, with its layers and stacks.

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
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .attention import Attention
from .config import full_config, kv_heads
from .positions import alibi_bias, sinusoidal_positions, t5_relative_position_bucket
from .search import GenerationMixin
from .seq2seq import Seq2SeqMixin


def _layer_norm(x: Tensor, ln: nn.LayerNorm) -> Tensor:
    return F.layer_norm(x, ln.normalized_shape, ln.weight, ln.bias, ln.eps)


_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "swish": F.silu}


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

    def rope(self, seq_lens: Optional[Tensor] = None):
        """The self-attention's rope argument (attention.py), or None; seq_lens [B, T]:
        tokens of the sequence when row t was computed (None: one pass over the whole
        input), position_offset added here."""
        c = self.cfg
        if c["position_encoding"] != "rope":
            return None
        if seq_lens is not None:  # tokens -> positions: the last position + 1
            seq_lens = seq_lens + c["position_offset"]
        return (c["rope_theta"], c["rope_layout"], c["position_offset"], c.get("rope_scaling"),
                c["max_position_embeddings"], seq_lens)

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


@torch.no_grad()
def init_modules(model: nn.Module, std: float) -> None:
    """The training init of every module, in module order: Xavier-uniform linear weights,
    zero biases, N(0, std) embeddings, LayerNorm 1/0 (the shipped models' and the toy
    Hugging Face layouts' alike)."""
    for m in model.modules():
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            if m.bias is not None:
                m.bias.zero_()
        elif isinstance(m, nn.Embedding):
            m.weight.normal_(0.0, std)
        elif isinstance(m, nn.LayerNorm):
            m.weight.fill_(1.0)
            m.bias.zero_()


class OrdoModel(Seq2SeqMixin, GenerationMixin, nn.Module):
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
        init_modules(self, std)
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
               tgt_padding: Optional[Tensor] = None,
               rope_lengths: Optional[Tensor] = None) -> Tensor:
        """Logits [B, T, V] for decoder inputs [B, T] (causal), given encoder output (None
        for a decoder-only model). tgt_padding [B, T] (True = pad) masks padded decoder
        inputs as self-attention keys. rope_lengths [B, T]: with rope_scaling, the
        sequence length each row is rotated for (rope_rotate's seq_lens; None: the
        padded length)."""
        dec = self.model.decoder
        table = self.model.decoder_embeddings()
        x = dec.embed(tgt_in_ids, table)
        rope, bias = dec.rope(rope_lengths), dec.score_bias(tgt_in_ids.shape[1])
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

    def lm_logits(self, ids: Tensor, padding: Optional[Tensor] = None,
                  rope_lengths: Optional[Tensor] = None) -> Tensor:
        """A decoder-only model's logits [B, T, V] for inputs [B, T]: the decoder with no
        cross-attention, positions position_offset + t. padding [B, T], True = pad;
        rope_lengths as decode takes them."""
        if not self.decoder_only:
            raise ValueError("lm_logits needs a decoder-only model (encoder_layers 0); "
                             "an encoder-decoder decodes with decode/greedy/beam_search")
        return self.decode(None, None, ids, padding, rope_lengths)

    @property
    def eos_ids(self) -> Tuple[int, ...]:
        return (self.config["eos_token_id"],)

    @property
    def lm_pad_id(self) -> int:
        return self.config["pad_token_id"]
