#!/usr/bin/python3
"""Tests of ordo_torch.search: the beam search against brute force, scripted models and
greedy; GenerationMixin's batches against one sequence at a time.

Alone: /usr/bin/python3 tools/oracle/tests/test_search.py [-v]; with the others:
/usr/bin/python3 tools/oracle/test_ordo_torch.py [-v].
"""
from __future__ import annotations

import itertools
import math
import sys
import unittest
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # ordo_torch, make_parity_models
import make_parity_models  # noqa: E402
from oracle_fixtures import (LLAMA_VARIANTS, POSITION_VARIANTS, close, random_lm,  # noqa: E402
                             random_llama, random_model)
from ordo_torch import OrdoModel  # noqa: E402


def stepwise_logprobs(model: OrdoModel, src, ids):
    """Log-probs of ids decoded one step at a time, with exactly greedy's calls
    (decode of [decoder_start] + prefix, batch of one), log_softmax in float64."""
    with torch.no_grad():
        memory = model.encode(torch.tensor([src]))
        tgt, out = [model.config["decoder_start_token_id"]], []
        for token in ids:
            logits = model.decode(memory, None, torch.tensor([tgt]))[0, -1]
            out.append(torch.log_softmax(logits.double(), -1)[token].item())
            tgt.append(token)
    return out


class BeamSearchTest(unittest.TestCase):
    TINY = dict(vocab_size=6, d_model=8, encoder_layers=1, decoder_layers=1,
                encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=16,
                decoder_ffn_dim=16, max_position_embeddings=16, pad_token_id=0, eos_token_id=1,
                decoder_start_token_id=0)

    def tiny_model(self, seed: int, eos_bias: float) -> OrdoModel:
        model = OrdoModel(self.TINY, final_logits_bias=True).eval()
        make_parity_models.random_weights_(model, torch.Generator().manual_seed(seed))
        with torch.no_grad():
            model.final_logits_bias[0, 1] += eos_bias
        return model

    def test_beam_search_equals_brute_force(self):
        """A beam that holds every output returns the exhaustive ranking of teacher-forced
        scores (every token id, pad = decoder_start included; min_length honoured)."""
        max_length, eos = 4, 1
        others = [0, 2, 3, 4, 5]
        outputs = [list(p) + [eos] for n in range(max_length) for p in
                   itertools.product(others, repeat=n)]
        outputs += [list(p) for p in itertools.product(others, repeat=max_length)]
        model, src = self.tiny_model(5, eos_bias=1.0), [5, 1]  # tops of every kind
        scores = {tuple(ids): math.fsum(model.score(src, ids)) for ids in outputs}
        seen = set()
        for alpha, min_length in itertools.product((0.0, 1.0, 0.6), (0, 2)):
            with self.subTest(length_penalty=alpha, min_length=min_length):
                valid = [ids for ids in outputs if ids[-1] != eos or len(ids) >= min_length]
                ranked = sorted(valid, key=lambda ids: -scores[tuple(ids)] / len(ids) ** alpha)
                best = [scores[tuple(ids)] / len(ids) ** alpha for ids in ranked[:4]]
                self.assertTrue(all(not close(x, y, 1e-7) for x, y in zip(best, best[1:])),
                                "near-tie in the exhaustive ranking: pick another model")
                for n_best in (1, 3):
                    hyps, margin = model.beam_search(src, 6 ** 4, n_best, alpha, max_length,
                                                     min_length)
                    self.assertEqual([h["ids"] for h in hyps], ranked[:n_best])
                    for h in hyps:
                        ids = h["ids"]
                        self.assertTrue(close(h["score"], scores[tuple(ids)], 1e-9))
                        self.assertTrue(close(h["normalized_score"],
                                              h["score"] / len(ids) ** alpha, 1e-12))
                        self.assertEqual(h["finished"], ids[-1] == eos)
                        seen.add((min_length, h["finished"], len(ids)))
                    self.assertGreater(margin, 0.0)
                # The whole pool is every valid output.
                hyps, _ = model.beam_search(src, 6 ** 4, 6 ** 4, alpha, max_length, min_length)
                self.assertEqual(sorted(h["ids"] for h in hyps), sorted(valid))
        # Finished hypotheses of several lengths and cut ones were ranked first somewhere;
        # min_length 2 kept [eos] out.
        self.assertIn((0, False, max_length), seen)
        self.assertIn((0, True, 1), seen)
        self.assertGreaterEqual(len({n for _, done, n in seen if done}), 3)
        self.assertNotIn((2, True, 1), seen)

    def test_beam_size_1_is_greedy(self):
        sources = [[1], [5, 17, 2, 33, 1], [9, 9, 30, 4, 12, 7, 25, 1]]
        for i, (name, pos) in enumerate(POSITION_VARIANTS.items()):
            model = random_model(30 + i, bias=True, normalize_before=i % 2 == 1, **pos)
            with torch.no_grad():
                model.final_logits_bias[0, 1] += 1.5  # eos now and then
            for j, src in enumerate(sources):
                alpha = (0.0, 1.0, 0.6)[(i + j) % 3]
                with self.subTest(positions=name, source=src, length_penalty=alpha):
                    ids, _ = model.greedy(src, 7)
                    (hyp,), _ = model.beam_search(src, 1, 1, alpha, 7)
                    self.assertEqual(hyp["ids"], ids)
                    self.assertEqual(hyp["finished"], ids[-1] == 1)
                    # Same decoder calls as greedy: the float64 sum is bit-identical.
                    self.assertEqual(hyp["score"], sum(stepwise_logprobs(model, src, ids)))
                    self.assertTrue(close(hyp["score"], math.fsum(model.score(src, ids)), 1e-10))

    class Scripted(OrdoModel):
        """Next-token probabilities from a table keyed by the prefix (tokens 0..3, eos 1)."""

        def __init__(self, table, default=((1, .4), (2, .3), (3, .2), (0, .1))):
            super().__init__(dict(BeamSearchTest.TINY, vocab_size=4, d_model=4))
            self.table, self.default = {k: dict(v) for k, v in table.items()}, dict(default)

        def encode(self, src_ids, src_padding=None):
            return torch.zeros(src_ids.shape[0], src_ids.shape[1], 4)

        def decode(self, memory, src_padding, tgt_in_ids):
            probs = [self.table.get(tuple(row[1:]), self.default) for row in tgt_in_ids.tolist()]
            last = torch.log(torch.tensor([[p[v] for v in range(4)] for p in probs]))
            return last[:, None, :].expand(-1, tgt_in_ids.shape[1], -1)

    def run_scripted(self, table, beam_size, alpha, max_length):
        hyps, margin = self.Scripted(table).beam_search([1], beam_size, beam_size, alpha,
                                                         max_length)
        return [(h["ids"], h["finished"]) for h in hyps], [h["score"] for h in hyps], margin

    def test_scripted_eos_ranked_k_or_later_is_skipped(self):
        # Step 1: [2] (.5) and [3] (.3) live. Step 2: [2,eos] -1.20 (rank 0, pooled),
        # [2,3] -1.90 live, [3,eos] -2.12 (rank 2 = K: skipped), [3,2] -2.25 live. Step 3
        # (default table): [2,3,eos] -2.81 fills the pool; the cut beams rank below it.
        table = {(): ((2, .5), (3, .3), (1, .12), (0, .08)),
                 (2,): ((1, .6), (3, .3), (2, .06), (0, .04)),
                 (3,): ((1, .4), (2, .35), (3, .15), (0, .1))}
        hyps, scores, margin = self.run_scripted(table, 2, 0.0, 3)
        self.assertEqual(hyps, [([2, 1], True), ([2, 3, 1], True)])
        self.assertAlmostEqual(scores[1], math.log(.5 * .3 * .4), delta=1e-6)
        # The smallest gap: step 3's candidates 4 and 5 (of the first 2K + 1), [3,2,2]
        # .105 * .3 against [2,3,3] .15 * .2, though the walk stopped at the 4th.
        self.assertAlmostEqual(margin, math.log(1.05), delta=1e-6)

    def test_scripted_stopping_test_normalizes_by_length(self):
        # Step 1: [eos] -0.69 pooled, [2] -1.20 and [3] -1.90 live. Step 2: [2,3] -1.43
        # live, [3,eos] -2.00 (normalized -1.00) fills the pool. Stopping test: -1.43 / 2
        # > -1.00, so go on; step 3: [2,3,eos] (normalized -0.51) is the best.
        table = {(): ((1, .5), (2, .3), (3, .15), (0, .05)),
                 (2,): ((3, .8), (1, .15), (2, .03), (0, .02)),
                 (3,): ((1, .9), (2, .05), (3, .03), (0, .02)),
                 (2, 3): ((1, .9), (2, .05), (3, .03), (0, .02))}
        hyps, scores, margin = self.run_scripted(table, 2, 1.0, 3)
        self.assertEqual(hyps, [([2, 3, 1], True), ([1], True)])  # stopping early: [3,eos]
        self.assertAlmostEqual(scores[0], math.log(.3 * .8 * .9), delta=1e-6)
        self.assertTrue(0.0 < margin < 0.3)

    def test_scripted_ties(self):
        # [2] and [3] tie (lower id first), so [2,eos] and [3,eos] tie (lower beam first,
        # so earlier inserted, so ranked first); the cut [2,3] does not beat an equal worst.
        same = ((1, .5), (3, .3), (2, .15), (0, .05))
        table = {(): ((2, .35), (3, .35), (1, .2), (0, .1)), (2,): same, (3,): same}
        hyps, scores, margin = self.run_scripted(table, 2, 0.0, 2)
        self.assertEqual(hyps, [([2, 1], True), ([3, 1], True)])
        self.assertEqual(scores[0], scores[1])
        self.assertEqual(margin, 0.0)
        hyps, _, margin = self.run_scripted(table, 1, 0.0, 2)  # beam 1: still [2] first
        self.assertEqual(hyps, [([2, 1], True)])
        # Beam 1: [2,eos] and [2,3] tie exactly. At max_length 2 the cut [2,3] does not
        # replace the equal [2,eos]; at max_length 3 the stopping test (equal) stops, else
        # [2,3,eos] (normalized -0.62 > -0.87) would win.
        table[(2,)] = ((1, .45), (3, .45), (2, .06), (0, .04))
        table[(2, 3)] = ((1, .9), (2, .05), (3, .03), (0, .02))
        self.assertEqual(self.run_scripted(table, 1, 0.0, 2)[0], [([2, 1], True)])
        self.assertEqual(self.run_scripted(table, 1, 1.0, 3)[0], [([2, 1], True)])

    def test_hypotheses_are_consistent(self):
        """A narrow beam on a 40-token model: sorted, scores = teacher-forced sums, eos
        only last, cut hypotheses have max_length tokens, min_length holds."""
        model = random_model(7, bias=True, normalize_before=True)
        with torch.no_grad():
            model.final_logits_bias[0, 1] += 2.0
        for beam_size, alpha, min_length in ((2, 1.0, 0), (4, 0.0, 0), (5, 0.6, 4)):
            with self.subTest(beam_size=beam_size, length_penalty=alpha, min_length=min_length):
                hyps, margin = model.beam_search([4, 12, 19, 22, 1], beam_size, beam_size,
                                                 alpha, 8, min_length)
                self.assertEqual(len(hyps), beam_size)
                norms = [h["normalized_score"] for h in hyps]
                self.assertEqual(norms, sorted(norms, reverse=True))
                self.assertTrue(0.0 < margin < math.inf)
                for h in hyps:
                    ids = h["ids"]
                    self.assertNotIn(1, ids[:-1])
                    self.assertEqual(h["finished"], ids[-1] == 1)
                    self.assertTrue(h["finished"] or len(ids) == 8)
                    self.assertGreaterEqual(len(ids), min_length)
                    self.assertTrue(close(h["score"], math.fsum(model.score([4, 12, 19, 22, 1],
                                                                            ids)), 1e-10))
        for bad in (dict(beam_size=0, n_best=1), dict(beam_size=2, n_best=3),
                    dict(beam_size=2, n_best=1, max_length=0)):
            with self.assertRaises(ValueError):
                model.beam_search([4, 1], **dict(dict(length_penalty=1.0, max_length=5), **bad))


class GenerationBatchTest(unittest.TestCase):
    def models(self):
        for i, pos in enumerate(("sinusoidal", "learned", "rope-half", "none")):
            model = random_lm(40 + i, bias=True, normalize_before=i % 2 == 1,
                              num_key_value_heads=2 if i < 2 else 4,
                              **POSITION_VARIANTS[pos])
            with torch.no_grad():
                model.final_logits_bias[0, 1] += 2.0  # eos now and then
            yield f"ordo-{pos}", model
        for i, overrides in enumerate(LLAMA_VARIANTS.values()):
            model = random_llama(50 + i, **overrides)
            if not model.config["tie_word_embeddings"]:
                with torch.no_grad():  # eos now and then
                    model.lm_head.weight[1] += 0.8 * model.model.norm.weight
            yield f"llama-{i}", model

    def test_batch_equals_one_at_a_time(self):
        g = torch.Generator().manual_seed(1)
        prompts = [[2] + torch.randint(4, 30, (n - 1,), generator=g).tolist() for n in range(1, 13)]
        order = [7, 0, 11, 2, 9, 4, 1, 10, 5, 3, 8, 6]  # longest neither first nor last
        prompts = [prompts[i] for i in order]
        sequences = [p + torch.randint(2, 30, (n % 5,), generator=g).tolist()
                     for n, p in enumerate(prompts)]
        finished = unfinished = 0
        for name, model in self.models():
            with self.subTest(model=name):
                ids, margins = model.lm_greedy_batch(prompts, 8)
                for b, prompt in enumerate(prompts):
                    one_ids, one_margins = model.lm_greedy(prompt, 8)
                    self.assertEqual(ids[b], one_ids, b)
                    self.assertTrue(np.allclose(margins[b], one_margins, atol=1e-10), b)
                    stopped = ids[b][-1] in model.eos_ids
                    finished += stopped
                    unfinished += not stopped
                logprobs = model.lm_score_batch(sequences)
                for b, seq in enumerate(sequences):
                    one = model.lm_score(seq)
                    self.assertEqual(len(logprobs[b]), len(seq) - 1)
                    self.assertTrue(all(close(x, y, 1e-10) for x, y in zip(logprobs[b], one)),
                                    (b, logprobs[b], one))
        self.assertGreater(finished, 10)
        self.assertGreater(unfinished, 10)
        model = random_llama()
        self.assertEqual(model.lm_greedy_batch([], 5), ([], []))
        self.assertEqual(model.lm_score_batch([[2], [2, 5]])[0], [])
        with self.assertRaisesRegex(ValueError, "at least one token"):
            model.lm_greedy_batch([[2], []], 5)


if __name__ == "__main__":
    unittest.main()
