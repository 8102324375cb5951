#!/usr/bin/python3
"""Tests of ordo_torch.config: the ordo and LLaMA config.json formats, their defaults and
errors.

Alone: /usr/bin/python3 tools/oracle/tests/test_config.py [-v]; with the others:
/usr/bin/python3 tools/oracle/test_ordo_torch.py [-v].
"""
from __future__ import annotations

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tools/oracle: ordo_torch
from oracle_fixtures import BASE, LM  # noqa: E402
from ordo_torch import LlamaModel, full_config, llama_config  # noqa: E402


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
            "rope_scaling.rope_type": dict(cfg, rope_scaling={"type": "longrope", "factor": 2.0}),
            "rope_scaling.factor": dict(cfg, rope_scaling={"rope_type": "linear", "factor": -1}),
            "rope_scaling.mscale": dict(cfg, rope_scaling={"rope_type": "yarn", "factor": 2.0,
                                                           "mscale": 1.0}),
            "rope_scaling.low_freq_factor": dict(cfg, rope_scaling={
                "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0,
                "high_freq_factor": 1.0, "original_max_position_embeddings": 1024}),
            "rope_scaling.original_max_position_embeddings": dict(cfg, rope_scaling={
                "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}),
            "eos_token_id": dict(cfg, eos_token_id=[1, 10]),
            "torch_dtype": dict(cfg, torch_dtype="int8"),
        }
        for key, c in bad.items():
            with self.subTest(key=key), self.assertRaisesRegex(ValueError, f"'{key}'"):
                llama_config(c)
        scaled = llama_config(dict(cfg, rope_scaling={"type": "linear", "factor": 2.0}))
        self.assertEqual(scaled["rope_scaling"], {"type": "linear", "factor": 2.0})


if __name__ == "__main__":
    unittest.main()
