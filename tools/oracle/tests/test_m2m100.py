"""The M2M100 oracle (ordo_torch/m2m100.py, m2m100_dirs.py) against torch's own layers and
the formulas it was written from: its layers are torch's pre-norm Transformer layers, its
positions M2M100's tensor2tensor sin-then-cos table read from the non-pad tokens, its
files save_pretrained's names, and its tokenizer NllbTokenizer's mapping."""
from __future__ import annotations

import json
import math
import tempfile
import unittest
from pathlib import Path

import sentencepiece as spm
import torch
from torch import nn

from oracle_fixtures import close  # noqa: F401  (sets float64 and one thread)
from ordo_torch import (M2M100Model, NllbTokenizerOracle, load_m2m100_dir, m2m100_table, save_m2m100_dir,
                        write_nllb_tokenizer)
from ordo_torch.m2m100 import (M2M100DecoderLayer, M2M100EncoderLayer, decoder_position_ids,
                               encoder_position_ids)
from test_marian import randomize_, torch_attention, torch_feed_forward

CFG = dict(vocab_size=40, d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
           decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=24, max_position_embeddings=20)
LINES = ["the clever young teachers chase dogs", "a small cat sees the big dog", "birds sing in the morning",
         "die klugen jungen Lehrer jagen Hunde", "eine kleine Katze sieht den großen Hund"] * 20


class M2M100LayerTest(unittest.TestCase):
    """M2M100EncoderLayer/DecoderLayer are pre-norm layers: torch's
    nn.TransformerEncoderLayer/DecoderLayer with norm_first=True compute them."""

    def test_encoder_layer_is_torchs_pre_norm_layer(self):
        for activation in ("relu", "gelu"):
            ours = randomize_(M2M100EncoderLayer(dict(CFG, activation_function=activation)), 1)
            theirs = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, activation=activation, batch_first=True,
                                                norm_first=True).eval()
            torch_attention(ours.self_attn, theirs.self_attn)
            torch_feed_forward(ours, theirs)
            theirs.norm1.load_state_dict(ours.self_attn_layer_norm.state_dict())
            theirs.norm2.load_state_dict(ours.final_layer_norm.state_dict())
            x = torch.randn(2, 5, 16)
            padding = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
            got = ours(x, padding)
            want = theirs(x, src_key_padding_mask=padding)
            self.assertLess(float((got - want)[~padding].abs().max()), 1e-12)

    def test_decoder_layer_is_torchs_pre_norm_layer(self):
        ours = randomize_(M2M100DecoderLayer(dict(CFG, activation_function="relu")), 2)
        theirs = nn.TransformerDecoderLayer(16, 4, 24, dropout=0.0, activation="relu", batch_first=True,
                                            norm_first=True).eval()
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


class M2M100PositionsTest(unittest.TestCase):
    def test_table_is_tensor2tensor_sin_then_cos_with_a_zero_pad_row(self):
        table = m2m100_table(12, 8, padding_idx=1)
        self.assertEqual(table.dtype, torch.float32)  # transformers computes it in float32
        for p in (0, 2, 11):
            for i in range(4):
                angle = p * math.exp(-i * math.log(10000) / 3)
                self.assertAlmostEqual(float(table[p, i]), math.sin(angle), delta=1e-6)
                self.assertAlmostEqual(float(table[p, 4 + i]), math.cos(angle), delta=1e-6)
        self.assertEqual(float(table[1].abs().max()), 0.0)

    def test_position_ids_count_the_non_pad_tokens(self):
        ids = torch.tensor([[7, 1, 8, 1, 9], [5, 6, 2, 1, 1]])
        self.assertEqual(encoder_position_ids(ids, 1).tolist(), [[2, 1, 3, 1, 4], [2, 3, 4, 1, 1]])
        # Decoding with a cache: a token's row is its step + 2, pads the zero row.
        self.assertEqual(decoder_position_ids(ids, 1).tolist(), [[2, 1, 4, 1, 6], [2, 3, 4, 1, 1]])

    def test_padding_on_either_side_does_not_move_the_positions(self):
        model = randomize_(M2M100Model(CFG), 3)
        source = [5, 6, 7, 2]
        alone = model.encode(torch.tensor([source]))[0]
        left = model.encode(torch.tensor([[1, 1] + source]), torch.tensor([[True, True] + [False] * 4]))[0, 2:]
        self.assertLess(float((alone - left).abs().max()), 1e-12)
        inside = model.score([5, 1, 6, 7, 2], [8, 2])
        batch = model.score_batch([[5, 1, 6, 7, 2], [9, 2]], [[8, 2], [4, 4, 2]])
        self.assertLess(max(abs(a - b) for a, b in zip(inside, batch[0])), 1e-12)
        # A pad token inside the source changes nothing but itself: its neighbours keep their rows.
        self.assertNotEqual(model.score([5, 1, 6, 7, 2], [8, 2]), model.score([5, 6, 6, 7, 2], [8, 2]))


class M2M100DirectoryTest(unittest.TestCase):
    def test_tensor_names_are_save_pretraineds(self):
        names = set(M2M100Model(CFG).state_dict())
        self.assertIn("model.shared.weight", names)
        self.assertIn("model.encoder.layer_norm.weight", names)
        self.assertIn("model.decoder.layers.1.encoder_attn.k_proj.bias", names)
        for absent in ("lm_head.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight",
                       "final_logits_bias", "model.encoder.embed_positions.weights"):
            self.assertNotIn(absent, names)
        self.assertEqual(len(names), 1 + 4 + 2 * 16 + 2 * 26)

    def test_save_and_load_give_the_same_model(self):
        model = randomize_(M2M100Model(dict(CFG, activation_function="gelu")), 4)
        with tempfile.TemporaryDirectory() as d:
            save_m2m100_dir(model, d, dtype="BF16", shards=2)
            config = json.loads((Path(d) / "config.json").read_text())
            self.assertEqual(config["model_type"], "m2m_100")
            self.assertEqual(config["tokenizer_class"], "NllbTokenizer")
            self.assertEqual(config["architectures"], ["M2M100ForConditionalGeneration"])
            loaded = load_m2m100_dir(d, torch.float64)
            self.assertEqual(model.score([5, 6, 2], [7, 2]), loaded.score([5, 6, 2], [7, 2]))

    def test_translate_forces_the_target_code_first(self):
        model = randomize_(M2M100Model(CFG), 5)
        ids, _ = model.translate([5, 6, 2], forced_bos_token_id=33, max_length=4)
        self.assertEqual(ids[0], 33)
        # After the forced code the search is greedy: each next token is the argmax given the prefix.
        memory = model.encode(torch.tensor([[5, 6, 2]]))
        for step in range(1, len(ids)):
            logits = model.decode(memory, None, torch.tensor([[2] + ids[:step]]))[0, -1]
            self.assertEqual(ids[step], int(torch.argmax(logits)))


class NllbTokenizerTest(unittest.TestCase):
    def test_pieces_are_shifted_by_fairseqs_offset_and_codes_follow_them(self):
        with tempfile.TemporaryDirectory() as d:
            tokens = write_nllb_tokenizer(d, LINES, 60, ["deu_Latn", "eng_Latn"])
            sp = spm.SentencePieceProcessor(model_file=str(Path(d) / "sentencepiece.bpe.model"))
            self.assertEqual(tokens["codes"], {"deu_Latn": sp.get_piece_size() + 1, "eng_Latn": sp.get_piece_size() + 2})
            self.assertEqual(tokens["tokens"], sp.get_piece_size() + 4)  # pieces + offset, two codes, <mask>
            oracle = NllbTokenizerOracle(d)
            pieces = sp.encode("the dogs", out_type=str)
            want = [tokens["codes"]["eng_Latn"]] + [sp.piece_to_id(p) + 1 for p in pieces] + [2]
            self.assertEqual(oracle.encode("the dogs", "eng_Latn"), want)
            self.assertEqual(oracle.encode("Ω", "eng_Latn")[1:-1].count(3), 1)  # unknown: <unk>'s 3
            config = json.loads((Path(d) / "tokenizer_config.json").read_text())
            self.assertEqual(config["added_tokens_decoder"][str(tokens["codes"]["deu_Latn"])]["content"], "deu_Latn")
            self.assertEqual(config["added_tokens_decoder"][str(tokens["tokens"] - 1)]["content"], "<mask>")

    def test_legacy_behaviour_puts_the_code_after_eos_and_old_files_list_codes_elsewhere(self):
        with tempfile.TemporaryDirectory() as d:
            tokens = write_nllb_tokenizer(d, LINES, 60, ["deu_Latn", "eng_Latn"], added_tokens_decoder=False,
                                          legacy_behaviour=True)
            config = json.loads((Path(d) / "tokenizer_config.json").read_text())
            self.assertIsNone(config["additional_special_tokens"])
            self.assertNotIn("added_tokens_decoder", config)
            ids = NllbTokenizerOracle(d).encode("the dogs", "deu_Latn")
            self.assertEqual(ids[-2:], [2, tokens["codes"]["deu_Latn"]])


if __name__ == "__main__":
    unittest.main()
