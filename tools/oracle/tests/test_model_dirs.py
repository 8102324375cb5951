#!/usr/bin/python3
"""Tests of ordo_torch.model_dirs for ordo's format: save/load round trips, rounding to the
file's dtype, rejected files.

Alone: /usr/bin/python3 tools/oracle/tests/test_model_dirs.py [-v]; with the others:
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
from ordo_torch import (load_model_dir, read_safetensors, save_model_dir,  # noqa: E402
                        write_safetensors)


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


if __name__ == "__main__":
    unittest.main()
