"""Model directories, config.json plus the weights in safetensors: `save_model_dir` and
`load_model_dir` for ordo's format, `save_llama_dir` and `load_llama_dir` for Hugging
Face's LLaMA layout (one model.safetensors, or shards and model.safetensors.index.json);
`round_weights_` makes an in-memory model hold exactly what a file of a given dtype
holds."""
from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path
from typing import List, Optional

import torch
from torch import nn

from .config import CONFIG_KEYS, LLAMA_CONFIG_KEYS, full_config, llama_config
from .encoder_decoder import OrdoModel
from .llama import LlamaModel
from .quantization import dequantized_weights, quantized_activations_
from .safetensors_io import read_safetensors, write_safetensors


_SAVE_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


@torch.no_grad()
def round_weights_(model: nn.Module, dtype: str) -> nn.Module:
    """Rounds every parameter in place to `dtype` (F32 | F16 | BF16) and back to its own
    dtype, so the model computes with exactly what a file of that dtype holds."""
    if dtype not in _SAVE_DTYPES:
        raise ValueError(f"dtype must be one of {' | '.join(_SAVE_DTYPES)}, got {dtype!r}")
    target = _SAVE_DTYPES[dtype]
    for name, p in model.state_dict().items():
        if target is torch.float16 and p.abs().max() > torch.finfo(torch.float16).max:
            raise ValueError(f"tensor '{name}' overflows F16")
        p.copy_(p.to(target).to(p.dtype))
    return model


def save_model_dir(model: OrdoModel, out_dir, dtype: str = "F32",
                   extra_config: Optional[dict] = None) -> None:
    """Writes out_dir/config.json (the full config plus extra_config, pretty) and
    out_dir/model.safetensors (state_dict in `dtype`). For F16/BF16 the in-memory model
    is rounded to that dtype first (round_weights_), so it matches the file exactly."""
    round_weights_(model, dtype)
    config = dict(model.config)
    for key, value in (extra_config or {}).items():
        if key in CONFIG_KEYS and config.get(key) != value:
            raise ValueError(f"extra_config key '{key}' conflicts with the model's config "
                             f"({value!r} != {config.get(key)!r})")
        config[key] = value
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    target = _SAVE_DTYPES[dtype]
    tensors = {k: v.detach().to(target) for k, v in model.state_dict().items()}
    write_safetensors(out / "model.safetensors", tensors, metadata={"format": "pt"})


def load_checked(model: nn.Module, source, tensors: dict, dtype: Optional[torch.dtype]) -> nn.Module:
    """Loads `tensors` into `model` in eval mode, computing in `dtype` (default: torch's
    default dtype), after checking that they are exactly the model's tensors, with its
    shapes and a floating-point dtype; `source` names the file(s) in errors, and its
    directory's config.json says whether the model is quantized."""
    expected = model.state_dict()
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise ValueError(f"{source}: missing tensors {missing}, unexpected tensors {unexpected}")
    for name, t in tensors.items():
        if tuple(t.shape) != tuple(expected[name].shape):
            raise ValueError(f"{source}: tensor '{name}' has shape {list(t.shape)}, "
                             f"expected {list(expected[name].shape)}")
        if not t.is_floating_point():
            raise ValueError(f"{source}: tensor '{name}' is {t.dtype}")
    dtype = dtype or torch.get_default_dtype()
    model.to(dtype).load_state_dict({k: v.to(dtype) for k, v in tensors.items()}, strict=True)
    # A quantized directory's products see quantized activations (quantization.py).
    config = json.loads((Path(source).parent / "config.json").read_text())
    return quantized_activations_(model.eval(), config.get("quantization"))


def load_model_dir(path, dtype: Optional[torch.dtype] = None) -> OrdoModel:
    """Loads a model directory into an OrdoModel in eval mode that computes in `dtype`
    (default: torch's default dtype; float64 for the oracle, see DTYPES in the package
    docstring). The file must hold exactly the tensors the config implies
    (final_logits_bias optional), with their shapes."""
    path = Path(path)
    config = full_config(json.loads((path / "config.json").read_text()))
    tensors = dequantized_weights(path, read_safetensors(path / "model.safetensors"),
                                  path / "model.safetensors")
    model = OrdoModel(config, final_logits_bias="final_logits_bias" in tensors)
    return load_checked(model, path / "model.safetensors", tensors, dtype)


_TORCH_DTYPE_NAMES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}
LLAMA_INDEX = "model.safetensors.index.json"


def _shard_name(i: int, n: int) -> str:
    return f"model-{i:05d}-of-{n:05d}.safetensors"


def save_llama_dir(model: LlamaModel, out_dir, dtype: str = "F32", shards: int = 1,
                   extra_config: Optional[dict] = None) -> None:
    """Writes a Hugging Face-style LLaMA directory: config.json (the full config, with
    torch_dtype set to dtype's name, plus extra_config) and the state_dict in `dtype`
    (F32 | F16 | BF16; the in-memory model is rounded to it first, as round_weights_).

    shards=1: model.safetensors. shards=N>1: the tensors, in state_dict order, cut into N
    contiguous runs of about equal bytes, written as model-0000i-of-0000N.safetensors
    (i = 1..N, 5 digits each, as Hugging Face names them), plus model.safetensors.index.json
    = {"metadata": {"total_size": bytes of all tensors' data}, "weight_map": {tensor
    name: shard file name}} (keys sorted, indent 2). Every safetensors file carries
    the metadata {"format": "pt"}.
    """
    round_weights_(model, dtype)
    tensors = {k: v.detach().to(_SAVE_DTYPES[dtype]) for k, v in model.state_dict().items()}
    config = dict(model.config, torch_dtype=_TORCH_DTYPE_NAMES[dtype])
    for key, value in (extra_config or {}).items():
        if key in LLAMA_CONFIG_KEYS and config.get(key) != value:
            raise ValueError(f"extra_config key '{key}' conflicts with the model's config "
                             f"({value!r} != {config.get(key)!r})")
        config[key] = value
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    write_weight_files(out, tensors, shards)


def _shard_groups(tensors: dict, shards: int) -> List[List[str]]:
    """The names of `tensors` (in order) cut into `shards` contiguous runs of about equal
    bytes, none empty."""
    if not 1 <= shards <= len(tensors):
        raise ValueError(f"shards must be in [1, {len(tensors)}], got {shards}")
    names = list(tensors)
    sizes = [tensors[n].numel() * tensors[n].element_size() for n in names]
    total = sum(sizes)
    groups: List[List[str]] = [[]]
    filled = 0
    for i, (name, size) in enumerate(zip(names, sizes)):
        # Start the next shard once this one holds its share, while enough tensors remain
        # for the shards still to come; never leave a shard empty.
        must_start = len(names) - i == shards - len(groups)
        if groups[-1] and len(groups) < shards and (filled >= total * len(groups) / shards
                                                    or must_start):
            groups.append([])
        groups[-1].append(name)
        filled += size
    assert len(groups) == shards and all(groups)
    return groups


TORCH_WEIGHTS = "pytorch_model.bin"
TORCH_INDEX = "pytorch_model.bin.index.json"


def _save_torch_state_dict(path: Path, tensors: dict, names: List[str], aliases: dict) -> None:
    """torch.save of a state dict as nn.Module.state_dict() makes one: an OrderedDict
    with a `_metadata` attribute (pickled by BUILD), each alias (name -> the name it is
    tied to) the very tensor it aliases, so both names share one storage."""
    state = OrderedDict((n, tensors[n]) for n in names)
    for alias, target in aliases.items():
        if target in state:
            state[alias] = state[target]
    state._metadata = OrderedDict([("", {"version": 1})])
    torch.save(state, path)


def write_weight_files(out: Path, tensors: dict, shards: int, weights_format: str = "safetensors",
                       aliases: Optional[dict] = None) -> None:
    """tensors (name -> tensor, in order) as Hugging Face writes them.

    weights_format "safetensors": shards=1: out/model.safetensors; shards=N>1: N
    contiguous runs of about equal bytes as model-0000i-of-0000N.safetensors and
    model.safetensors.index.json (save_llama_dir's docstring). Every file carries the
    metadata {"format": "pt"}.

    weights_format "bin", as transformers saved checkpoints before safetensors:
    torch.save of the state dict as out/pytorch_model.bin, or the same runs as
    pytorch_model-0000i-of-0000N.bin and pytorch_model.bin.index.json. `aliases` (name ->
    the name it is tied to, as a module's state_dict() lists a tied weight under each of
    its modules) are saved too, each in the file of the tensor it aliases, sharing its
    storage."""
    if weights_format not in ("safetensors", "bin"):
        raise ValueError(f"weights_format must be safetensors or bin, got {weights_format!r}")
    aliases = aliases or {}
    groups = _shard_groups(tensors, shards)
    if weights_format == "bin" and shards == 1:
        _save_torch_state_dict(out / TORCH_WEIGHTS, tensors, groups[0], aliases)
        return
    if shards == 1:
        write_safetensors(out / "model.safetensors", tensors, metadata={"format": "pt"})
        return
    weight_map = {}
    for i, group in enumerate(groups, start=1):
        if weights_format == "bin":
            file = f"pytorch_model-{i:05d}-of-{shards:05d}.bin"
            _save_torch_state_dict(out / file, tensors, group, aliases)
            weight_map.update({a: file for a, target in aliases.items() if target in group})
        else:
            file = _shard_name(i, shards)
            write_safetensors(out / file, {n: tensors[n] for n in group}, metadata={"format": "pt"})
        weight_map.update({n: file for n in group})
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    index_name = TORCH_INDEX if weights_format == "bin" else LLAMA_INDEX
    (out / index_name).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")


def read_weight_files(path: Path):
    """(source, tensors) of a Hugging Face directory: model.safetensors, or when there is
    none, the shards named by model.safetensors.index.json, checked as load_llama_dir's
    docstring says; quantized matrices dequantized as config.json's `quantization` says
    (quantization.py)."""
    if (path / "model.safetensors").exists():
        source = path / "model.safetensors"
        return source, dequantized_weights(path, read_safetensors(source), source)
    if not (path / LLAMA_INDEX).exists():
        raise ValueError(f"{path}: neither model.safetensors nor {LLAMA_INDEX}")
    source = path / LLAMA_INDEX
    index = json.loads(source.read_text())
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not (isinstance(weight_map, dict) and weight_map
            and all(isinstance(v, str) for v in weight_map.values())):
        raise ValueError(f"{source}: 'weight_map' must map tensor names to file names")
    tensors, total = {}, 0
    for file in sorted(set(weight_map.values())):
        if Path(file).name != file:
            raise ValueError(f"{source}: shard '{file}' is not a file name in the directory")
        for name, t in read_safetensors(path / file).items():
            if weight_map.get(name) != file:
                raise ValueError(f"{path / file}: tensor '{name}' is not mapped to this "
                                 f"file by {LLAMA_INDEX}")
            tensors[name] = t
            total += t.numel() * t.element_size()
    absent = sorted(set(weight_map) - set(tensors))
    if absent:
        raise ValueError(f"{source}: tensors {absent} are not in the shards they are mapped to")
    declared = (index.get("metadata") or {}).get("total_size")
    if declared is not None and declared != total:
        raise ValueError(f"{source}: metadata.total_size is {declared}, but the tensors "
                         f"hold {total} bytes")
    return source, dequantized_weights(path, tensors, source)


def load_llama_dir(path, dtype: Optional[torch.dtype] = None) -> LlamaModel:
    """Loads a LLaMA directory (model.safetensors, or when there is none, the shards named
    by model.safetensors.index.json) into a LlamaModel in eval mode that computes in
    `dtype` (default: torch's default dtype; float64 for the oracle, see DTYPES in the
    package docstring). The files must hold exactly the tensors the config implies, with
    their shapes; with an index, every shard's tensors must be mapped to that shard,
    every mapped tensor must be in its shard, and total_size must be the bytes of all
    tensors' data."""
    path = Path(path)
    config = llama_config(json.loads((path / "config.json").read_text()))
    source, tensors = read_weight_files(path)
    return load_checked(LlamaModel(config), source, tensors, dtype)
