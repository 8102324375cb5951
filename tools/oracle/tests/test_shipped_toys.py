"""The shipped toy models in Hugging Face layouts (weights/marian, weights/t5) against the
record their training left in training.json ("oracle_test_sample"), which
tests/test_shipped_toys.cpp holds ordo to: the oracle, run now on the committed files
(float64), must still give those source and reference ids (MarianTokenizer's,
T5Tokenizer's), those greedy ids and those log-probabilities (recorded to 8 decimals).
So the record can be trusted as the oracle's answer, and a change to the files or to the
oracle that would make it stale fails here."""
from __future__ import annotations

import json
import unittest
from pathlib import Path

from oracle_fixtures import close  # noqa: F401  (sets float64 and one thread)
from ordo_torch import MarianTokenizerOracle, T5TokenizerOracle, load_marian_dir, load_t5_dir

WEIGHTS = Path(__file__).resolve().parents[3] / "weights"


class ShippedToysTest(unittest.TestCase):
    def check(self, name, model, encode_source, encode_target):
        cases = json.loads((WEIGHTS / name / "training.json").read_text())["oracle_test_sample"]["cases"]
        self.assertGreaterEqual(len(cases), 100)
        sources = [c["source_ids"] for c in cases]
        for c in cases:
            self.assertEqual(encode_source(c["source"]), c["source_ids"], c["source"])
            self.assertEqual(encode_target(c["reference"]), c["reference_ids"], c["reference"])
        greedy, _ = model.greedy_batch(sources, 64)
        self.assertEqual(greedy, [c["greedy_ids"] for c in cases])
        scores = model.score_batch(sources, [c["reference_ids"] for c in cases])
        for got, c in zip(scores, cases):
            for g, want in zip(got, c["reference_logprobs"]):
                self.assertAlmostEqual(g, want, delta=1e-7, msg=c["source"])

    def test_marian(self):
        tokenizer = MarianTokenizerOracle(WEIGHTS / "marian")
        self.check("marian", load_marian_dir(WEIGHTS / "marian"), tokenizer.encode_source, tokenizer.encode_target)

    def test_t5(self):
        tokenizer = T5TokenizerOracle(WEIGHTS / "t5")
        self.check("t5", load_t5_dir(WEIGHTS / "t5"), tokenizer.encode, tokenizer.encode)


if __name__ == "__main__":
    unittest.main()
