"""The T5 oracle (ordo_torch/t5.py, t5_dirs.py) against the formulas it was written from
and the package's other code: its buckets are the ones positions.py ported from the T5
paper's reference code, its norm LLaMA's RMSNorm, its attention explicit_attention
without the 1/sqrt(d_kv) factor, its tied head the shared table read through
d_model^-0.5, its files save_pretrained's names, and its tokenizer the SentencePiece
model's own ids then </s>."""
from __future__ import annotations

import math
import tempfile
import unittest
from pathlib import Path

import sentencepiece as spm
import torch
import torch.nn.functional as F
from torch import nn

from oracle_fixtures import close  # noqa: F401  (sets float64 and one thread)
from ordo_torch import (T5ForConditionalGeneration, T5TokenizerOracle, explicit_attention, load_t5_dir,
                        relative_position_bucket, rms_norm, save_t5_dir, t5_config, write_t5_tokenizer)
from ordo_torch.positions import t5_relative_position_bucket
from ordo_torch.t5 import T5Attention, T5LayerNorm

CFG = dict(vocab_size=40, d_model=16, d_kv=6, num_heads=3, d_ff=24, num_layers=2, num_decoder_layers=3,
           relative_attention_num_buckets=8, relative_attention_max_distance=12)


def randomize_(module: nn.Module, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_((1 + 0.2 * torch.randn(p.shape)) if "layer_norm" in name else 0.4 * torch.randn(p.shape))
    return module.eval()


class T5ConfigTest(unittest.TestCase):
    def test_defaults_are_t5configs_and_mt5configs(self):
        t5 = t5_config({})
        self.assertEqual((t5["vocab_size"], t5["d_ff"], t5["num_layers"], t5["num_heads"]), (32128, 2048, 6, 8))
        self.assertEqual((t5["num_decoder_layers"], t5["decoder_start_token_id"], t5["tie_word_embeddings"]), (6, 0, True))
        self.assertEqual((t5["dense_act_fn"], t5["is_gated_act"]), ("relu", False))
        mt5 = t5_config({"model_type": "mt5"})
        self.assertEqual((mt5["vocab_size"], mt5["d_ff"], mt5["num_layers"], mt5["num_heads"]), (250112, 1024, 8, 6))
        self.assertEqual((mt5["dense_act_fn"], mt5["is_gated_act"], mt5["tie_word_embeddings"]), ("gelu_new", True, False))

    def test_feed_forward_proj_is_read_as_t5config_reads_it(self):
        self.assertEqual(t5_config({"feed_forward_proj": "gated-silu"})["dense_act_fn"], "silu")
        self.assertEqual(t5_config({"feed_forward_proj": "gated-gelu"})["dense_act_fn"], "gelu_new")
        self.assertEqual(t5_config({"feed_forward_proj": "gelu"})["dense_act_fn"], "gelu")
        for bad in ("gelu-new", "gated-gated-gelu", "gated-quick_gelu"):
            with self.assertRaises(ValueError):
                t5_config({"feed_forward_proj": bad})


class T5BlocksTest(unittest.TestCase):
    def test_buckets_are_the_reference_codes(self):
        rp = torch.arange(-300, 301)
        for bidirectional in (True, False):
            for buckets, distance in ((32, 128), (8, 12), (4, 3), (10, 50)):
                self.assertTrue(torch.equal(relative_position_bucket(rp, bidirectional, buckets, distance),
                                            t5_relative_position_bucket(rp, bidirectional, buckets, distance)))
        # Hand-worked: bidirectional 32 buckets over 128, a key 1 after the query: 16 + 1;
        # 200 before: side 0's last bucket, 15. Causal: a later key is bucket 0.
        self.assertEqual(relative_position_bucket(torch.tensor([1, -200]), True, 32, 128).tolist(), [17, 15])
        self.assertEqual(relative_position_bucket(torch.tensor([3, -3]), False, 32, 128).tolist(), [0, 3])

    def test_layer_norm_is_rms_norm(self):
        norm = randomize_(T5LayerNorm(16, 1e-6), 1)
        x = torch.randn(3, 16)
        self.assertLess(float((norm(x) - rms_norm(x, norm.weight, 1e-6)).abs().max()), 1e-14)
        self.assertGreater(float((norm(x) - F.layer_norm(x, (16,), norm.weight)).abs().max()), 1e-3)

    def test_attention_is_unscaled(self):
        cfg = t5_config(CFG)
        attention = randomize_(T5Attention(cfg, True, True), 2)
        x = torch.randn(2, 5, 16)
        bias = attention.compute_bias(5, 5)
        got = attention(x, x, bias)

        def split(t):
            return t.view(2, 5, 3, 6).transpose(1, 2)
        # explicit_attention divides by sqrt(d_kv): hand it q times sqrt(d_kv).
        inner = explicit_attention(split(attention.q(x)) * math.sqrt(6), split(attention.k(x)), split(attention.v(x)),
                                   None, False, bias[0])
        want = attention.o(inner.transpose(1, 2).reshape(2, 5, 18))
        self.assertLess(float((got - want).abs().max()), 1e-12)

    def test_tied_head_reads_through_d_model_to_the_minus_half(self):
        tied = randomize_(T5ForConditionalGeneration(CFG), 3)
        untied = T5ForConditionalGeneration(dict(CFG, tie_word_embeddings=False)).eval()
        state = dict(tied.state_dict(), **{"lm_head.weight": tied.shared.weight.detach() / 4})
        untied.load_state_dict(state)
        self.assertLess(max(abs(a - b) for a, b in zip(tied.score([3, 4, 5, 1], [6, 7, 1]),
                                                         untied.score([3, 4, 5, 1], [6, 7, 1]))), 1e-12)

    def test_one_bias_table_per_stack_shared_by_its_blocks(self):
        model = randomize_(T5ForConditionalGeneration(CFG), 4)
        before = model.score([3, 4, 5, 6, 1], [6, 7, 8, 1])
        with torch.no_grad():
            model.decoder.block[0].layer[0].SelfAttention.relative_attention_bias.weight.mul_(-2)
        self.assertNotEqual(before, model.score([3, 4, 5, 6, 1], [6, 7, 8, 1]))
        self.assertFalse(hasattr(model.encoder.block[1].layer[0].SelfAttention, "relative_attention_bias"))

    def test_batches_are_single_sources(self):
        model = randomize_(T5ForConditionalGeneration(dict(CFG, feed_forward_proj="gated-gelu")), 5)
        sources = [[3, 4, 5, 1], [6, 7, 8, 9, 10, 11, 1], [12, 1]]
        targets = [[5, 6, 1], [7, 1], [8, 9, 10, 11, 1]]
        batch = model.score_batch(sources, targets)
        for source, target, got in zip(sources, targets, batch):
            self.assertLess(max(abs(a - b) for a, b in zip(got, model.score(source, target))), 1e-12)


class T5FilesTest(unittest.TestCase):
    def test_state_dict_holds_save_pretraineds_names(self):
        model = T5ForConditionalGeneration(dict(CFG, num_layers=1, num_decoder_layers=1))
        names = set(model.state_dict())
        published = {  # t5-small's model.safetensors, one block per stack
            "shared.weight", "encoder.final_layer_norm.weight", "decoder.final_layer_norm.weight",
            "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
            "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
            "encoder.block.0.layer.0.layer_norm.weight", "encoder.block.0.layer.1.DenseReluDense.wi.weight",
            "encoder.block.0.layer.1.DenseReluDense.wo.weight", "encoder.block.0.layer.1.layer_norm.weight",
            "decoder.block.0.layer.0.layer_norm.weight", "decoder.block.0.layer.1.layer_norm.weight",
            "decoder.block.0.layer.2.DenseReluDense.wi.weight", "decoder.block.0.layer.2.DenseReluDense.wo.weight",
            "decoder.block.0.layer.2.layer_norm.weight"}
        published |= {f"{s}.block.0.layer.0.SelfAttention.{p}.weight" for s in ("encoder", "decoder") for p in "qkvo"}
        published |= {f"decoder.block.0.layer.1.EncDecAttention.{p}.weight" for p in "qkvo"}
        self.assertEqual(names, published)
        gated = set(T5ForConditionalGeneration(dict(CFG, feed_forward_proj="gated-gelu", tie_word_embeddings=False))
                    .state_dict())
        for present in ("lm_head.weight", "encoder.block.1.layer.1.DenseReluDense.wi_0.weight",
                        "decoder.block.2.layer.2.DenseReluDense.wi_1.weight"):
            self.assertIn(present, gated)
        copies = set(T5ForConditionalGeneration(CFG, embed_copies_in_file=True).state_dict())
        self.assertEqual(copies - set(T5ForConditionalGeneration(CFG).state_dict()),
                         {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight"})

    def test_a_saved_directory_reads_back_the_same_model(self):
        model = randomize_(T5ForConditionalGeneration(dict(CFG, model_type="mt5")), 6)
        with tempfile.TemporaryDirectory() as tmp:
            save_t5_dir(model, tmp, dtype="BF16", shards=2)
            loaded = load_t5_dir(tmp, torch.float64)
            self.assertEqual(loaded.config["model_type"], "mt5")
            self.assertEqual(model.score([3, 4, 1], [5, 1]), loaded.score([3, 4, 1], [5, 1]))

    def test_tokenizer_is_the_sentencepiece_models_ids_then_eos(self):
        lines = ["the cats chase the dogs", "die Katzen jagen die Hunde", "a big dog sees a small cat"] * 30
        with tempfile.TemporaryDirectory() as tmp:
            keys = write_t5_tokenizer(tmp, lines, 30, extra_ids=13)
            self.assertEqual(keys["vocab_size"], 48)  # 30 + 13, up to a multiple of 8
            sp = spm.SentencePieceProcessor(model_file=str(Path(tmp) / "spiece.model"))
            self.assertEqual([sp.id_to_piece(i) for i in range(3)], ["<pad>", "</s>", "<unk>"])
            oracle = T5TokenizerOracle(tmp)
            self.assertEqual(oracle.encode("the dogs"), sp.encode("the dogs") + [1])
            self.assertEqual(oracle.token(42), "<extra_id_0>")
            self.assertEqual(oracle.token(30), "<extra_id_12>")
            self.assertEqual(oracle.decode(sp.encode("the dogs") + [42]), "the dogs<extra_id_0>")
            self.assertEqual(oracle.decode([42] + sp.encode("the dogs") + [41, 42]),
                             "<extra_id_0> the dogs<extra_id_1><extra_id_0>")


if __name__ == "__main__":
    unittest.main()
