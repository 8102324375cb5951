#!/usr/bin/python3
"""Self-checks of the PyTorch oracle (tools/oracle/ordo_torch/) and the parity-model generator.

    /usr/bin/python3 tools/oracle/test_ordo_torch.py [-v]
"""
from __future__ import annotations

import contextlib
import io
import itertools
import json
import math
import struct
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_parity_models  # noqa: E402
from ordo_torch import (  # noqa: E402
    Attention, LlamaModel, OrdoModel, explicit_attention, full_config, llama_config,
    load_llama_dir, load_model_dir, read_safetensors, repeat_kv, rms_norm, rope_rotate,
    save_llama_dir, save_model_dir, sinusoidal_positions, write_safetensors, alibi_slopes,
    t5_relative_position_bucket)

torch.set_num_threads(1)
# The oracle computes in float64 (ordo_torch's DTYPES): every model and tensor these tests
# make does too, so that comparing two of the oracle's own computations (batched and
# single, beam and brute force) gives the same answer on every CPU, to ~1e-13. Tests of
# the float32 path the trainer and the speed peer use say float32 explicitly.
torch.set_default_dtype(torch.float64)

BASE = dict(vocab_size=40, d_model=16, encoder_layers=2, decoder_layers=2,
            encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
            decoder_ffn_dim=32, max_position_embeddings=32, pad_token_id=0, eos_token_id=1,
            decoder_start_token_id=0)

POSITION_VARIANTS = {
    "sinusoidal": dict(position_encoding="sinusoidal"),
    "sinusoidal-split": dict(position_encoding="sinusoidal", sinusoidal_layout="split"),
    "sinusoidal-t2t": dict(position_encoding="sinusoidal", sinusoidal_frequencies="tensor2tensor"),
    "learned": dict(position_encoding="learned", position_offset=2),
    "rope-half": dict(position_encoding="rope", position_offset=3),
    "rope-interleaved": dict(position_encoding="rope", rope_layout="interleaved"),
    "none": dict(position_encoding="none"),
    "alibi": dict(position_encoding="alibi", position_offset=1),
    "t5_relative": dict(position_encoding="t5_relative", relative_attention_num_buckets=8,
                        relative_attention_max_distance=6),
}


def random_model(seed=0, bias=False, base=None, **overrides) -> OrdoModel:
    """A model with large random weights (outputs far from degenerate)."""
    torch.manual_seed(seed)
    model = OrdoModel(dict(BASE if base is None else base, **overrides),
                      final_logits_bias=bias).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.2 * torch.randn(p.shape))
            else:
                p.copy_(0.4 * torch.randn(p.shape))
    return model


class ConfigTest(unittest.TestCase):
    def test_defaults(self):
        cfg = full_config(BASE)
        self.assertEqual(cfg["decoder_vocab_size"], 40)
        self.assertEqual(cfg["position_encoding"], "sinusoidal")
        self.assertEqual(cfg["activation_function"], "relu")
        self.assertIs(cfg["normalize_before"], False)
        self.assertIs(cfg["tie_word_embeddings"], True)
        self.assertEqual(cfg["layer_norm_eps"], 1e-5)
        self.assertEqual(cfg["rope_theta"], 10000.0)
        self.assertNotIn("bos_token_id", cfg)
        self.assertEqual(full_config(dict(BASE, bos_token_id=2))["bos_token_id"], 2)
        self.assertEqual(full_config(dict(BASE, note="x"))["note"], "x")  # extra keys kept

    def test_errors_name_the_key(self):
        bad = {
            "d_model": dict(BASE, d_model=None),
            "encoder_attention_heads": dict(BASE, encoder_attention_heads=3),
            "position_encoding": dict(BASE, position_encoding="xpos"),
            "relative_attention_num_buckets": dict(BASE, position_encoding="t5_relative",
                                                   relative_attention_num_buckets=3),
            "relative_attention_max_distance": dict(BASE, position_encoding="t5_relative",
                                                    relative_attention_max_distance=16),
            "normalize_before": dict(BASE, normalize_before=1),
            "vocab_size": dict(BASE, vocab_size="40"),
            "share_encoder_decoder_embeddings": dict(BASE, decoder_vocab_size=37),
            "decoder_attention_heads": dict(BASE, position_encoding="rope", d_model=12,
                                            encoder_attention_heads=2, decoder_attention_heads=4),
            "eos_token_id": dict(BASE, eos_token_id=40),
            "layer_norm_eps": dict(BASE, layer_norm_eps=0),
            "position_offset": dict(BASE, position_offset=-1),
        }
        for key, cfg in bad.items():
            with self.subTest(key=key):
                with self.assertRaisesRegex(ValueError, f"'{key}'"):
                    full_config(cfg)
        partial = dict(BASE)
        del partial["eos_token_id"]
        with self.assertRaisesRegex(ValueError, "'eos_token_id' is required"):
            full_config(partial)


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


class RoundTripTest(unittest.TestCase):
    CONFIGS = [
        dict(),
        dict(position_encoding="learned", position_offset=2, normalize_before=True,
             layernorm_embedding=True),
        dict(share_encoder_decoder_embeddings=False, decoder_vocab_size=37,
             tie_word_embeddings=False, position_encoding="rope", activation_function="gelu"),
        dict(tie_word_embeddings=False, scale_embedding=True, activation_function="swish",
             encoder_attention_heads=4, decoder_ffn_dim=24, layer_norm_eps=1e-6),
    ]

    def test_f32_round_trip_is_exact(self):
        src, tgt = [5, 9, 3, 1], [7, 4, 1]
        for i, cfg in enumerate(self.CONFIGS):
            with self.subTest(config=cfg), tempfile.TemporaryDirectory() as tmp:
                model = random_model(i, bias=i % 2 == 1, **cfg)
                save_model_dir(model, tmp, extra_config={"description": "test"})
                # Saving rounded the float64 model to F32 in place; that model is what
                # the file must give back, bit for bit.
                before = {k: v.clone() for k, v in model.state_dict().items()}
                loaded = load_model_dir(tmp)
                self.assertEqual(json.loads((Path(tmp) / "config.json").read_text())["description"],
                                 "test")
                self.assertEqual(sorted(loaded.state_dict()), sorted(before))
                for k, v in loaded.state_dict().items():
                    self.assertTrue(torch.equal(v, before[k]), k)
                self.assertEqual(read_safetensors(Path(tmp) / "model.safetensors")[
                    "model.encoder.layers.0.fc1.weight"].dtype, torch.float32)
                self.assertEqual(loaded.score(src, tgt), model.score(src, tgt))
                self.assertEqual(loaded.greedy(src, 8), model.greedy(src, 8))
                self.assertEqual(hasattr(loaded, "final_logits_bias"), i % 2 == 1)

    def test_f16_bf16_round_the_in_memory_model(self):
        for dtype, torch_dtype in (("F16", torch.float16), ("BF16", torch.bfloat16)):
            with self.subTest(dtype=dtype), tempfile.TemporaryDirectory() as tmp:
                model = random_model(3, bias=True, **self.CONFIGS[2])
                original = model.state_dict()["model.encoder.layers.0.fc1.weight"].clone()
                save_model_dir(model, tmp, dtype=dtype)
                stored = read_safetensors(Path(tmp) / "model.safetensors")
                self.assertTrue(all(t.dtype == torch_dtype for t in stored.values()))
                state = model.state_dict()
                for k, v in stored.items():
                    self.assertTrue(torch.equal(v.to(state[k].dtype), state[k]), k)
                self.assertFalse(torch.equal(original, state["model.encoder.layers.0.fc1.weight"]))
                loaded = load_model_dir(tmp)
                self.assertEqual(loaded.score([4, 1], [5, 1]), model.score([4, 1], [5, 1]))

    def test_load_rejects_missing_and_unexpected_tensors(self):
        with tempfile.TemporaryDirectory() as tmp:
            model = random_model()
            save_model_dir(model, tmp)
            tensors = read_safetensors(Path(tmp) / "model.safetensors")
            tensors["lm_head.weight"] = torch.zeros(40, 16)
            del tensors["model.decoder.layers.1.fc2.bias"]
            write_safetensors(Path(tmp) / "model.safetensors", tensors)
            with self.assertRaisesRegex(ValueError, "model.decoder.layers.1.fc2.bias"):
                load_model_dir(tmp)


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


class ModelTest(unittest.TestCase):
    def test_permutation_equivariance_only_without_positions(self):
        src = torch.tensor([[4, 9, 13, 22, 7, 30, 11, 1]])
        perm = torch.tensor([3, 0, 6, 1, 7, 2, 5, 4])
        for name, pos in POSITION_VARIANTS.items():
            for pre in (False, True):
                with self.subTest(positions=name, pre_norm=pre):
                    model = random_model(5, normalize_before=pre, layernorm_embedding=pre, **pos)
                    out = model.encode(src)[0]
                    out_perm = model.encode(src[:, perm])[0]
                    diff = (out_perm - out[perm]).abs().max().item()
                    if name == "none":
                        self.assertLess(diff, 1e-5)
                    else:
                        self.assertGreater(diff, 1e-2)

    def test_greedy_equals_argmax_of_forward(self):
        for i, (name, pos) in enumerate(POSITION_VARIANTS.items()):
            with self.subTest(positions=name):
                model = random_model(10 + i, bias=True, normalize_before=i % 2 == 1,
                                     tie_word_embeddings=i % 3 == 0, **pos)
                src = [5, 17, 2, 33, 1]
                ids, margins = model.greedy(src, 9)
                self.assertEqual(len(ids), len(margins))
                self.assertTrue(len(ids) == 9 or ids[-1] == 1)
                self.assertNotIn(1, ids[:-1])
                tgt_in = torch.tensor([[0] + ids[:-1]])
                logits = model(torch.tensor([src]), tgt_in)[0]
                self.assertEqual(logits.argmax(-1).tolist(), ids)
                top2 = logits.topk(2, dim=-1).values
                self.assertTrue(torch.allclose(top2[:, 0] - top2[:, 1], torch.tensor(margins),
                                               atol=1e-5))
                scores = model.score(src, ids)
                logp = torch.log_softmax(logits.double(), -1)
                self.assertTrue(np.allclose(scores, logp[range(len(ids)), ids].tolist(), atol=1e-9))

    def test_greedy_stops_at_eos(self):
        model = random_model(3, bias=True)
        with torch.no_grad():
            model.final_logits_bias[0, 1] = 1e4  # eos always wins
        self.assertEqual(model.greedy([4, 1], 5)[0], [1])

    def test_padding_does_not_change_outputs(self):
        sources = [[5, 9, 3, 1], [8, 1], [4, 12, 19, 22, 7, 1]]
        targets = [[0, 6, 2], [0, 3, 3], [0, 9, 11]]
        S = max(map(len, sources))
        for name, pos in POSITION_VARIANTS.items():
            with self.subTest(positions=name):
                model = random_model(2, normalize_before=True, **pos)
                src = torch.tensor([s + [0] * (S - len(s)) for s in sources])
                pad = model.padding_mask(src)
                enc = model.encode(src, pad)
                logits = model(src, torch.tensor(targets), pad)
                for b, (s, t) in enumerate(zip(sources, targets)):
                    alone = model.encode(torch.tensor([s]))[0]
                    self.assertTrue(torch.allclose(enc[b, :len(s)], alone, atol=1e-10))
                    alone = model(torch.tensor([s]), torch.tensor([t]))[0]
                    self.assertTrue(torch.allclose(logits[b], alone, atol=1e-10))

    def test_explicit_attention_matches_multi_head_attention_forward(self):
        torch.manual_seed(0)
        model = random_model(4, encoder_attention_heads=4)
        attn = model.model.encoder.layers[0].self_attn
        x, mem = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
        pad = torch.tensor([[False] * 7, [False] * 4 + [True] * 3])

        def explicit(q_in, kv_in, mask, causal):
            def split(t):
                return t.view(t.shape[0], t.shape[1], 4, 4).transpose(1, 2)

            q = split(F.linear(q_in, attn.q_proj.weight, attn.q_proj.bias))
            k = split(F.linear(kv_in, attn.k_proj.weight, attn.k_proj.bias))
            v = split(F.linear(kv_in, attn.v_proj.weight, attn.v_proj.bias))
            o = explicit_attention(q, k, v, mask, causal).transpose(1, 2).reshape(q_in.shape)
            return F.linear(o, attn.out_proj.weight, attn.out_proj.bias)

        self.assertTrue(torch.allclose(attn(x, mem, key_padding_mask=pad),
                                       explicit(x, mem, pad, False), atol=1e-5))
        self.assertTrue(torch.allclose(attn(x, x, causal=True), explicit(x, x, None, True),
                                       atol=1e-5))

    def test_matches_torch_transformer_layers(self):
        """Layer wiring against torch.nn.TransformerEncoder/DecoderLayer (no positions)."""
        acts = {"relu": "relu", "gelu": "gelu", "swish": F.silu}
        for act, pre in itertools.product(acts, (False, True)):
            with self.subTest(activation=act, pre_norm=pre):
                model = random_model(6, position_encoding="none", activation_function=act,
                                     normalize_before=pre, layer_norm_eps=1e-6)
                d = 16

                def copy_attn(dst, src):
                    dst.in_proj_weight.data = torch.cat(
                        [src.q_proj.weight, src.k_proj.weight, src.v_proj.weight])
                    dst.in_proj_bias.data = torch.cat(
                        [src.q_proj.bias, src.k_proj.bias, src.v_proj.bias])
                    dst.out_proj.weight.data = src.out_proj.weight.data
                    dst.out_proj.bias.data = src.out_proj.bias.data

                def copy_common(dst, src, norms):
                    dst.linear1.weight.data, dst.linear1.bias.data = src.fc1.weight.data, src.fc1.bias.data
                    dst.linear2.weight.data, dst.linear2.bias.data = src.fc2.weight.data, src.fc2.bias.data
                    for dst_norm, src_norm in norms:
                        getattr(dst, dst_norm).weight.data = getattr(src, src_norm).weight.data
                        getattr(dst, dst_norm).bias.data = getattr(src, src_norm).bias.data

                enc_layers = []
                for layer in model.model.encoder.layers:
                    ref = nn.TransformerEncoderLayer(d, 2, 32, dropout=0.0, activation=acts[act],
                                                     layer_norm_eps=1e-6, batch_first=True,
                                                     norm_first=pre).eval()
                    copy_attn(ref.self_attn, layer.self_attn)
                    copy_common(ref, layer, (("norm1", "self_attn_layer_norm"),
                                            ("norm2", "final_layer_norm")))
                    enc_layers.append(ref)
                dec_layers = []
                for layer in model.model.decoder.layers:
                    ref = nn.TransformerDecoderLayer(d, 2, 32, dropout=0.0, activation=acts[act],
                                                     layer_norm_eps=1e-6, batch_first=True,
                                                     norm_first=pre).eval()
                    copy_attn(ref.self_attn, layer.self_attn)
                    copy_attn(ref.multihead_attn, layer.encoder_attn)
                    copy_common(ref, layer, (("norm1", "self_attn_layer_norm"),
                                            ("norm2", "encoder_attn_layer_norm"),
                                            ("norm3", "final_layer_norm")))
                    dec_layers.append(ref)

                src = torch.tensor([[4, 9, 13, 22, 1]])
                tgt = torch.tensor([[0, 7, 7, 3]])
                E = model.model.shared.weight
                with torch.no_grad():
                    h = E[src]
                    for ref in enc_layers:
                        h = ref(h)
                    if pre:
                        h = F.layer_norm(h, (d,), model.model.encoder.layer_norm.weight,
                                         model.model.encoder.layer_norm.bias, 1e-6)
                    memory = h
                    causal = torch.triu(torch.full((4, 4), float("-inf")), 1)
                    y = E[tgt]
                    for ref in dec_layers:
                        y = ref(y, memory, tgt_mask=causal)
                    if pre:
                        y = F.layer_norm(y, (d,), model.model.decoder.layer_norm.weight,
                                         model.model.decoder.layer_norm.bias, 1e-6)
                    logits = y @ E.T
                self.assertTrue(torch.allclose(model.encode(src), memory, atol=1e-5))
                self.assertTrue(torch.allclose(model(src, tgt), logits, atol=1e-4))

    def test_trainable_on_a_copy_task(self):
        torch.manual_seed(0)
        cfg = dict(BASE, vocab_size=12, d_model=32, encoder_attention_heads=4,
                   decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64)
        for pos in ("sinusoidal", "rope"):
            with self.subTest(positions=pos):
                model = OrdoModel(dict(cfg, position_encoding=pos), dropout=0.1).train()
                body = torch.randint(2, 12, (32, 5))
                src = torch.cat([body, torch.ones(32, 1, dtype=torch.long)], dim=1)
                src[:8, 3:] = 0  # some padded sources
                src[:8, 3] = 1
                tgt_out = src.clone()
                tgt_in = torch.cat([torch.zeros(32, 1, dtype=torch.long), tgt_out[:, :-1]], dim=1)
                pad = model.padding_mask(src)
                opt = torch.optim.Adam(model.parameters(), lr=3e-3)

                def loss_fn():
                    logits = model(src, tgt_in, pad)
                    return F.cross_entropy(logits.reshape(-1, 12), tgt_out.reshape(-1),
                                           ignore_index=0)

                first = None
                for step in range(40):
                    opt.zero_grad()
                    loss = loss_fn()
                    loss.backward()
                    if step == 0:
                        first = loss.item()
                        for name, p in model.named_parameters():
                            self.assertIsNotNone(p.grad, name)
                            self.assertTrue(torch.isfinite(p.grad).all(), name)
                    opt.step()
                model.eval()
                with torch.no_grad():
                    last = loss_fn().item()
                self.assertLess(last, 0.6 * first, (first, last))


def stepwise_logprobs(model: OrdoModel, src, ids):
    """Log-probs of ids decoded one step at a time, with exactly greedy's calls
    (decode of [decoder_start] + prefix, batch of one), log_softmax in float64."""
    with torch.no_grad():
        memory = model.encode(torch.tensor([src]))
        tgt, out = [model.config["decoder_start_token_id"]], []
        for token in ids:
            logits = model.decode(memory, None, torch.tensor([tgt]))[0, -1]
            out.append(torch.log_softmax(logits.double(), -1)[token].item())
            tgt.append(token)
    return out


def close(a: float, b: float, rel: float) -> bool:
    return abs(a - b) <= rel * max(1.0, abs(a), abs(b))


class BatchTest(unittest.TestCase):
    POSITIONS = ("sinusoidal", "learned", "rope-half", "none")

    def test_batch_equals_one_at_a_time(self):
        g = torch.Generator().manual_seed(0)
        sources = [torch.randint(2, 40, (n - 1,), generator=g).tolist() + [1]
                   for n in range(1, 13)]
        targets = [torch.randint(2, 40, (n % 7,), generator=g).tolist() + [1] for n in range(12)]
        targets[3] = []  # an empty target scores as []
        order = [7, 0, 11, 2, 9, 4, 1, 10, 5, 3, 8, 6]  # longest source neither first nor last
        sources = [sources[i] for i in order]
        finished, unfinished = 0, 0
        for i, name in enumerate(self.POSITIONS):
            for pre in (False, True):
                with self.subTest(positions=name, pre_norm=pre):
                    model = random_model(20 + i, bias=True, normalize_before=pre,
                                         **POSITION_VARIANTS[name])
                    with torch.no_grad():
                        model.final_logits_bias[0, 1] += 2.0  # eos now and then
                    ids, margins = model.greedy_batch(sources, 8)
                    for b, src in enumerate(sources):
                        one_ids, one_margins = model.greedy(src, 8)
                        self.assertEqual(ids[b], one_ids, b)
                        self.assertTrue(np.allclose(margins[b], one_margins, atol=1e-10), b)
                        finished += ids[b][-1] == 1
                        unfinished += ids[b][-1] != 1
                    logprobs = model.score_batch(sources, targets)
                    for b, (src, tgt) in enumerate(zip(sources, targets)):
                        one = model.score(src, tgt)
                        self.assertEqual(len(logprobs[b]), len(one))
                        self.assertTrue(all(close(x, y, 1e-10) for x, y in zip(logprobs[b], one)),
                                        (b, logprobs[b], one))
        # Some sequences stopped at eos while others went on.
        self.assertGreater(finished, 10)
        self.assertGreater(unfinished, 10)
        self.assertEqual(random_model().greedy_batch([], 5), ([], []))
        self.assertEqual(random_model().score_batch([[4, 1], [5, 1]], [[], []]), [[], []])
        with self.assertRaisesRegex(ValueError, "at least one token"):
            random_model().greedy_batch([[4, 1], []], 5)


class BeamSearchTest(unittest.TestCase):
    TINY = dict(vocab_size=6, d_model=8, encoder_layers=1, decoder_layers=1,
                encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=16,
                decoder_ffn_dim=16, max_position_embeddings=16, pad_token_id=0, eos_token_id=1,
                decoder_start_token_id=0)

    def tiny_model(self, seed: int, eos_bias: float) -> OrdoModel:
        model = OrdoModel(self.TINY, final_logits_bias=True).eval()
        make_parity_models.random_weights_(model, torch.Generator().manual_seed(seed))
        with torch.no_grad():
            model.final_logits_bias[0, 1] += eos_bias
        return model

    def test_beam_search_equals_brute_force(self):
        """A beam that holds every output returns the exhaustive ranking of teacher-forced
        scores (every token id, pad = decoder_start included; min_length honoured)."""
        max_length, eos = 4, 1
        others = [0, 2, 3, 4, 5]
        outputs = [list(p) + [eos] for n in range(max_length) for p in
                   itertools.product(others, repeat=n)]
        outputs += [list(p) for p in itertools.product(others, repeat=max_length)]
        model, src = self.tiny_model(5, eos_bias=1.0), [5, 1]  # tops of every kind
        scores = {tuple(ids): math.fsum(model.score(src, ids)) for ids in outputs}
        seen = set()
        for alpha, min_length in itertools.product((0.0, 1.0, 0.6), (0, 2)):
            with self.subTest(length_penalty=alpha, min_length=min_length):
                valid = [ids for ids in outputs if ids[-1] != eos or len(ids) >= min_length]
                ranked = sorted(valid, key=lambda ids: -scores[tuple(ids)] / len(ids) ** alpha)
                best = [scores[tuple(ids)] / len(ids) ** alpha for ids in ranked[:4]]
                self.assertTrue(all(not close(x, y, 1e-7) for x, y in zip(best, best[1:])),
                                "near-tie in the exhaustive ranking: pick another model")
                for n_best in (1, 3):
                    hyps, margin = model.beam_search(src, 6 ** 4, n_best, alpha, max_length,
                                                     min_length)
                    self.assertEqual([h["ids"] for h in hyps], ranked[:n_best])
                    for h in hyps:
                        ids = h["ids"]
                        self.assertTrue(close(h["score"], scores[tuple(ids)], 1e-9))
                        self.assertTrue(close(h["normalized_score"],
                                              h["score"] / len(ids) ** alpha, 1e-12))
                        self.assertEqual(h["finished"], ids[-1] == eos)
                        seen.add((min_length, h["finished"], len(ids)))
                    self.assertGreater(margin, 0.0)
                # The whole pool is every valid output.
                hyps, _ = model.beam_search(src, 6 ** 4, 6 ** 4, alpha, max_length, min_length)
                self.assertEqual(sorted(h["ids"] for h in hyps), sorted(valid))
        # Finished hypotheses of several lengths and cut ones were ranked first somewhere;
        # min_length 2 kept [eos] out.
        self.assertIn((0, False, max_length), seen)
        self.assertIn((0, True, 1), seen)
        self.assertGreaterEqual(len({n for _, done, n in seen if done}), 3)
        self.assertNotIn((2, True, 1), seen)

    def test_beam_size_1_is_greedy(self):
        sources = [[1], [5, 17, 2, 33, 1], [9, 9, 30, 4, 12, 7, 25, 1]]
        for i, (name, pos) in enumerate(POSITION_VARIANTS.items()):
            model = random_model(30 + i, bias=True, normalize_before=i % 2 == 1, **pos)
            with torch.no_grad():
                model.final_logits_bias[0, 1] += 1.5  # eos now and then
            for j, src in enumerate(sources):
                alpha = (0.0, 1.0, 0.6)[(i + j) % 3]
                with self.subTest(positions=name, source=src, length_penalty=alpha):
                    ids, _ = model.greedy(src, 7)
                    (hyp,), _ = model.beam_search(src, 1, 1, alpha, 7)
                    self.assertEqual(hyp["ids"], ids)
                    self.assertEqual(hyp["finished"], ids[-1] == 1)
                    # Same decoder calls as greedy: the float64 sum is bit-identical.
                    self.assertEqual(hyp["score"], sum(stepwise_logprobs(model, src, ids)))
                    self.assertTrue(close(hyp["score"], math.fsum(model.score(src, ids)), 1e-10))

    class Scripted(OrdoModel):
        """Next-token probabilities from a table keyed by the prefix (tokens 0..3, eos 1)."""

        def __init__(self, table, default=((1, .4), (2, .3), (3, .2), (0, .1))):
            super().__init__(dict(BeamSearchTest.TINY, vocab_size=4, d_model=4))
            self.table, self.default = {k: dict(v) for k, v in table.items()}, dict(default)

        def encode(self, src_ids, src_padding=None):
            return torch.zeros(src_ids.shape[0], src_ids.shape[1], 4)

        def decode(self, memory, src_padding, tgt_in_ids):
            probs = [self.table.get(tuple(row[1:]), self.default) for row in tgt_in_ids.tolist()]
            last = torch.log(torch.tensor([[p[v] for v in range(4)] for p in probs]))
            return last[:, None, :].expand(-1, tgt_in_ids.shape[1], -1)

    def run_scripted(self, table, beam_size, alpha, max_length):
        hyps, margin = self.Scripted(table).beam_search([1], beam_size, beam_size, alpha,
                                                         max_length)
        return [(h["ids"], h["finished"]) for h in hyps], [h["score"] for h in hyps], margin

    def test_scripted_eos_ranked_k_or_later_is_skipped(self):
        # Step 1: [2] (.5) and [3] (.3) live. Step 2: [2,eos] -1.20 (rank 0, pooled),
        # [2,3] -1.90 live, [3,eos] -2.12 (rank 2 = K: skipped), [3,2] -2.25 live. Step 3
        # (default table): [2,3,eos] -2.81 fills the pool; the cut beams rank below it.
        table = {(): ((2, .5), (3, .3), (1, .12), (0, .08)),
                 (2,): ((1, .6), (3, .3), (2, .06), (0, .04)),
                 (3,): ((1, .4), (2, .35), (3, .15), (0, .1))}
        hyps, scores, margin = self.run_scripted(table, 2, 0.0, 3)
        self.assertEqual(hyps, [([2, 1], True), ([2, 3, 1], True)])
        self.assertAlmostEqual(scores[1], math.log(.5 * .3 * .4), delta=1e-6)
        # The smallest gap: step 3's candidates 4 and 5 (of the first 2K + 1), [3,2,2]
        # .105 * .3 against [2,3,3] .15 * .2, though the walk stopped at the 4th.
        self.assertAlmostEqual(margin, math.log(1.05), delta=1e-6)

    def test_scripted_stopping_test_normalizes_by_length(self):
        # Step 1: [eos] -0.69 pooled, [2] -1.20 and [3] -1.90 live. Step 2: [2,3] -1.43
        # live, [3,eos] -2.00 (normalized -1.00) fills the pool. Stopping test: -1.43 / 2
        # > -1.00, so go on; step 3: [2,3,eos] (normalized -0.51) is the best.
        table = {(): ((1, .5), (2, .3), (3, .15), (0, .05)),
                 (2,): ((3, .8), (1, .15), (2, .03), (0, .02)),
                 (3,): ((1, .9), (2, .05), (3, .03), (0, .02)),
                 (2, 3): ((1, .9), (2, .05), (3, .03), (0, .02))}
        hyps, scores, margin = self.run_scripted(table, 2, 1.0, 3)
        self.assertEqual(hyps, [([2, 3, 1], True), ([1], True)])  # stopping early: [3,eos]
        self.assertAlmostEqual(scores[0], math.log(.3 * .8 * .9), delta=1e-6)
        self.assertTrue(0.0 < margin < 0.3)

    def test_scripted_ties(self):
        # [2] and [3] tie (lower id first), so [2,eos] and [3,eos] tie (lower beam first,
        # so earlier inserted, so ranked first); the cut [2,3] does not beat an equal worst.
        same = ((1, .5), (3, .3), (2, .15), (0, .05))
        table = {(): ((2, .35), (3, .35), (1, .2), (0, .1)), (2,): same, (3,): same}
        hyps, scores, margin = self.run_scripted(table, 2, 0.0, 2)
        self.assertEqual(hyps, [([2, 1], True), ([3, 1], True)])
        self.assertEqual(scores[0], scores[1])
        self.assertEqual(margin, 0.0)
        hyps, _, margin = self.run_scripted(table, 1, 0.0, 2)  # beam 1: still [2] first
        self.assertEqual(hyps, [([2, 1], True)])
        # Beam 1: [2,eos] and [2,3] tie exactly. At max_length 2 the cut [2,3] does not
        # replace the equal [2,eos]; at max_length 3 the stopping test (equal) stops, else
        # [2,3,eos] (normalized -0.62 > -0.87) would win.
        table[(2,)] = ((1, .45), (3, .45), (2, .06), (0, .04))
        table[(2, 3)] = ((1, .9), (2, .05), (3, .03), (0, .02))
        self.assertEqual(self.run_scripted(table, 1, 0.0, 2)[0], [([2, 1], True)])
        self.assertEqual(self.run_scripted(table, 1, 1.0, 3)[0], [([2, 1], True)])

    def test_hypotheses_are_consistent(self):
        """A narrow beam on a 40-token model: sorted, scores = teacher-forced sums, eos
        only last, cut hypotheses have max_length tokens, min_length holds."""
        model = random_model(7, bias=True, normalize_before=True)
        with torch.no_grad():
            model.final_logits_bias[0, 1] += 2.0
        for beam_size, alpha, min_length in ((2, 1.0, 0), (4, 0.0, 0), (5, 0.6, 4)):
            with self.subTest(beam_size=beam_size, length_penalty=alpha, min_length=min_length):
                hyps, margin = model.beam_search([4, 12, 19, 22, 1], beam_size, beam_size,
                                                 alpha, 8, min_length)
                self.assertEqual(len(hyps), beam_size)
                norms = [h["normalized_score"] for h in hyps]
                self.assertEqual(norms, sorted(norms, reverse=True))
                self.assertTrue(0.0 < margin < math.inf)
                for h in hyps:
                    ids = h["ids"]
                    self.assertNotIn(1, ids[:-1])
                    self.assertEqual(h["finished"], ids[-1] == 1)
                    self.assertTrue(h["finished"] or len(ids) == 8)
                    self.assertGreaterEqual(len(ids), min_length)
                    self.assertTrue(close(h["score"], math.fsum(model.score([4, 12, 19, 22, 1],
                                                                            ids)), 1e-10))
        for bad in (dict(beam_size=0, n_best=1), dict(beam_size=2, n_best=3),
                    dict(beam_size=2, n_best=1, max_length=0)):
            with self.assertRaises(ValueError):
                model.beam_search([4, 1], **dict(dict(length_penalty=1.0, max_length=5), **bad))


# ----------------------------------------------------------------------------------------
# Generation models: decoder-only ordo, grouped-query attention, LLaMA
# ----------------------------------------------------------------------------------------

LM = dict(vocab_size=40, d_model=16, encoder_layers=0, decoder_layers=2,
          decoder_attention_heads=4, decoder_ffn_dim=32, max_position_embeddings=32,
          pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)

LLAMA = dict(model_type="llama", vocab_size=30, hidden_size=16, intermediate_size=24,
             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             bos_token_id=2, eos_token_id=1, pad_token_id=0)


def random_lm(seed=0, bias=False, **overrides) -> OrdoModel:
    """A decoder-only ordo model with large random weights."""
    return random_model(seed, bias, base=LM, **overrides)


def random_llama(seed=0, **overrides) -> LlamaModel:
    """A LLaMA model with large random weights (embeddings N(0, 1), norms 1 + N(0, 0.2),
    the rest N(0, 0.4))."""
    model = LlamaModel(dict(LLAMA, **overrides)).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.4 * torch.randn(p.shape, generator=g))
    return model


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


class GenerationConfigTest(unittest.TestCase):
    def test_native_keys(self):
        cfg = full_config(LM)
        self.assertNotIn("encoder_attention_heads", cfg)  # absent stays absent
        self.assertNotIn("encoder_ffn_dim", cfg)
        self.assertNotIn("num_key_value_heads", cfg)
        cfg = full_config(dict(LM, num_key_value_heads=2, encoder_attention_heads=2,
                               encoder_ffn_dim=8))
        self.assertEqual((cfg["num_key_value_heads"], cfg["encoder_attention_heads"]), (2, 2))
        self.assertEqual(full_config(cfg), cfg)  # round trip
        bad = {
            "num_key_value_heads": dict(LM, num_key_value_heads=3),
            "encoder_layers": dict(BASE, encoder_layers=-1),
            "encoder_attention_heads": dict(LM, encoder_attention_heads=3),
        }
        for key, c in bad.items():
            with self.subTest(key=key), self.assertRaisesRegex(ValueError, f"'{key}'"):
                full_config(c)
        partial = dict(BASE)
        del partial["encoder_ffn_dim"]  # still required with an encoder
        with self.assertRaisesRegex(ValueError, "'encoder_ffn_dim' is required"):
            full_config(partial)

    def test_llama_keys(self):
        cfg = llama_config(dict(model_type="llama", vocab_size=10, hidden_size=8,
                                intermediate_size=12, num_hidden_layers=1,
                                num_attention_heads=2, eos_token_id=[1, 3], note="kept"))
        self.assertEqual((cfg["num_key_value_heads"], cfg["head_dim"]), (2, 4))
        self.assertEqual((cfg["rope_theta"], cfg["rms_norm_eps"], cfg["hidden_act"]),
                         (10000.0, 1e-6, "silu"))
        self.assertIs(cfg["tie_word_embeddings"], False)
        self.assertIsNone(cfg["rope_scaling"])
        self.assertNotIn("pad_token_id", cfg)  # absent stays absent, null stays null
        self.assertIsNone(llama_config(dict(cfg, pad_token_id=None))["pad_token_id"])
        self.assertEqual(cfg["eos_token_id"], [1, 3])
        self.assertEqual(cfg["note"], "kept")
        self.assertEqual(llama_config(cfg), cfg)
        self.assertEqual(LlamaModel(cfg).eos_ids, (1, 3))
        bad = {
            "model_type": dict(cfg, model_type="mistral"),
            "num_key_value_heads": dict(cfg, num_key_value_heads=3),
            "head_dim": dict(cfg, head_dim=5),
            "hidden_act": dict(cfg, hidden_act="gelu"),
            "rope_scaling": dict(cfg, rope_scaling={"type": "linear", "factor": 2.0}),
            "eos_token_id": dict(cfg, eos_token_id=[1, 10]),
            "torch_dtype": dict(cfg, torch_dtype="int8"),
        }
        for key, c in bad.items():
            with self.subTest(key=key), self.assertRaisesRegex(ValueError, f"'{key}'"):
                llama_config(c)


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
    VARIANTS = {
        "kv2-untied": {},
        "kv1-tied-bias": dict(num_key_value_heads=1, tie_word_embeddings=True,
                              attention_bias=True, mlp_bias=True),
        "kv4-headdim6-eos2": dict(num_key_value_heads=4, head_dim=6, eos_token_id=[1, 3],
                                  rope_theta=100.0, rms_norm_eps=1e-5),
    }

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


class DecoderOnlyTest(unittest.TestCase):
    def test_writes_no_encoder_tensors_and_loads_back(self):
        for overrides in (dict(), dict(share_encoder_decoder_embeddings=False,
                                       decoder_vocab_size=37, tie_word_embeddings=False,
                                       num_key_value_heads=2, position_encoding="learned",
                                       position_offset=2, normalize_before=True)):
            with self.subTest(config=overrides), tempfile.TemporaryDirectory() as tmp:
                model = random_lm(1, bias=True, **overrides)
                save_model_dir(model, tmp, dtype="F16")
                names = set(read_safetensors(Path(tmp) / "model.safetensors"))
                self.assertFalse([n for n in names if "encoder" in n], names)
                table = ("model.shared.weight" if not overrides
                         else "model.decoder.embed_tokens.weight")
                self.assertIn(table, names)
                self.assertIn("model.decoder.layers.1.self_attn.k_proj.weight", names)
                config = json.loads((Path(tmp) / "config.json").read_text())
                self.assertEqual(config["encoder_layers"], 0)
                self.assertNotIn("encoder_attention_heads", config)
                loaded = load_model_dir(tmp)
                self.assertEqual(set(loaded.state_dict()), names)
                self.assertEqual(loaded.lm_score([5, 9, 3, 1]), model.lm_score([5, 9, 3, 1]))
                self.assertEqual(loaded.lm_greedy([5, 9], 6), model.lm_greedy([5, 9], 6))
                if overrides:
                    k = loaded.state_dict()["model.decoder.layers.0.self_attn.k_proj.weight"]
                    self.assertEqual(tuple(k.shape), (8, 16))
                with self.assertRaisesRegex(ValueError, "decoder-only"):
                    loaded.greedy([5, 1], 4)
        with self.assertRaisesRegex(ValueError, "decoder-only"):
            random_model().lm_score([5, 9])

    def test_matches_torch_transformer_layers_with_a_causal_mask(self):
        """A decoder-only layer is [causal self-attention, feed-forward]: an
        nn.TransformerEncoderLayer with a causal mask (learned positions from
        position_offset)."""
        for pre in (False, True):
            with self.subTest(pre_norm=pre):
                model = random_lm(8, position_encoding="learned", position_offset=3,
                                  normalize_before=pre, decoder_attention_heads=2)
                ids = torch.tensor([[4, 9, 13, 22, 1, 7]])
                dec = model.model.decoder
                h = model.model.shared.weight[ids] + dec.embed_positions.weight[3:9]
                causal = torch.triu(torch.full((6, 6), float("-inf")), 1)
                with torch.no_grad():
                    for layer in dec.layers:
                        ref = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True,
                                                         norm_first=pre).eval()
                        a = layer.self_attn
                        ref.self_attn.in_proj_weight.copy_(torch.cat(
                            [a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]))
                        ref.self_attn.in_proj_bias.copy_(torch.cat(
                            [a.q_proj.bias, a.k_proj.bias, a.v_proj.bias]))
                        ref.self_attn.out_proj.load_state_dict(a.out_proj.state_dict())
                        ref.linear1.load_state_dict(layer.fc1.state_dict())
                        ref.linear2.load_state_dict(layer.fc2.state_dict())
                        ref.norm1.load_state_dict(layer.self_attn_layer_norm.state_dict())
                        ref.norm2.load_state_dict(layer.final_layer_norm.state_dict())
                        h = ref(h, src_mask=causal)
                    if pre:
                        h = dec.layer_norm(h)
                    logits = h @ model.model.shared.weight.T
                self.assertTrue(torch.allclose(model.lm_logits(ids), logits, atol=1e-4))
                logp = torch.log_softmax(logits[0].double(), -1)
                self.assertTrue(np.allclose(model.lm_score(ids[0].tolist()),
                                            logp[range(5), ids[0, 1:]].tolist(), atol=1e-5))


class GenerationBatchTest(unittest.TestCase):
    def models(self):
        for i, pos in enumerate(("sinusoidal", "learned", "rope-half", "none")):
            model = random_lm(40 + i, bias=True, normalize_before=i % 2 == 1,
                              num_key_value_heads=2 if i < 2 else 4,
                              **POSITION_VARIANTS[pos])
            with torch.no_grad():
                model.final_logits_bias[0, 1] += 2.0  # eos now and then
            yield f"ordo-{pos}", model
        for i, overrides in enumerate(LlamaModelTest.VARIANTS.values()):
            model = random_llama(50 + i, **overrides)
            if not model.config["tie_word_embeddings"]:
                with torch.no_grad():  # eos now and then
                    model.lm_head.weight[1] += 0.8 * model.model.norm.weight
            yield f"llama-{i}", model

    def test_batch_equals_one_at_a_time(self):
        g = torch.Generator().manual_seed(1)
        prompts = [[2] + torch.randint(4, 30, (n - 1,), generator=g).tolist() for n in range(1, 13)]
        order = [7, 0, 11, 2, 9, 4, 1, 10, 5, 3, 8, 6]  # longest neither first nor last
        prompts = [prompts[i] for i in order]
        sequences = [p + torch.randint(2, 30, (n % 5,), generator=g).tolist()
                     for n, p in enumerate(prompts)]
        finished = unfinished = 0
        for name, model in self.models():
            with self.subTest(model=name):
                ids, margins = model.lm_greedy_batch(prompts, 8)
                for b, prompt in enumerate(prompts):
                    one_ids, one_margins = model.lm_greedy(prompt, 8)
                    self.assertEqual(ids[b], one_ids, b)
                    self.assertTrue(np.allclose(margins[b], one_margins, atol=1e-10), b)
                    stopped = ids[b][-1] in model.eos_ids
                    finished += stopped
                    unfinished += not stopped
                logprobs = model.lm_score_batch(sequences)
                for b, seq in enumerate(sequences):
                    one = model.lm_score(seq)
                    self.assertEqual(len(logprobs[b]), len(seq) - 1)
                    self.assertTrue(all(close(x, y, 1e-10) for x, y in zip(logprobs[b], one)),
                                    (b, logprobs[b], one))
        self.assertGreater(finished, 10)
        self.assertGreater(unfinished, 10)
        model = random_llama()
        self.assertEqual(model.lm_greedy_batch([], 5), ([], []))
        self.assertEqual(model.lm_score_batch([[2], [2, 5]])[0], [])
        with self.assertRaisesRegex(ValueError, "at least one token"):
            model.lm_greedy_batch([[2], []], 5)


class ParityModelsTest(unittest.TestCase):
    def test_generator(self):
        with tempfile.TemporaryDirectory() as tmp:
            with contextlib.redirect_stdout(io.StringIO()):
                make_parity_models.main(["--out", tmp, "--seed", "3"])
            index = json.loads((Path(tmp) / "index.json").read_text())
            self.assertEqual(len(index["models"]), 54)
            self.check_generation_models(Path(tmp), index)
            seen = set()
            for name in index["models"]:
                cfg = json.loads((Path(tmp) / name / "config.json").read_text())
                ref = json.loads((Path(tmp) / name / "reference.json").read_text())
                dtype = ref["dtype"]
                seen.add((cfg["position_encoding"], cfg["sinusoidal_layout"],
                          cfg["sinusoidal_frequencies"], cfg["rope_layout"],
                          cfg["normalize_before"], dtype))
                seen.update({("activation", cfg["activation_function"]),
                             ("offset", cfg["position_encoding"], cfg["position_offset"])})
                if not cfg["share_encoder_decoder_embeddings"]:
                    seen.add("separate vocab")
                if not cfg["tie_word_embeddings"]:
                    seen.add("untied")
                if cfg["layernorm_embedding"]:
                    seen.add("layernorm_embedding")
                if cfg["scale_embedding"]:
                    seen.add("scale_embedding")
                if cfg["layer_norm_eps"] == 1e-6:
                    seen.add("eps")
                if cfg["encoder_attention_heads"] != cfg["decoder_attention_heads"]:
                    seen.add("heads")
                model = load_model_dir(Path(tmp) / name)
                if hasattr(model, "final_logits_bias"):
                    seen.add("final_logits_bias")
                lengths = set()
                for case in ref["cases"]:
                    lengths.add(len(case["source_ids"]))
                    self.assertEqual(case["source_ids"][-1], cfg["eos_token_id"])
                    self.assertNotIn(cfg["pad_token_id"], case["source_ids"])
                    self.assertEqual(case["target_ids"][-1], cfg["eos_token_id"])
                    self.assertGreaterEqual(min(case["greedy_margins"]), 1e-3)
                    ids, _ = model.greedy(case["source_ids"], case["greedy_max_length"])
                    self.assertEqual(ids, case["greedy_ids"])
                    self.assertEqual(model.score(case["source_ids"], case["target_ids"]),
                                     case["token_logprobs"])
                    enc = model.encode(torch.tensor([case["source_ids"]]))[0]
                    self.assertTrue(torch.equal(enc, torch.tensor(case["encoder_output"])))
                self.assertEqual(len(lengths), len(ref["cases"]))
                self.assertIn(1, lengths)
                batch, cases = ref["batch"], ref["cases"]
                self.assertEqual(batch["sources"], [c["source_ids"] for c in cases])
                self.assertEqual(batch["targets"], [c["target_ids"] for c in cases])
                self.assertEqual(batch["greedy_max_length"], make_parity_models.GREEDY_MAX_LENGTH)
                self.assertEqual(batch["greedy_ids"], [c["greedy_ids"] for c in cases])
                self.assertEqual(batch["token_logprobs"],
                                 model.score_batch(batch["sources"], batch["targets"]))
                for got, case in zip(batch["token_logprobs"], cases):
                    self.assertTrue(np.allclose(got, case["token_logprobs"], rtol=1e-10,
                                                atol=1e-10))
                self.assertEqual(len(ref["beam"]), len(cases))
                for i, (entry, case) in enumerate(zip(ref["beam"], cases)):
                    self.assertEqual(entry["source_ids"], case["source_ids"])
                    options = {k: entry[k] for k in ("beam_size", "n_best", "length_penalty",
                                                     "max_length", "min_length")}
                    self.assertEqual(options, dict(beam_size=3, n_best=3, max_length=10,
                                                   min_length=0,
                                                   length_penalty=1.0 if i % 2 == 0 else 0.0))
                    self.assertGreaterEqual(entry["min_margin"], 1e-3)
                    self.assertEqual(len(entry["hypotheses"]), 3)
                    for h in entry["hypotheses"]:
                        self.assertEqual(set(h), {"ids", "score", "normalized_score", "finished"})
                        self.assertEqual(h["finished"], h["ids"][-1] == cfg["eos_token_id"])
                    if dtype == "F32":  # recomputing every model takes too long
                        hyps, margin = model.beam_search(case["source_ids"], **options)
                        self.assertEqual((entry["hypotheses"], entry["min_margin"]),
                                         (hyps, margin))
                        for h in hyps:
                            self.assertTrue(math.isclose(h["score"], math.fsum(model.score(
                                case["source_ids"], h["ids"])), rel_tol=1e-10, abs_tol=1e-10))
                    seen.update(("beam finished", h["finished"]) for h in entry["hypotheses"])
        for pe, layout, freqs, rope_layout in (
                ("sinusoidal", "interleaved", "vaswani", "half"),
                ("sinusoidal", "split", "vaswani", "half"),
                ("learned", "interleaved", "vaswani", "half"),
                ("rope", "interleaved", "vaswani", "half"),
                ("rope", "interleaved", "vaswani", "interleaved"),
                ("none", "interleaved", "vaswani", "half"),
                ("alibi", "interleaved", "vaswani", "half"),
                ("t5_relative", "interleaved", "vaswani", "half")):
            for pre, dtype in itertools.product((False, True), ("F32", "F16", "BF16")):
                self.assertIn((pe, layout, freqs, rope_layout, pre, dtype), seen)
        for pre, dtype in itertools.product((False, True), ("F32", "F16", "BF16")):
            layout = "interleaved" if pre else "split"
            self.assertIn(("sinusoidal", layout, "tensor2tensor", "half", pre, dtype), seen)
        for need in ("separate vocab", "untied", "layernorm_embedding", "scale_embedding", "eps",
                     "heads", "final_logits_bias", ("activation", "relu"), ("activation", "gelu"),
                     ("activation", "swish"), ("offset", "learned", 2),
                     ("offset", "sinusoidal", 1), ("offset", "rope", 3),
                     ("beam finished", True), ("beam finished", False)):
            self.assertIn(need, seen)

    def check_generation_models(self, tmp: Path, index: dict):
        names = index["generation_models"]
        self.assertEqual(len(names), 24)
        self.assertFalse(set(names) & set(index["models"]))
        seen = set()
        for name in names:
            ref = json.loads((tmp / name / "reference.json").read_text())
            cfg = json.loads((tmp / name / "config.json").read_text())
            family, dtype = ref["family"], ref["dtype"]
            self.assertEqual(ref["model"], name)
            self.assertEqual(ref["sharded"], (tmp / name / "model.safetensors.index.json").exists())
            self.assertEqual(ref["sharded"], not (tmp / name / "model.safetensors").exists())
            if family == "ordo":
                model = load_model_dir(tmp / name)
                self.assertEqual(cfg["encoder_layers"], 0)
                self.assertTrue(name.startswith("lm-"))
                seen.add(("lm", cfg["position_encoding"], cfg["normalize_before"]))
                seen.add(("lm dtype", dtype))
                heads = cfg["decoder_attention_heads"]
                if cfg.get("num_key_value_heads", heads) < heads:
                    seen.add(("lm gqa", heads // cfg["num_key_value_heads"]))
                if cfg["position_encoding"] == "learned" and cfg["position_offset"]:
                    seen.add("lm learned offset")
                if not cfg["tie_word_embeddings"] and hasattr(model, "final_logits_bias"):
                    seen.add("lm untied bias")
                if "encoder_attention_heads" in cfg:
                    seen.add("lm encoder keys kept")
                else:
                    seen.add("lm encoder keys absent")
            else:
                model = load_llama_dir(tmp / name)
                self.assertEqual(cfg["model_type"], "llama")
                seen.add(("llama gqa", cfg["num_attention_heads"] // cfg["num_key_value_heads"]))
                seen.add(("llama tied", cfg["tie_word_embeddings"]))
                seen.add(("llama attention_bias", cfg["attention_bias"]))
                seen.add(("llama mlp_bias", cfg["mlp_bias"]))
                seen.add(("llama dtype", dtype))
                seen.add(("llama sharded", ref["sharded"]))
                if cfg["head_dim"] != cfg["hidden_size"] // cfg["num_attention_heads"]:
                    seen.add("llama head_dim")
                if isinstance(cfg["eos_token_id"], list) and len(cfg["eos_token_id"]) == 2:
                    seen.add("llama eos list")
            eos = set(model.eos_ids)
            cases = ref["cases"]
            self.assertGreaterEqual(len(cases), 5)
            lengths = {len(c["prompt_ids"]) for c in cases}
            self.assertIn(1, lengths)
            self.assertGreaterEqual(max(lengths), 11)
            for case in cases:
                self.assertGreaterEqual(min(case["greedy_margins"]), 1e-3)
                ids, _ = model.lm_greedy(case["prompt_ids"], case["greedy_max_length"])
                self.assertEqual(ids, case["greedy_ids"])
                self.assertNotIn(True, [t in eos for t in ids[:-1]])
                seen.add(("greedy stopped", ids[-1] in eos))
                seq = case["prompt_ids"] + case["continuation_ids"]
                self.assertEqual(model.lm_score(seq), case["token_logprobs"])
                self.assertEqual(len(case["token_logprobs"]), len(seq) - 1)
            batch = ref["batch"]
            self.assertEqual(batch["prompts"], [c["prompt_ids"] for c in cases])
            self.assertEqual(batch["sequences"],
                             [c["prompt_ids"] + c["continuation_ids"] for c in cases])
            self.assertEqual(batch["greedy_ids"], [c["greedy_ids"] for c in cases])
            self.assertEqual(batch["token_logprobs"], model.lm_score_batch(batch["sequences"]))
            for got, case in zip(batch["token_logprobs"], cases):
                self.assertTrue(np.allclose(got, case["token_logprobs"], rtol=1e-10, atol=1e-10))
            self.assertEqual(len(ref["beam"]), len(cases))
            for i, (entry, case) in enumerate(zip(ref["beam"], cases)):
                self.assertEqual(entry["prompt_ids"], case["prompt_ids"])
                options = {k: entry[k] for k in ("beam_size", "n_best", "length_penalty",
                                                 "max_length", "min_length")}
                self.assertEqual(options, dict(beam_size=3, n_best=3, max_length=10, min_length=0,
                                               length_penalty=1.0 if i % 2 == 0 else 0.0))
                self.assertGreaterEqual(entry["min_margin"], 1e-3)
                for h in entry["hypotheses"]:
                    self.assertEqual(h["finished"], h["ids"][-1] in eos)
                    seen.add(("beam finished", h["finished"]))
                if dtype == "F32":
                    self.assertEqual(model.lm_beam_search(case["prompt_ids"], **options),
                                     (entry["hypotheses"], entry["min_margin"]))
        for pe, pre in itertools.product(("sinusoidal", "learned", "rope", "none"), (False, True)):
            self.assertIn(("lm", pe, pre), seen)
        for need in (("lm dtype", "F32"), ("lm dtype", "F16"), ("lm dtype", "BF16"),
                     ("lm gqa", 2), "lm learned offset", "lm untied bias", "lm encoder keys kept",
                     "lm encoder keys absent", ("llama gqa", 1), ("llama gqa", 2),
                     ("llama gqa", 4), ("llama tied", True), ("llama tied", False),
                     ("llama attention_bias", True), ("llama attention_bias", False),
                     ("llama mlp_bias", True), ("llama dtype", "F32"), ("llama dtype", "F16"),
                     ("llama dtype", "BF16"), ("llama sharded", True), ("llama sharded", False),
                     "llama head_dim", "llama eos list", ("greedy stopped", True),
                     ("greedy stopped", False), ("beam finished", True),
                     ("beam finished", False)):
            self.assertIn(need, seen)


if __name__ == "__main__":
    unittest.main()
