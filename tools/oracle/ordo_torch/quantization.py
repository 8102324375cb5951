"""Quantized weights as README's "Quantized weights" section lays them out, written from
that text (not from ordo's C++): `dequantize_tensors` turns a directory's stored I8 / U8
matrices and their `_scale` tensors back into float, `quantize_tensors` writes them, and
`quantize_weights_` makes an in-memory model hold exactly the dequantized values, as
round_weights_ does for F16.

    config.json: "quantization": {"type": "int8" | "int4", "group_size": G}
    int8: NAME.weight I8 [out, in], NAME.weight_scale F32 [out] (G = 0: a scale a row) or
          [out, in / G]; w = q x scale; scale = max|w| / 127 over the row or group,
          q = round(w / scale) (halves to even) in [-127, 127].
    int4: NAME.weight U8 [out, in / 2], NAME.weight_scale F16 [out, in / G] (G a multiple
          of 32, default 32); a row is runs of 32 weights, 16 bytes a run, byte j holding
          weight j in its low nibble and weight j + 16 in its high one, each n = q + 8;
          w = (n - 8) x scale; scale = F16(max|w| / 7), q = round(w / scale) in [-8, 7].
          A matrix whose width G does not divide is int8 with a scale a row instead (I8
          [out, in], F32 [out]), and only such a matrix: U8 where in % G == 0, I8 where not.
    An all-zero group gets scale 1; norms, biases and position tables stay float.

The dequantized values are exact in float64 (q has at most 8 bits, the scale 24), which
is what the oracle computes with.

ACTIVATIONS. A product with a quantized matrix quantizes its input first, as README's
"Quantized weights" (and engine/integer_product.h) define: per row, per group of the
matrix's group size (the row for a scale a row), amax = max |x|, s = amax / 127 and
q = round(x * (127 / amax)) (halves to even), in float32 from x rounded to float32; a
group with amax below 2^-120 is zero, one with a non-finite value NaN. The product is
then (s q) . (scale w), in float64 here: ordo's integer sums are exact, and its float
steps round within the parity tolerances. `quantized_activations_` marks a model's
quantized matrices so that F.linear with one of them quantizes its input; every loader
of a quantized directory and quantize_weights_ call it.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, Optional

import torch
from torch import Tensor, nn
from torch.nn import functional as F

SCALE_SUFFIX = "_scale"
INT4_RUN = 32
TYPES = ("int8", "int4")


def is_quantized_matrix(name: str, t: Tensor) -> bool:
    """The matrices the oracle's writer quantizes: every 2-D `.weight` (linears, token
    embeddings, output heads) but position tables and T5's relative-bias tables, which
    README keeps float."""
    return (t.dim() == 2 and name.endswith(".weight") and "embed_positions" not in name
            and "relative_attention_bias" not in name)


def check_quantization(quantization: dict) -> dict:
    """{"type", "group_size"} with the default group filled in; a ValueError for anything
    README does not allow."""
    if not isinstance(quantization, dict) or quantization.get("type") not in TYPES:
        raise ValueError(f"quantization must be {{'type': int8 | int4, 'group_size': G}}, got {quantization!r}")
    unknown = set(quantization) - {"type", "group_size"}
    if unknown:
        raise ValueError(f"quantization: unknown keys {sorted(unknown)}")
    kind = quantization["type"]
    group = quantization.get("group_size", INT4_RUN if kind == "int4" else 0)
    if not isinstance(group, int) or isinstance(group, bool) or group < 0:
        raise ValueError(f"quantization.group_size must be an integer >= 0, got {group!r}")
    if kind == "int4" and (group == 0 or group % INT4_RUN):
        raise ValueError(f"quantization.group_size is {group}; int4 needs a positive multiple of 32")
    return {"type": kind, "group_size": group}


def stored_as(quantization: dict, cols: int):
    """(type, group) of a matrix with rows of `cols` weights: int4 only where its group
    divides the width, else int8 with a scale a row (group = cols); int8 as configured."""
    kind, group = quantization["type"], quantization["group_size"]
    if kind == "int4" and cols % group:
        return "int8", cols
    return kind, group or cols


def _group(name: str, cols: int, quantization: dict):
    kind, group = stored_as(quantization, cols)
    if cols % group:
        raise ValueError(f"tensor '{name}': group_size {group} does not divide its rows of {cols} weights")
    return kind, group


def quantize_int8(w: Tensor, group: int):
    """(q I8 [out, in], scale F32 [out, in / group]) of a float matrix, in float32."""
    rows, cols = w.shape
    g = w.to(torch.float32).reshape(rows, cols // group, group)
    amax = g.abs().amax(dim=2)
    scale = torch.where(amax > 0, amax / 127, torch.ones_like(amax))
    # max|w| / 127 rounded to 0 (subnormal weights): the smallest positive float32.
    scale = torch.where(scale > 0, scale, torch.full_like(scale, 2.0**-149))
    q = torch.round(g / scale.unsqueeze(2)).clamp(-127, 127).to(torch.int8)
    return q.reshape(rows, cols), scale


def quantize_int4(w: Tensor, group: int):
    """(packed U8 [out, in / 2], scale F16 [out, in / group]) of a float matrix."""
    rows, cols = w.shape
    g = w.to(torch.float32).reshape(rows, cols // group, group)
    amax = g.abs().amax(dim=2)
    scale = torch.where(amax > 0, amax / 7, torch.ones_like(amax)).to(torch.float16)
    # Below F16's smallest positive value the scale would be 0: use that smallest value.
    scale = torch.where(scale == 0, torch.tensor(2.0 ** -24, dtype=torch.float16), scale)
    if not torch.isfinite(scale).all():
        raise ValueError("a weight's int4 scale is beyond F16's range (65504)")
    q = torch.round(g / scale.to(torch.float32).unsqueeze(2)).clamp(-8, 7).to(torch.int16) + 8
    runs = q.reshape(rows, cols // INT4_RUN, 2, 16)  # [row, run, low/high half, j]
    packed = (runs[:, :, 0, :] | (runs[:, :, 1, :] << 4)).to(torch.uint8)
    return packed.reshape(rows, cols // 2), scale


def unpack_int4(packed: Tensor, cols: int) -> Tensor:
    """q [out, in] in [-8, 7] (int16) of a packed U8 [out, in / 2] matrix."""
    rows = packed.shape[0]
    runs = packed.to(torch.int16).reshape(rows, cols // INT4_RUN, 16)
    low, high = runs & 0x0F, runs >> 4
    return torch.stack([low, high], dim=2).reshape(rows, cols) - 8


def _dequantize_one(name: str, w: Tensor, scale: Tensor, quantization: dict, source) -> Tensor:
    where = f"{source}: tensor '{name}'"
    configured = quantization["type"]
    # An int4 model holds I8 matrices too: its int8 fallbacks, checked against the rule below.
    kind = "int8" if configured == "int4" and w.dtype == torch.int8 else configured
    want_dtype = torch.int8 if kind == "int8" else torch.uint8
    if w.dtype != want_dtype or w.dim() != 2:
        raise ValueError(f"{where}: is {w.dtype} {list(w.shape)}, but {kind} stores a 2-D "
                         f"{'I8' if kind == 'int8' else 'U8'} matrix")
    rows = w.shape[0]
    cols = w.shape[1] * (2 if kind == "int4" else 1)
    stored, group = _group(name, cols, quantization)
    if stored != kind:
        raise ValueError(f"{where}: is {'I8' if kind == 'int8' else 'U8'} in an int4 model with group_size "
                         f"{quantization['group_size']}, but its rows of {cols} weights are {stored}: int4 where "
                         "group_size divides the width, int8 with a scale a row where it does not")
    fallback = configured == "int4" and kind == "int8"
    scale_dtype = torch.float32 if kind == "int8" else torch.float16
    if scale.dtype != scale_dtype:
        raise ValueError(f"{where}{SCALE_SUFFIX}: is {scale.dtype}, {kind} scales are {scale_dtype}")
    shapes = ([] if fallback else [[rows, cols // group]]) + ([[rows]] if kind == "int8" and group == cols else [])
    if list(scale.shape) not in shapes:
        raise ValueError(f"{where}{SCALE_SUFFIX}: shape {list(scale.shape)}, expected {shapes[-1]}")
    s = scale.to(torch.float64).reshape(rows, cols // group)
    if not (torch.isfinite(s).all() and (s > 0).all()):
        raise ValueError(f"{where}{SCALE_SUFFIX}: scales must be finite and > 0")
    q = w.to(torch.float64) if kind == "int8" else unpack_int4(w, cols).to(torch.float64)
    return (q.reshape(rows, cols // group, group) * s.unsqueeze(2)).reshape(rows, cols)


def dequantize_tensors(tensors: Dict[str, Tensor], quantization: Optional[dict], source) -> Dict[str, Tensor]:
    """A directory's tensors with every quantized matrix as float64 (exact: q x scale) and
    its scale dropped. Without a quantization config, I8/U8 matrices or scales are an
    error; with one, every I8/U8 matrix needs its scale and every scale its matrix."""
    scales = {n for n in tensors if n.endswith(SCALE_SUFFIX)}
    if quantization is None:
        stored = [n for n, t in tensors.items() if t.dtype in (torch.int8, torch.uint8)]
        if scales or stored:
            raise ValueError(f"{source}: tensors {sorted(scales | set(stored))} are quantized, but "
                             "config.json has no 'quantization' key")
        return tensors
    quantization = check_quantization(quantization)
    out = {}
    for name, t in tensors.items():
        if name in scales:
            matrix = name[: -len(SCALE_SUFFIX)]
            if matrix not in tensors or tensors[matrix].is_floating_point():
                raise ValueError(f"{source}: tensor '{name}' is a scale, but '{matrix}' is "
                                 f"{'missing' if matrix not in tensors else 'float, not quantized'}")
            continue
        if t.dtype in (torch.int8, torch.uint8):
            if name + SCALE_SUFFIX not in tensors:
                raise ValueError(f"{source}: tensor '{name}' is {t.dtype} without its '{name}{SCALE_SUFFIX}'")
            out[name] = _dequantize_one(name, t, tensors[name + SCALE_SUFFIX], quantization, source)
        else:
            out[name] = t
    return out


def quantize_tensors(tensors: Dict[str, Tensor], quantization: dict) -> Dict[str, Tensor]:
    """The stored form of float tensors: every is_quantized_matrix becomes its I8 / U8
    matrix and `_scale`; the rest as they are (in their order)."""
    quantization = check_quantization(quantization)
    out = {}
    for name, t in tensors.items():
        if not is_quantized_matrix(name, t):
            out[name] = t
            continue
        kind, group = _group(name, t.shape[1], quantization)
        if kind == "int8":
            q, scale = quantize_int8(t, group)
            if group == t.shape[1] and (quantization["group_size"] == 0 or quantization["type"] == "int4"):
                scale = scale.reshape(-1)  # [out]: a scale a row, as the format has it
        else:
            q, scale = quantize_int4(t, group)
        out[name] = q
        out[name + SCALE_SUFFIX] = scale
    return out


@torch.no_grad()
def quantize_weights_(model: nn.Module, quantization: dict) -> nn.Module:
    """Replaces every quantized matrix of `model` in place by its dequantized values, and
    marks them for quantized activations (quantized_activations_), so the model computes
    exactly as a quantized file of it does. Tied parameters (one tensor under two names)
    are rounded once."""
    quantization = check_quantization(quantization)
    for name, p in model.named_parameters():  # each shared parameter once
        if is_quantized_matrix(name, p):
            stored = quantize_tensors({name: p}, quantization)
            p.copy_(dequantize_tensors(stored, quantization, "quantize_weights_")[name].to(p.dtype))
    return quantized_activations_(model, quantization)


TINY_GROUP = 2.0 ** -120


def quantize_activations(x: Tensor, group: int) -> Tensor:
    """x (any float dtype, last axis the product's inner one) with each group of `group`
    values replaced by s q, the values ordo's integer products see (module docstring)."""
    x32 = x.to(torch.float32)
    g = x32.reshape(*x32.shape[:-1], x32.shape[-1] // group, group)
    amax = g.abs().amax(dim=-1, keepdim=True)
    finite = torch.isfinite(g).all(dim=-1, keepdim=True)
    usable = finite & (amax >= TINY_GROUP)
    safe = torch.where(usable, amax, torch.ones_like(amax))
    q = torch.round(g * (torch.tensor(127.0, dtype=torch.float32) / safe))  # float32 product, halves to even
    scale = torch.where(usable, safe / 127.0, torch.zeros_like(amax))
    scale = torch.where(finite, scale, torch.full_like(amax, float("nan")))
    q = torch.where(usable, q, torch.zeros_like(q))
    return (q.to(torch.float64) * scale.to(torch.float64)).reshape(x.shape).to(x.dtype)


_INPUTS_QUANTIZED: Dict[int, tuple] = {}  # id(matrix) -> (matrix, group): the matrices F.linear quantizes for
_PLAIN_LINEAR = F.linear


def _linear(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    marked = _INPUTS_QUANTIZED.get(id(weight))
    if marked is not None and marked[0] is weight:
        input = quantize_activations(input, marked[1])
    return _PLAIN_LINEAR(input, weight, bias)


def quantized_activations_(model: nn.Module, quantization: Optional[dict]) -> nn.Module:
    """Marks `model`'s quantized matrices (is_quantized_matrix, each with its group: the
    row for int8 with a scale a row and for an int4 model's int8 fallbacks) so that the
    oracle's F.linear with one of them quantizes its input; without a quantization,
    nothing. Returns the model."""
    if not quantization:
        return model
    quantization = check_quantization(quantization)
    for name, p in model.named_parameters():
        if is_quantized_matrix(name, p):
            _, group = _group(name, p.shape[1], quantization)
            _INPUTS_QUANTIZED[id(p)] = (p, group)
    F.linear = _linear
    return model


def dequantized_weights(directory: Path, tensors: Dict[str, Tensor], source) -> Dict[str, Tensor]:
    """`tensors` read from `directory`, dequantized as its config.json says."""
    config = json.loads((Path(directory) / "config.json").read_text())
    return dequantize_tensors(tensors, config.get("quantization"), source)


def _same_in_file_dtype(dequantized: Tensor, saved: Tensor) -> bool:
    # The float file rounded the model's exact q x scale to its dtype: compare there.
    return dequantized.shape == saved.shape and torch.equal(dequantized.to(saved.dtype), saved)


def quantize_model_dir(directory, quantization: dict, model: Optional[nn.Module] = None) -> None:
    """Rewrites a saved float directory (model.safetensors or its shards, as
    write_weight_files laid them out) in the quantized format, and adds `quantization` to
    its config.json. The directory's model must already hold dequantized values
    (quantize_weights_ before saving): re-quantizing them must give them back, which is
    checked here to the float file's precision (make_parity_models then checks that the
    re-loaded model's outputs equal the in-memory model's exactly).

    Saving rounded `model` to F32, and an int8 q x scale needs up to 32 bits: given the
    model, its quantized matrices are set back to the exact products the file now holds."""
    from .model_dirs import LLAMA_INDEX  # model_dirs imports this module
    from .safetensors_io import read_safetensors, write_safetensors
    quantization = check_quantization(quantization)
    directory = Path(directory)
    index_path = directory / LLAMA_INDEX
    if (directory / "model.safetensors").exists():
        files = ["model.safetensors"]
        index = None
    else:
        index = json.loads(index_path.read_text())
        files = sorted(set(index["weight_map"].values()))
    total = 0
    for file in files:
        floats = read_safetensors(directory / file)
        stored = quantize_tensors(floats, quantization)
        back = dequantize_tensors(stored, quantization, directory / file)
        for name, t in floats.items():
            if not _same_in_file_dtype(back[name], t):
                raise RuntimeError(f"{directory / file}: tensor '{name}' does not hold dequantized values "
                                   "(call quantize_weights_ before saving)")
        write_safetensors(directory / file, stored, metadata={"format": "pt"})
        total += sum(t.numel() * t.element_size() for t in stored.values())
        if index is not None:
            for name in stored:
                index["weight_map"][name] = file
    if index is not None:
        index["metadata"] = dict(index.get("metadata") or {}, total_size=total)
        index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    config_path = directory / "config.json"
    config = json.loads(config_path.read_text())
    config["quantization"] = quantization
    config_path.write_text(json.dumps(config, indent=2) + "\n")
    if model is not None:
        quantize_weights_(model, quantization)


__all__ = ["dequantize_tensors", "quantize_tensors", "quantize_weights_", "quantize_model_dir", "quantize_activations",
           "quantized_activations_",
           "dequantized_weights", "is_quantized_matrix", "check_quantization", "stored_as"]
