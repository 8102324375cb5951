#!/usr/bin/python3
"""Tests of ordo_torch's RoPE scaling (positions.rope_inv_freq, rope_rotate's per-row
lengths, the LLaMA model's KV-cached rotation) against hand-computed values and the
properties each method is defined by (transformers' modeling_rope_utils.py).

Alone: /usr/bin/python3 tools/oracle/tests/test_rope_scaling.py [-v]; with the others:
/usr/bin/python3 tools/oracle/test_ordo_torch.py [-v].
"""
from __future__ import annotations

import math
import sys
import unittest
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tools/oracle: ordo_torch
from ordo_torch import LlamaModel, rope_rotate  # noqa: E402
from ordo_torch.positions import rope_inv_freq  # noqa: E402

# Frequencies are float64 formulas of at most a few operations: 1e-14 relative.
TIGHT = dict(rtol=1e-14, atol=0.0)


def plain(head_dim, theta):
    return torch.tensor([theta ** (-2.0 * i / head_dim) for i in range(head_dim // 2)],
                        dtype=torch.float64)


class InverseFrequenciesTest(unittest.TestCase):
    def test_linear_divides_every_frequency(self):
        w, attention = rope_inv_freq(8, 10000.0, {"rope_type": "linear", "factor": 4.0}, 16)
        torch.testing.assert_close(w, plain(8, 10000.0) / 4.0, **TIGHT)
        self.assertEqual(attention, 1.0)

    def test_dynamic_is_plain_up_to_max_position_embeddings_then_grows_the_base(self):
        s = {"rope_type": "dynamic", "factor": 2.0}
        for n in (1, 8, 16):
            torch.testing.assert_close(rope_inv_freq(8, 100.0, s, 16, n)[0], plain(8, 100.0),
                                       **TIGHT)
        # 32 positions, max 16, factor 2: base 100 * (2 * 2 - 1)^(8 / 6) = 100 * 3^(4/3)
        torch.testing.assert_close(rope_inv_freq(8, 100.0, s, 16, 32)[0],
                                   plain(8, 100.0 * 3.0 ** (4.0 / 3.0)), **TIGHT)
        # The lowest frequency (i = 0) is always 1: the base grows, w_0 = base^0.
        self.assertEqual(float(rope_inv_freq(8, 100.0, s, 16, 999)[0][0]), 1.0)

    def test_yarn_ramps_from_plain_to_interpolated(self):
        # head_dim 16, theta 100, original 16: dim(r) = 16 ln(16 / (2 pi r)) / (2 ln 100);
        # dim(32) < 0 -> low 0, dim(1) = 1.62 -> high 2: i = 0 plain, i = 1 half way,
        # i >= 2 divided by the factor.
        s = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}
        w, attention = rope_inv_freq(16, 100.0, s, 64)
        p = plain(16, 100.0)
        ratio = (w / p).tolist()
        self.assertAlmostEqual(ratio[0], 1.0, places=14)
        self.assertAlmostEqual(ratio[1], 0.5 / 4.0 + 0.5, places=14)
        for r in ratio[2:]:
            self.assertAlmostEqual(r, 0.25, places=14)
        self.assertAlmostEqual(attention, 0.1 * math.log(4.0) + 1.0, places=14)
        # An explicit attention factor is taken as it is; no truncation moves the ramp.
        _, given = rope_inv_freq(16, 100.0, dict(s, attention_factor=1.5), 64)
        self.assertEqual(given, 1.5)
        loose = rope_inv_freq(16, 100.0, dict(s, truncate=False), 64)[0] / p
        high = 16 * math.log(16 / (2 * math.pi)) / (2 * math.log(100.0))
        self.assertAlmostEqual(float(loose[1]), 0.25 * (1 / high) + (1 - 1 / high), places=12)

    def test_llama3_keeps_high_divides_low_and_smooths_between(self):
        # head_dim 16, theta 100: wavelengths 2 pi / 100^(-i/8) = 6.28, 11.2, 19.9, ...
        # original 16, low_freq_factor 1, high_freq_factor 2: < 8 kept, > 16 divided.
        s = {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
             "high_freq_factor": 2.0, "original_max_position_embeddings": 16}
        w, _ = rope_inv_freq(16, 100.0, s, 64)
        p = plain(16, 100.0)
        ratio = (w / p).tolist()
        self.assertAlmostEqual(ratio[0], 1.0, places=14)
        wavelength = 2 * math.pi / float(p[1])
        smooth = 16 / wavelength - 1.0
        self.assertTrue(0 < smooth < 1)
        self.assertAlmostEqual(ratio[1], (1 - smooth) / 4.0 + smooth, places=14)
        for r in ratio[2:]:
            self.assertAlmostEqual(r, 0.25, places=14)

    def test_default_and_none_are_plain(self):
        for s in (None, {"rope_type": "default"}):
            w, attention = rope_inv_freq(8, 500.0, s, 16)
            torch.testing.assert_close(w, plain(8, 500.0), **TIGHT)
            self.assertEqual(attention, 1.0)


class RotationTest(unittest.TestCase):
    def test_the_attention_factor_scales_the_rotated_vector(self):
        x = torch.randn(5, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
        s = {"rope_type": "yarn", "factor": 4.0, "attention_factor": 1.25}
        y = rope_rotate(x, torch.arange(5), 100.0, "half", s, 16)
        torch.testing.assert_close(y.norm(dim=-1), 1.25 * x.norm(dim=-1), rtol=1e-13, atol=0)

    def test_per_row_lengths_choose_each_rows_frequencies(self):
        x = torch.randn(2, 3, 6, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
        s = {"rope_type": "dynamic", "factor": 2.0}
        lengths = torch.tensor([[4, 4, 4, 4, 5, 6], [6] * 6])
        y = rope_rotate(x, torch.arange(6), 100.0, "interleaved", s, 4, lengths)
        for b in range(2):
            for t in range(6):
                alone = rope_rotate(x[b, :, t:t + 1], torch.tensor([t]), 100.0, "interleaved",
                                    s, 4, torch.tensor([int(lengths[b, t])]))
                torch.testing.assert_close(y[b, :, t:t + 1], alone, rtol=0, atol=0)


class CachedDecodingTest(unittest.TestCase):
    """A KV-cached decode rotates each token for the length the sequence had when it was
    computed; with dynamic scaling that differs from one pass past the threshold."""

    def model(self, scaling):
        cfg = {"model_type": "llama", "vocab_size": 20, "hidden_size": 16,
               "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 2,
               "max_position_embeddings": 6, "bos_token_id": 2, "eos_token_id": 1,
               "rope_theta": 100.0, "rope_scaling": scaling}
        torch.manual_seed(3)
        model = LlamaModel(cfg).to(torch.float64).eval()
        with torch.no_grad():
            for p in model.parameters():
                p.normal_(0.0, 0.5)
        return model

    def logits(self, model, ids, prompt):
        T = len(ids)
        lengths = model._rope_lengths([T], [prompt], T)
        with torch.no_grad():
            return model.lm_logits(torch.tensor([ids]), None, lengths)[0]

    def test_cached_equals_one_pass_for_fixed_frequencies(self):
        ids = [2, 5, 7, 9, 4, 3, 8, 11, 6, 12, 13, 14]
        for scaling in (None, {"rope_type": "linear", "factor": 2.0},
                        {"rope_type": "yarn", "factor": 2.0},
                        {"rope_type": "llama3", "factor": 2.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 2.0, "original_max_position_embeddings": 6}):
            with self.subTest(scaling=scaling):
                model = self.model(scaling)
                torch.testing.assert_close(self.logits(model, ids, 3),
                                           self.logits(model, ids, len(ids)), rtol=1e-12, atol=1e-12)

    def test_dynamic_cached_differs_from_one_pass_only_past_the_threshold(self):
        model = self.model({"rope_type": "dynamic", "factor": 2.0})
        ids = [2, 5, 7, 9, 4, 3, 8, 11, 6, 12, 13, 14]
        cached, one_pass = self.logits(model, ids, 3), self.logits(model, ids, len(ids))
        short = self.logits(model, ids[:6], 3)  # never past 6 positions: plain RoPE
        torch.testing.assert_close(short, self.logits(model, ids[:6], 6), rtol=1e-12, atol=1e-12)
        # The last row of a cached decode sees the whole sequence with the newest base
        # for itself, but keys rotated with the bases of their own steps: not one pass.
        self.assertGreater(float((cached[-1] - one_pass[-1]).abs().max()), 1e-3)
        # And a cached decode's rows are those of the shorter sequences computed alone:
        # row t, once computed, never changes.
        for t in range(3, len(ids)):
            prefix = self.logits(model, ids[:t + 1], 3)
            torch.testing.assert_close(cached[:t + 1], prefix, rtol=1e-12, atol=1e-12)


if __name__ == "__main__":
    unittest.main()
