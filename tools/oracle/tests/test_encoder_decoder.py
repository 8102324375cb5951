#!/usr/bin/python3
"""Tests of ordo_torch.encoder_decoder (OrdoModel): against torch's own Transformer layers,
batched against one at a time, decoder-only models, training.

Alone: /usr/bin/python3 tools/oracle/tests/test_encoder_decoder.py [-v]; with the others:
/usr/bin/python3 tools/oracle/test_ordo_torch.py [-v].
"""
from __future__ import annotations

import itertools
import json
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tools/oracle: ordo_torch
from oracle_fixtures import (BASE, POSITION_VARIANTS, close, random_lm,  # noqa: E402
                             random_model)
from ordo_torch import (OrdoModel, explicit_attention, load_model_dir,  # noqa: E402
                        read_safetensors, save_model_dir)


class ModelTest(unittest.TestCase):
    def test_permutation_equivariance_only_without_positions(self):
        src = torch.tensor([[4, 9, 13, 22, 7, 30, 11, 1]])
        perm = torch.tensor([3, 0, 6, 1, 7, 2, 5, 4])
        for name, pos in POSITION_VARIANTS.items():
            for pre in (False, True):
                with self.subTest(positions=name, pre_norm=pre):
                    model = random_model(5, normalize_before=pre, layernorm_embedding=pre, **pos)
                    out = model.encode(src)[0]
                    out_perm = model.encode(src[:, perm])[0]
                    diff = (out_perm - out[perm]).abs().max().item()
                    if name == "none":
                        self.assertLess(diff, 1e-5)
                    else:
                        self.assertGreater(diff, 1e-2)

    def test_greedy_equals_argmax_of_forward(self):
        for i, (name, pos) in enumerate(POSITION_VARIANTS.items()):
            with self.subTest(positions=name):
                model = random_model(10 + i, bias=True, normalize_before=i % 2 == 1,
                                     tie_word_embeddings=i % 3 == 0, **pos)
                src = [5, 17, 2, 33, 1]
                ids, margins = model.greedy(src, 9)
                self.assertEqual(len(ids), len(margins))
                self.assertTrue(len(ids) == 9 or ids[-1] == 1)
                self.assertNotIn(1, ids[:-1])
                tgt_in = torch.tensor([[0] + ids[:-1]])
                logits = model(torch.tensor([src]), tgt_in)[0]
                self.assertEqual(logits.argmax(-1).tolist(), ids)
                top2 = logits.topk(2, dim=-1).values
                self.assertTrue(torch.allclose(top2[:, 0] - top2[:, 1], torch.tensor(margins),
                                               atol=1e-5))
                scores = model.score(src, ids)
                logp = torch.log_softmax(logits.double(), -1)
                self.assertTrue(np.allclose(scores, logp[range(len(ids)), ids].tolist(), atol=1e-9))

    def test_greedy_stops_at_eos(self):
        model = random_model(3, bias=True)
        with torch.no_grad():
            model.final_logits_bias[0, 1] = 1e4  # eos always wins
        self.assertEqual(model.greedy([4, 1], 5)[0], [1])

    def test_padding_does_not_change_outputs(self):
        sources = [[5, 9, 3, 1], [8, 1], [4, 12, 19, 22, 7, 1]]
        targets = [[0, 6, 2], [0, 3, 3], [0, 9, 11]]
        S = max(map(len, sources))
        for name, pos in POSITION_VARIANTS.items():
            with self.subTest(positions=name):
                model = random_model(2, normalize_before=True, **pos)
                src = torch.tensor([s + [0] * (S - len(s)) for s in sources])
                pad = model.padding_mask(src)
                enc = model.encode(src, pad)
                logits = model(src, torch.tensor(targets), pad)
                for b, (s, t) in enumerate(zip(sources, targets)):
                    alone = model.encode(torch.tensor([s]))[0]
                    self.assertTrue(torch.allclose(enc[b, :len(s)], alone, atol=1e-10))
                    alone = model(torch.tensor([s]), torch.tensor([t]))[0]
                    self.assertTrue(torch.allclose(logits[b], alone, atol=1e-10))

    def test_explicit_attention_matches_multi_head_attention_forward(self):
        torch.manual_seed(0)
        model = random_model(4, encoder_attention_heads=4)
        attn = model.model.encoder.layers[0].self_attn
        x, mem = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
        pad = torch.tensor([[False] * 7, [False] * 4 + [True] * 3])

        def explicit(q_in, kv_in, mask, causal):
            def split(t):
                return t.view(t.shape[0], t.shape[1], 4, 4).transpose(1, 2)

            q = split(F.linear(q_in, attn.q_proj.weight, attn.q_proj.bias))
            k = split(F.linear(kv_in, attn.k_proj.weight, attn.k_proj.bias))
            v = split(F.linear(kv_in, attn.v_proj.weight, attn.v_proj.bias))
            o = explicit_attention(q, k, v, mask, causal).transpose(1, 2).reshape(q_in.shape)
            return F.linear(o, attn.out_proj.weight, attn.out_proj.bias)

        self.assertTrue(torch.allclose(attn(x, mem, key_padding_mask=pad),
                                       explicit(x, mem, pad, False), atol=1e-5))
        self.assertTrue(torch.allclose(attn(x, x, causal=True), explicit(x, x, None, True),
                                       atol=1e-5))

    def test_matches_torch_transformer_layers(self):
        """Layer wiring against torch.nn.TransformerEncoder/DecoderLayer (no positions)."""
        acts = {"relu": "relu", "gelu": "gelu", "swish": F.silu}
        for act, pre in itertools.product(acts, (False, True)):
            with self.subTest(activation=act, pre_norm=pre):
                model = random_model(6, position_encoding="none", activation_function=act,
                                     normalize_before=pre, layer_norm_eps=1e-6)
                d = 16

                def copy_attn(dst, src):
                    dst.in_proj_weight.data = torch.cat(
                        [src.q_proj.weight, src.k_proj.weight, src.v_proj.weight])
                    dst.in_proj_bias.data = torch.cat(
                        [src.q_proj.bias, src.k_proj.bias, src.v_proj.bias])
                    dst.out_proj.weight.data = src.out_proj.weight.data
                    dst.out_proj.bias.data = src.out_proj.bias.data

                def copy_common(dst, src, norms):
                    dst.linear1.weight.data, dst.linear1.bias.data = src.fc1.weight.data, src.fc1.bias.data
                    dst.linear2.weight.data, dst.linear2.bias.data = src.fc2.weight.data, src.fc2.bias.data
                    for dst_norm, src_norm in norms:
                        getattr(dst, dst_norm).weight.data = getattr(src, src_norm).weight.data
                        getattr(dst, dst_norm).bias.data = getattr(src, src_norm).bias.data

                enc_layers = []
                for layer in model.model.encoder.layers:
                    ref = nn.TransformerEncoderLayer(d, 2, 32, dropout=0.0, activation=acts[act],
                                                     layer_norm_eps=1e-6, batch_first=True,
                                                     norm_first=pre).eval()
                    copy_attn(ref.self_attn, layer.self_attn)
                    copy_common(ref, layer, (("norm1", "self_attn_layer_norm"),
                                            ("norm2", "final_layer_norm")))
                    enc_layers.append(ref)
                dec_layers = []
                for layer in model.model.decoder.layers:
                    ref = nn.TransformerDecoderLayer(d, 2, 32, dropout=0.0, activation=acts[act],
                                                     layer_norm_eps=1e-6, batch_first=True,
                                                     norm_first=pre).eval()
                    copy_attn(ref.self_attn, layer.self_attn)
                    copy_attn(ref.multihead_attn, layer.encoder_attn)
                    copy_common(ref, layer, (("norm1", "self_attn_layer_norm"),
                                            ("norm2", "encoder_attn_layer_norm"),
                                            ("norm3", "final_layer_norm")))
                    dec_layers.append(ref)

                src = torch.tensor([[4, 9, 13, 22, 1]])
                tgt = torch.tensor([[0, 7, 7, 3]])
                E = model.model.shared.weight
                with torch.no_grad():
                    h = E[src]
                    for ref in enc_layers:
                        h = ref(h)
                    if pre:
                        h = F.layer_norm(h, (d,), model.model.encoder.layer_norm.weight,
                                         model.model.encoder.layer_norm.bias, 1e-6)
                    memory = h
                    causal = torch.triu(torch.full((4, 4), float("-inf")), 1)
                    y = E[tgt]
                    for ref in dec_layers:
                        y = ref(y, memory, tgt_mask=causal)
                    if pre:
                        y = F.layer_norm(y, (d,), model.model.decoder.layer_norm.weight,
                                         model.model.decoder.layer_norm.bias, 1e-6)
                    logits = y @ E.T
                self.assertTrue(torch.allclose(model.encode(src), memory, atol=1e-5))
                self.assertTrue(torch.allclose(model(src, tgt), logits, atol=1e-4))

    def test_trainable_on_a_copy_task(self):
        torch.manual_seed(0)
        cfg = dict(BASE, vocab_size=12, d_model=32, encoder_attention_heads=4,
                   decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64)
        for pos in ("sinusoidal", "rope"):
            with self.subTest(positions=pos):
                model = OrdoModel(dict(cfg, position_encoding=pos), dropout=0.1).train()
                body = torch.randint(2, 12, (32, 5))
                src = torch.cat([body, torch.ones(32, 1, dtype=torch.long)], dim=1)
                src[:8, 3:] = 0  # some padded sources
                src[:8, 3] = 1
                tgt_out = src.clone()
                tgt_in = torch.cat([torch.zeros(32, 1, dtype=torch.long), tgt_out[:, :-1]], dim=1)
                pad = model.padding_mask(src)
                opt = torch.optim.Adam(model.parameters(), lr=3e-3)

                def loss_fn():
                    logits = model(src, tgt_in, pad)
                    return F.cross_entropy(logits.reshape(-1, 12), tgt_out.reshape(-1),
                                           ignore_index=0)

                first = None
                for step in range(40):
                    opt.zero_grad()
                    loss = loss_fn()
                    loss.backward()
                    if step == 0:
                        first = loss.item()
                        for name, p in model.named_parameters():
                            self.assertIsNotNone(p.grad, name)
                            self.assertTrue(torch.isfinite(p.grad).all(), name)
                    opt.step()
                model.eval()
                with torch.no_grad():
                    last = loss_fn().item()
                self.assertLess(last, 0.6 * first, (first, last))


class BatchTest(unittest.TestCase):
    POSITIONS = ("sinusoidal", "learned", "rope-half", "none")

    def test_batch_equals_one_at_a_time(self):
        g = torch.Generator().manual_seed(0)
        sources = [torch.randint(2, 40, (n - 1,), generator=g).tolist() + [1]
                   for n in range(1, 13)]
        targets = [torch.randint(2, 40, (n % 7,), generator=g).tolist() + [1] for n in range(12)]
        targets[3] = []  # an empty target scores as []
        order = [7, 0, 11, 2, 9, 4, 1, 10, 5, 3, 8, 6]  # longest source neither first nor last
        sources = [sources[i] for i in order]
        finished, unfinished = 0, 0
        for i, name in enumerate(self.POSITIONS):
            for pre in (False, True):
                with self.subTest(positions=name, pre_norm=pre):
                    model = random_model(20 + i, bias=True, normalize_before=pre,
                                         **POSITION_VARIANTS[name])
                    with torch.no_grad():
                        model.final_logits_bias[0, 1] += 2.0  # eos now and then
                    ids, margins = model.greedy_batch(sources, 8)
                    for b, src in enumerate(sources):
                        one_ids, one_margins = model.greedy(src, 8)
                        self.assertEqual(ids[b], one_ids, b)
                        self.assertTrue(np.allclose(margins[b], one_margins, atol=1e-10), b)
                        finished += ids[b][-1] == 1
                        unfinished += ids[b][-1] != 1
                    logprobs = model.score_batch(sources, targets)
                    for b, (src, tgt) in enumerate(zip(sources, targets)):
                        one = model.score(src, tgt)
                        self.assertEqual(len(logprobs[b]), len(one))
                        self.assertTrue(all(close(x, y, 1e-10) for x, y in zip(logprobs[b], one)),
                                        (b, logprobs[b], one))
        # Some sequences stopped at eos while others went on.
        self.assertGreater(finished, 10)
        self.assertGreater(unfinished, 10)
        self.assertEqual(random_model().greedy_batch([], 5), ([], []))
        self.assertEqual(random_model().score_batch([[4, 1], [5, 1]], [[], []]), [[], []])
        with self.assertRaisesRegex(ValueError, "at least one token"):
            random_model().greedy_batch([[4, 1], []], 5)


class DecoderOnlyTest(unittest.TestCase):
    def test_writes_no_encoder_tensors_and_loads_back(self):
        for overrides in (dict(), dict(share_encoder_decoder_embeddings=False,
                                       decoder_vocab_size=37, tie_word_embeddings=False,
                                       num_key_value_heads=2, position_encoding="learned",
                                       position_offset=2, normalize_before=True)):
            with self.subTest(config=overrides), tempfile.TemporaryDirectory() as tmp:
                model = random_lm(1, bias=True, **overrides)
                save_model_dir(model, tmp, dtype="F16")
                names = set(read_safetensors(Path(tmp) / "model.safetensors"))
                self.assertFalse([n for n in names if "encoder" in n], names)
                table = ("model.shared.weight" if not overrides
                         else "model.decoder.embed_tokens.weight")
                self.assertIn(table, names)
                self.assertIn("model.decoder.layers.1.self_attn.k_proj.weight", names)
                config = json.loads((Path(tmp) / "config.json").read_text())
                self.assertEqual(config["encoder_layers"], 0)
                self.assertNotIn("encoder_attention_heads", config)
                loaded = load_model_dir(tmp)
                self.assertEqual(set(loaded.state_dict()), names)
                self.assertEqual(loaded.lm_score([5, 9, 3, 1]), model.lm_score([5, 9, 3, 1]))
                self.assertEqual(loaded.lm_greedy([5, 9], 6), model.lm_greedy([5, 9], 6))
                if overrides:
                    k = loaded.state_dict()["model.decoder.layers.0.self_attn.k_proj.weight"]
                    self.assertEqual(tuple(k.shape), (8, 16))
                with self.assertRaisesRegex(ValueError, "decoder-only"):
                    loaded.greedy([5, 1], 4)
        with self.assertRaisesRegex(ValueError, "decoder-only"):
            random_model().lm_score([5, 9])

    def test_matches_torch_transformer_layers_with_a_causal_mask(self):
        """A decoder-only layer is [causal self-attention, feed-forward]: an
        nn.TransformerEncoderLayer with a causal mask (learned positions from
        position_offset)."""
        for pre in (False, True):
            with self.subTest(pre_norm=pre):
                model = random_lm(8, position_encoding="learned", position_offset=3,
                                  normalize_before=pre, decoder_attention_heads=2)
                ids = torch.tensor([[4, 9, 13, 22, 1, 7]])
                dec = model.model.decoder
                h = model.model.shared.weight[ids] + dec.embed_positions.weight[3:9]
                causal = torch.triu(torch.full((6, 6), float("-inf")), 1)
                with torch.no_grad():
                    for layer in dec.layers:
                        ref = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True,
                                                         norm_first=pre).eval()
                        a = layer.self_attn
                        ref.self_attn.in_proj_weight.copy_(torch.cat(
                            [a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]))
                        ref.self_attn.in_proj_bias.copy_(torch.cat(
                            [a.q_proj.bias, a.k_proj.bias, a.v_proj.bias]))
                        ref.self_attn.out_proj.load_state_dict(a.out_proj.state_dict())
                        ref.linear1.load_state_dict(layer.fc1.state_dict())
                        ref.linear2.load_state_dict(layer.fc2.state_dict())
                        ref.norm1.load_state_dict(layer.self_attn_layer_norm.state_dict())
                        ref.norm2.load_state_dict(layer.final_layer_norm.state_dict())
                        h = ref(h, src_mask=causal)
                    if pre:
                        h = dec.layer_norm(h)
                    logits = h @ model.model.shared.weight.T
                self.assertTrue(torch.allclose(model.lm_logits(ids), logits, atol=1e-4))
                logp = torch.log_softmax(logits[0].double(), -1)
                self.assertTrue(np.allclose(model.lm_score(ids[0].tolist()),
                                            logp[range(5), ids[0, 1:]].tolist(), atol=1e-5))


if __name__ == "__main__":
    unittest.main()
