"""The decoding of an encoder-decoder (`Seq2SeqMixin`): greedy search, teacher-forced
scores, their padded-batch forms and the beam search (its docstring defines it), over
the model's `encode` and `decode`. Shared by OrdoModel and MarianMTModel, so that the
parity references of every family come from one definition of each search."""
from __future__ import annotations

import math
from typing import List, Sequence, Tuple

import torch
from torch import Tensor

from .search import _beam_search, _best_and_gaps, _check_beam_arguments, _eval_mode


class Seq2SeqMixin:
    """Needs `config` (pad_token_id, eos_token_id, decoder_start_token_id), `encode(src
    [B, S], src_padding [B, S] or None) -> memory [B, S, D]`, `decode(memory,
    src_padding, tgt_in [B, T]) -> logits [B, T, V]` (causal) and `forward(src, tgt_in,
    src_padding)` = decode(encode(src, src_padding), src_padding, tgt_in)."""

    # -- inference -------------------------------------------------------------------
    @torch.no_grad()
    def greedy(self, src_ids: Sequence[int], max_length: int) -> Tuple[List[int], List[float]]:
        """Greedy decoding of one source. Returns the ids generated after
        decoder_start_token_id (stopping after eos, which is included) and, per step, the
        margin top1 - top2 of the logits. Ties go to the lowest id."""
        was_training = self.training
        self.eval()
        try:
            cfg = self.config
            src = torch.tensor([list(src_ids)], dtype=torch.long)
            memory = self.encode(src)
            tgt = [cfg["decoder_start_token_id"]]
            ids, margins = [], []
            for _ in range(max_length):
                logits = self.decode(memory, None, torch.tensor([tgt], dtype=torch.long))[0, -1]
                best = int(torch.argmax(logits))  # first maximum
                top2 = torch.topk(logits, 2).values if logits.numel() > 1 else None
                margins.append(float(top2[0] - top2[1]) if top2 is not None else math.inf)
                ids.append(best)
                tgt.append(best)
                if best == cfg["eos_token_id"]:
                    break
            return ids, margins
        finally:
            self.train(was_training)

    @torch.no_grad()
    def score(self, src_ids: Sequence[int], tgt_ids: Sequence[int]) -> List[float]:
        """Teacher-forced log-probabilities of each target token (decoder input is
        [decoder_start] + tgt[:-1]); log_softmax of the logits, in float64."""
        was_training = self.training
        self.eval()
        try:
            tgt = list(tgt_ids)
            if not tgt:
                return []
            src = torch.tensor([list(src_ids)], dtype=torch.long)
            tgt_in = torch.tensor([[self.config["decoder_start_token_id"]] + tgt[:-1]])
            logits = self(src, tgt_in)[0].to(torch.float64)
            logp = torch.log_softmax(logits, dim=-1)
            return logp.gather(1, torch.tensor(tgt)[:, None])[:, 0].tolist()
        finally:
            self.train(was_training)

    def _source_batch(self, sources: Sequence[Sequence[int]]) -> Tuple[Tensor, Tensor]:
        """Right-pads sources with pad_token_id into [B, S] ids and the [B, S] key padding
        mask (True = pad). The mask comes from the lengths, so a source that itself holds
        pad_token_id sees it as a token, exactly as `greedy` and `score` do."""
        rows = [list(s) for s in sources]
        if any(not r for r in rows):
            raise ValueError("every source needs at least one token")
        S = max(map(len, rows))
        pad = self.config["pad_token_id"]
        ids = torch.tensor([r + [pad] * (S - len(r)) for r in rows], dtype=torch.long)
        lengths = torch.tensor([len(r) for r in rows])
        return ids, torch.arange(S)[None, :] >= lengths[:, None]

    @torch.no_grad()
    def greedy_batch(self, sources: Sequence[Sequence[int]],
                     max_length: int) -> Tuple[List[List[int]], List[List[float]]]:
        """`greedy` for several sources at once, in one padded batch: sources right-padded
        with pad_token_id and masked in the encoder and the cross-attention; a sequence that
        has produced eos is fed pad_token_id and its outputs are ignored. Returns per source
        what `greedy` returns for it (ids, margins)."""
        was_training = self.training
        self.eval()
        try:
            cfg = self.config
            B = len(sources)
            ids: List[List[int]] = [[] for _ in range(B)]
            margins: List[List[float]] = [[] for _ in range(B)]
            if B == 0:
                return ids, margins
            src, src_padding = self._source_batch(sources)
            memory = self.encode(src, src_padding)
            tgt = torch.full((B, 1), cfg["decoder_start_token_id"], dtype=torch.long)
            done = [False] * B
            for _ in range(max_length):
                logits = self.decode(memory, src_padding, tgt)[:, -1]  # [B, V]
                best, gaps = _best_and_gaps(logits)
                step = []
                for b in range(B):
                    if done[b]:
                        step.append(cfg["pad_token_id"])
                        continue
                    ids[b].append(best[b])
                    margins[b].append(float(gaps[b]))
                    step.append(best[b])
                    done[b] = best[b] == cfg["eos_token_id"]
                if all(done):
                    break
                tgt = torch.cat([tgt, torch.tensor(step, dtype=torch.long)[:, None]], dim=1)
            return ids, margins
        finally:
            self.train(was_training)

    @torch.no_grad()
    def score_batch(self, sources: Sequence[Sequence[int]],
                    targets: Sequence[Sequence[int]]) -> List[List[float]]:
        """`score` for several (source, target) pairs in one padded batch: sources as in
        `greedy_batch`, decoder inputs [decoder_start] + target[:-1] right-padded with
        pad_token_id (causal attention keeps the padding out of the real positions).
        Returns per pair the log-probabilities of its target tokens."""
        if len(sources) != len(targets):
            raise ValueError(f"{len(sources)} sources but {len(targets)} targets")
        was_training = self.training
        self.eval()
        try:
            cfg = self.config
            tgts = [list(t) for t in targets]
            T = max(map(len, tgts), default=0)
            if T == 0:
                return [[] for _ in tgts]
            pad, start = cfg["pad_token_id"], cfg["decoder_start_token_id"]
            src, src_padding = self._source_batch(sources)
            tgt_in = torch.tensor([([start] + t[:-1] + [pad] * T)[:T] for t in tgts],
                                  dtype=torch.long)
            tgt_out = torch.tensor([t + [pad] * (T - len(t)) for t in tgts], dtype=torch.long)
            logits = self(src, tgt_in, src_padding).to(torch.float64)
            logp = torch.log_softmax(logits, dim=-1).gather(2, tgt_out[:, :, None])[:, :, 0]
            return [row[:len(t)] for row, t in zip(logp.tolist(), tgts)]
        finally:
            self.train(was_training)

    @torch.no_grad()
    def beam_search(self, src_ids: Sequence[int], beam_size: int, n_best: int,
                    length_penalty: float, max_length: int,
                    min_length: int = 0) -> Tuple[List[dict], float]:
        """Beam search of one source (the reference definition; see BEAM SEARCH below).

        Returns (hypotheses, min_margin): the n_best best finished-pool entries, best first,
        each {"ids", "score", "normalized_score", "finished"}, and the smallest gap any
        decision depended on (math.inf if none).

        BEAM SEARCH. Live beams are (prefix, score = float64 sum of its token log-probs),
        starting with ([], 0); a beam's decoder input is [decoder_start] + prefix. The
        pool holds at most K = beam_size hypotheses (ids, score, normalized = score /
        len(ids) ** length_penalty, finished, insertion counter); an offered hypothesis
        is added while the pool has < K entries, else replaces the worst entry (lowest
        normalized; among equals the latest inserted) if its normalized score is strictly
        greater. A step: lp_b = log_softmax in float64 of beam b's logits, with
        lp_b[eos] = -inf while len(prefix) + 1 < min_length; candidates (b, v) with
        total = score_b + lp_b[v] > -inf, sorted by total descending, then b, then v; the
        first 2K are walked with rank r: eos is offered to the pool (finished) if r < K,
        else skipped; any other token extends prefix_b into the new live list, and the
        walk stops once that has K beams. Then: if the prefixes have max_length tokens,
        every live beam is offered (finished=False) and the search stops; otherwise it
        stops when no beam is live, or when the pool is full and best live score /
        L ** length_penalty <= the pool's worst normalized score (L: prefix length).
        The result is the pool sorted by normalized score descending, then insertion.

        min_margin is the minimum of: adjacent gaps between the first 2K + 1 sorted
        candidates' totals at every step; |new - worst| of every comparison with a full
        pool and, when that replaces, the gap between the worst and the second-worst
        entry; |bound - worst| of every stopping test evaluated; the adjacent gaps of
        the first n_best + 1 normalized scores of the final ranking.
        """
        _check_beam_arguments(beam_size, n_best, max_length)
        start = self.config["decoder_start_token_id"]
        with _eval_mode(self):
            memory = self.encode(torch.tensor([list(src_ids)], dtype=torch.long))

            def next_logits(prefixes: List[List[int]]) -> Tensor:
                tgt = torch.tensor([[start] + prefix for prefix in prefixes], dtype=torch.long)
                return self.decode(memory.expand(len(prefixes), -1, -1), None, tgt)[:, -1]

            return _beam_search(next_logits, (self.config["eos_token_id"],), beam_size, n_best,
                                length_penalty, max_length, min_length)
