#!/usr/bin/python3
"""Tests of ordo_torch.safetensors_io: the writer against the format's layout, the reader's
round trip and validation.

Alone: /usr/bin/python3 tools/oracle/tests/test_safetensors_io.py [-v]; with the others:
/usr/bin/python3 tools/oracle/test_ordo_torch.py [-v].
"""
from __future__ import annotations

import json
import struct
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tools/oracle: ordo_torch
import oracle_fixtures  # noqa: E402,F401  (float64 by default: the tensors below are made in it)
from ordo_torch import read_safetensors, write_safetensors  # noqa: E402


class SafetensorsTest(unittest.TestCase):
    def tensors(self):
        g = torch.Generator().manual_seed(1)
        return {
            "b.f32": torch.randn(3, 5, generator=g),
            "a.f16": torch.randn(7, generator=g).half(),
            "c.bf16": torch.randn(2, 3, generator=g).bfloat16(),
            "d.i64": torch.arange(-3, 3, dtype=torch.int64).reshape(2, 3),
            "e.bool": torch.tensor([True, False, True]),
            "f.scalar": torch.tensor(2.5),
            "g.empty": torch.zeros(0, 4),
            "h.f64": torch.randn(3, dtype=torch.float64, generator=g),
        }

    def test_writer_output_follows_the_spec(self):
        tensors = self.tensors()
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "x.safetensors"
            write_safetensors(path, tensors, metadata={"format": "pt"})
            raw = path.read_bytes()
        (n,) = struct.unpack("<Q", raw[:8])
        self.assertEqual(n % 8, 0)
        text = raw[8:8 + n].decode("utf-8")
        self.assertEqual(text, text.rstrip(" ") + " " * (len(text) - len(text.rstrip(" "))))
        header = json.loads(text)
        self.assertEqual(header.pop("__metadata__"), {"format": "pt"})
        self.assertEqual(sorted(header), sorted(tensors))
        data = raw[8 + n:]
        position = 0
        names = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
                 "I64": torch.int64, "BOOL": torch.bool, "F64": torch.float64}
        for name in sorted(tensors):  # data in sorted-name order, contiguous
            info, t = header[name], tensors[name]
            self.assertEqual(set(info), {"dtype", "shape", "data_offsets"})
            self.assertEqual(names[info["dtype"]], t.dtype)
            self.assertEqual(info["shape"], list(t.shape))
            begin, end = info["data_offsets"]
            self.assertEqual(begin, position)
            position = end
            blob = data[begin:end]
            if t.dtype == torch.bfloat16:  # the high half of each float32
                bits = np.frombuffer(t.float().numpy().astype("<f4").tobytes(), "<u4") >> 16
                self.assertEqual(blob, bits.astype("<u2").tobytes())
            elif t.dtype == torch.bool:
                self.assertEqual(blob, bytes(int(v) for v in t.flatten().tolist()))
            else:
                np_type = {torch.float32: "<f4", torch.float16: "<f2", torch.int64: "<i8",
                           torch.float64: "<f8"}[t.dtype]
                self.assertEqual(blob, t.numpy().astype(np_type).tobytes())
        self.assertEqual(position, len(data))

    def test_round_trip_and_validation(self):
        tensors = self.tensors()
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "x.safetensors"
            write_safetensors(path, tensors)
            back = read_safetensors(path)
            self.assertEqual(sorted(back), sorted(tensors))
            for name, t in tensors.items():
                self.assertEqual(back[name].dtype, t.dtype, name)
                self.assertTrue(torch.equal(back[name], t), name)
            raw = path.read_bytes()
            path.write_bytes(raw[:-1])
            with self.assertRaisesRegex(ValueError, "h.f64.*past the end"):
                read_safetensors(path)
            (n,) = struct.unpack("<Q", raw[:8])
            header = json.loads(raw[8:8 + n])
            header["b.f32"]["data_offsets"][0] += 4  # claims 4 bytes fewer: size mismatch
            text = json.dumps(header).encode()
            text += b" " * (-len(text) % 8)
            path.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + n:])
            with self.assertRaisesRegex(ValueError, "b.f32"):
                read_safetensors(path)


if __name__ == "__main__":
    unittest.main()
