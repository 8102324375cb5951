#!/usr/bin/env python3
"""Trains ordo's shipped toy models: one English->German encoder-decoder per position scheme.

Run with Debian's Python (python3-torch, python3-sentencepiece):

    /usr/bin/python3 tools/make_grammar_data.py            # weights/data/*.tsv
    /usr/bin/python3 tools/train_models.py                 # all schemes
    /usr/bin/python3 tools/train_models.py --schemes none  # one of them

Every model has the same size, data, seed and step budget; only `position_encoding`
(and, for `sinusoidal-split`, the sinusoid layout) differs, so that their scores can be
compared. The SentencePiece model is trained once over both languages and shared.
Models are written as ordo model directories (config.json, model.safetensors in F16,
tokenizer.model) plus training.json with what the run measured.
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
import ordo_torch  # noqa: E402  (the PyTorch twin of ordo's model format)

PAD, EOS, UNK = 0, 1, 2

SCHEMES = {
    "sinusoidal": {"position_encoding": "sinusoidal"},
    "learned": {"position_encoding": "learned"},
    "rope": {"position_encoding": "rope"},
    "none": {"position_encoding": "none"},
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
    """Shuffled batches of similar lengths: less padding, same data every epoch."""
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
            for g in optimizer.param_groups:
                g["lr"] = learning_rate(step, args.lr, args.warmup, args.steps)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(loss.item())
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


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("weights/data"), help="directory with train.tsv")
    parser.add_argument("--out", type=Path, default=Path("weights"), help="where model directories go")
    parser.add_argument("--schemes", nargs="+", default=["sinusoidal", "learned", "rope", "none"],
                        choices=sorted(SCHEMES))
    parser.add_argument("--steps", type=int, default=2400)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--label-smoothing", type=float, default=0.1)
    parser.add_argument("--vocab-size", type=int, default=400)
    parser.add_argument("--dev-size", type=int, default=500, help="held out of train.tsv for progress reports")
    parser.add_argument("--eval-every", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    pairs = read_tsv(args.data / "train.tsv")
    dev, train_pairs = pairs[:args.dev_size], pairs[args.dev_size:]
    args.out.mkdir(parents=True, exist_ok=True)
    tokenizer = args.out / "tokenizer.model"
    if not tokenizer.exists():  # shared by every model; train it once
        train_tokenizer(train_pairs, args.out, args.vocab_size)
    sp = spm.SentencePieceProcessor(model_file=str(tokenizer))
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
