#!/usr/bin/python3
"""`ordo viz pe` against PyTorch: the CSV tables equal what PyTorch code computes.

    /usr/bin/python3 tools/oracle/test_viz_pe.py path/to/ordo [-v]

Sinusoidal: the classic PositionalEncoding module (the PyTorch tutorial's, as the
seeds trained with), run in float64 so that the comparison measures ordo and not
float32 rounding of pos * div_term (in float32 that code itself is 3.0e-6 off at
64 x 128 and 6.6e-6 at 100 x 512; printed for the record). Tolerance 1e-6.
RoPE: Hugging Face's rotate_half cos/sin table via the oracle (ordo_torch.rope_rotate
of the vector [1..1, 0..0]), and the split sinusoidal layout of weights/sinusoidal-split
via ordo_torch.sinusoidal_positions. ALiBi: -m_h |key - query| with the paper's slopes
(ordo_torch.alibi_slopes). T5: the model's own table looked up by the mesh_tensorflow
bucket function's port (ordo_torch.t5_relative_position_bucket). Tolerance 1e-6.
"""
from __future__ import annotations

import math
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ordo_torch import (alibi_slopes, read_safetensors, rope_rotate, sinusoidal_positions,  # noqa: E402
                        t5_relative_position_bucket)

ORDO = ""
ROOT = Path(__file__).resolve().parents[2]


class PositionalEncoding(nn.Module):
    """The classic module, verbatim but for dropout, the batch axis and the dtype
    (torch.float there, float64 here unless asked)."""

    def __init__(self, d_model: int, max_len: int = 5000, dtype: torch.dtype = torch.float64):
        super().__init__()
        pe = torch.zeros(max_len, d_model, dtype=dtype)
        position = torch.arange(0, max_len, dtype=dtype).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).to(dtype) * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)


def viz_csv(*arguments: str) -> np.ndarray:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "pe.csv"
        subprocess.run([ORDO, "viz", "pe", *arguments, "--out", str(out)], check=True, capture_output=True)
        return np.loadtxt(out, delimiter=",", ndmin=2)


class VizPe(unittest.TestCase):
    def test_sinusoidal_is_the_classic_positional_encoding(self):
        for length, dim in ((64, 128), (100, 512), (5, 4)):
            with self.subTest(length=length, dim=dim):
                got = viz_csv("--scheme", "sinusoidal", "--length", str(length), "--dim", str(dim))
                want = PositionalEncoding(dim, max_len=length).pe.numpy()
                float32 = PositionalEncoding(dim, max_len=length, dtype=torch.float).pe.numpy()
                self.assertEqual(got.shape, want.shape)
                worst = np.abs(got - want).max()
                print(f"\n  sinusoidal {length} x {dim}: max |ordo - torch float64| = {worst:.2e}, "
                      f"torch float32 vs float64 = {np.abs(float32 - want).max():.2e}", file=sys.stderr)
                self.assertLess(worst, 1e-6)

    def test_split_layout_of_a_model(self):
        got = viz_csv("--model", str(ROOT / "weights" / "sinusoidal-split"), "--length", "45")
        want = sinusoidal_positions(torch.arange(45), 128, layout="split").numpy()
        self.assertLess(np.abs(got - want).max(), 1e-6)

    def test_rope_is_the_rotate_half_cos_sin_table(self):
        length, dim = 50, 32
        got = viz_csv("--scheme", "rope", "--length", str(length), "--dim", str(dim))
        ones = torch.cat([torch.ones(1, length, dim // 2), torch.zeros(1, length, dim // 2)], dim=-1)
        want = rope_rotate(ones.to(torch.float64), torch.arange(length)).reshape(length, dim).numpy()
        self.assertLess(np.abs(got - want).max(), 1e-6)

    def test_alibi_is_minus_slope_times_distance(self):
        for heads in (8, 6):
            for stack, bidirectional in (("encoder", True), ("decoder", False)):
                with self.subTest(heads=heads, stack=stack):
                    got = viz_csv("--scheme", "alibi", "--heads", str(heads), "--length", "12", "--stack", stack)
                    relative = np.arange(-11, 12 if bidirectional else 1)
                    want = -np.array(alibi_slopes(heads))[:, None] * np.abs(relative)[None, :]
                    self.assertEqual(got.shape, want.shape)
                    self.assertLess(np.abs(got - want).max(), 1e-6)

    def test_t5_relative_is_the_models_table_by_bucket(self):
        model = ROOT / "weights" / "t5_relative"
        tensors = read_safetensors(model / "model.safetensors")
        for stack, bidirectional in (("encoder", True), ("decoder", False)):
            with self.subTest(stack=stack):
                got = viz_csv("--scheme", "t5_relative", "--model", str(model), "--length", "40", "--stack", stack)
                table = tensors[f"model.{stack}.relative_attention_bias.weight"].to(torch.float64)  # [buckets, heads]
                relative = torch.arange(-39, 40 if bidirectional else 1)
                buckets = t5_relative_position_bucket(relative, bidirectional, 32, 128)
                want = table[buckets].T.numpy()  # [heads, relative positions]
                self.assertEqual(got.shape, want.shape)
                self.assertLess(np.abs(got - want).max(), 1e-6)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: test_viz_pe.py path/to/ordo [-v]")
    ORDO = sys.argv.pop(1)
    unittest.main()
