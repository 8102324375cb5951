"""Hugging Face's M2M100ForConditionalGeneration (M2M100, NLLB-200), written from
transformers' modeling_m2m_100.py and configuration_m2m_100.py: `m2m100_config`
(M2M100Config's keys and defaults) and `M2M100Model`, whose state_dict() keys are the
tensor names save_pretrained writes.

THE MODEL. BART's layout, pre-norm, with a final LayerNorm per stack:
    x = embed(ids) * (sqrt(d_model) if scale_embedding else 1) + positions
    encoder layer:  x = x + self_attn(LN(x));  x = x + fc2(act(fc1(LN(x))))
    decoder layer:  x = x + causal self_attn(LN(x));  x = x + encoder_attn(LN(x), memory);
                    x = x + fc2(act(fc1(LN(x))))
    after the layers: x = layer_norm(x)        logits = x shared^T (no bias)
LayerNorm is nn.LayerNorm's (eps 1e-5); every projection has a bias; attention is
softmax(q k^T / sqrt(head_dim)) v with padded source keys masked.

POSITIONS. M2M100SinusoidalPositionalEmbedding: half = d/2, w_i = exp(-i ln(10000) /
(half - 1)), row p = [sin(p w_0..), cos(p w_0..)], computed in float32 as transformers
does; row padding_idx (= pad_token_id) is zero. A token's row is
create_position_ids_from_input_ids: padding_idx + (cumsum of ids != pad up to it, plus the
tokens before the call), and padding_idx for a pad token. The encoder reads its source in
one call. The decoder's rows are those of generate() with its cache, one call per token:
token t of the decoder input is at padding_idx + 1 + t unless it is pad (then the zero
row); with no pad in the decoder input this is the one-call cumsum as well, which is what
a teacher-forced forward computes.

EMBEDDINGS. One model.shared.weight [vocab_size, d_model] (M2M100ScaledWordEmbedding):
both stacks' embed_tokens and lm_head are tied to it and save_pretrained leaves them out;
the sinusoid table is a buffer that is not saved.
"""
from __future__ import annotations

import math
from typing import List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .marian import ACTIVATIONS, MarianAttention
from .seq2seq import Seq2SeqMixin

# M2M100Config's keys with their defaults, as save_pretrained writes them (with
# PretrainedConfig's tie_word_embeddings).
M2M100_DEFAULTS = {
    "vocab_size": 128112, "max_position_embeddings": 1024, "encoder_layers": 12, "encoder_ffn_dim": 4096,
    "encoder_attention_heads": 16, "decoder_layers": 12, "decoder_ffn_dim": 4096,
    "decoder_attention_heads": 16, "encoder_layerdrop": 0.05, "decoder_layerdrop": 0.05, "use_cache": True,
    "is_encoder_decoder": True, "activation_function": "relu", "d_model": 1024, "dropout": 0.1,
    "attention_dropout": 0.1, "activation_dropout": 0.0, "init_std": 0.02, "decoder_start_token_id": 2,
    "scale_embedding": True, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2,
    "tie_word_embeddings": True,
}


def m2m100_config(config: dict) -> dict:
    """config.json's keys over M2M100Config's defaults. Raises ValueError for what the
    model cannot run."""
    cfg = dict(M2M100_DEFAULTS, **config)
    cfg["model_type"] = "m2m_100"
    if cfg["activation_function"] not in ACTIVATIONS:
        raise ValueError(f"activation_function {cfg['activation_function']!r} is not one of {sorted(ACTIVATIONS)}")
    if not cfg["tie_word_embeddings"]:
        raise ValueError("the oracle's M2M100 ties its embeddings, as every published checkpoint")
    for side in ("encoder", "decoder"):
        if cfg["d_model"] % cfg[f"{side}_attention_heads"]:
            raise ValueError(f"d_model is not divisible by {side}_attention_heads")
    return cfg


def m2m100_table(rows: int, dim: int, padding_idx: int) -> Tensor:
    """M2M100SinusoidalPositionalEmbedding.get_embedding: [rows, dim] in float32, row
    padding_idx zero (see POSITIONS)."""
    half = dim // 2
    step = math.log(10000) / (half - 1)
    freq = torch.exp(torch.arange(half, dtype=torch.int64).float() * -step)
    angle = torch.arange(rows, dtype=torch.int64).float()[:, None] * freq[None, :]
    table = torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)
    if dim % 2:
        table = torch.cat([table, torch.zeros(rows, 1)], dim=1)
    table[padding_idx] = 0
    return table


def encoder_position_ids(ids: Tensor, padding_idx: int) -> Tensor:
    """create_position_ids_from_input_ids for one call from the start: [B, T]."""
    mask = ids.ne(padding_idx).int()
    return (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + padding_idx


def decoder_position_ids(ids: Tensor, padding_idx: int) -> Tensor:
    """The rows generate() reads with its cache, one token per call (see POSITIONS)."""
    mask = ids.ne(padding_idx).long()
    steps = torch.arange(1, ids.shape[1] + 1)[None, :]
    return steps * mask + padding_idx


class M2M100EncoderLayer(nn.Module):
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
        return x + self.fc2(self.act(self.fc1(self.final_layer_norm(x))))

    def forward(self, x: Tensor, padding: Optional[Tensor]) -> Tensor:
        h = self.self_attn_layer_norm(x)
        x = x + self.self_attn(h, h, padding, causal=False)
        return self.ffn(x)


class M2M100DecoderLayer(M2M100EncoderLayer):
    def __init__(self, cfg: dict):
        super().__init__(cfg, "decoder")
        d = cfg["d_model"]
        self.encoder_attn = MarianAttention(d, cfg["decoder_attention_heads"])
        self.encoder_attn_layer_norm = nn.LayerNorm(d)

    def forward(self, x: Tensor, memory: Tensor, src_padding: Optional[Tensor],
                tgt_padding: Optional[Tensor]) -> Tensor:
        h = self.self_attn_layer_norm(x)
        x = x + self.self_attn(h, h, tgt_padding, causal=True)
        x = x + self.encoder_attn(self.encoder_attn_layer_norm(x), memory, src_padding, causal=False)
        return self.ffn(x)


class M2M100Stack(nn.Module):
    def __init__(self, cfg: dict, side: str):
        super().__init__()
        layer = M2M100EncoderLayer if side == "encoder" else M2M100DecoderLayer
        self.layers = nn.ModuleList(layer(cfg) for _ in range(cfg[f"{side}_layers"]))
        self.layer_norm = nn.LayerNorm(cfg["d_model"])
        self.scale = math.sqrt(cfg["d_model"]) if cfg["scale_embedding"] else 1.0
        self.padding_idx = cfg["pad_token_id"]
        self.side = side

    def embed(self, ids: Tensor, table: Tensor) -> Tensor:
        rows = encoder_position_ids(ids, self.padding_idx) if self.side == "encoder" else \
            decoder_position_ids(ids, self.padding_idx)
        # transformers grows its table to whatever the call needs: no bound.
        sinusoids = m2m100_table(int(rows.max()) + 1, table.shape[1], self.padding_idx).to(table.dtype)
        return F.embedding(ids, table) * self.scale + sinusoids[rows]


class _M2M100Body(nn.Module):
    """The `model.` prefix of the tensor names."""

    def __init__(self, cfg: dict):
        super().__init__()
        self.shared = nn.Embedding(cfg["vocab_size"], cfg["d_model"])
        self.encoder = M2M100Stack(cfg, "encoder")
        self.decoder = M2M100Stack(cfg, "decoder")


class M2M100Model(Seq2SeqMixin, nn.Module):
    """M2M100ForConditionalGeneration for inference (see the module docstring)."""

    def __init__(self, config: dict):
        super().__init__()
        self.config = m2m100_config(config)
        self.model = _M2M100Body(self.config)

    def encode(self, src_ids: Tensor, src_padding: Optional[Tensor] = None) -> Tensor:
        enc = self.model.encoder
        x = enc.embed(src_ids, self.model.shared.weight)
        for layer in enc.layers:
            x = layer(x, src_padding)
        return enc.layer_norm(x)

    def decode(self, memory: Tensor, src_padding: Optional[Tensor], tgt_in_ids: Tensor,
               tgt_padding: Optional[Tensor] = None) -> Tensor:
        dec = self.model.decoder
        x = dec.embed(tgt_in_ids, self.model.shared.weight)
        for layer in dec.layers:
            x = layer(x, memory, src_padding, tgt_padding)
        return F.linear(dec.layer_norm(x), self.model.shared.weight)

    def forward(self, src_ids: Tensor, tgt_in_ids: Tensor, src_padding: Optional[Tensor] = None) -> Tensor:
        return self.decode(self.encode(src_ids, src_padding), src_padding, tgt_in_ids)

    @torch.no_grad()
    def translate(self, src_ids: Sequence[int], forced_bos_token_id: int,
                  max_length: int) -> Tuple[List[int], float]:
        """generate(num_beams=1, forced_bos_token_id=...) of one source: greedy from
        decoder_start_token_id, the first generated token forced (NLLB's target language),
        stopping after eos or max_length generated tokens. Returns the generated ids and
        the smallest top1 - top2 logit gap of the steps that were not forced."""
        was_training = self.training
        self.eval()
        try:
            memory = self.encode(torch.tensor([list(src_ids)], dtype=torch.long))
            tgt = [self.config["decoder_start_token_id"]]
            out: List[int] = []
            margin = math.inf
            for step in range(max_length):
                logits = self.decode(memory, None, torch.tensor([tgt], dtype=torch.long))[0, -1]
                if step == 0:
                    best = forced_bos_token_id
                else:
                    best = int(torch.argmax(logits))
                    top2 = torch.topk(logits, 2).values
                    margin = min(margin, float(top2[0] - top2[1]))
                out.append(best)
                tgt.append(best)
                if best == self.config["eos_token_id"]:
                    break
            return out, margin
        finally:
            self.train(was_training)
