#!/usr/bin/python3
"""Tests of ordo_torch.positions: sinusoids, RoPE, ALiBi slopes and T5 buckets against
their formulas and hand tables, and how a model applies them.

Alone: /usr/bin/python3 tools/oracle/tests/test_positions.py [-v]; with the others:
/usr/bin/python3 tools/oracle/test_ordo_torch.py [-v].
"""
from __future__ import annotations

import itertools
import math
import sys
import unittest
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tools/oracle: ordo_torch
from oracle_fixtures import random_model  # noqa: E402
from ordo_torch import (alibi_slopes, rope_rotate, sinusoidal_positions,  # noqa: E402
                        t5_relative_position_bucket)


class PositionsTest(unittest.TestCase):
    def test_sinusoidal_formula(self):
        d = 10
        for layout, freqs in itertools.product(("interleaved", "split"),
                                               ("vaswani", "tensor2tensor")):
            pe = sinusoidal_positions(torch.arange(50), d, layout, freqs)
            for p in (0, 1, 7, 49):
                for i in range(d // 2):
                    w = (10000.0 ** (-2 * i / d) if freqs == "vaswani"
                         else math.exp(-i * math.log(10000.0) / (d / 2 - 1)))
                    s, c = (2 * i, 2 * i + 1) if layout == "interleaved" else (i, d // 2 + i)
                    self.assertAlmostEqual(pe[p, s].item(), math.sin(p * w), delta=1e-7)
                    self.assertAlmostEqual(pe[p, c].item(), math.cos(p * w), delta=1e-7)

    def test_positions_start_at_offset(self):
        # Sinusoidal: offset 1 equals positions 1..n of offset 0; learned uses rows offset+s.
        a = random_model(0, position_offset=1)
        b = random_model(0)
        src = torch.tensor([[5, 9, 3, 1]])
        emb = b.model.shared.weight[src] + sinusoidal_positions(torch.arange(1, 5), 16)
        self.assertTrue(torch.allclose(a.model.encoder.embed(src, a.model.shared.weight), emb))
        m = random_model(0, position_encoding="learned", position_offset=2)
        emb = m.model.shared.weight[src] + m.model.encoder.embed_positions.weight[2:6]
        self.assertTrue(torch.equal(m.model.encoder.embed(src, m.model.shared.weight), emb))

    def test_learned_positions_too_long(self):
        model = random_model(position_encoding="learned", max_position_embeddings=6)
        model.encode(torch.tensor([[3] * 6]))
        with self.assertRaisesRegex(ValueError, "max_position_embeddings=6"):
            model.encode(torch.tensor([[3] * 7]))

    @staticmethod
    def naive_rope(x, p, theta, layout):
        out = x.clone().double()
        hd = x.shape[-1]
        for i in range(hd // 2):
            angle = p * theta ** (-2 * i / hd)
            a, b = (i, i + hd // 2) if layout == "half" else (2 * i, 2 * i + 1)
            out[a] = x[a] * math.cos(angle) - x[b] * math.sin(angle)
            out[b] = x[a] * math.sin(angle) + x[b] * math.cos(angle)
        return out.to(x.dtype)

    def test_rope(self):
        g = torch.Generator().manual_seed(0)
        hd = 8
        q, k = torch.randn(hd, generator=g), torch.randn(hd, generator=g)
        for layout in ("half", "interleaved"):
            for theta in (10000.0, 100.0):
                with self.subTest(layout=layout, theta=theta):
                    pos = torch.arange(40)
                    rq = rope_rotate(q.expand(40, hd), pos, theta, layout)
                    rk = rope_rotate(k.expand(40, hd), pos, theta, layout)
                    # Norms are preserved.
                    self.assertTrue(torch.allclose(rq.norm(dim=-1), q.norm().expand(40), atol=1e-5))
                    # <R_m q, R_n k> depends only on m - n.
                    for delta in (0, 1, 5, -3):
                        dots = [float(rq[m] @ rk[m - delta]) for m in range(max(delta, 0) + 3, 37)]
                        self.assertLess(max(dots) - min(dots), 1e-4, (delta, dots))
                    # The formula, pair by pair.
                    for p in (0, 1, 13, 39):
                        self.assertTrue(torch.allclose(rq[p], self.naive_rope(q, p, theta, layout),
                                                       atol=1e-6))
        # half layout = Hugging Face LLaMA rotate_half.
        x = torch.randn(2, 3, 5, hd, generator=g)
        pos = torch.arange(5) + 4
        inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2).double() / hd))
        freqs = pos.double()[:, None] * inv[None]
        emb = torch.cat([freqs, freqs], dim=-1)

        def rotate_half(t):
            return torch.cat((-t[..., hd // 2:], t[..., : hd // 2]), dim=-1)

        hf = x * emb.cos().to(x.dtype) + rotate_half(x) * emb.sin().to(x.dtype)
        self.assertTrue(torch.allclose(rope_rotate(x, pos, 10000.0, "half"), hf, atol=1e-6))
        # The two layouts are the same rotation on permuted dimensions.
        perm = torch.tensor([i // 2 + (hd // 2) * (i % 2) for i in range(hd)])
        self.assertTrue(torch.allclose(rope_rotate(x[..., perm], pos, 10000.0, "interleaved"),
                                       rope_rotate(x, pos, 10000.0, "half")[..., perm], atol=1e-6))


class RelativePositionsTest(unittest.TestCase):
    def test_alibi_slopes_are_the_papers(self):
        self.assertEqual(alibi_slopes(8), [2.0 ** -h for h in range(1, 9)])
        for got, want in zip(alibi_slopes(16), [2.0 ** (-h / 2) for h in range(1, 17)]):
            self.assertAlmostEqual(got, want, places=15)
        twelve = alibi_slopes(12)
        self.assertEqual(twelve[:8], alibi_slopes(8))
        for got, e in zip(twelve[8:], (0.5, 1.5, 2.5, 3.5)):
            self.assertAlmostEqual(got, 2.0 ** -e, places=15)

    def test_t5_buckets_follow_the_hand_table(self):
        # The same table as tests/test_relative_positions.cpp (T5's 32 buckets, 128).
        bidirectional = [(7, None), (11, 8), (15, 9), (22, 10), (31, 11), (45, 12), (63, 13),
                         (90, 14), (10 ** 9, 15)]
        causal = [(15, None), (18, 16), (20, 17), (23, 18), (26, 19), (30, 20), (34, 21),
                  (39, 22), (45, 23), (51, 24), (58, 25), (66, 26), (76, 27), (86, 28),
                  (98, 29), (112, 30), (10 ** 9, 31)]

        def by_hand(table, n):
            bucket = next(b for last, b in table if n <= last)
            return n if bucket is None else bucket

        relative = torch.arange(-200, 201)
        got_b = t5_relative_position_bucket(relative, True, 32, 128).tolist()
        got_c = t5_relative_position_bucket(relative, False, 32, 128).tolist()
        for r, b, c in zip(relative.tolist(), got_b, got_c):
            self.assertEqual(b, by_hand(bidirectional, abs(r)) + (16 if r > 0 else 0), r)
            self.assertEqual(c, by_hand(causal, max(-r, 0)), r)


if __name__ == "__main__":
    unittest.main()
