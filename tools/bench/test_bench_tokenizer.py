#!/usr/bin/env python3
"""Tests for tools/bench/bench_tokenizer.py: the tokenizer a random bench model gets
(make_bench_model.py --tokenizer) has exactly vocab_size pieces, every one decodes, the
special pieces sit at config.json's ids, German prompts become german-llama's pieces,
and ordo completes text with it. On small vocabularies: the 32000-piece one differs
only in how much filler it holds (tools/bench/serve_load.py checks it by running).

    /usr/bin/python3 tools/bench/test_bench_tokenizer.py [path/to/ordo] [-v]

Without an ordo binary (argument, else $ORDO_CLI), the test that runs it is skipped.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import sentencepiece as spm

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_tokenizer as bt  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ORDO = os.environ.get("ORDO_CLI", "")
LLAMA = {"vocab_size": 700, "bos_token_id": 1, "eos_token_id": 2}  # the llama shape's ids


def load(data: bytes) -> spm.SentencePieceProcessor:
    sp = spm.SentencePieceProcessor()
    sp.load_from_serialized_proto(data)
    return sp


def prompts() -> list[str]:
    """serve_load.py's completion prompts: the first two words of test.tsv's targets."""
    rows = [line.split("\t") for line in (ROOT / "weights" / "data" / "test.tsv").read_text("utf-8").splitlines()
            if line]
    return sorted({" ".join(row[1].split()[:2]) for row in rows})


class VocabularyTest(unittest.TestCase):
    def test_exactly_vocab_size_pieces_and_every_id_decodes(self):
        for vocab_size in (600, 700, 1031):  # 600: no filler at all
            sp = load(bt.tokenizer_model({**LLAMA, "vocab_size": vocab_size}))
            self.assertEqual(sp.get_piece_size(), vocab_size)
            for i in range(vocab_size):
                with self.subTest(vocab_size=vocab_size, id=i):
                    self.assertIsInstance(sp.decode([i]), str)
                    self.assertTrue(sp.id_to_piece(i))
            self.assertEqual(len({sp.id_to_piece(i) for i in range(vocab_size)}), vocab_size)

    def test_llama_layout(self):
        sp = load(bt.tokenizer_model(LLAMA))
        self.assertEqual((sp.unk_id(), sp.bos_id(), sp.eos_id(), sp.pad_id()), (0, 1, 2, -1))
        self.assertEqual([sp.id_to_piece(i) for i in range(3)], ["<unk>", "<s>", "</s>"])
        self.assertTrue(all(sp.is_byte(i) for i in range(3, 259)))
        self.assertEqual((sp.id_to_piece(3), sp.id_to_piece(258)), ("<0x00>", "<0xFF>"))
        self.assertEqual(sp.id_to_piece(699), "\u2581tok699")
        self.assertEqual(sp.decode([698, 699]), "tok698 tok699")
        self.assertEqual(sp.decode([3 + ord("A"), 3 + 0xC3, 3 + 0xA4]), "Aä")  # byte pieces spell bytes

    def test_special_pieces_sit_at_the_config_ids(self):
        # Marian-like: eos 0, pad last, no bos; <unk> takes the first free id.
        sp = load(bt.tokenizer_model({"vocab_size": 650, "eos_token_id": 0, "pad_token_id": 649}))
        self.assertEqual((sp.eos_id(), sp.pad_id(), sp.unk_id(), sp.bos_id()), (0, 649, 1, -1))
        self.assertTrue(sp.is_byte(2))
        # german-llama's ids: bos = eos = 1, pad 0.
        sp = load(bt.tokenizer_model({"vocab_size": 650, "bos_token_id": 1, "eos_token_id": 1, "pad_token_id": 0}))
        self.assertEqual((sp.pad_id(), sp.eos_id(), sp.unk_id()), (0, 1, 2))
        self.assertTrue(sp.is_control(1))
        self.assertEqual(sp.get_piece_size(), 650)

    def test_german_prompts_become_german_llamas_pieces(self):
        sp = load(bt.tokenizer_model(LLAMA))
        german = spm.SentencePieceProcessor(model_file=str(bt.SOURCE_PIECES))
        texts = prompts() + ["Die Katze jagt den Hund.", "Eine kleine Ente fängt einen großen Frosch"]
        for text in texts:
            with self.subTest(text=text):
                self.assertEqual(sp.encode(text, out_type=str), german.encode(text, out_type=str))
                self.assertEqual(sp.decode(sp.encode(text)), text)
        # A character german-llama lacks falls back to bytes, not <unk>.
        self.assertEqual(sp.decode(sp.encode("Die Katze \U0001F408")), "Die Katze \U0001F408")
        self.assertNotIn(sp.unk_id(), sp.encode("Die Katze \U0001F408"))

    def test_bad_configs_say_what_is_wrong(self):
        cases = [({**LLAMA, "vocab_size": 599}, "vocab_size 599 is too small"),
                 ({**LLAMA, "eos_token_id": 700}, "eos_token_id 700 is outside the vocabulary [0, 700)"),
                 ({**LLAMA, "eos_token_id": [2, 3]}, "eos_token_id is [2, 3]"),
                 ({**LLAMA, "vocab_size": "700"}, "vocab_size is '700', expected a positive integer"),
                 ({"bos_token_id": 1}, "vocab_size is None")]
        for config, message in cases:
            with self.subTest(config=config):
                with self.assertRaises(ValueError) as caught:
                    bt.tokenizer_model(config)
                self.assertIn(message, str(caught.exception))

    def test_write_tokenizer_reads_config_json(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaisesRegex(ValueError, "config.json: cannot read a config.json"):
                bt.write_tokenizer(Path(d))
            (Path(d) / "config.json").write_text(json.dumps(LLAMA))
            path = bt.write_tokenizer(Path(d))
            self.assertEqual(path, Path(d) / "tokenizer.model")
            self.assertEqual(spm.SentencePieceProcessor(model_file=str(path)).get_piece_size(), 700)
            self.assertEqual(sorted(p.name for p in Path(d).iterdir()), ["config.json", "tokenizer.model"])


class OrdoTest(unittest.TestCase):
    """ordo reads it: a tiny random LLaMA model of LLAMA's vocabulary with this tokenizer
    tokenizes as sentencepiece does, spells every id, and generates text."""

    @classmethod
    def setUpClass(cls):
        if not ORDO:
            raise unittest.SkipTest("no ordo binary given")
        import torch
        sys.path.insert(0, str(ROOT / "tools" / "oracle"))
        from ordo_torch import LlamaModel, save_llama_dir

        cls.scratch = tempfile.TemporaryDirectory(prefix="ordo-bench-tokenizer.")
        cls.model = Path(cls.scratch.name)
        torch.manual_seed(0)
        config = {**LLAMA, "model_type": "llama", "hidden_size": 32, "intermediate_size": 64,
                  "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
                  "max_position_embeddings": 64}
        save_llama_dir(LlamaModel(config), cls.model, "F32")
        bt.write_tokenizer(cls.model)
        cls.sp = spm.SentencePieceProcessor(model_file=str(cls.model / "tokenizer.model"))

    @classmethod
    def tearDownClass(cls):
        cls.scratch.cleanup()

    def ordo(self, *args):
        run = subprocess.run([ORDO, *args, "--model", str(self.model), "--json"], capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        return json.loads(run.stdout.splitlines()[0])

    def test_ordo_tokenizes_as_sentencepiece(self):
        for text in ("Die Katze", "Ein Vogel fängt"):
            self.assertEqual(self.ordo("tokenize", text)["ids"], [1] + self.sp.encode(text))

    def test_ordo_spells_every_id(self):
        # A target stops at eos (2) and skips bos (1): the others, all at once.
        ids = [i for i in range(LLAMA["vocab_size"]) if i not in (1, 2)]
        text = self.ordo("detokenize", " ".join(map(str, ids)))["text"]
        self.assertEqual(text, self.sp.decode(ids))

    def test_ordo_generates_text(self):
        result = self.ordo("generate", "Die Katze", "--max-length", "8")
        ids = result["generated_ids"]
        self.assertTrue(len(ids) == 8 or result["finished"], result)
        ids = ids[:ids.index(2)] if 2 in ids else ids  # what follows eos is not text
        self.assertTrue(result["text"])
        self.assertEqual(result["text"], self.sp.decode(ids))


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        ORDO = sys.argv.pop(1)
    unittest.main()
