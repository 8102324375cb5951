"""Hugging Face's MarianMTModel (the opus-mt checkpoints), written from transformers'
modeling_marian.py and configuration_marian.py: `marian_config` (MarianConfig's keys and
defaults) and `MarianMTModel`, whose state_dict() keys are the tensor names
save_pretrained writes.

THE MODEL. BART's layout without its embedding norm, post-norm:
    x = embed_tokens(ids) * (sqrt(d_model) if scale_embedding else 1) + positions
    encoder layer:  x = LN(x + self_attn(x));  x = LN(x + fc2(act(fc1(x))))
    decoder layer:  x = LN(x + causal self_attn(x));  x = LN(x + encoder_attn(x, memory));
                    x = LN(x + fc2(act(fc1(x))))
    logits = x lm_head^T + final_logits_bias
LayerNorm is nn.LayerNorm's (eps 1e-5, weight and bias); every projection has a bias;
attention is softmax(q k^T / sqrt(head_dim)) v with padded source keys masked.
act is ACT2FN[activation_function]: gelu (erf form), relu, swish = silu, gelu_new =
gelu_pytorch_tanh (the tanh approximation).

POSITIONS. MarianSinusoidalPositionalEmbedding: a table [max_position_embeddings,
d_model] with angle(p, j) = p / 10000^(2 floor(j/2) / d); the first d/2 columns are
sin of the even j, the last d/2 cos of the odd j (no interleaving); step t of a
sequence reads row t. transformers computes it in float64 and stores it as float32
(torch.FloatTensor), so it is rounded to float32 here too. When the checkpoint holds
model.{encoder,decoder}.embed_positions.weight (save_pretrained wrote it before
transformers 4.3x), transformers loads those values into the table: `positions_in_file`
makes them parameters that load and save like any other.

EMBEDDINGS. share_encoder_decoder_embeddings (default true): one model.shared.weight
[vocab_size, d_model] for both stacks; false: model.encoder.embed_tokens.weight and
model.decoder.embed_tokens.weight, both [vocab_size, d_model] (MarianModel deep-copies the
shared table, so the decoder's has vocab_size rows too). tie_word_embeddings (default
true): the logits use the decoder's input table and no lm_head.weight is saved; false:
lm_head.weight [vocab_size, d_model]. final_logits_bias [1, vocab_size] is always saved.

Generation (greedy, scores, beam search, batches) is Seq2SeqMixin's: the decoder starts
from decoder_start_token_id (= pad_token_id in every Marian checkpoint) and stops at
eos_token_id.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .attention import explicit_attention
from .seq2seq import Seq2SeqMixin

# MarianConfig's keys with their defaults, as save_pretrained writes them (with
# PretrainedConfig's tie_word_embeddings and bos_token_id).
MARIAN_DEFAULTS = {
    "vocab_size": 58101, "decoder_vocab_size": None, "max_position_embeddings": 1024,
    "encoder_layers": 12, "encoder_ffn_dim": 4096, "encoder_attention_heads": 16,
    "decoder_layers": 12, "decoder_ffn_dim": 4096, "decoder_attention_heads": 16,
    "encoder_layerdrop": 0.0, "decoder_layerdrop": 0.0, "use_cache": True,
    "is_encoder_decoder": True, "activation_function": "gelu", "d_model": 1024,
    "dropout": 0.1, "attention_dropout": 0.0, "activation_dropout": 0.0, "init_std": 0.02,
    "decoder_start_token_id": 58100, "scale_embedding": False, "pad_token_id": 58100,
    "eos_token_id": 0, "forced_eos_token_id": 0, "share_encoder_decoder_embeddings": True,
    "tie_word_embeddings": True, "bos_token_id": None,
}
def gelu_new(x: Tensor) -> Tensor:
    """transformers' NewGELUActivation: GELU's tanh approximation (Hendrycks & Gimpel)."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


ACTIVATIONS = {"gelu": F.gelu, "relu": F.relu, "swish": F.silu, "silu": F.silu, "gelu_new": gelu_new,
               "gelu_pytorch_tanh": gelu_new}


def marian_config(config: dict) -> dict:
    """config.json's keys over MarianConfig's defaults; decoder_vocab_size None means
    vocab_size. Raises ValueError for what MarianMTModel cannot run."""
    cfg = dict(MARIAN_DEFAULTS, **config)
    cfg["model_type"] = "marian"
    if cfg["decoder_vocab_size"] is None:
        cfg["decoder_vocab_size"] = cfg["vocab_size"]
    if cfg["activation_function"] not in ACTIVATIONS:
        raise ValueError(f"activation_function {cfg['activation_function']!r} is not one of "
                         f"{sorted(ACTIVATIONS)}")
    for side in ("encoder", "decoder"):
        if cfg["d_model"] % cfg[f"{side}_attention_heads"]:
            raise ValueError(f"d_model is not divisible by {side}_attention_heads")
    return cfg


def marian_positions(n_positions: int, dim: int) -> Tensor:
    """MarianSinusoidalPositionalEmbedding's table [n_positions, dim] (see POSITIONS),
    rounded to float32 as transformers stores it, returned in float64."""
    j = np.arange(dim)
    angle = np.arange(n_positions)[:, None] / np.power(10000.0, 2 * (j // 2) / dim)[None, :]
    half = dim // 2 + dim % 2
    table = np.empty((n_positions, dim))
    table[:, :half] = np.sin(angle[:, 0::2])
    table[:, half:] = np.cos(angle[:, 1::2])
    return torch.from_numpy(table).to(torch.float32).to(torch.float64)


class MarianAttention(nn.Module):
    def __init__(self, d_model: int, heads: int):
        super().__init__()
        self.heads = heads
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.q_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor, keys: Tensor, key_padding: Optional[Tensor], causal: bool) -> Tensor:
        B, T, D = x.shape

        def split(t: Tensor) -> Tensor:  # [B, L, D] -> [B, heads, L, D / heads]
            return t.view(B, t.shape[1], self.heads, D // self.heads).transpose(1, 2)

        out = explicit_attention(split(self.q_proj(x)), split(self.k_proj(keys)),
                                 split(self.v_proj(keys)), key_padding, causal)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, D))


class MarianEncoderLayer(nn.Module):
    def __init__(self, cfg: dict, side: str = "encoder"):
        super().__init__()
        d = cfg["d_model"]
        self.self_attn = MarianAttention(d, cfg[f"{side}_attention_heads"])
        self.self_attn_layer_norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, cfg[f"{side}_ffn_dim"])
        self.fc2 = nn.Linear(cfg[f"{side}_ffn_dim"], d)
        self.final_layer_norm = nn.LayerNorm(d)
        self.act = ACTIVATIONS[cfg["activation_function"]]

    def ffn(self, x: Tensor) -> Tensor:
        return self.final_layer_norm(x + self.fc2(self.act(self.fc1(x))))

    def forward(self, x: Tensor, padding: Optional[Tensor]) -> Tensor:
        x = self.self_attn_layer_norm(x + self.self_attn(x, x, padding, causal=False))
        return self.ffn(x)


class MarianDecoderLayer(MarianEncoderLayer):
    def __init__(self, cfg: dict):
        super().__init__(cfg, "decoder")
        d = cfg["d_model"]
        self.encoder_attn = MarianAttention(d, cfg["decoder_attention_heads"])
        self.encoder_attn_layer_norm = nn.LayerNorm(d)

    def forward(self, x: Tensor, memory: Tensor, src_padding: Optional[Tensor],
                tgt_padding: Optional[Tensor]) -> Tensor:
        x = self.self_attn_layer_norm(x + self.self_attn(x, x, tgt_padding, causal=True))
        x = self.encoder_attn_layer_norm(x + self.encoder_attn(x, memory, src_padding, causal=False))
        return self.ffn(x)


class _Table(nn.Module):
    """A stored sinusoid table: `weight` is model.{stack}.embed_positions.weight."""

    def __init__(self, rows: int, dim: int):
        super().__init__()
        self.weight = nn.Parameter(marian_positions(rows, dim))


class MarianStack(nn.Module):
    def __init__(self, cfg: dict, side: str, own_embeddings: bool, positions_in_file: bool):
        super().__init__()
        d = cfg["d_model"]
        if own_embeddings:
            self.embed_tokens = nn.Embedding(cfg["vocab_size"], d)
        if positions_in_file:
            self.embed_positions = _Table(cfg["max_position_embeddings"], d)
        layer = MarianEncoderLayer if side == "encoder" else MarianDecoderLayer
        self.layers = nn.ModuleList(layer(cfg) for _ in range(cfg[f"{side}_layers"]))
        self.scale = math.sqrt(d) if cfg["scale_embedding"] else 1.0
        self.n_positions = cfg["max_position_embeddings"]

    def embed(self, ids: Tensor, table: Tensor) -> Tensor:
        T = ids.shape[1]
        if T > self.n_positions:
            raise ValueError(f"{T} tokens, more than max_position_embeddings={self.n_positions}")
        if hasattr(self, "embed_positions"):
            positions = self.embed_positions.weight[:T]
        else:
            positions = marian_positions(self.n_positions, table.shape[1])[:T].to(table.dtype)
        return F.embedding(ids, table) * self.scale + positions


class _MarianBody(nn.Module):
    """The `model.` prefix of the tensor names."""

    def __init__(self, cfg: dict, positions_in_file: bool):
        super().__init__()
        shared = cfg["share_encoder_decoder_embeddings"]
        if shared:
            self.shared = nn.Embedding(cfg["vocab_size"], cfg["d_model"])
        self.encoder = MarianStack(cfg, "encoder", not shared, positions_in_file)
        self.decoder = MarianStack(cfg, "decoder", not shared, positions_in_file)

    def table(self, side: str) -> Tensor:
        if hasattr(self, "shared"):
            return self.shared.weight
        return getattr(self, side).embed_tokens.weight


class MarianMTModel(Seq2SeqMixin, nn.Module):
    """MarianMTModel for inference (see the module docstring). `positions_in_file`: the
    sinusoid tables are parameters (saved, loaded) instead of computed."""

    def __init__(self, config: dict, positions_in_file: bool = False):
        super().__init__()
        self.config = marian_config(config)
        cfg = self.config
        if cfg["decoder_vocab_size"] != cfg["vocab_size"]:
            raise ValueError("MarianMTModel's decoder table has vocab_size rows: decoder_vocab_size "
                             "must equal vocab_size")
        self.model = _MarianBody(cfg, positions_in_file)
        if not cfg["tie_word_embeddings"]:
            self.lm_head = nn.Linear(cfg["d_model"], cfg["vocab_size"], bias=False)
        self.final_logits_bias = nn.Parameter(torch.zeros(1, cfg["vocab_size"]))

    @property
    def positions_in_file(self) -> bool:
        return hasattr(self.model.encoder, "embed_positions")

    def encode(self, src_ids: Tensor, src_padding: Optional[Tensor] = None) -> Tensor:
        enc = self.model.encoder
        x = enc.embed(src_ids, self.model.table("encoder"))
        for layer in enc.layers:
            x = layer(x, src_padding)
        return x

    def decode(self, memory: Tensor, src_padding: Optional[Tensor], tgt_in_ids: Tensor,
               tgt_padding: Optional[Tensor] = None) -> Tensor:
        dec = self.model.decoder
        table = self.model.table("decoder")
        x = dec.embed(tgt_in_ids, table)
        for layer in dec.layers:
            x = layer(x, memory, src_padding, tgt_padding)
        head = self.lm_head.weight if hasattr(self, "lm_head") else table
        return F.linear(x, head) + self.final_logits_bias

    def forward(self, src_ids: Tensor, tgt_in_ids: Tensor,
                src_padding: Optional[Tensor] = None) -> Tensor:
        return self.decode(self.encode(src_ids, src_padding), src_padding, tgt_in_ids)
