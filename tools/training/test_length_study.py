#!/usr/bin/env python3
"""Tests for tools/training/length_study.py: the RoPE-scaling parts that run without
build/ordo (the scalings it asks for, the scaled oracle, the fine-tune, the rows kept
across --schemes runs, the tables). The measurements themselves are checked by the
study, against ordo, every time it runs.

    /usr/bin/python3 tools/training/test_length_study.py     # from anywhere
"""

import argparse
import importlib.util
import json
import sys
import tempfile
import unittest
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import length_study as study  # noqa: E402
from length_study import ordo_torch  # noqa: E402

VOCAB = 40
WINDOW = 8  # a small L: windows of 8..64 tokens


def save_tiny_rope_model(path, seed=0, scaling=None):
    torch.manual_seed(seed)
    config = {**study.lm_config("rope", VOCAB, WINDOW), "rope_scaling": scaling}
    model = ordo_torch.OrdoModel(config)
    ordo_torch.save_model_dir(model, path, dtype="F32")
    (path / "tokenizer.model").write_bytes(b"not read by these tests")
    return model


@torch.no_grad()
def logits(model, length):
    model.eval()
    ids = torch.arange(length, dtype=torch.long)[None] % VOCAB
    return model.lm_logits(ids)


class RopeScalingTest(unittest.TestCase):
    def test_every_type_is_a_valid_config_with_ordo_s_defaults(self):
        for kind in ("linear", "dynamic", "yarn", "llama3"):
            scaling = study.rope_scaling(kind, 2.0, WINDOW + 1)
            config = ordo_torch.full_config({**study.lm_config("rope", VOCAB, WINDOW),
                                             "rope_scaling": scaling})
            self.assertEqual(config["rope_scaling"]["factor"], 2.0, kind)
        self.assertEqual(study.rope_scaling("llama3", 8, 65),
                         {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0, "original_max_position_embeddings": 65})
        self.assertEqual(study.rope_scaling("yarn", 8, 65), {"rope_type": "yarn", "factor": 8.0})
        self.assertIsNone(study.rope_scaling(None, 8, 65))

    def test_rows_cover_every_type_fitted_and_fixed(self):
        kinds = {(kind, factor == study.FIXED) for kind, factor in study.SCALED_ROWS.values()}
        self.assertEqual(kinds, {(k, fixed) for k in ("linear", "dynamic", "yarn", "llama3")
                                 for fixed in (False, True)})


class ScaledModelTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name) / "lm-rope"
        self.model = save_tiny_rope_model(self.dir)

    def tearDown(self):
        self.tmp.cleanup()

    def test_no_scaling_and_factor_one_are_the_model_itself(self):
        want = logits(ordo_torch.load_model_dir(self.dir), 6 * WINDOW)
        self.assertTrue(torch.equal(logits(study.scaled_model(self.dir, None), 6 * WINDOW), want))
        linear_1 = study.scaled_model(self.dir, study.rope_scaling("linear", 1.0, WINDOW + 1))
        self.assertTrue(torch.equal(logits(linear_1, 6 * WINDOW), want))

    def test_a_scaling_changes_the_model_past_the_trained_length(self):
        plain = logits(study.scaled_model(self.dir, None), 6 * WINDOW)
        for kind in ("linear", "yarn"):
            scaled = logits(study.scaled_model(self.dir, study.rope_scaling(kind, 4.0, WINDOW + 1)),
                            6 * WINDOW)
            self.assertFalse(torch.allclose(scaled, plain), kind)

    def test_the_given_scaling_replaces_the_config_s(self):
        yarn_dir = Path(self.tmp.name) / "lm-rope-yarn"
        save_tiny_rope_model(yarn_dir, scaling=study.rope_scaling("yarn", 4.0, WINDOW + 1))
        # The same weights (seed 0) without the config's yarn: the plain model.
        self.assertTrue(torch.equal(logits(study.scaled_model(yarn_dir, None), 6 * WINDOW),
                                    logits(ordo_torch.load_model_dir(self.dir), 6 * WINDOW)))


class FineTuneTest(unittest.TestCase):
    def test_writes_the_scaling_the_base_s_hash_and_new_weights(self):
        with tempfile.TemporaryDirectory() as tmp:
            base = Path(tmp) / "lm-rope"
            save_tiny_rope_model(base)
            out = Path(tmp) / "lm-rope-ft-yarn"
            args = argparse.Namespace(window=WINDOW, ft_factor=2.0, ft_steps=3, ft_batch_size=2,
                                      ft_lr=1e-3, ft_warmup=1, seed=1, dropout=0.1)
            train_ids = [i % VOCAB for i in range(400)]
            study.fine_tune("test", "yarn", args, base, train_ids, out)
            config = json.loads((out / "config.json").read_text())
            self.assertEqual(config["rope_scaling"], {"rope_type": "yarn", "factor": 2.0})
            log = json.loads((out / "training.json").read_text())
            self.assertEqual(log["base_sha256"], study.sha256(base / "model.safetensors"))
            self.assertEqual((log["window"], log["steps"], log["batch_size"]), (2 * WINDOW, 3, 2))
            tuned = ordo_torch.load_model_dir(out)  # its config's yarn, as ordo reads it
            self.assertFalse(torch.equal(logits(tuned, 2 * WINDOW),
                                         logits(study.scaled_model(base, config["rope_scaling"]),
                                                2 * WINDOW)))


def fake_perplexities(tag, args, model_dir, test_ids, sizes, scaling_at=None):
    return {str(s): {"perplexity": 5.0, "tokens": 1, "torch_perplexity": 5.0 * (1 + 1e-6)}
            for s in sizes}


class KeptRowsTest(unittest.TestCase):
    """--schemes: the rows of the schemes (and scalings) not measured come from the last
    results.json, unless that was measured with another window or test set."""

    def run_study(self, tmp, previous, schemes):
        data = Path(tmp) / "data"
        data.mkdir(exist_ok=True)
        sentences = "\n".join(f"the cat {i}\tdie Katze {i}" for i in range(600)) + "\n"
        for split in ("train", "test"):
            (data / f"{split}.tsv").write_text(sentences)
        args = argparse.Namespace(data=data, out=Path(tmp), schemes=schemes, retrain=False,
                                  window=WINDOW, steps=2, batch_size=2, lr=1e-3, warmup=1,
                                  dropout=0.1, seed=1, ft_factor=8.0, ft_steps=1,
                                  ft_batch_size=1, ft_lr=1e-3, ft_warmup=1)
        sp = study.spm.SentencePieceProcessor(
            model_file=str(Path(__file__).resolve().parents[2] / "weights" / "tokenizer.model"))
        (Path(tmp) / "tokenizer.model").write_bytes(
            (Path(__file__).resolve().parents[2] / "weights" / "tokenizer.model").read_bytes())
        saved = study.perplexities
        study.perplexities = fake_perplexities
        try:
            return study.language_modelling(args, sp, previous)
        finally:
            study.perplexities = saved

    def test_alibi_alone_keeps_the_rope_rows(self):
        with tempfile.TemporaryDirectory() as tmp:
            first = self.run_study(tmp, None, ["alibi"])
            self.assertEqual(list(first["models"]), ["alibi"])
            kept = {"perplexity": {"64": {"perplexity": 6.0, "torch_perplexity": 6.0 * (1 + 3e-6)}}}
            previous = {**first, "models": {**first["models"], "rope": kept},
                        "rope_scaling": {"yarn, factor 8": kept},
                        "fine_tuned": {"models": {"yarn": kept}}}
            second = self.run_study(tmp, previous, ["alibi"])
            self.assertEqual(list(second["models"]), ["rope", "alibi"])  # SCHEMES order
            self.assertEqual(second["models"]["rope"], kept)
            self.assertEqual(second["rope_scaling"], previous["rope_scaling"])
            self.assertEqual(second["fine_tuned"], previous["fine_tuned"])
            # the kept rows count in the worst difference (3e-6, the measured ones 1e-6)
            self.assertAlmostEqual(second["worst_relative_difference"], 3e-6, delta=1e-9)
            other = {**previous, "window": 2 * WINDOW}  # another setting: nothing kept
            third = self.run_study(tmp, other, ["alibi"])
            self.assertEqual(list(third["models"]), ["alibi"])
            self.assertNotIn("rope_scaling", third)


def results_for_tables():
    sizes = [64, 96, 128, 256, 512]

    def row(value, **extra):
        return {**extra, "perplexity": {str(s): {"perplexity": value + s / 1000,
                                                 "torch_perplexity": value} for s in sizes}}
    learned = row(4.8)
    for s in sizes[1:]:
        learned["perplexity"][str(s)] = {"error": "ordo: too long"}
    ft_models = {"none": row(4.6, rope_scaling=None, final_loss=1.5),
                 "linear": row(4.5, rope_scaling={"rope_type": "linear", "factor": 8.0},
                               final_loss=1.4)}
    return {"language_modelling": {
        "window": 64, "sizes": sizes, "test_tokens": 1000,
        "models": {"rope": row(4.7), "alibi": row(4.6), "learned": learned},
        "rope_scaling": {"linear, factor n/L": row(4.9, rope_type="linear", fitted=True,
                                                    factor=study.FITTED),
                         "dynamic, factor 8": row(5.0, rope_type="dynamic", fitted=False,
                                                   factor=8.0)},
        "fine_tuned": {"window": 512, "factor": 8.0, "steps": 200, "batch_size": 4,
                       "lr": 2e-4, "warmup": 20, "models": ft_models},
        "worst_relative_difference": 2.5e-8},
        "translation": {"rope": {split: {"exact_match": 100.0, "bleu": 100.0}
                                 for split in ("test", "swapped", "long")}}}


class TablesTest(unittest.TestCase):
    def test_every_row_is_in_the_tables(self):
        text = study.markdown(results_for_tables())
        for line in ("| linear, factor n/L | 4.964 | 4.996 | 5.028 | 5.156 | 5.412 |",
                     "| dynamic, factor 8 | 5.064 |",
                     "| learned | 4.864 | refused | refused | refused | refused |",
                     "| no scaling (control) | 4.664 |",
                     "| *alibi (reference), not fine-tuned* | 4.664 |",
                     "| linear, factor 8 | 4.564 | 4.596 | 4.628 | 4.756 | 5.012 | 1.4000 |",
                     "fine-tuned 200 steps of 4 windows of 512 tokens (8L",
                     "to within 2.5e-08 relative"):
            self.assertIn(line, text)

    @unittest.skipUnless(importlib.util.find_spec("matplotlib"), "needs python3-matplotlib")
    def test_the_plot_has_a_panel_per_part(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "plot.png"
            study.plot(results_for_tables(), path)
            self.assertGreater(path.stat().st_size, 10000)


if __name__ == "__main__":
    unittest.main()
