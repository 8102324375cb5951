#!/usr/bin/env python3
"""Trains ordo's shipped toy models: one English->German encoder-decoder per position scheme.

Run with Debian's Python (python3-torch, python3-sentencepiece):

    /usr/bin/python3 tools/training/make_grammar_data.py            # weights/data/*.tsv
    /usr/bin/python3 tools/training/train_models.py                 # the six schemes
    /usr/bin/python3 tools/training/train_models.py --schemes none  # one of them
    /usr/bin/python3 tools/training/train_models.py --german-llama  # the German language model

Every model has the same size, data, seed and step budget; only `position_encoding`
(and, for `sinusoidal-split`, the sinusoid layout) differs, so that their scores can be
compared. The SentencePiece model is trained once over both languages and shared.
Models are written as ordo model directories (config.json, model.safetensors in F16,
tokenizer.model) plus training.json with what the run measured.

--german-llama trains, instead, weights/german-llama: a decoder-only language model of
the German side of train.tsv (the same 500 dev pairs held out), in the Hugging Face
LLaMA layout (ordo_torch.LlamaModel: RMSNorm, SwiGLU, RoPE, 4 heads sharing 2 K/V heads),
with the shared tokenizer. It has no bos piece, so bos = eos = 1 (as GPT-2 does): every
training sequence is [1] + German ids + [1]. Written with save_llama_dir (config.json
with the Hugging Face keys, model.safetensors in F16) plus tokenizer.model and
training.json (loss, dev loss and seconds at checkpoints; greedy continuations of
two-word prompts, checked against the training sentences and the corpus grammar).
"""

import argparse
import json
import math
import random
import shutil
import sys
import time
from pathlib import Path

import sentencepiece as spm
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "oracle"))  # ordo_torch, the PyTorch oracle
import make_grammar_data as grammar  # noqa: E402  (the corpus grammar, to check LM outputs)
import ordo_torch  # noqa: E402  (the PyTorch twin of ordo's model format)

PAD, EOS, UNK = 0, 1, 2

SCHEMES = {
    "sinusoidal": {"position_encoding": "sinusoidal"},
    "learned": {"position_encoding": "learned"},
    "rope": {"position_encoding": "rope"},
    "none": {"position_encoding": "none"},
    "alibi": {"position_encoding": "alibi"},
    "t5_relative": {"position_encoding": "t5_relative"},  # T5's 32 buckets up to distance 128
    "sinusoidal-split": {"position_encoding": "sinusoidal", "sinusoidal_layout": "split"},
}

# Small enough to train in minutes on two CPU cores, large enough to learn the grammar.
ARCHITECTURE = {
    "model_type": "ordo",
    "d_model": 128,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "encoder_ffn_dim": 256,
    "decoder_ffn_dim": 256,
    "activation_function": "relu",
    "normalize_before": False,
    "scale_embedding": True,
    "share_encoder_decoder_embeddings": True,
    "tie_word_embeddings": True,
    "pad_token_id": PAD,
    "eos_token_id": EOS,
    "decoder_start_token_id": PAD,
}


def read_tsv(path):
    with open(path, encoding="utf-8") as f:
        return [tuple(line.rstrip("\n").split("\t")) for line in f if line.strip()]


def train_tokenizer(pairs, out_dir, vocab_size):
    """One SentencePiece model over both languages, trained on the training split only."""
    text = out_dir / "spm_corpus.txt"
    with open(text, "w", encoding="utf-8") as f:
        for en, de in pairs:
            f.write(en + "\n" + de + "\n")
    prefix = out_dir / "tokenizer"
    spm.SentencePieceTrainer.train(
        input=str(text), model_prefix=str(prefix), vocab_size=vocab_size, model_type="unigram",
        character_coverage=1.0, pad_id=PAD, eos_id=EOS, unk_id=UNK, bos_id=-1,
        hard_vocab_limit=False, num_threads=1, minloglevel=2)
    text.unlink()
    (out_dir / "tokenizer.vocab").unlink()
    return out_dir / "tokenizer.model"


def encode_pairs(sp, pairs):
    return [(sp.encode(en) + [EOS], sp.encode(de) + [EOS]) for en, de in pairs]


def pad_batch(sequences):
    width = max(len(s) for s in sequences)
    return torch.tensor([s + [PAD] * (width - len(s)) for s in sequences], dtype=torch.long)


def batches(examples, batch_size, rng):
    """Shuffled batches of similar lengths (of examples[i][0]): less padding, same data
    every epoch."""
    order = list(range(len(examples)))
    rng.shuffle(order)
    chunk = batch_size * 50
    for start in range(0, len(order), chunk):
        block = sorted(order[start:start + chunk], key=lambda i: len(examples[i][0]))
        groups = [block[i:i + batch_size] for i in range(0, len(block), batch_size)]
        rng.shuffle(groups)
        yield from groups


@torch.no_grad()
def greedy_batch(model, sources, max_length):
    """Batched greedy decoding without a cache (evaluation only)."""
    model.eval()
    src = pad_batch(sources)
    padding = src.eq(PAD)
    memory = model.encode(src, padding)
    out = torch.full((len(sources), 1), PAD, dtype=torch.long)
    done = torch.zeros(len(sources), dtype=torch.bool)
    for _ in range(max_length):
        logits = model.decode(memory, padding, out)[:, -1]
        token = logits.argmax(-1).masked_fill(done, PAD)
        out = torch.cat([out, token[:, None]], dim=1)
        done |= token.eq(EOS)
        if done.all():
            break
    results = []
    for row in out[:, 1:].tolist():
        results.append(row[:row.index(EOS)] if EOS in row else row)
    return results


def exact_match(model, sp, pairs):
    # A learned table has no rows past max_position_embeddings: decode no further.
    max_length = min(64, model.config["max_position_embeddings"])
    sources = [sp.encode(en) + [EOS] for en, _ in pairs]
    hyps = []
    for i in range(0, len(sources), 256):
        hyps += greedy_batch(model, sources[i:i + 256], max_length)
    right = sum(sp.decode(h) == de for h, (_, de) in zip(hyps, pairs))
    return right / len(pairs)


def learning_rate(step, peak, warmup, total):
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return peak * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * progress)))


def optimize(model, optimizer, loss, step, args):
    """One optimizer step on `loss` at the schedule's rate for `step` (args.lr,
    args.warmup, args.steps), gradients clipped to norm 1; returns the loss value."""
    for g in optimizer.param_groups:
        g["lr"] = learning_rate(step, args.lr, args.warmup, args.steps)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss.item()


def train_one(name, scheme, args, sp, train, dev, max_positions):
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    config = ordo_torch.full_config({**ARCHITECTURE, **scheme, "vocab_size": sp.get_piece_size(),
                                     "max_position_embeddings": max_positions})
    model = ordo_torch.OrdoModel(config, dropout=args.dropout)
    params = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.98), eps=1e-9)
    log = {"model": name, "parameters": params, "steps": args.steps, "batch_size": args.batch_size,
           "seed": args.seed, "checkpoints": []}
    print(f"[{name}] {params} parameters, {args.steps} steps", file=sys.stderr, flush=True)

    step, started, losses = 0, time.time(), []
    while step < args.steps:
        for group in batches(train, args.batch_size, rng):
            if step >= args.steps:
                break
            model.train()
            src = pad_batch([train[i][0] for i in group])
            tgt = pad_batch([train[i][1] for i in group])
            tgt_in = torch.cat([torch.full((len(group), 1), PAD, dtype=torch.long), tgt[:, :-1]], 1)
            logits = model(src, tgt_in, src.eq(PAD))
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt.reshape(-1),
                                   ignore_index=PAD, label_smoothing=args.label_smoothing)
            losses.append(optimize(model, optimizer, loss, step, args))
            step += 1
            if step % args.eval_every == 0 or step == args.steps:
                acc = exact_match(model, sp, dev)
                mean = sum(losses) / len(losses)
                losses = []
                log["checkpoints"].append({"step": step, "loss": round(mean, 4),
                                           "dev_exact_match": round(acc, 4),
                                           "seconds": round(time.time() - started, 1)})
                print(f"[{name}] step {step} loss {mean:.4f} dev exact match {acc:.2%} "
                      f"({time.time() - started:.0f}s)", file=sys.stderr, flush=True)
    log["train_seconds"] = round(time.time() - started, 1)
    return model, log


# ----------------------------------------------------------------------------------------
# The German language model (LLaMA layout)
# ----------------------------------------------------------------------------------------

LLAMA_ARCHITECTURE = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 128,
    "intermediate_size": 344,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "hidden_act": "silu",
    "max_position_embeddings": 128,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "attention_bias": False,
    "mlp_bias": False,
    "tie_word_embeddings": True,
    "bos_token_id": EOS,  # no bos piece: the sequence starts with eos, as in GPT-2
    "eos_token_id": EOS,
    "pad_token_id": PAD,
}
LM_DEFAULTS = {"steps": 5000, "lr": 2e-3, "eval_every": 500, "label_smoothing": 0.0}
TRANSLATOR_DEFAULTS = {"steps": 2400, "lr": 1e-3, "eval_every": 400,
                       "label_smoothing": 0.1}
LM_PROMPTS = ["Die Katze", "Der Hund", "Ein Mann", "Die Frauen", "Eine kleine", "Das Pferd"]


class GermanGrammar:
    """Recognizes the German sentences the corpus grammar (tools/training/make_grammar_data.py)
    generates for train: NP_nom VERB NP_acc, each NP one simple noun phrase or two joined
    by "und" that differ in noun or adjectives, subject != object, the verb agreeing
    with the subject, English side at most MAX_WORDS words; first letter capitalized,
    final period optional."""

    def __init__(self):
        self.simple = {"nom": {}, "acc": {}}
        for n, noun in enumerate(grammar.NOUNS):
            allowed = [i for i, a in enumerate(grammar.ADJECTIVES)
                       if not (noun.person and a.order == grammar.COLOUR)]
            adjectives = [()] + [(a,) for a in allowed] + [
                (a, b) for a in allowed for b in allowed
                if grammar.ADJECTIVES[a].order < grammar.ADJECTIVES[b].order]
            for plural in (False, True):
                for det in ((grammar.THE, None) if plural else (grammar.THE, grammar.A)):
                    for adj in adjectives:
                        np = grammar.SimpleNP(n, plural, det, adj)
                        for case in ("nom", "acc"):
                            self.simple[case][" ".join(grammar.german_simple_np(np, case))] = np
        self.verbs = {}
        for v, verb in enumerate(grammar.VERBS):
            self.verbs[verb.de_3sg] = (v, False)
            self.verbs[verb.de_3pl] = (v, True)

    def _np(self, words, case):
        parts, current = [], []
        for w in words + ["und"]:
            if w == "und":
                parts.append(self.simple[case].get(" ".join(current)))
                current = []
            else:
                current.append(w)
        if None in parts or not 1 <= len(parts) <= grammar.TRAIN_MAX_CONJUNCTS:
            return None
        if len({(p.noun, p.adjectives) for p in parts}) != len(parts):
            return None
        return tuple(parts)

    def parse(self, text):
        """The grammar's Sentence for a German sentence, or None."""
        if text.endswith("."):
            text = text[:-1]
        words = text.split(" ")
        if not words[0] or words[0] != grammar.upper_first(words[0]):
            return None
        for i, w in enumerate(words):
            if w not in self.verbs:
                continue
            verb, plural = self.verbs[w]
            subject_words = words[:i]
            for first in {subject_words[0], subject_words[0][:1].lower() + subject_words[0][1:]} \
                    if subject_words else ():
                subject = self._np([first] + subject_words[1:], "nom")
                obj = self._np(words[i + 1:], "acc")
                if subject is None or obj is None or grammar.is_plural(subject) != plural:
                    continue
                sentence = grammar.Sentence(subject, verb, obj)
                if (sentence.subject != sentence.object
                        and len(grammar.english_words(sentence)) <= grammar.MAX_WORDS):
                    return sentence
        return None


def lm_sequences(sp, sentences):
    return [[EOS] + sp.encode(text) + [EOS] for text in sentences]


@torch.no_grad()
def lm_dev_loss(model, sequences, batch_size=250):
    """Mean negative log-likelihood per predicted token (the tokens after the leading
    [1], the final eos included), in nats."""
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(sequences), batch_size):
        ids = pad_batch(sequences[i:i + batch_size])
        logits = model(ids, ids.eq(PAD))
        target = ids[:, 1:]
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), target.reshape(-1),
                               ignore_index=PAD, reduction="sum")
        total += loss.item()
        count += int(target.ne(PAD).sum())
    return total / count


@torch.no_grad()
def lm_continue(model, sp, prompts, max_length=40, batch_size=100):
    """Greedy continuations (ordo_torch's lm_greedy_batch) of [1] + ids(prompt): the
    full texts (prompt + continuation, eos removed) and whether each ended with eos."""
    texts, finished = [], []
    for i in range(0, len(prompts), batch_size):
        chunk = prompts[i:i + batch_size]
        ids, _ = model.lm_greedy_batch([[EOS] + sp.encode(p) for p in chunk], max_length)
        for prompt, out in zip(chunk, ids):
            done = bool(out) and out[-1] == EOS
            texts.append(sp.decode(sp.encode(prompt) + (out[:-1] if done else out)))
            finished.append(done)
    return texts, finished


def lm_measure(model, sp, prompts, train_set, german):
    """Greedy continuations of prompts: the share that is a training sentence, and the
    share the grammar generates (with or without being in train)."""
    texts, finished = lm_continue(model, sp, prompts)
    in_train = [done and t in train_set for t, done in zip(texts, finished)]
    grammatical = [done and german.parse(t) is not None for t, done in zip(texts, finished)]
    return texts, {"prompts": len(prompts),
                   "in_train": round(sum(in_train) / len(prompts), 4),
                   "grammatical": round(sum(grammatical) / len(prompts), 4)}


def train_german_llama(args, sp, train_pairs, dev_pairs):
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    german = GermanGrammar()
    train_text = [de for _, de in train_pairs]
    train_set = set(train_text)
    train = [(seq,) for seq in lm_sequences(sp, train_text)]
    dev = lm_sequences(sp, [de for _, de in dev_pairs])
    # Two-word prompts of the dev sentences ("Die Katze", "Ein großer", ...).
    dev_prompts = [" ".join(de.split()[:2]) for _, de in dev_pairs]
    config = ordo_torch.llama_config({**LLAMA_ARCHITECTURE, "vocab_size": sp.get_piece_size()})
    model = ordo_torch.LlamaModel(config)
    params = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.98), eps=1e-9)
    name = "german-llama"
    log = {"model": name, "parameters": params, "steps": args.steps,
           "batch_size": args.batch_size, "lr": args.lr, "warmup": args.warmup,
           "seed": args.seed, "training_sentences": len(train), "checkpoints": []}
    print(f"[{name}] {params} parameters, {len(train)} sentences, {args.steps} steps",
          file=sys.stderr, flush=True)
    step, started, losses = 0, time.time(), []
    while step < args.steps:
        for group in batches(train, args.batch_size, rng):
            if step >= args.steps:
                break
            model.train()
            ids = pad_batch([train[i][0] for i in group])
            logits = model(ids, ids.eq(PAD))
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)),
                                   ids[:, 1:].reshape(-1), ignore_index=PAD,
                                   label_smoothing=args.label_smoothing)
            losses.append(optimize(model, optimizer, loss, step, args))
            step += 1
            if step % args.eval_every == 0 or step == args.steps:
                seconds = round(time.time() - started, 1)  # training time, evaluation excluded
                mean = sum(losses) / len(losses)
                losses = []
                dev_loss = lm_dev_loss(model, dev)
                samples, _ = lm_continue(model, sp, LM_PROMPTS[:1])
                log["checkpoints"].append({"step": step, "loss": round(mean, 4),
                                           "dev_loss": round(dev_loss, 4), "seconds": seconds,
                                           "greedy": samples[0]})
                print(f"[{name}] step {step} loss {mean:.4f} dev loss {dev_loss:.4f} "
                      f"({seconds:.0f}s) {samples[0]!r}", file=sys.stderr, flush=True)
                started += time.time() - started - seconds  # do not count the evaluation
    log["train_seconds"] = log["checkpoints"][-1]["seconds"]
    model.eval()
    ordo_torch.round_weights_(model, "F16")  # measure what is shipped (save rounds the same)
    texts, measured = lm_measure(model, sp, dev_prompts, train_set, german)
    log["dev_prompts"] = measured
    log["examples"] = []
    for prompt in LM_PROMPTS:
        prompt_ids = [EOS] + sp.encode(prompt)
        ids, margins = model.lm_greedy(prompt_ids, 40)
        text = sp.decode(sp.encode(prompt) + (ids[:-1] if ids[-1:] == [EOS] else ids))
        log["examples"].append({"prompt": prompt, "prompt_ids": prompt_ids, "greedy_ids": ids,
                                "min_margin": round(min(margins), 4), "greedy": text,
                                "in_train": text in train_set,
                                "grammatical": german.parse(text) is not None})
    print(f"[{name}] dev prompts: {measured}", file=sys.stderr, flush=True)
    for example in log["examples"]:
        print(f"[{name}] {example}", file=sys.stderr, flush=True)
    return model, log


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("weights/data"), help="directory with train.tsv")
    parser.add_argument("--out", type=Path, default=Path("weights"), help="where model directories go")
    parser.add_argument("--schemes", nargs="+",
                        default=["sinusoidal", "learned", "rope", "none", "alibi", "t5_relative"],
                        choices=sorted(SCHEMES))
    parser.add_argument("--german-llama", action="store_true",
                        help="train weights/german-llama (the LLaMA-layout German language "
                             "model) instead of the translators")
    parser.add_argument("--steps", type=int, help=f"default {TRANSLATOR_DEFAULTS['steps']}; "
                                                  f"--german-llama: {LM_DEFAULTS['steps']}")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, help=f"default {TRANSLATOR_DEFAULTS['lr']}; "
                                                 f"--german-llama: {LM_DEFAULTS['lr']}")
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--dropout", type=float, default=0.1, help="translators only")
    parser.add_argument("--label-smoothing", type=float,
                        help=f"default {TRANSLATOR_DEFAULTS['label_smoothing']}; "
                             f"--german-llama: {LM_DEFAULTS['label_smoothing']}")
    parser.add_argument("--vocab-size", type=int, default=400)
    parser.add_argument("--dev-size", type=int, default=500, help="held out of train.tsv for progress reports")
    parser.add_argument("--eval-every", type=int, help=f"default {TRANSLATOR_DEFAULTS['eval_every']}; "
                                                       f"--german-llama: {LM_DEFAULTS['eval_every']}")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    for key, value in (LM_DEFAULTS if args.german_llama else TRANSLATOR_DEFAULTS).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    torch.set_num_threads(args.threads)

    pairs = read_tsv(args.data / "train.tsv")
    dev, train_pairs = pairs[:args.dev_size], pairs[args.dev_size:]
    args.out.mkdir(parents=True, exist_ok=True)
    tokenizer = args.out / "tokenizer.model"
    if not tokenizer.exists():  # shared by every model; train it once
        train_tokenizer(train_pairs, args.out, args.vocab_size)
    sp = spm.SentencePieceProcessor(model_file=str(tokenizer))
    if args.german_llama:
        model, log = train_german_llama(args, sp, train_pairs, dev)
        out = args.out / "german-llama"
        ordo_torch.save_llama_dir(model, out, dtype="F16")
        shutil.copy(tokenizer, out / "tokenizer.model")
        (out / "training.json").write_text(json.dumps(log, indent=2, ensure_ascii=False) + "\n")
        return
    train = encode_pairs(sp, train_pairs)
    longest = max(max(len(s), len(t)) for s, t in train)
    # The learned table covers what training shows, with a little slack; the long test
    # split goes past it on purpose.
    max_positions = longest + 8
    print(f"{len(train)} training pairs, vocabulary {sp.get_piece_size()}, longest sequence {longest} "
          f"tokens, max_position_embeddings {max_positions}", file=sys.stderr)

    for name in args.schemes:
        model, log = train_one(name, SCHEMES[name], args, sp, train, dev, max_positions)
        out = args.out / name
        out.mkdir(parents=True, exist_ok=True)
        ordo_torch.save_model_dir(model, out, dtype="F16")
        shutil.copy(tokenizer, out / "tokenizer.model")
        log["longest_training_sequence"] = longest
        (out / "training.json").write_text(json.dumps(log, indent=2) + "\n")


if __name__ == "__main__":
    main()
