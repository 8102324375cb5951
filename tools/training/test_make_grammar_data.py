#!/usr/bin/env python3
"""Tests for tools/training/make_grammar_data.py (the toy English->German corpus).

    /usr/bin/python3 -m unittest tools/training/test_make_grammar_data.py     # from the repo root
    /usr/bin/python3 tools/training/test_make_grammar_data.py
"""

import collections
import contextlib
import io
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_grammar_data as grammar  # noqa: E402

# Small sizes keep the suite fast; the split logic is the same at any size.
SIZES = dict(train_size=3000, test_size=300, swapped_pairs=150, long_size=150)


def conjunct_counts(english):
    """Conjuncts in the subject and in the object of an English sentence."""
    sentence, _ = grammar.parse(english)
    return len(sentence.subject), len(sentence.object)


class TranslationTest(unittest.TestCase):
    def check(self, english, german):
        self.assertEqual(grammar.translate(english), german)

    def test_examples_from_the_specification(self):
        self.check("cats chase dogs", "Katzen jagen Hunde")
        self.check("dogs chase cats", "Hunde jagen Katzen")
        self.check("the cat chases the dog", "Die Katze jagt den Hund")
        self.check("The big dog sees a small cat.", "Der große Hund sieht eine kleine Katze.")
        self.check("the cat and the dog chase the mouse", "Die Katze und der Hund jagen die Maus")

    def test_masculine_accusative_with_adjective(self):
        self.check("the cat sees the big dog", "Die Katze sieht den großen Hund")
        self.check("the cat sees a big dog", "Die Katze sieht einen großen Hund")
        self.check("the cat sees a big black dog", "Die Katze sieht einen großen schwarzen Hund")

    def test_masculine_nominative_with_adjective(self):
        self.check("a big dog sees the cat", "Ein großer Hund sieht die Katze")
        self.check("the old fox sees the cat", "Der alte Fuchs sieht die Katze")

    def test_neuter_with_indefinite_article(self):
        self.check("a white horse sees the cat", "Ein weißes Pferd sieht die Katze")
        self.check("the cat sees a white horse", "Die Katze sieht ein weißes Pferd")
        self.check("the horse sees the clever child", "Das Pferd sieht das kluge Kind")

    def test_feminine(self):
        self.check("a small cow sees a hungry duck", "Eine kleine Kuh sieht eine hungrige Ente")

    def test_plurals(self):
        self.check("big dogs chase small cats", "Große Hunde jagen kleine Katzen")
        self.check("the big dogs chase the small cats", "Die großen Hunde jagen die kleinen Katzen")
        self.check("the mice see men and women", "Die Mäuse sehen Männer und Frauen")
        self.check("wolves like children", "Wölfe mögen Kinder")
        self.check("foxes watch the teachers", "Füchse beobachten die Lehrer")

    def test_irregular_verbs(self):
        self.check("the dog likes the cat", "Der Hund mag die Katze")
        self.check("the dog sees the cat", "Der Hund sieht die Katze")
        self.check("the fox catches a duck", "Der Fuchs fängt eine Ente")
        self.check("the teacher finds the child", "Der Lehrer findet das Kind")
        self.check("the frogs catch a bird", "Die Frösche fangen einen Vogel")

    def test_coordinated_subject_takes_plural_verb(self):
        self.check("a man and a woman feed the cow", "Ein Mann und eine Frau füttern die Kuh")
        self.check("The dog and the wolf greet a lazy frog.",
                   "Der Hund und der Wolf grüßen einen faulen Frosch.")

    def test_coordinated_object_is_accusative(self):
        self.check("the cow sees the dog and an old wolf",
                   "Die Kuh sieht den Hund und einen alten Wolf")

    def test_a_and_an(self):
        self.check("an old dog bites a young cat", "Ein alter Hund beißt eine junge Katze")
        for bad in ("a old dog bites the cat", "an dog bites the cat"):
            with self.assertRaises(ValueError):
                grammar.parse(bad)

    def test_ungrammatical_english_is_rejected(self):
        for bad in ("the cat chase the dog", "the cats chases the dog", "cat chases dog",
                    "a cats chase the dog", "the cat the dog", "the cat sees"):
            with self.assertRaises(ValueError, msg=bad):
                grammar.parse(bad)

    def test_capitalization_and_period(self):
        self.check("the cat sees the dog.", "Die Katze sieht den Hund.")
        self.check("The cat sees the dog", "Die Katze sieht den Hund")


class CorpusTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.corpus = grammar.generate_corpus(seed=1234, **SIZES)

    def test_sizes(self):
        self.assertEqual(len(self.corpus["train"]), SIZES["train_size"])
        self.assertEqual(len(self.corpus["test"]), SIZES["test_size"])
        self.assertEqual(len(self.corpus["swapped"]), 2 * SIZES["swapped_pairs"])
        self.assertEqual(len(self.corpus["long"]), SIZES["long_size"])

    def test_every_line_parses_and_translates_consistently(self):
        for split, pairs in self.corpus.items():
            for english, german in pairs:
                self.assertNotIn("\t", english + german)
                sentence, style = grammar.parse(english)
                self.assertEqual(grammar.render_english(sentence, style), english, split)
                self.assertEqual(grammar.translate(english), german, split)
                self.assertEqual(english.endswith("."), german.endswith("."))
                self.assertTrue(german[0].isupper())
                self.assertTrue(english[0].islower() or english == grammar.upper_first(
                    english.lower()), english)

    def test_determinism(self):
        again = grammar.generate_corpus(seed=1234, **SIZES)
        self.assertEqual(again, self.corpus)
        other = grammar.generate_corpus(seed=4321, **SIZES)
        self.assertNotEqual(other["train"], self.corpus["train"])

    def test_written_files_are_byte_identical_across_runs(self):
        args = ["--seed", "99", "--train-size", "500", "--test-size", "50",
                "--swapped-pairs", "20", "--long-size", "20"]
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            for out in (a, b):
                with contextlib.redirect_stderr(io.StringIO()):  # the summary
                    self.assertEqual(grammar.main(args + ["--out", out]), 0)
            for name in ("train", "test", "swapped", "long"):
                first = (Path(a) / f"{name}.tsv").read_bytes()
                self.assertEqual(first, (Path(b) / f"{name}.tsv").read_bytes(), name)
                lines = first.decode("utf-8").splitlines()
                self.assertTrue(all(len(line.split("\t")) == 2 for line in lines), name)

    def test_committed_data_is_what_the_defaults_generate(self):
        # weights/README.md says the shipped splits come from this script's defaults;
        # the models were trained on them, so a drift here must be a conscious change.
        committed = Path(__file__).resolve().parents[2] / "weights" / "data"
        with tempfile.TemporaryDirectory() as out:
            with contextlib.redirect_stderr(io.StringIO()):
                self.assertEqual(grammar.main(["--out", out]), 0)
            for name in ("train", "test", "swapped", "long"):
                self.assertEqual((Path(out) / f"{name}.tsv").read_bytes(),
                                 (committed / f"{name}.tsv").read_bytes(), name)

    def test_splits_are_disjoint(self):
        train_exact = {en for en, _ in self.corpus["train"]}
        train_normalized = {grammar.normalize(en) for en in train_exact}
        self.assertEqual(len(train_normalized), len(self.corpus["train"]))  # unique
        for split in ("test", "swapped", "long"):
            english = [en for en, _ in self.corpus[split]]
            self.assertEqual(len({grammar.normalize(en) for en in english}), len(english), split)
            for en in english:
                self.assertNotIn(en, train_exact, split)
                self.assertNotIn(grammar.normalize(en), train_normalized, split)

    def test_train_and_test_are_bounded(self):
        for split in ("train", "test", "swapped"):
            for english, _ in self.corpus[split]:
                self.assertLessEqual(len(english.split()), grammar.MAX_WORDS)
                self.assertLessEqual(max(conjunct_counts(english)), grammar.TRAIN_MAX_CONJUNCTS)

    def test_swapped_pairs_are_the_same_bag_of_words(self):
        lines = self.corpus["swapped"]
        for (a, a_de), (b, b_de) in zip(lines[0::2], lines[1::2]):
            self.assertNotEqual(a, b)
            self.assertNotEqual(a_de, b_de)
            self.assertEqual(a, a.lower())
            self.assertEqual(b, b.lower())
            self.assertEqual(a.endswith("."), b.endswith("."))
            self.assertEqual(collections.Counter(a.rstrip(".").split()),
                             collections.Counter(b.rstrip(".").split()))
            first, _ = grammar.parse(a)
            second, _ = grammar.parse(b)
            self.assertEqual((second.subject, second.verb, second.object),
                             (first.object, first.verb, first.subject))

    def test_long_split_has_more_conjuncts_than_train(self):
        train_max = max(max(conjunct_counts(en)) for en, _ in self.corpus["train"])
        self.assertEqual(train_max, grammar.TRAIN_MAX_CONJUNCTS)
        for english, german in self.corpus["long"]:
            self.assertGreater(max(conjunct_counts(english)), train_max, english)
            self.assertIn(max(conjunct_counts(english)), (3, 4))

    def test_training_data_covers_the_grammar(self):
        corpus = grammar.generate_corpus(seed=1234, train_size=20000, test_size=0,
                                         swapped_pairs=0, long_size=0)
        sentences = [grammar.parse(en) for en, _ in corpus["train"]]
        missing = grammar.required_features() - grammar.coverage_features(sentences)
        self.assertEqual(missing, set())


if __name__ == "__main__":
    unittest.main()
