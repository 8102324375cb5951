"""Decoding shared by every model: the beam search (`_beam_search`; OrdoModel.beam_search's
docstring defines it) and `GenerationMixin`, the generation API of decoder-only language
models (greedy, scores and beam search, for one sequence or a right-padded batch)."""
from __future__ import annotations

import contextlib
import math
from typing import List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor, nn


def _best_and_gaps(logits: Tensor) -> Tuple[List[int], List[float]]:
    """Each row's greedy choice (the first maximum) and its margin over the runner-up (inf
    with a single column): how far rounding is from changing the choice."""
    best = torch.argmax(logits, dim=-1).tolist()
    if logits.shape[-1] > 1:
        top2 = torch.topk(logits, 2).values
        return best, (top2[:, 0] - top2[:, 1]).tolist()
    return best, [math.inf] * logits.shape[0]


@contextlib.contextmanager
def _eval_mode(model: nn.Module):
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


def _check_beam_arguments(beam_size: int, n_best: int, max_length: int) -> None:
    K = int(beam_size)
    if K < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    if not 1 <= n_best <= K:
        raise ValueError(f"n_best must be in [1, beam_size={K}], got {n_best}")
    if max_length < 1:
        raise ValueError(f"max_length must be >= 1, got {max_length}")


def _beam_search(next_logits, eos_ids: Sequence[int], beam_size: int, n_best: int,
                 length_penalty: float, max_length: int,
                 min_length: int) -> Tuple[List[dict], float]:
    """OrdoModel.beam_search's BEAM SEARCH over next_logits(prefixes) -> the logits
    [len(prefixes), V] of the next token after each live prefix. A token is "eos" if it
    is any of eos_ids."""
    _check_beam_arguments(beam_size, n_best, max_length)
    K = int(beam_size)
    eos_set = set(eos_ids)
    eos_list = sorted(eos_set)
    alpha = float(length_penalty)
    gaps: List[float] = []
    pool: List[list] = []  # [ids, score, normalized, finished, counter]
    counter = 0

    def worst_index() -> int:
        return min(range(len(pool)), key=lambda i: (pool[i][2], -pool[i][4]))

    def offer(ids: List[int], score: float, finished: bool) -> None:
        nonlocal counter
        normalized = score / len(ids) ** alpha
        if len(pool) >= K:
            w = worst_index()
            gaps.append(abs(normalized - pool[w][2]))
            if not normalized > pool[w][2]:
                return
            rest = [e[2] for i, e in enumerate(pool) if i != w]
            if rest:  # which entry is evicted is a decision too
                gaps.append(abs(min(rest) - pool[w][2]))
            del pool[w]
        pool.append([ids, score, normalized, finished, counter])
        counter += 1

    live: List[Tuple[List[int], float]] = [([], 0.0)]
    while True:
        L = len(live[0][0])
        logits = next_logits([prefix for prefix, _ in live])
        lp = torch.log_softmax(logits.to(torch.float64), dim=-1)
        if L + 1 < min_length:
            lp[:, eos_list] = -math.inf
        V = lp.shape[-1]
        scores = torch.tensor([s for _, s in live], dtype=torch.float64)
        totals = (scores[:, None] + lp).flatten().numpy()
        if np.isnan(totals).any():
            raise FloatingPointError("NaN log-probabilities in beam search")
        keep = np.flatnonzero(totals != -np.inf)
        order = keep[np.lexsort((keep, -totals[keep]))]  # total desc, then b, v
        head = totals[order[: 2 * K + 1]]
        gaps.extend(np.abs(np.diff(head)).tolist())
        new_live: List[Tuple[List[int], float]] = []
        for r, flat in enumerate(order[: 2 * K].tolist()):
            b, v = divmod(flat, V)
            total = float(totals[flat])
            if v in eos_set:
                if r < K:
                    offer(live[b][0] + [v], total, True)
                continue
            new_live.append((live[b][0] + [v], total))
            if len(new_live) == K:
                break
        live = new_live
        if not live:
            break
        L = len(live[0][0])
        if L == max_length:
            for prefix, score in live:
                offer(prefix, score, False)
            break
        if len(pool) == K:
            bound = max(s for _, s in live) / L ** alpha
            worst = pool[worst_index()][2]
            gaps.append(abs(bound - worst))
            if bound <= worst:
                break
    ranked = sorted(pool, key=lambda e: (-e[2], e[4]))
    head = [e[2] for e in ranked[: n_best + 1]]
    gaps.extend(abs(x - y) for x, y in zip(head, head[1:]))
    hypotheses = [{"ids": list(e[0]), "score": e[1], "normalized_score": e[2],
                   "finished": e[3]} for e in ranked[:n_best]]
    return hypotheses, min(gaps, default=math.inf)


class GenerationMixin:
    """The generation API of a decoder-only language model (OrdoModel with encoder_layers
    0, LlamaModel). A prompt is the decoder's input as it is (nothing is prepended);
    every sequence's positions start at 0 (plus position_offset, for ordo).

    The model provides `lm_logits(ids [B, T], padding [B, T] or None, rope_lengths [B,
    T] or None) -> [B, T, V]` (causal: row t depends on ids[:, :t + 1] only; padding
    True = a right-padded slot, masked as a key; rope_lengths: how long the sequence was
    when row t was computed, which dynamic RoPE scaling rotates by), `eos_ids` (a tuple: emitting any of them ends a sequence) and
    `lm_pad_id` (the id right-padding is written with; padded slots are masked and
    their outputs never read, so it does not change any result).

    Log-probabilities are log_softmax in float64 of the model's logits (float64 in the
    oracle). Greedy ties go to the lowest id. The *_batch methods compute, in one
    right-padded batch, what the one-sequence methods compute for each sequence.
    """

    @staticmethod
    def _rope_lengths(lengths: Sequence[int], prompts: Sequence[int], T: int) -> Tensor:
        """[B, T]: how many tokens sequence b had when row t was computed, as a KV-cached
        decode computes them: its prompt in one pass (prompts[b] tokens), then one token
        at a time (t + 1), never more than lengths[b] (padding rows: its length). A
        teacher-forced score is one pass: prompts = lengths. Only dynamic RoPE scaling
        reads it (positions.rope_rotate)."""
        t = torch.arange(T)[None, :] + 1
        prompt = torch.tensor(list(prompts))[:, None]
        length = torch.tensor(list(lengths))[:, None]
        return torch.minimum(torch.maximum(t, prompt), length)

    def _padded(self, rows: List[List[int]]) -> Tuple[Tensor, Optional[Tensor], Tensor]:
        """Right-padded ids [B, T] (lm_pad_id), padding [B, T] (True = pad; None for a
        batch of one), lengths [B]."""
        if any(not r for r in rows):
            raise ValueError("every sequence needs at least one token")
        T = max(map(len, rows))
        ids = torch.tensor([r + [self.lm_pad_id] * (T - len(r)) for r in rows], dtype=torch.long)
        lengths = torch.tensor([len(r) for r in rows])
        padding = None if len(rows) == 1 else torch.arange(T)[None, :] >= lengths[:, None]
        return ids, padding, lengths

    def lm_score(self, ids: Sequence[int]) -> List[float]:
        """[log p(ids[t] | ids[:t]) for t = 1 .. len(ids) - 1] (n - 1 values; ids needs
        at least one token)."""
        return self.lm_score_batch([ids])[0]

    def lm_score_batch(self, sequences: Sequence[Sequence[int]]) -> List[List[float]]:
        """lm_score of each sequence, all of them in one right-padded batch."""
        rows = [list(r) for r in sequences]
        if not rows:
            return []
        with _eval_mode(self):
            ids, padding, lengths = self._padded(rows)
            rope = self._rope_lengths(lengths.tolist(), lengths.tolist(), ids.shape[1])
            logp = torch.log_softmax(self.lm_logits(ids, padding, rope).to(torch.float64), dim=-1)
            nxt = torch.cat([ids[:, 1:], ids[:, :1]], dim=1)  # next token (last: unused)
            picked = logp.gather(2, nxt[:, :, None])[:, :, 0].tolist()
            return [row[:len(r) - 1] for row, r in zip(picked, rows)]

    def lm_greedy(self, prompt_ids: Sequence[int],
                  max_length: int) -> Tuple[List[int], List[float]]:
        """Greedy continuation of a prompt: up to max_length generated tokens (the prompt
        excluded), stopping after the first eos (included). Returns (ids, margins), the
        margin of a step being top1 - top2 of its logits. Each step runs the whole
        sequence so far (no cache), each row rotated as a KV-cached decode rotates it
        (_rope_lengths: what differs only under dynamic RoPE scaling)."""
        ids, margins = self.lm_greedy_batch([prompt_ids], max_length)
        return ids[0], margins[0]

    def lm_greedy_batch(self, prompts: Sequence[Sequence[int]],
                        max_length: int) -> Tuple[List[List[int]], List[List[float]]]:
        """lm_greedy of each prompt; each step runs every sequence (prompt + generated so
        far) as one right-padded batch and reads each one's logits at its own last token;
        a finished sequence stays in the batch unchanged and its outputs are ignored."""
        seqs = [list(p) for p in prompts]
        B = len(seqs)
        out: List[List[int]] = [[] for _ in range(B)]
        margins: List[List[float]] = [[] for _ in range(B)]
        if B == 0:
            return out, margins
        eos = set(self.eos_ids)
        done = [False] * B
        prompt_lengths = [len(p) for p in seqs]
        with _eval_mode(self):
            for _ in range(max_length):
                ids, padding, lengths = self._padded(seqs)
                rope = self._rope_lengths(lengths.tolist(), prompt_lengths, ids.shape[1])
                logits = self.lm_logits(ids, padding, rope)[torch.arange(B), lengths - 1]  # [B, V]
                best, gaps = _best_and_gaps(logits)
                for b in range(B):
                    if done[b]:
                        continue
                    out[b].append(best[b])
                    margins[b].append(float(gaps[b]))
                    seqs[b].append(best[b])
                    done[b] = best[b] in eos
                if all(done):
                    break
        return out, margins

    def lm_beam_search(self, prompt_ids: Sequence[int], beam_size: int, n_best: int,
                       length_penalty: float, max_length: int,
                       min_length: int = 0) -> Tuple[List[dict], float]:
        """OrdoModel.beam_search's BEAM SEARCH (and min_margin) with a beam's decoder
        input = prompt + prefix instead of [decoder_start] + prefix, and eos = any of
        eos_ids. Hypothesis ids are the generated tokens only (prefix lengths, hence
        max_length, min_length and the length penalty, do not count the prompt)."""
        _check_beam_arguments(beam_size, n_best, max_length)
        prompt = list(prompt_ids)
        if not prompt:
            raise ValueError("lm_beam_search needs a prompt of at least one token")

        def next_logits(prefixes: List[List[int]]) -> Tensor:
            ids = torch.tensor([prompt + prefix for prefix in prefixes], dtype=torch.long)
            B, T = ids.shape
            rope = self._rope_lengths([T] * B, [len(prompt)] * B, T)
            return self.lm_logits(ids, None, rope)[:, -1]

        with _eval_mode(self):
            return _beam_search(next_logits, self.eos_ids, beam_size, n_best, length_penalty,
                                max_length, min_length)
