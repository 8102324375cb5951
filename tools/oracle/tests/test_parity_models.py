#!/usr/bin/python3
"""Self-checks of make_parity_models.py: the models and references it writes cover every
variant the C++ parity tests need, and the oracle recomputes them.

Alone: /usr/bin/python3 tools/oracle/tests/test_parity_models.py [-v]; with the others:
/usr/bin/python3 tools/oracle/test_ordo_torch.py [-v].
"""
from __future__ import annotations

import contextlib
import io
import itertools
import json
import math
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # ordo_torch, make_parity_models
import make_parity_models  # noqa: E402
import oracle_fixtures  # noqa: E402,F401  (float64 by default, one thread)
from ordo_torch import load_llama_dir, load_model_dir  # noqa: E402


class ParityModelsTest(unittest.TestCase):
    def test_generator(self):
        with tempfile.TemporaryDirectory() as tmp:
            with contextlib.redirect_stdout(io.StringIO()):
                make_parity_models.main(["--out", tmp, "--seed", "3"])
            index = json.loads((Path(tmp) / "index.json").read_text())
            self.assertEqual(len(index["models"]), 54)
            self.check_generation_models(Path(tmp), index)
            self.check_quantized_models(Path(tmp), index)
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

    def check_quantized_models(self, tmp: Path, index: dict):
        """Each quantized model: its files hold I8 / U8 matrices with scales as its config
        says, its float twin holds those values rounded to F32, and the oracle re-loading
        it recomputes its references."""
        from ordo_torch import load_m2m100_dir, load_marian_dir, load_t5_dir
        from ordo_torch.model_dirs import read_weight_files
        from ordo_torch.safetensors_io import read_safetensors
        loaders = {"ordo": load_model_dir, "llama": load_llama_dir, "marian": load_marian_dir,
                   "m2m_100": load_m2m100_dir, "t5": load_t5_dir}
        names = index["quantized_models"]
        self.assertEqual(len(names), 23)
        self.assertEqual(index["dequantized_twins"], {n + "-dequantized": n for n in names})
        seen = set()
        for name in names:
            ref = json.loads((tmp / name / "reference.json").read_text())
            cfg = json.loads((tmp / name / "config.json").read_text())
            self.assertEqual(cfg["quantization"], ref["quantization"])
            kind = ref["quantization"]["type"]
            seen.add((ref["family"], kind))
            stored = {}
            for file in sorted(tmp.joinpath(name).glob("*.safetensors")):
                stored.update(read_safetensors(file))
            matrices = [n for n, t in stored.items() if t.dtype == (torch.int8 if kind == "int8" else torch.uint8)]
            self.assertTrue(matrices)
            if kind == "int4":  # int8 inside int4 only where the group does not divide the width
                fallbacks = [n for n, t in stored.items() if t.dtype == torch.int8]
                group = ref["quantization"]["group_size"]
                self.assertTrue(all(stored[n].shape[1] % group for n in fallbacks), fallbacks)
                if fallbacks:
                    seen.add((ref["family"], "int4 mixed"))
                matrices += fallbacks
            self.assertTrue(all(m + "_scale" in stored for m in matrices))
            _, dequantized = read_weight_files(tmp / name)
            _, twin = read_weight_files(tmp / (name + "-dequantized"))
            self.assertEqual(set(dequantized), set(twin))
            for m in matrices:
                self.assertTrue(torch.equal(dequantized[m].to(torch.float32), twin[m]), m)
            model = loaders[ref["family"]](tmp / name)
            case = ref["cases"][-1]
            if "source_ids" in case:
                got = model.score(case["source_ids"], case["target_ids"])
            else:
                got = model.lm_score(case["prompt_ids"] + case["continuation_ids"])
            self.assertEqual(got, case["token_logprobs"])
        for family in ("ordo", "llama", "marian", "m2m_100", "t5"):
            for kind in ("int8", "int4"):
                self.assertIn((family, kind), seen)
        self.assertIn(("llama", "int4 mixed"), seen)

    def check_generation_models(self, tmp: Path, index: dict):
        names = index["generation_models"]
        self.assertEqual(len(names), 31)
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
            scaling = cfg.get("rope_scaling")
            if scaling is not None:
                kind = scaling.get("rope_type", scaling.get("type"))
                seen.add(("rope_scaling", family, kind))
                trained = (scaling.get("original_max_position_embeddings")
                           or cfg["max_position_embeddings"])
                longest = max(len(c["prompt_ids"]) + len(c["greedy_ids"]) for c in ref["cases"])
                self.assertGreaterEqual(longest, 2.5 * trained, name)
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
                     ("beam finished", False), ("rope_scaling", "llama", "linear"),
                     ("rope_scaling", "llama", "dynamic"), ("rope_scaling", "llama", "yarn"),
                     ("rope_scaling", "llama", "llama3"), ("rope_scaling", "ordo", "dynamic"),
                     ("rope_scaling", "ordo", "yarn")):
            self.assertIn(need, seen)


if __name__ == "__main__":
    unittest.main()
