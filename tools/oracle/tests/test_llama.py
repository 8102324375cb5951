#!/usr/bin/python3
"""Tests of ordo_torch.llama (LlamaModel) against a naive loop written from the formulas,
its pieces (RMSNorm, SwiGLU, grouped-query attention, RoPE), and its directories.

Alone: /usr/bin/python3 tools/oracle/tests/test_llama.py [-v]; with the others:
/usr/bin/python3 tools/oracle/test_ordo_torch.py [-v].
"""
from __future__ import annotations

import itertools
import json
import math
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tools/oracle: ordo_torch
from oracle_fixtures import LLAMA_VARIANTS, close, random_llama  # noqa: E402
from ordo_torch import (Attention, LlamaModel, load_llama_dir, read_safetensors,  # noqa: E402
                        repeat_kv, rms_norm, rope_rotate, save_llama_dir, write_safetensors)


def naive_llama_logits(model: LlamaModel, ids) -> np.ndarray:
    """Logits [T, V] in float64, written from the formulas: for each t the whole prefix
    ids[:t + 1] is recomputed (no cache), position by position and head by head; RoPE as
    complex multiplication of (x_i, x_{i + hd/2}) by e^{i p theta^(-2i/hd)}."""
    c = model.config
    w = {k: v.double().numpy() for k, v in model.state_dict().items()}
    H, KV, hd, eps = (c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"],
                      c["rms_norm_eps"])
    freqs = c["rope_theta"] ** (-2.0 * np.arange(hd // 2) / hd)

    def rms(x, weight):
        return weight * x / math.sqrt(float(np.mean(x * x)) + eps)

    def linear(name, x):
        y = w[name + ".weight"] @ x
        return y + w[name + ".bias"] if name + ".bias" in w else y

    def rope(v, p):
        z = (v[: hd // 2] + 1j * v[hd // 2:]) * np.exp(1j * p * freqs)
        return np.concatenate([z.real, z.imag])

    out_table = w["lm_head.weight"] if "lm_head.weight" in w else w["model.embed_tokens.weight"]
    logits = []
    for t in range(len(ids)):
        hs = [w["model.embed_tokens.weight"][i] for i in ids[:t + 1]]
        for layer in range(c["num_hidden_layers"]):
            pre = f"model.layers.{layer}."
            xs = [rms(h, w[pre + "input_layernorm.weight"]) for h in hs]
            qs = [linear(pre + "self_attn.q_proj", x).reshape(H, hd) for x in xs]
            ks = [linear(pre + "self_attn.k_proj", x).reshape(KV, hd) for x in xs]
            vs = [linear(pre + "self_attn.v_proj", x).reshape(KV, hd) for x in xs]
            new = []
            for s in range(t + 1):
                heads = []
                for h in range(H):
                    g = h // (H // KV)
                    q = rope(qs[s][h], s)
                    scores = np.array([rope(ks[u][g], u) @ q for u in range(s + 1)]) / math.sqrt(hd)
                    p = np.exp(scores - scores.max())
                    p /= p.sum()
                    heads.append(sum(p[u] * vs[u][g] for u in range(s + 1)))
                h1 = hs[s] + linear(pre + "self_attn.o_proj", np.concatenate(heads))
                x2 = rms(h1, w[pre + "post_attention_layernorm.weight"])
                gate = linear(pre + "mlp.gate_proj", x2)
                silu = gate / (1 + np.exp(-gate))
                up = linear(pre + "mlp.up_proj", x2)
                new.append(h1 + linear(pre + "mlp.down_proj", silu * up))
            hs = new
        logits.append(out_table @ rms(hs[t], w["model.norm.weight"]))
    return np.array(logits)


def log_softmax64(x: np.ndarray) -> np.ndarray:
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


class LlamaPiecesTest(unittest.TestCase):
    def test_rms_norm_formula(self):
        g = torch.Generator().manual_seed(0)
        x, weight = torch.randn(3, 5, 8, generator=g) * 3, torch.randn(8, generator=g)
        got = rms_norm(x, weight, 1e-5)
        self.assertEqual(got.dtype, torch.float64)  # the oracle's float64 stays float64
        for low in (torch.float32, torch.float16):  # the trainer's dtypes: float32 or wider
            self.assertEqual(rms_norm(x.to(low), weight.float(), 1e-5).dtype, torch.float32)
        for row, out in zip(x.reshape(-1, 8).tolist(), got.reshape(-1, 8).tolist()):
            rms = math.sqrt(sum(v * v for v in row) / 8 + 1e-5)
            want = [wi * v / rms for wi, v in zip(weight.tolist(), row)]
            self.assertTrue(np.allclose(out, want, rtol=1e-6, atol=1e-6))

    def test_swiglu(self):
        model = random_llama(1, mlp_bias=True)
        mlp = model.model.layers[0].mlp
        x = torch.randn(16, generator=torch.Generator().manual_seed(2))
        w = {k: v.double().numpy() for k, v in mlp.state_dict().items()}
        xd = x.double().numpy()
        gate = w["gate_proj.weight"] @ xd + w["gate_proj.bias"]
        up = w["up_proj.weight"] @ xd + w["up_proj.bias"]
        want = w["down_proj.weight"] @ (gate / (1 + np.exp(-gate)) * up) + w["down_proj.bias"]
        self.assertTrue(np.allclose(mlp(x).detach().numpy(), want, rtol=1e-5, atol=1e-4))

    def test_repeat_kv(self):
        x = torch.randn(2, 3, 5, 4)
        y = repeat_kv(x, 4)
        self.assertEqual(tuple(y.shape), (2, 12, 5, 4))
        for h in range(12):
            self.assertTrue(torch.equal(y[:, h], x[:, h // 4]))

    def test_grouped_query_attention_equals_full_attention_with_repeated_kv(self):
        g = torch.Generator().manual_seed(3)
        x = torch.randn(2, 6, 16, generator=g)
        pad = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
        for kv, rope in itertools.product((1, 2, 4), (None, (10000.0, "half", 2),
                                                      (100.0, "interleaved", 0))):
            with self.subTest(kv_heads=kv, rope=rope):
                grouped = Attention(16, 4, kv_heads=kv)
                full = Attention(16, 4)
                with torch.no_grad():
                    for p in grouped.parameters():
                        p.copy_(0.4 * torch.randn(p.shape, generator=g))
                    full.load_state_dict({k: v for k, v in grouped.state_dict().items()
                                          if not k.startswith(("k_proj", "v_proj"))}, strict=False)
                    for name in ("k_proj", "v_proj"):  # head h gets K/V head h // (4 / kv)
                        src = getattr(grouped, name)
                        rows = torch.cat([torch.arange(h // (4 // kv) * 4, h // (4 // kv) * 4 + 4)
                                          for h in range(4)])
                        getattr(full, name).weight.copy_(src.weight[rows])
                        getattr(full, name).bias.copy_(src.bias[rows])
                self.assertEqual(tuple(grouped.k_proj.weight.shape), (kv * 4, 16))
                for causal in (False, True):
                    a = grouped(x, x, key_padding_mask=pad, causal=causal, rope=rope)
                    b = full(x, x, key_padding_mask=pad, causal=causal, rope=rope)
                    self.assertTrue(torch.allclose(a, b, atol=1e-5))
                if kv == 4 and rope is None:  # the explicit path = multi_head_attention_forward
                    a = grouped._explicit(x, x, pad, True, None)
                    self.assertTrue(torch.allclose(a, grouped(x, x, pad, causal=True), atol=1e-5))

    def test_llama_rope_is_the_complex_rotation(self):
        g = torch.Generator().manual_seed(4)
        hd = 12
        x = torch.randn(3, 7, hd, generator=g)
        pos = torch.arange(7) * 3
        for theta in (10000.0, 500.0):
            got = rope_rotate(x, pos, theta, "half").double().numpy()
            freqs = theta ** (-2.0 * np.arange(hd // 2) / hd)
            xd = x.double().numpy()
            z = (xd[..., : hd // 2] + 1j * xd[..., hd // 2:]) * np.exp(
                1j * pos.numpy()[:, None] * freqs[None, :])
            self.assertTrue(np.allclose(got, np.concatenate([z.real, z.imag], -1), atol=2e-6))


class LlamaModelTest(unittest.TestCase):
    VARIANTS = LLAMA_VARIANTS
    def test_lm_score_equals_a_naive_loop(self):
        ids = [2, 7, 19, 4, 4, 28, 11]
        for i, (name, overrides) in enumerate(self.VARIANTS.items()):
            with self.subTest(variant=name):
                model = random_llama(10 + i, **overrides)
                naive = naive_llama_logits(model, ids)
                got = model.lm_logits(torch.tensor([ids]))[0].detach().double().numpy()
                self.assertTrue(np.allclose(got, naive, rtol=1e-4, atol=1e-4),
                                np.abs(got - naive).max())
                want = log_softmax64(naive)[range(len(ids) - 1), ids[1:]]
                self.assertTrue(np.allclose(model.lm_score(ids), want, rtol=1e-5, atol=1e-4))
                self.assertEqual(len(model.lm_score(ids)), len(ids) - 1)
                self.assertEqual(model.lm_score([2]), [])
                # Greedy is the argmax of the naive logits, step by step.
                gen, margins = model.lm_greedy([2, 7], 5)
                seq = [2, 7] + gen
                naive = naive_llama_logits(model, seq[:-1])[1:]
                self.assertEqual(naive.argmax(-1).tolist(), gen)
                top2 = np.sort(naive, axis=-1)[:, -2:]
                self.assertTrue(np.allclose(margins, top2[:, 1] - top2[:, 0], atol=1e-4))

    def test_greedy_stops_at_any_eos(self):
        model = random_llama(5, eos_token_id=[1, 3], tie_word_embeddings=False)
        for eos in (1, 3):
            with torch.no_grad():
                model.lm_head.weight[eos] = 50 * model.model.norm.weight  # eos wins
            ids, _ = model.lm_greedy([2, 5], 6)
            self.assertEqual(ids[-1], eos)
            hyps, _ = model.lm_beam_search([2, 5], 2, 1, 1.0, 6)
            self.assertEqual(hyps[0]["ids"], [eos])
            self.assertTrue(hyps[0]["finished"])
            with torch.no_grad():
                model.lm_head.weight[eos] = 0.0

    def test_beam_size_1_is_greedy(self):
        for i, (name, overrides) in enumerate(self.VARIANTS.items()):
            model = random_llama(20 + i, **overrides)
            for prompt in ([2], [2, 9, 14], [2, 5, 5, 5, 17, 26, 8, 21]):
                with self.subTest(variant=name, prompt=prompt):
                    ids, _ = model.lm_greedy(prompt, 7)
                    (hyp,), _ = model.lm_beam_search(prompt, 1, 1, 1.0, 7)
                    self.assertEqual(hyp["ids"], ids)
                    self.assertTrue(close(hyp["score"],
                                          math.fsum(model.lm_score(prompt + ids)[len(prompt) - 1:]),
                                          1e-10))

    def test_sharded_save_load_equals_single_file(self):
        for dtype, shards in (("F32", 2), ("F16", 3), ("BF16", 5)):
            with self.subTest(dtype=dtype, shards=shards), \
                    tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as many:
                model = random_llama(6, attention_bias=True)
                save_llama_dir(model, one, dtype=dtype)
                save_llama_dir(model, many, dtype=dtype, shards=shards)
                files = sorted(f.name for f in Path(many).iterdir())
                want = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
                self.assertEqual(files, sorted(want + ["config.json",
                                                       "model.safetensors.index.json"]))
                index = json.loads((Path(many) / "model.safetensors.index.json").read_text())
                self.assertEqual(set(index), {"metadata", "weight_map"})
                self.assertEqual(set(index["weight_map"]), set(model.state_dict()))
                self.assertEqual(set(index["weight_map"].values()), set(want))
                single = read_safetensors(Path(one) / "model.safetensors")
                self.assertEqual(index["metadata"]["total_size"],
                                 sum(t.numel() * t.element_size() for t in single.values()))
                for file in want:  # each shard holds exactly what the map says, as in the file
                    shard = read_safetensors(Path(many) / file)
                    self.assertEqual(set(shard), {k for k, f in index["weight_map"].items()
                                                  if f == file})
                    for k, t in shard.items():
                        self.assertTrue(torch.equal(t, single[k]) and t.dtype == single[k].dtype)
                config = json.loads((Path(one) / "config.json").read_text())
                self.assertEqual(config["torch_dtype"], {"F32": "float32", "F16": "float16",
                                                         "BF16": "bfloat16"}[dtype])
                a, b = load_llama_dir(one), load_llama_dir(many)
                for k, v in a.state_dict().items():
                    self.assertTrue(torch.equal(v, b.state_dict()[k]), k)
                    self.assertTrue(torch.equal(v, model.state_dict()[k]), k)  # rounded in place
                self.assertEqual(a.lm_score([2, 8, 9, 1]), b.lm_score([2, 8, 9, 1]))
                self.assertEqual(a.lm_score([2, 8, 9, 1]), model.lm_score([2, 8, 9, 1]))

    def test_load_rejects_bad_directories(self):
        with tempfile.TemporaryDirectory() as tmp:
            model = random_llama(7, tie_word_embeddings=True)
            save_llama_dir(model, tmp, shards=2)
            self.assertNotIn("lm_head.weight", read_safetensors(
                Path(tmp) / "model-00002-of-00002.safetensors"))
            index_path = Path(tmp) / "model.safetensors.index.json"
            index = json.loads(index_path.read_text())
            moved = next(k for k, f in index["weight_map"].items() if f.startswith("model-00001"))
            index["weight_map"][moved] = "model-00002-of-00002.safetensors"
            index_path.write_text(json.dumps(index))
            with self.assertRaisesRegex(ValueError, "not mapped to this file"):
                load_llama_dir(tmp)
        with tempfile.TemporaryDirectory() as tmp:
            save_llama_dir(random_llama(7), tmp)
            tensors = read_safetensors(Path(tmp) / "model.safetensors")
            del tensors["model.layers.1.mlp.up_proj.weight"]
            write_safetensors(Path(tmp) / "model.safetensors", tensors)
            with self.assertRaisesRegex(ValueError, "model.layers.1.mlp.up_proj.weight"):
                load_llama_dir(tmp)


if __name__ == "__main__":
    unittest.main()
