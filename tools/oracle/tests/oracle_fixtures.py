"""What the oracle's tests share: torch computing in float64 on one thread (set when this
is imported, so every test module imports it), the small configs, and models with large
random weights."""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tools/oracle: ordo_torch
from ordo_torch import LlamaModel, OrdoModel  # noqa: E402

torch.set_num_threads(1)
# The oracle computes in float64 (ordo_torch's DTYPES): every model and tensor these tests
# make does too, so that comparing two of the oracle's own computations (batched and
# single, beam and brute force) gives the same answer on every CPU, to ~1e-13. Tests of
# the float32 path the trainer and the speed peer use say float32 explicitly.
torch.set_default_dtype(torch.float64)

BASE = dict(vocab_size=40, d_model=16, encoder_layers=2, decoder_layers=2,
            encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
            decoder_ffn_dim=32, max_position_embeddings=32, pad_token_id=0, eos_token_id=1,
            decoder_start_token_id=0)

POSITION_VARIANTS = {
    "sinusoidal": dict(position_encoding="sinusoidal"),
    "sinusoidal-split": dict(position_encoding="sinusoidal", sinusoidal_layout="split"),
    "sinusoidal-t2t": dict(position_encoding="sinusoidal", sinusoidal_frequencies="tensor2tensor"),
    "learned": dict(position_encoding="learned", position_offset=2),
    "rope-half": dict(position_encoding="rope", position_offset=3),
    "rope-interleaved": dict(position_encoding="rope", rope_layout="interleaved"),
    "none": dict(position_encoding="none"),
    "alibi": dict(position_encoding="alibi", position_offset=1),
    "t5_relative": dict(position_encoding="t5_relative", relative_attention_num_buckets=8,
                        relative_attention_max_distance=6),
}


def random_model(seed=0, bias=False, base=None, **overrides) -> OrdoModel:
    """A model with large random weights (outputs far from degenerate)."""
    torch.manual_seed(seed)
    model = OrdoModel(dict(BASE if base is None else base, **overrides),
                      final_logits_bias=bias).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.2 * torch.randn(p.shape))
            else:
                p.copy_(0.4 * torch.randn(p.shape))
    return model


def close(a: float, b: float, rel: float) -> bool:
    return abs(a - b) <= rel * max(1.0, abs(a), abs(b))


# ----------------------------------------------------------------------------------------
# Generation models: decoder-only ordo, grouped-query attention, LLaMA
# ----------------------------------------------------------------------------------------

LM = dict(vocab_size=40, d_model=16, encoder_layers=0, decoder_layers=2,
          decoder_attention_heads=4, decoder_ffn_dim=32, max_position_embeddings=32,
          pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)

LLAMA = dict(model_type="llama", vocab_size=30, hidden_size=16, intermediate_size=24,
             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             bos_token_id=2, eos_token_id=1, pad_token_id=0)

# LlamaModelTest's variants; GenerationBatchTest (test_search.py) runs them too.
LLAMA_VARIANTS = {
    "kv2-untied": {},
    "kv1-tied-bias": dict(num_key_value_heads=1, tie_word_embeddings=True,
                          attention_bias=True, mlp_bias=True),
    "kv4-headdim6-eos2": dict(num_key_value_heads=4, head_dim=6, eos_token_id=[1, 3],
                              rope_theta=100.0, rms_norm_eps=1e-5),
}


def random_lm(seed=0, bias=False, **overrides) -> OrdoModel:
    """A decoder-only ordo model with large random weights."""
    return random_model(seed, bias, base=LM, **overrides)


def random_llama(seed=0, **overrides) -> LlamaModel:
    """A LLaMA model with large random weights (embeddings N(0, 1), norms 1 + N(0, 0.2),
    the rest N(0, 0.4))."""
    model = LlamaModel(dict(LLAMA, **overrides)).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.4 * torch.randn(p.shape, generator=g))
    return model
