"""The Marian oracle (ordo_torch/marian.py, marian_dirs.py) against torch's own layers and
the formulas it was written from: its layers are torch's post-norm Transformer layers, its
positions Marian's sin-then-cos table, its files save_pretrained's names, and its
tokenizer MarianTokenizer's mapping."""
from __future__ import annotations

import json
import math
import tempfile
import unittest
from pathlib import Path

import torch
from torch import nn

from oracle_fixtures import close  # noqa: F401  (sets float64 and one thread)
from ordo_torch import (MarianMTModel, MarianTokenizerOracle, load_marian_dir, marian_positions,
                        read_safetensors, save_marian_dir, sinusoidal_positions, write_marian_tokenizer)
from ordo_torch.marian import MarianDecoderLayer, MarianEncoderLayer

CFG = dict(vocab_size=30, d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
           decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=24, max_position_embeddings=20,
           pad_token_id=29, eos_token_id=0, decoder_start_token_id=29, activation_function="relu")


def randomize_(module: nn.Module, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "embed_positions" in name:
                continue
            p.copy_((1 + 0.2 * torch.randn(p.shape)) if "norm" in name and name.endswith("weight")
                    else 0.4 * torch.randn(p.shape))
    return module.eval()


def torch_attention(ours, theirs: nn.MultiheadAttention) -> None:
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
        theirs.out_proj.weight.copy_(ours.out_proj.weight)
        theirs.out_proj.bias.copy_(ours.out_proj.bias)


def torch_feed_forward(ours, theirs) -> None:
    with torch.no_grad():
        for mine, torch_name in (("fc1", "linear1"), ("fc2", "linear2")):
            getattr(theirs, torch_name).weight.copy_(getattr(ours, mine).weight)
            getattr(theirs, torch_name).bias.copy_(getattr(ours, mine).bias)


class MarianLayerTest(unittest.TestCase):
    """MarianEncoderLayer/MarianDecoderLayer are post-norm layers: torch's
    nn.TransformerEncoderLayer/DecoderLayer with norm_first=False compute them."""

    def test_encoder_layer_is_torchs_post_norm_layer(self):
        for activation in ("relu", "gelu"):
            ours = randomize_(MarianEncoderLayer(dict(CFG, activation_function=activation)), 1)
            theirs = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, activation=activation,
                                                batch_first=True, norm_first=False).eval()
            torch_attention(ours.self_attn, theirs.self_attn)
            torch_feed_forward(ours, theirs)
            theirs.norm1.load_state_dict(ours.self_attn_layer_norm.state_dict())
            theirs.norm2.load_state_dict(ours.final_layer_norm.state_dict())
            x = torch.randn(2, 5, 16)
            padding = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
            got = ours(x, padding)
            want = theirs(x, src_key_padding_mask=padding)
            self.assertLess(float((got - want)[~padding].abs().max()), 1e-12)

    def test_decoder_layer_is_torchs_post_norm_layer(self):
        ours = randomize_(MarianDecoderLayer(dict(CFG, activation_function="gelu")), 2)
        theirs = nn.TransformerDecoderLayer(16, 4, 24, dropout=0.0, activation="gelu", batch_first=True,
                                            norm_first=False).eval()
        torch_attention(ours.self_attn, theirs.self_attn)
        torch_attention(ours.encoder_attn, theirs.multihead_attn)
        torch_feed_forward(ours, theirs)
        theirs.norm1.load_state_dict(ours.self_attn_layer_norm.state_dict())
        theirs.norm2.load_state_dict(ours.encoder_attn_layer_norm.state_dict())
        theirs.norm3.load_state_dict(ours.final_layer_norm.state_dict())
        x, memory = torch.randn(2, 4, 16), torch.randn(2, 6, 16)
        src_padding = torch.tensor([[False] * 6, [False] * 2 + [True] * 4])
        causal = torch.ones(4, 4, dtype=torch.bool).triu(1)
        got = ours(x, memory, src_padding, None)
        want = theirs(x, memory, tgt_mask=causal, memory_key_padding_mask=src_padding)
        self.assertLess(float((got - want).abs().max()), 1e-12)


class GeluNewTest(unittest.TestCase):
    def test_gelu_new_is_torchs_tanh_gelu(self):
        from ordo_torch.marian import gelu_new
        x = torch.linspace(-8, 8, 101)
        self.assertLess(float((gelu_new(x) - torch.nn.functional.gelu(x, approximate="tanh")).abs().max()), 1e-12)


class MarianPositionsTest(unittest.TestCase):
    def test_table_is_sin_then_cos_rounded_to_float32(self):
        table = marian_positions(12, 8)
        for p in (0, 3, 11):
            for i in range(4):
                angle = p / 10000 ** (2 * i / 8)
                self.assertEqual(float(table[p, i]), float(torch.tensor(math.sin(angle)).float()))
                self.assertEqual(float(table[p, 4 + i]), float(torch.tensor(math.cos(angle)).float()))
        # The package's other sinusoid code, in its split layout, agrees to float32's rounding.
        other = sinusoidal_positions(torch.arange(12), 8, layout="split", dtype=torch.float64)
        self.assertLess(float((table - other).abs().max()), 1e-7)

    def test_a_stored_table_is_what_the_model_adds(self):
        computed = randomize_(MarianMTModel(CFG), 3)
        stored = MarianMTModel(CFG, positions_in_file=True).eval()
        state = dict(computed.state_dict())
        state["model.encoder.embed_positions.weight"] = marian_positions(20, 16)
        state["model.decoder.embed_positions.weight"] = marian_positions(20, 16)
        stored.load_state_dict(state)
        self.assertEqual(computed.score([3, 4, 5, 0], [6, 7, 0]), stored.score([3, 4, 5, 0], [6, 7, 0]))
        with torch.no_grad():
            stored.model.decoder.embed_positions.weight.add_(0.5)
        self.assertNotEqual(computed.score([3, 4, 5, 0], [6, 7, 0]), stored.score([3, 4, 5, 0], [6, 7, 0]))


class MarianFilesTest(unittest.TestCase):
    def names(self, **overrides):
        model = randomize_(MarianMTModel(dict(CFG, encoder_layers=1, decoder_layers=1, **overrides),
                                         positions_in_file=overrides.pop("positions", False)), 4)
        return set(model.state_dict())

    def test_state_dict_holds_save_pretraineds_names(self):
        shared = self.names()
        self.assertIn("model.shared.weight", shared)
        self.assertIn("final_logits_bias", shared)
        for absent in ("lm_head.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight",
                       "model.encoder.embed_positions.weight"):
            self.assertNotIn(absent, shared)
        self.assertEqual(len(shared), 2 + 16 + 26)
        separate = self.names(share_encoder_decoder_embeddings=False, tie_word_embeddings=False)
        for present in ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight"):
            self.assertIn(present, separate)
        self.assertNotIn("model.shared.weight", separate)

    def test_saved_and_loaded_models_compute_the_same(self):
        model = randomize_(MarianMTModel(dict(CFG, scale_embedding=True), positions_in_file=True), 5)
        with tempfile.TemporaryDirectory() as d:
            save_marian_dir(model, d, dtype="BF16", shards=2)
            config = json.loads((Path(d) / "config.json").read_text())
            self.assertEqual(config["model_type"], "marian")
            for key in ("dropout", "init_std", "forced_eos_token_id", "share_encoder_decoder_embeddings"):
                self.assertIn(key, config)
            loaded = load_marian_dir(d, torch.float64)
        self.assertEqual(model.score([3, 4, 5, 0], [6, 7, 0]), loaded.score([3, 4, 5, 0], [6, 7, 0]))

    def test_a_torch_save_twin_holds_the_same_tensors_and_the_ties(self):
        model = randomize_(MarianMTModel(dict(CFG, scale_embedding=True)), 7)
        for shards in (1, 3):
            with self.subTest(shards=shards), tempfile.TemporaryDirectory() as a, \
                    tempfile.TemporaryDirectory() as b:
                save_marian_dir(model, a, dtype="F16", shards=shards)
                save_marian_dir(model, b, dtype="F16", shards=shards, weights_format="bin")
                self.assertFalse(list(Path(b).glob("*.safetensors")))
                files = sorted(Path(b).glob("*.bin"))
                self.assertEqual(len(files), shards)
                state = {}
                for file in files:
                    part = torch.load(file, weights_only=True)
                    self.assertEqual(part._metadata, {"": {"version": 1}})  # a state_dict() as saved
                    state.update(part)
                saved = {}
                for file in Path(a).glob("*.safetensors"):
                    saved.update(read_safetensors(file))
                aliases = {"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight"}
                self.assertEqual(set(state), set(saved) | aliases)
                for name, tensor in saved.items():
                    self.assertEqual(state[name].dtype, torch.float16)
                    self.assertTrue(torch.equal(state[name], tensor), name)
                for alias in aliases:  # one storage, as the tie in transformers' module
                    self.assertEqual(state[alias].data_ptr(), state["model.shared.weight"].data_ptr())
                if shards > 1:
                    index = json.loads((Path(b) / "pytorch_model.bin.index.json").read_text())
                    self.assertEqual(set(index["weight_map"]), set(state))
                    self.assertEqual(set(index["weight_map"].values()), {f.name for f in files})

    def test_batches_equal_single_sequences(self):
        model = randomize_(MarianMTModel(dict(CFG, activation_function="swish")), 6)
        sources, targets = [[3, 4, 5, 0], [7, 0], [8, 9, 10, 11, 12, 0]], [[4, 0], [5, 6, 7, 0], [9, 0]]
        batch = model.score_batch(sources, targets)
        ids, _ = model.greedy_batch(sources, 6)
        for i, (s, t) in enumerate(zip(sources, targets)):
            for a, b in zip(batch[i], model.score(s, t)):
                self.assertTrue(close(a, b, 1e-10))
            self.assertEqual(ids[i], model.greedy(s, 6)[0])


class MarianTokenizerTest(unittest.TestCase):
    PAIRS = [line.split("\t") for line in (Path(__file__).resolve().parents[3] / "weights" / "data" /
                                           "train.tsv").read_text(encoding="utf-8").splitlines()[:500]]
    LINES, GERMAN = [a for a, _ in PAIRS], [b for _, b in PAIRS]

    def test_pieces_map_through_vocab_json(self):
        with tempfile.TemporaryDirectory() as d:
            keys = write_marian_tokenizer(d, self.LINES, self.GERMAN, 60, language_tokens=[">>deu<<"])
            vocab = json.loads((Path(d) / "vocab.json").read_text())
            oracle = MarianTokenizerOracle(d)
            self.assertEqual((vocab["</s>"], vocab["<unk>"], vocab["<pad>"]), (0, 1, keys["pad_token_id"]))
            ids = oracle.encode_source(">>deu<< the cat Ω")
            self.assertEqual(ids[0], vocab[">>deu<<"])
            self.assertEqual(ids[-1], vocab["</s>"])
            self.assertIn(vocab["<unk>"], ids)  # Ω is no piece of source.spm
            pieces = oracle.source.encode("the cat", out_type=str)
            self.assertEqual(oracle.encode_source("the cat"), [vocab[p] for p in pieces] + [0])
            self.assertEqual(oracle.encode_source(">>xyz<< cat")[0], vocab["<unk>"])

    def test_separate_vocabs_map_targets_through_target_vocab(self):
        with tempfile.TemporaryDirectory() as d:
            keys = write_marian_tokenizer(d, self.LINES, self.GERMAN, 60, separate_vocabs=True)
            target_vocab = json.loads((Path(d) / "target_vocab.json").read_text())
            self.assertEqual(target_vocab["<pad>"], keys["pad_token_id"])
            oracle = MarianTokenizerOracle(d)
            pieces = oracle.target.encode("die Katze", out_type=str)
            self.assertEqual(oracle.encode_target("die Katze"), [target_vocab[p] for p in pieces] + [0])


if __name__ == "__main__":
    unittest.main()
