"""The ordo model format in PyTorch: the independent oracle for the C++ engine, and the
trainer's model; and the Hugging Face LLaMA layout, as published.

A model directory holds `config.json` (see `full_config`) and `model.safetensors`, whose
tensor names are exactly the `state_dict()` keys of `OrdoModel`. The forward pass is
written from the format's definition with torch's own building blocks
(F.multi_head_attention_forward, F.layer_norm, F.linear, ...); sinusoids and rotary
embeddings are written from their formulas, in float64, rounded once to the model's dtype.

MODULES, one job each; this package re-exports the names its callers use.
    config           config.json validation and defaults (full_config, llama_config)
    positions        sinusoidal, RoPE, ALiBi and T5 relative positions
    attention        attention shared by both families (grouped-query included)
    search           the beam search and GenerationMixin, the decoder-only generation API
    encoder_decoder  OrdoModel: ordo's encoder-decoder, or a decoder-only model
    llama            LlamaModel: Hugging Face's LLaMA layout
    safetensors_io   the safetensors file format
    model_dirs       model directories: save/load of either family, round_weights_
    quantization     int8 and int4 weights as README lays them out: read (dequantized
                     exactly, in float64) by every loader, written by quantize_model_dir

DTYPES. A model computes in the dtype of its parameters, torch's default dtype unless
said otherwise: float32 for training and the speed peer, float64 for the oracle
(make_parity_models passes dtype=torch.float64; the tests, tests/oracle_fixtures.py, set
the default). PyTorch picks its float32 kernels by the CPU (ATEN_CPU_CAPABILITY), and
their rounding differs, batched or not, by ~1e-5 on these models; in float64 the same
differences are ~1e-12, so the oracle's answer is the same on every machine. Nothing
inside rounds to float32 but T5's bucket index, which T5 defines in float32 (an integer
either way).

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
# Attention and explicit_attention are not in __all__, as before, but the tests import them.
from .attention import Attention, explicit_attention, repeat_kv  # noqa: F401
from .config import full_config, kv_heads, llama_config
from .encoder_decoder import OrdoModel
from .llama import LlamaModel, rms_norm
from .model_dirs import (load_llama_dir, load_model_dir, round_weights_, save_llama_dir,
                         save_model_dir)
from .positions import (alibi_slopes, rope_rotate, sinusoidal_positions,
                        t5_relative_position_bucket)
from .safetensors_io import read_safetensors, write_safetensors
from .search import GenerationMixin

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
from .marian import MarianMTModel, marian_config, marian_positions  # noqa: E402
from .marian_dirs import (MarianTokenizerOracle, load_marian_dir,  # noqa: E402
                          marian_generation_config, save_marian_dir, write_marian_tokenizer)

__all__ += ["MarianMTModel", "marian_config", "marian_positions", "MarianTokenizerOracle",
            "load_marian_dir", "marian_generation_config", "save_marian_dir",
            "write_marian_tokenizer"]

from .t5 import T5ForConditionalGeneration, relative_position_bucket, t5_config  # noqa: E402
from .t5_dirs import (T5TokenizerOracle, load_t5_dir, save_t5_dir,  # noqa: E402
                      t5_generation_config, write_t5_tokenizer)

__all__ += ["T5ForConditionalGeneration", "t5_config", "relative_position_bucket", "T5TokenizerOracle",
            "load_t5_dir", "save_t5_dir", "t5_generation_config", "write_t5_tokenizer"]
from .m2m100 import M2M100Model, m2m100_config, m2m100_table  # noqa: E402
from .m2m100_dirs import (NllbTokenizerOracle, load_m2m100_dir, nllb_generation_config,  # noqa: E402
                          save_m2m100_dir, write_nllb_tokenizer)

__all__ += ["M2M100Model", "m2m100_config", "m2m100_table", "NllbTokenizerOracle", "load_m2m100_dir",
            "nllb_generation_config", "save_m2m100_dir", "write_nllb_tokenizer"]
