"""Validation and defaults of the two config.json formats: ordo's (`full_config`; `kv_heads`
reads the K/V head count it implies) and Hugging Face LLaMA's (`llama_config`). Each returns
a new dict with every key of its format, defaults filled in, and raises ValueError naming
the offending key."""
from __future__ import annotations

import math


_REQUIRED = object()
_ENUMS = {
    "activation_function": ("relu", "gelu", "swish"),
    "position_encoding": ("sinusoidal", "learned", "rope", "none", "alibi", "t5_relative"),
    "sinusoidal_layout": ("interleaved", "split"),
    "sinusoidal_frequencies": ("vaswani", "tensor2tensor"),
    "rope_layout": ("half", "interleaved"),
}
# (key, kind, default); kind is int | bool | float | str | enum | optional_int.
# Order is the order of config.json.
_SCHEMA = [
    ("model_type", "str", "ordo"),
    ("vocab_size", "int", _REQUIRED),
    ("decoder_vocab_size", "int", None),  # None: = vocab_size
    ("d_model", "int", _REQUIRED),
    ("encoder_layers", "int", _REQUIRED),
    ("decoder_layers", "int", _REQUIRED),
    ("encoder_attention_heads", "int", _REQUIRED),
    ("decoder_attention_heads", "int", _REQUIRED),
    ("num_key_value_heads", "optional_int", None),  # None: = decoder_attention_heads
    ("encoder_ffn_dim", "int", _REQUIRED),
    ("decoder_ffn_dim", "int", _REQUIRED),
    ("activation_function", "enum", "relu"),
    ("normalize_before", "bool", False),
    ("scale_embedding", "bool", False),
    ("layernorm_embedding", "bool", False),
    ("max_position_embeddings", "int", _REQUIRED),
    ("position_encoding", "enum", "sinusoidal"),
    ("sinusoidal_layout", "enum", "interleaved"),
    ("sinusoidal_frequencies", "enum", "vaswani"),
    ("position_offset", "int", 0),
    ("rope_theta", "float", 10000.0),
    ("rope_layout", "enum", "half"),
    ("relative_attention_num_buckets", "int", 32),
    ("relative_attention_max_distance", "int", 128),
    ("share_encoder_decoder_embeddings", "bool", True),
    ("tie_word_embeddings", "bool", True),
    ("layer_norm_eps", "float", 1e-5),
    ("pad_token_id", "int", _REQUIRED),
    ("bos_token_id", "optional_int", None),
    ("eos_token_id", "int", _REQUIRED),
    ("decoder_start_token_id", "int", _REQUIRED),
]
CONFIG_KEYS = tuple(key for key, _, _ in _SCHEMA)
_ENCODER_ONLY_KEYS = ("encoder_attention_heads", "encoder_ffn_dim")  # optional without encoder


def _check_type(key: str, kind: str, value):
    if kind in ("int", "optional_int"):
        if kind == "optional_int" and value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"config key '{key}' must be an integer, got {value!r}")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"config key '{key}' must be true or false, got {value!r}")
        return value
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"config key '{key}' must be a number, got {value!r}")
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"config key '{key}' must be finite, got {value!r}")
        return value
    if kind == "str":
        if not isinstance(value, str):
            raise ValueError(f"config key '{key}' must be a string, got {value!r}")
        return value
    if kind == "enum":
        if value not in _ENUMS[key]:
            choices = " | ".join(_ENUMS[key])
            raise ValueError(f"config key '{key}' must be one of {choices}, got {value!r}")
        return value
    raise AssertionError(kind)


# rope_scaling: each type's keys beside rope_type/type (transformers' required + optional).
_ROPE_SCALING_KEYS = {
    "default": ((), ()),
    "linear": (("factor",), ()),
    "dynamic": (("factor",), ("original_max_position_embeddings",)),
    "yarn": (("factor",), ("original_max_position_embeddings", "beta_fast", "beta_slow",
                           "attention_factor", "truncate")),
    "llama3": (("factor", "low_freq_factor", "high_freq_factor",
                "original_max_position_embeddings"), ()),
}


def check_rope_scaling(value, max_position_embeddings: int, head_dims, rope: bool):
    """A config's rope_scaling (None: plain RoPE), validated: a dict whose rope_type (or
    older type) is default, linear, dynamic, yarn or llama3, with that type's keys only
    (_ROPE_SCALING_KEYS; null optional keys count as absent), factor a finite number > 0,
    original_max_position_embeddings an integer > 0 and (yarn, llama3) at most
    max_position_embeddings, low_freq_factor < high_freq_factor (both > 0), beta_fast >=
    beta_slow > 0, attention_factor > 0; dynamic needs every head_dim > 2; only a rope
    model may scale. Returns it as given (None for None); raises ValueError naming
    'rope_scaling.<key>'."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(f"config key 'rope_scaling' must be an object or null, got {value!r}")
    kind = value.get("rope_type", value.get("type"))
    if kind not in _ROPE_SCALING_KEYS:
        raise ValueError(f"config key 'rope_scaling.rope_type': unknown or unsupported {kind!r}")
    required, optional = _ROPE_SCALING_KEYS[kind]
    for key in value:
        if key not in ("rope_type", "type") + required + optional:
            raise ValueError(f"config key 'rope_scaling.{key}' is not a key of {kind} scaling")
    for key in required:
        if value.get(key) is None:
            raise ValueError(f"config key 'rope_scaling.{key}' is missing")
    if kind == "default":
        return value
    if not rope:
        raise ValueError("config key 'rope_scaling' is set on a model without rope positions")

    def number(key, default=None):
        v = value.get(key)
        if v is None:
            return default
        v = _check_type(f"rope_scaling.{key}", "float", v)
        if v <= 0:
            raise ValueError(f"config key 'rope_scaling.{key}' must be > 0, got {v}")
        return v
    number("factor")
    original = value.get("original_max_position_embeddings")
    if original is not None:
        _check_type("rope_scaling.original_max_position_embeddings", "int", original)
        if original <= 0 or (kind in ("yarn", "llama3") and original > max_position_embeddings):
            raise ValueError("config key 'rope_scaling.original_max_position_embeddings' must be "
                             f"in [1, max_position_embeddings={max_position_embeddings}], "
                             f"got {original}")
    if kind == "dynamic" and min(head_dims) <= 2:
        raise ValueError("config key 'rope_scaling.rope_type': dynamic needs head_dim > 2")
    if kind == "llama3" and not number("low_freq_factor") < number("high_freq_factor"):
        raise ValueError("config key 'rope_scaling.low_freq_factor' must be below high_freq_factor")
    if kind == "yarn":
        if number("beta_fast", 32.0) < number("beta_slow", 1.0):
            raise ValueError("config key 'rope_scaling.beta_fast' must be >= beta_slow")
        number("attention_factor")
        if not isinstance(value.get("truncate", True), bool):
            raise ValueError("config key 'rope_scaling.truncate' must be true or false")
    return value


def full_config(partial: dict) -> dict:
    """Returns a new dict with every key of the format, defaults filled in, validated.

    Raises ValueError naming the offending key. Keys that are not part of the format
    (descriptions, provenance, ...) are kept, after the format's keys. An absent or null
    bos_token_id is left out of the result, and so is an absent or null
    num_key_value_heads (it then means decoder_attention_heads: use `kv_heads(cfg)`).

    encoder_layers 0 makes a decoder-only model; encoder_attention_heads and
    encoder_ffn_dim are then optional (left out when absent, validated when given).
    num_key_value_heads (the K/V heads of the decoder's self-attention only) must divide
    decoder_attention_heads.
    """
    if not isinstance(partial, dict):
        raise ValueError(f"config must be a JSON object, got {type(partial).__name__}")
    cfg = {}
    for key, kind, default in _SCHEMA:
        if key in partial and partial[key] is not None:
            cfg[key] = _check_type(key, kind, partial[key])
        elif key in _ENCODER_ONLY_KEYS and cfg.get("encoder_layers") == 0:
            continue
        elif default is _REQUIRED:
            raise ValueError(f"config key '{key}' is required")
        elif key == "decoder_vocab_size":
            cfg[key] = cfg["vocab_size"]
        elif default is not None:
            cfg[key] = default
    for key, value in partial.items():
        if key not in cfg and key not in CONFIG_KEYS:
            cfg[key] = value

    def positive(key):
        if cfg[key] < 1:
            raise ValueError(f"config key '{key}' must be >= 1, got {cfg[key]}")

    if cfg["model_type"] != "ordo":
        raise ValueError(f"config key 'model_type' must be \"ordo\", got {cfg['model_type']!r}")
    if cfg["encoder_layers"] < 0:
        raise ValueError(f"config key 'encoder_layers' must be >= 0, got {cfg['encoder_layers']}")
    for key in ("vocab_size", "decoder_vocab_size", "d_model", "decoder_layers",
                "encoder_attention_heads", "decoder_attention_heads",
                "encoder_ffn_dim", "decoder_ffn_dim", "max_position_embeddings",
                "num_key_value_heads"):
        if key in cfg:
            positive(key)
    d = cfg["d_model"]
    for side in ("encoder", "decoder"):
        key = f"{side}_attention_heads"
        if key in cfg and d % cfg[key] != 0:
            raise ValueError(f"config key '{key}': d_model={d} is not divisible by {cfg[key]} heads")
    if "num_key_value_heads" in cfg and cfg["decoder_attention_heads"] % cfg["num_key_value_heads"]:
        raise ValueError(f"config key 'num_key_value_heads': decoder_attention_heads="
                         f"{cfg['decoder_attention_heads']} is not divisible by "
                         f"{cfg['num_key_value_heads']} key/value heads")
    if cfg["position_offset"] < 0:
        raise ValueError(f"config key 'position_offset' must be >= 0, got {cfg['position_offset']}")
    if cfg["rope_theta"] <= 0:
        raise ValueError(f"config key 'rope_theta' must be > 0, got {cfg['rope_theta']}")
    if cfg["layer_norm_eps"] <= 0:
        raise ValueError(f"config key 'layer_norm_eps' must be > 0, got {cfg['layer_norm_eps']}")
    if cfg["position_encoding"] == "sinusoidal":
        if d % 2 != 0:
            raise ValueError(f"config key 'd_model' must be even for sinusoidal positions, got {d}")
        if cfg["sinusoidal_frequencies"] == "tensor2tensor" and d < 4:
            raise ValueError("config key 'sinusoidal_frequencies': tensor2tensor needs d_model >= 4")
    if cfg["position_encoding"] == "rope":
        for side in ("encoder", "decoder"):
            key = f"{side}_attention_heads"
            if key in cfg and (d // cfg[key]) % 2 != 0:
                raise ValueError(f"config key '{key}': rope needs an even head_dim, "
                                 f"got d_model/heads = {d // cfg[key]}")
    if partial.get("rope_scaling") is not None:
        heads = [cfg[f"{side}_attention_heads"] for side in ("encoder", "decoder")
                 if f"{side}_attention_heads" in cfg]
        cfg["rope_scaling"] = check_rope_scaling(partial["rope_scaling"],
                                                 cfg["max_position_embeddings"],
                                                 [d // h for h in heads],
                                                 cfg["position_encoding"] == "rope")
    if cfg["position_encoding"] == "t5_relative":
        buckets, distance = cfg["relative_attention_num_buckets"], cfg["relative_attention_max_distance"]
        if buckets < 4:
            raise ValueError(f"config key 'relative_attention_num_buckets': t5_relative needs at "
                             f"least 4 buckets, got {buckets}")
        if distance <= buckets // 2:
            raise ValueError(f"config key 'relative_attention_max_distance' must be more than "
                             f"relative_attention_num_buckets / 2 = {buckets // 2}, got {distance}")
    if cfg["share_encoder_decoder_embeddings"] and cfg["vocab_size"] != cfg["decoder_vocab_size"]:
        raise ValueError("config key 'share_encoder_decoder_embeddings' is true but vocab_size="
                         f"{cfg['vocab_size']} != decoder_vocab_size={cfg['decoder_vocab_size']}")
    both = min(cfg["vocab_size"], cfg["decoder_vocab_size"])
    for key, limit in (("pad_token_id", both), ("eos_token_id", both),
                       ("decoder_start_token_id", cfg["decoder_vocab_size"]),
                       ("bos_token_id", max(cfg["vocab_size"], cfg["decoder_vocab_size"]))):
        if key in cfg and not 0 <= cfg[key] < limit:
            raise ValueError(f"config key '{key}' must be in [0, {limit}), got {cfg[key]}")
    return cfg


def kv_heads(cfg: dict) -> int:
    """The number of K/V heads of the decoder's self-attention (num_key_value_heads,
    default decoder_attention_heads)."""
    return cfg.get("num_key_value_heads", cfg["decoder_attention_heads"])


_LLAMA_DTYPES = ("float32", "float16", "bfloat16")
# (key, kind, default); kind as _SCHEMA's, plus "eos" (an int or a non-empty list of
# ints) and "nullable_int" (absent, null or an int: kept exactly as given).
_LLAMA_SCHEMA = [
    ("model_type", "str", _REQUIRED),
    ("vocab_size", "int", _REQUIRED),
    ("hidden_size", "int", _REQUIRED),
    ("intermediate_size", "int", _REQUIRED),
    ("num_hidden_layers", "int", _REQUIRED),
    ("num_attention_heads", "int", _REQUIRED),
    ("num_key_value_heads", "optional_int", None),  # None: = num_attention_heads
    ("head_dim", "optional_int", None),             # None: = hidden_size / num_attention_heads
    ("hidden_act", "str", "silu"),
    ("max_position_embeddings", "int", 2048),
    ("rms_norm_eps", "float", 1e-6),
    ("rope_theta", "float", 10000.0),
    ("rope_scaling", "rope_scaling", None),
    ("attention_bias", "bool", False),
    ("mlp_bias", "bool", False),
    ("tie_word_embeddings", "bool", False),
    ("bos_token_id", "nullable_int", None),
    ("eos_token_id", "eos", _REQUIRED),
    ("pad_token_id", "nullable_int", None),
    ("torch_dtype", "str", "float32"),
]
LLAMA_CONFIG_KEYS = tuple(key for key, _, _ in _LLAMA_SCHEMA)


def llama_config(partial: dict) -> dict:
    """A Hugging Face LLaMA config.json, validated, defaults filled in ([default]):
    model_type "llama", vocab_size, hidden_size, intermediate_size, num_hidden_layers,
    num_attention_heads, num_key_value_heads [= heads, must divide them], head_dim
    [hidden_size / heads; any even size], hidden_act ["silu", the only one],
    max_position_embeddings [2048, informational: RoPE has no table], rms_norm_eps
    [1e-6], rope_theta [10000], rope_scaling [null; check_rope_scaling], attention_bias
    [false], mlp_bias [false], tie_word_embeddings [false], bos_token_id and
    pad_token_id (absent, null or an id: kept as given), eos_token_id (an id or a
    non-empty list of ids; required), torch_dtype ["float32" | "float16" | "bfloat16",
    informational]. Other keys (architectures, transformers_version, ...) are kept after
    these. Raises ValueError naming the offending key.
    """
    if not isinstance(partial, dict):
        raise ValueError(f"config must be a JSON object, got {type(partial).__name__}")
    cfg = {}
    for key, kind, default in _LLAMA_SCHEMA:
        present = key in partial
        value = partial.get(key)
        if kind == "nullable_int":
            if present:
                cfg[key] = None if value is None else _check_type(key, "int", value)
        elif kind == "rope_scaling":
            cfg[key] = value  # checked below, once head_dim is known
        elif kind == "eos":
            if value is None:
                raise ValueError(f"config key '{key}' is required")
            ids = value if isinstance(value, list) else [value]
            if not ids:
                raise ValueError(f"config key '{key}' must be an id or a non-empty list of ids")
            for v in ids:
                _check_type(key, "int", v)
            cfg[key] = list(value) if isinstance(value, list) else value
        elif value is not None:
            cfg[key] = _check_type(key, kind, value)
        elif default is _REQUIRED:
            raise ValueError(f"config key '{key}' is required")
        elif key == "num_key_value_heads":
            cfg[key] = cfg["num_attention_heads"]
        elif key == "head_dim":
            if cfg["hidden_size"] % cfg["num_attention_heads"] != 0:
                raise ValueError(f"config key 'num_attention_heads': hidden_size="
                                 f"{cfg['hidden_size']} is not divisible by "
                                 f"{cfg['num_attention_heads']} heads (or give head_dim)")
            cfg[key] = cfg["hidden_size"] // cfg["num_attention_heads"]
        else:
            cfg[key] = default
    for key, value in partial.items():
        if key not in cfg and key not in LLAMA_CONFIG_KEYS:
            cfg[key] = value
    if cfg["model_type"] != "llama":
        raise ValueError(f"config key 'model_type' must be \"llama\", got {cfg['model_type']!r}")
    for key in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                "num_attention_heads", "num_key_value_heads", "head_dim",
                "max_position_embeddings"):
        if cfg[key] < 1:
            raise ValueError(f"config key '{key}' must be >= 1, got {cfg[key]}")
    if cfg["num_attention_heads"] % cfg["num_key_value_heads"] != 0:
        raise ValueError(f"config key 'num_key_value_heads': num_attention_heads="
                         f"{cfg['num_attention_heads']} is not divisible by "
                         f"{cfg['num_key_value_heads']}")
    if cfg["head_dim"] % 2 != 0:
        raise ValueError(f"config key 'head_dim': rope needs an even head_dim, "
                         f"got {cfg['head_dim']}")
    if cfg["hidden_act"] != "silu":
        raise ValueError(f"config key 'hidden_act' must be \"silu\", got {cfg['hidden_act']!r}")
    if cfg["torch_dtype"] not in _LLAMA_DTYPES:
        raise ValueError(f"config key 'torch_dtype' must be one of {' | '.join(_LLAMA_DTYPES)}, "
                         f"got {cfg['torch_dtype']!r}")
    for key in ("rms_norm_eps", "rope_theta"):
        if cfg[key] <= 0:
            raise ValueError(f"config key '{key}' must be > 0, got {cfg[key]}")
    cfg["rope_scaling"] = check_rope_scaling(cfg["rope_scaling"], cfg["max_position_embeddings"],
                                             [cfg["head_dim"]], True)
    V = cfg["vocab_size"]
    eos = cfg["eos_token_id"]
    for key, ids in (("bos_token_id", [cfg.get("bos_token_id")]),
                     ("pad_token_id", [cfg.get("pad_token_id")]),
                     ("eos_token_id", eos if isinstance(eos, list) else [eos])):
        for v in ids:
            if v is not None and not 0 <= v < V:
                raise ValueError(f"config key '{key}' must be in [0, {V}), got {v}")
    return cfg
