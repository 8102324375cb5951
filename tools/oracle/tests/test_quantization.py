#!/usr/bin/python3
"""Tests of ordo_torch.quantization: the int8 and int4 layouts as README states them
(worked by hand on small matrices), round trips through a model directory, and the
files the reader refuses.

Alone: /usr/bin/python3 tools/oracle/tests/test_quantization.py [-v]; with the others:
/usr/bin/python3 tools/oracle/test_ordo_torch.py [-v].
"""
from __future__ import annotations

import json
import sys
import tempfile
import unittest
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tools/oracle: ordo_torch
from oracle_fixtures import random_model  # noqa: E402
from ordo_torch import load_model_dir, read_safetensors, save_model_dir, write_safetensors  # noqa: E402
from ordo_torch.quantization import (dequantize_tensors, quantize_activations,  # noqa: E402
                                     quantize_model_dir, quantize_tensors, quantize_weights_,
                                     quantized_activations_)

INT8_ROW = {"type": "int8", "group_size": 0}
INT8_GROUP = {"type": "int8", "group_size": 16}
INT4 = {"type": "int4", "group_size": 32}
WIDE = dict(d_model=32, encoder_attention_heads=2, decoder_attention_heads=4, encoder_ffn_dim=64,
            decoder_ffn_dim=64)
MIXED = dict(WIDE, encoder_ffn_dim=40)  # the encoder's fc2 is 40 wide: int8 in an int4 model


class LayoutTest(unittest.TestCase):
    def test_int8_by_hand(self):
        # Row 0: max |w| = 2.54, so scale 0.02 and q = w / 0.02; row 1 is all zero: scale 1.
        w = torch.tensor([[2.54, -1.0, 0.01, 0.03], [0.0, 0.0, 0.0, 0.0]])
        stored = quantize_tensors({"a.weight": w}, INT8_ROW)
        self.assertEqual(stored["a.weight"].dtype, torch.int8)
        self.assertEqual(stored["a.weight"].tolist(), [[127, -50, 0, 2], [0, 0, 0, 0]])  # 0.5, 1.5: to even
        self.assertEqual(list(stored["a.weight_scale"].shape), [2])  # a scale a row: [out]
        self.assertEqual(stored["a.weight_scale"][1].item(), 1.0)
        self.assertAlmostEqual(stored["a.weight_scale"][0].item(), 2.54 / 127, places=7)

    def test_int8_groups_have_a_scale_each(self):
        w = torch.tensor([[1.27, 0.0, 0.0, 2.54]])
        stored = quantize_tensors({"a.weight": w}, {"type": "int8", "group_size": 2})
        self.assertEqual(list(stored["a.weight_scale"].shape), [1, 2])
        self.assertEqual(stored["a.weight"].tolist(), [[127, 0, 0, 127]])

    def test_int4_packing_order(self):
        # A run of 32 weights: byte j = weight j (low nibble) | weight j + 16 (high nibble),
        # each n = q + 8. Weights q x 0.5 for q = -7..7 and back, scale max|w| / 7 = 0.5.
        q = [(j % 15) - 7 for j in range(32)]
        w = torch.tensor([[0.5 * v for v in q]])
        stored = quantize_tensors({"a.weight": w}, INT4)
        self.assertEqual(stored["a.weight"].dtype, torch.uint8)
        self.assertEqual(list(stored["a.weight"].shape), [1, 16])
        self.assertEqual(stored["a.weight_scale"].dtype, torch.float16)
        self.assertEqual(stored["a.weight_scale"].tolist(), [[0.5]])
        want = [(q[j] + 8) | ((q[j + 16] + 8) << 4) for j in range(16)]
        self.assertEqual(stored["a.weight"][0].tolist(), want)
        back = dequantize_tensors(stored, INT4, "test")["a.weight"]
        self.assertTrue(torch.equal(back, w.to(torch.float64)))

    def test_dequantized_values_are_exact_products(self):
        torch.manual_seed(3)
        w = torch.randn(8, 64, dtype=torch.float32)
        for quantization in (INT8_ROW, INT8_GROUP, INT4):
            with self.subTest(quantization=quantization):
                stored = quantize_tensors({"a.weight": w}, quantization)
                back = dequantize_tensors(stored, quantization, "test")["a.weight"]
                # Each weight moves by at most half a step of its group's scale.
                group = quantization["group_size"] or 64
                scale = stored["a.weight_scale"].to(torch.float64).reshape(8, 64 // group)
                step = scale.repeat_interleave(group, dim=1)
                self.assertTrue(((back - w.to(torch.float64)).abs() <= step / 2 + 1e-12).all())
                again = quantize_tensors({"a.weight": back}, quantization)  # idempotent
                self.assertTrue(torch.equal(again["a.weight"], stored["a.weight"]))
                self.assertTrue(torch.equal(again["a.weight_scale"], stored["a.weight_scale"]))

    def test_int4_keeps_a_width_its_group_does_not_divide_int8_with_a_scale_a_row(self):
        torch.manual_seed(4)
        for cols, group in ((48, 32), (96, 64), (40, 128)):
            with self.subTest(cols=cols, group=group):
                w = torch.randn(5, cols)
                stored = quantize_tensors({"a.weight": w}, {"type": "int4", "group_size": group})
                as_int8 = quantize_tensors({"a.weight": w}, INT8_ROW)
                self.assertEqual(stored["a.weight"].dtype, torch.int8)
                self.assertEqual(list(stored["a.weight_scale"].shape), [5])
                self.assertTrue(torch.equal(stored["a.weight"], as_int8["a.weight"]))
                self.assertTrue(torch.equal(stored["a.weight_scale"], as_int8["a.weight_scale"]))
                back = dequantize_tensors(stored, {"type": "int4", "group_size": group}, "test")["a.weight"]
                self.assertTrue(torch.equal(back, dequantize_tensors(as_int8, INT8_ROW, "test")["a.weight"]))
        stored = quantize_tensors({"a.weight": torch.randn(5, 128)}, {"type": "int4", "group_size": 64})
        self.assertEqual(stored["a.weight"].dtype, torch.uint8)

    def test_norms_biases_and_positions_stay_float(self):
        tensors = {"x.weight": torch.ones(4, 32), "x.bias": torch.ones(4), "ln.weight": torch.ones(32),
                   "model.embed_positions.weight": torch.ones(4, 32),
                   "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight": torch.ones(32, 4)}
        stored = quantize_tensors(tensors, INT4)
        self.assertEqual(sorted(n for n, t in stored.items() if not t.is_floating_point()), ["x.weight"])


class ActivationTest(unittest.TestCase):
    def test_by_hand(self):
        # max |x| = 127: a step of exactly 1; halves to even; the padding of nothing.
        x = torch.tensor([[2.5, -127.0, 3.5, -0.5, 0.0, 126.6, 1.49, 100.0]], dtype=torch.float64)
        self.assertEqual(quantize_activations(x, 8).tolist(), [[2.0, -127.0, 4.0, -0.0, 0.0, 127.0, 1.0, 100.0]])
        # Each group its own scale: [1, 2] -> amax 2, step 2/127.
        y = quantize_activations(torch.tensor([[1.0, 2.0, 10.0, -10.0]], dtype=torch.float64), 2)
        self.assertEqual(y[0, 1].item(), torch.tensor(2.0 / 127, dtype=torch.float32).item() * 127)
        step = torch.tensor(10.0, dtype=torch.float32) / 127  # s in float32, then s q in float64
        self.assertEqual(y[0, 2:].tolist(), [127 * step.item(), -127 * step.item()])

    def test_zero_tiny_and_non_finite_groups(self):
        x = torch.tensor([[0.0, 0.0], [1e-37, -1e-37], [float("nan"), 1.0], [float("inf"), 1.0]], dtype=torch.float64)
        y = quantize_activations(x, 2)
        self.assertEqual(y[:2].tolist(), [[0.0, 0.0], [0.0, 0.0]])
        self.assertTrue(torch.isnan(y[2:]).all())

    def test_only_the_marked_matrices_quantize_their_input(self):
        torch.manual_seed(0)
        marked, plain = torch.nn.Linear(32, 4).double(), torch.nn.Linear(32, 4).double()
        model = torch.nn.ModuleDict({"a": marked})
        quantized_activations_(model, INT8_ROW)
        x = torch.randn(3, 32, dtype=torch.float64)
        quantized = quantize_activations(x, 32)
        self.assertTrue(torch.allclose(marked(x), quantized @ marked.weight.T + marked.bias, rtol=0, atol=1e-12))
        self.assertFalse(torch.allclose(marked(x), x @ marked.weight.T + marked.bias, rtol=0, atol=1e-6))
        self.assertTrue(torch.allclose(plain(x), x @ plain.weight.T + plain.bias, rtol=0, atol=1e-12))


class DirectoryTest(unittest.TestCase):
    def test_quantized_directories_load_as_their_dequantized_model(self):
        src, tgt = [5, 9, 3, 1], [7, 4, 1]
        for quantization in (INT8_ROW, INT8_GROUP, INT4):
            with self.subTest(quantization=quantization), tempfile.TemporaryDirectory() as tmp:
                model = random_model(1, **WIDE).to(torch.float64)
                save_model_dir(model, tmp)  # rounds to F32
                quantize_weights_(model, quantization)
                save_model_dir(model, tmp)
                quantize_model_dir(tmp, quantization, model)
                config = json.loads((Path(tmp) / "config.json").read_text())
                self.assertEqual(config["quantization"], quantization)
                kinds = {t.dtype for t in read_safetensors(Path(tmp) / "model.safetensors").values()}
                self.assertIn(torch.int8 if quantization["type"] == "int8" else torch.uint8, kinds)
                loaded = load_model_dir(tmp, torch.float64)
                for name, p in model.state_dict().items():
                    self.assertTrue(torch.equal(loaded.state_dict()[name], p), name)
                self.assertEqual(loaded.score(src, tgt), model.score(src, tgt))


    def test_a_mixed_int4_directory_loads_as_its_dequantized_model(self):
        src, tgt = [5, 9, 3, 1], [7, 4, 1]
        with tempfile.TemporaryDirectory() as tmp:
            model = random_model(1, **MIXED).to(torch.float64)
            save_model_dir(model, tmp)
            quantize_weights_(model, INT4)
            save_model_dir(model, tmp)
            quantize_model_dir(tmp, INT4, model)
            tensors = read_safetensors(Path(tmp) / "model.safetensors")
            int8 = sorted(n for n, t in tensors.items() if t.dtype == torch.int8)
            self.assertEqual(int8, [f"model.encoder.layers.{i}.fc2.weight" for i in range(len(int8))])
            self.assertGreater(len(int8), 0)
            self.assertTrue(any(t.dtype == torch.uint8 for t in tensors.values()))
            loaded = load_model_dir(tmp, torch.float64)
            for name, p in model.state_dict().items():
                self.assertTrue(torch.equal(loaded.state_dict()[name], p), name)
            self.assertEqual(loaded.score(src, tgt), model.score(src, tgt))


class RefusedTest(unittest.TestCase):
    def stored(self, quantization=INT8_GROUP):
        torch.manual_seed(0)
        return quantize_tensors({"a.weight": torch.randn(4, 32), "a.bias": torch.randn(4)}, quantization)

    def refused(self, tensors, quantization, message):
        with self.assertRaisesRegex(ValueError, message):
            dequantize_tensors(tensors, quantization, "test")

    def test_each_rule(self):
        good = self.stored()
        self.refused({k: v for k, v in good.items() if k != "a.weight_scale"}, INT8_GROUP, "without its 'a.weight_scale'")
        self.refused(good, None, "no 'quantization' key")
        self.refused(dict(good, **{"a.weight_scale": good["a.weight_scale"][:, :1]}), INT8_GROUP, "shape")
        self.refused(dict(good, **{"a.weight_scale": good["a.weight_scale"].double()}), INT8_GROUP, "scales are")
        for bad in (0.0, -1.0, float("nan"), float("inf")):
            scale = good["a.weight_scale"].clone()
            scale[1, 0] = bad
            self.refused(dict(good, **{"a.weight_scale": scale}), INT8_GROUP, "finite and > 0")
        self.refused(good, {"type": "int8", "group_size": 5}, "does not divide")
        self.refused(dict(good, **{"a.bias_scale": torch.ones(4)}), INT8_GROUP, "float, not quantized")
        self.refused(good, INT4, "I8 in an int4 model .* are int4")  # 32 wide: int4 holds it
        packed = self.stored(INT4)
        self.refused(dict(packed, **{"a.weight": packed["a.weight"][:, :8]}), INT4, "U8 in an int4 model .* are int8")
        torch.manual_seed(1)
        fallback = quantize_tensors({"a.weight": torch.randn(4, 48)}, INT4)  # int8, a scale a row
        self.assertEqual(fallback["a.weight"].dtype, torch.int8)
        self.refused(dict(fallback, **{"a.weight_scale": fallback["a.weight_scale"].reshape(4, 1)}), INT4,
                     r"shape \[4, 1\], expected \[4\]")
        # A stored -128 is read as -128 x scale, as ordo reads it: the layout is w = q x scale,
        # and [-127, 127] is how the writer rounds, not a rule for the reader.
        q = good["a.weight"].clone()
        q[0, 0] = -128
        read = dequantize_tensors(dict(good, **{"a.weight": q}), INT8_GROUP, "test")["a.weight"]
        self.assertEqual(read[0, 0].item(), -128 * good["a.weight_scale"][0, 0].double().item())

    def test_a_quantized_file_without_the_config_key_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            model = random_model(2, **WIDE)
            save_model_dir(model, tmp)
            tensors = quantize_tensors(read_safetensors(Path(tmp) / "model.safetensors"), INT8_ROW)
            write_safetensors(Path(tmp) / "model.safetensors", tensors)
            with self.assertRaisesRegex(ValueError, "no 'quantization' key"):
                load_model_dir(tmp)


if __name__ == "__main__":
    unittest.main()
