"""The safetensors file format, written and read with torch and numpy only:
`write_safetensors` lays a file out as the format specifies, `read_safetensors` validates
one as it reads it."""
from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Dict, Optional

import numpy as np
import torch
from torch import Tensor


_ST_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool,
}
_ST_NAMES = {v: k for k, v in _ST_DTYPES.items()}
_NP_DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<i2", "I64": "<i8", "I32": "<i4",
    "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?",
}


def _tensor_bytes(t: Tensor) -> bytes:
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    arr = t.numpy()
    return arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()


def write_safetensors(path, tensors: Dict[str, Tensor],
                      metadata: Optional[Dict[str, str]] = None) -> None:
    """Writes a safetensors file: u64 LE header length N, an N-byte JSON header
    {name: {dtype, shape, data_offsets}} (plus "__metadata__" when given) padded with
    spaces to a multiple of 8, then the tensors' bytes in sorted-name order, contiguous."""
    header = {}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        if name == "__metadata__":
            raise ValueError("'__metadata__' is not a valid tensor name")
        t = tensors[name]
        if t.dtype not in _ST_NAMES:
            raise ValueError(f"tensor '{name}': unsupported dtype {t.dtype}")
        blob = _tensor_bytes(t)
        header[name] = {"dtype": _ST_NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    if metadata:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise ValueError("safetensors metadata must map str to str")
        header = {"__metadata__": dict(metadata), **header}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def read_safetensors(path) -> Dict[str, Tensor]:
    """Reads and validates a safetensors file (any tensor order; entries must tile the
    data exactly). Returns {name: tensor} in the file's dtypes; "__metadata__" is skipped."""
    data = Path(path).read_bytes()
    if len(data) < 8:
        raise ValueError(f"{path}: too short for a safetensors header")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise ValueError(f"{path}: header length {n} exceeds the file size {len(data)}")
    try:
        header = json.loads(data[8: 8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: header is not JSON: {e}") from None
    if not isinstance(header, dict):
        raise ValueError(f"{path}: header is not a JSON object")
    body = memoryview(data)[8 + n:]
    out, spans = {}, []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if dtype not in _ST_DTYPES:
            raise ValueError(f"{path}: tensor '{name}' has unsupported dtype {dtype!r}")
        if not (isinstance(shape, list) and all(isinstance(s, int) and s >= 0 for s in shape)):
            raise ValueError(f"{path}: tensor '{name}' has a bad shape {shape!r}")
        if not (isinstance(offsets, list) and len(offsets) == 2
                and all(isinstance(o, int) for o in offsets) and 0 <= offsets[0] <= offsets[1]):
            raise ValueError(f"{path}: tensor '{name}' has bad data_offsets {offsets!r}")
        begin, end = offsets
        numel = math.prod(shape)
        np_dtype = np.dtype(_NP_DTYPES[dtype])
        if end - begin != numel * np_dtype.itemsize:
            raise ValueError(f"{path}: tensor '{name}' spans {end - begin} bytes, "
                             f"but {dtype}{shape} needs {numel * np_dtype.itemsize}")
        if end > len(body):
            raise ValueError(f"{path}: tensor '{name}' ends at {end}, past the end of the "
                             f"data ({len(body)} bytes)")
        spans.append((begin, end, name))
        arr = np.frombuffer(body[begin:end], dtype=np_dtype).astype(np_dtype.newbyteorder("="))
        t = torch.from_numpy(arr.reshape(shape).copy())
        if dtype == "BF16":
            t = t.view(torch.bfloat16)
        out[name] = t
    position = 0
    for begin, end, name in sorted(spans):
        if begin != position:
            raise ValueError(f"{path}: tensor '{name}' starts at {begin}, expected {position} "
                             "(gap or overlap)")
        position = end
    if position != len(body):
        raise ValueError(f"{path}: tensors end at {position} but the data is {len(body)} bytes")
    return out
