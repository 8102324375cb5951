#!/usr/bin/env python3
"""The length-extrapolation study: which positional schemes handle inputs longer than
anything seen in training?

    /usr/bin/python3 tools/training/length_study.py            # trains what is missing, measures, writes
    /usr/bin/python3 tools/training/length_study.py --retrain  # trains the six language models again

Two parts, both measured with ordo itself (build/ordo; build it first):

1. Language modelling, as Press et al. ("Train Short, Test Long") measure it, which
   isolates positions: one small decoder-only model per scheme (sinusoidal, learned,
   rope, alibi, t5_relative, none), all with the same size, data, seed and budget,
   trained on the German side of weights/data/train.tsv as one continuous stream (each
   sentence followed by eos) cut into windows of L tokens. Each training sequence is eos
   (as bos) + a window, so the models see positions 0..L. Perplexity is then measured on
   the German side of weights/data/test.tsv (held out), as one stream cut into
   non-overlapping windows of L, 1.5L, 2L, 4L and 8L tokens, every token scored given
   the ones before it in its window (`ordo score --target-ids`, bos first). The same
   tokens are scored at every window size. Where ordo refuses a window (learned
   positions past max_position_embeddings) the table says what ordo said. Each
   perplexity is also computed by the PyTorch oracle, and the two must agree.
2. Translation: exact match and BLEU of every shipped encoder-decoder scheme on the
   held-out test, the swapped test and the long test (`ordo eval --json`).

Writes STUDY_DIR/results.json, STUDY_DIR/length_study.md (the tables) and
STUDY_DIR/length_study.png (perplexity against window length); the language models go
to STUDY_DIR/lm-SCHEME. STUDY_DIR defaults to weights/length-study.

Needs Debian's python3-torch, python3-sentencepiece and python3-matplotlib.
"""

import argparse
import json
import math
import random
import subprocess
import sys
import time
from pathlib import Path

import sentencepiece as spm
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "oracle"))  # ordo_torch, the PyTorch oracle
import ordo_torch  # noqa: E402
from train_models import EOS, PAD, optimize, read_tsv  # noqa: E402

SCHEMES = ["sinusoidal", "learned", "rope", "alibi", "t5_relative", "none"]
TRANSLATORS = ["sinusoidal", "learned", "rope", "alibi", "t5_relative", "none"]
WINDOW_FACTORS = [1.0, 1.5, 2.0, 4.0, 8.0]
DEV_PAIRS = 500  # the first pairs of train.tsv, held out as train_models.py does

# The same for every scheme; only position_encoding differs.
LM_ARCHITECTURE = {
    "model_type": "ordo",
    "d_model": 128,
    "encoder_layers": 0,
    "decoder_layers": 2,
    "decoder_attention_heads": 4,
    "decoder_ffn_dim": 256,
    "activation_function": "relu",
    "normalize_before": True,
    "scale_embedding": True,
    "pad_token_id": PAD,
    "bos_token_id": EOS,  # no bos piece: a window starts with eos, as in GPT-2
    "eos_token_id": EOS,
    "decoder_start_token_id": PAD,  # unused without an encoder; the format asks for it
}


def stream(sp, sentences):
    """One token stream: every sentence's ids followed by eos."""
    ids = []
    for text in sentences:
        ids += sp.encode(text) + [EOS]
    return ids


def lm_config(scheme, vocab_size, window):
    # Positions 0..window: bos, then the window's tokens. Only a learned table is bound
    # by it; the other schemes take any length.
    return ordo_torch.full_config({**LM_ARCHITECTURE, "position_encoding": scheme,
                                   "vocab_size": vocab_size,
                                   "max_position_embeddings": window + 1})


def train_lm(scheme, args, vocab_size, train_ids):
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    model = ordo_torch.OrdoModel(lm_config(scheme, vocab_size, args.window), dropout=args.dropout)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.98), eps=1e-9)
    L = args.window
    starts = list(range(0, len(train_ids) - L + 1, L))  # non-overlapping windows
    log = {"scheme": scheme, "parameters": sum(p.numel() for p in model.parameters()),
           "steps": args.steps, "batch_size": args.batch_size, "window": L,
           "train_windows": len(starts), "seed": args.seed, "checkpoints": []}
    print(f"[lm-{scheme}] {log['parameters']} parameters, {len(starts)} windows of {L}",
          file=sys.stderr, flush=True)
    step, started, losses, order = 0, time.time(), [], []
    while step < args.steps:
        if not order:
            order = starts[:]
            rng.shuffle(order)
        batch = [order.pop() for _ in range(min(args.batch_size, len(order)))]
        ids = torch.tensor([[EOS] + train_ids[s:s + L] for s in batch], dtype=torch.long)
        model.train()
        logits = model.lm_logits(ids)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1))
        losses.append(optimize(model, optimizer, loss, step, args))
        step += 1
        if step % 250 == 0 or step == args.steps:
            mean = sum(losses) / len(losses)
            losses = []
            log["checkpoints"].append({"step": step, "loss": round(mean, 4),
                                       "seconds": round(time.time() - started, 1)})
            print(f"[lm-{scheme}] step {step} loss {mean:.4f} ({time.time() - started:.0f}s)",
                  file=sys.stderr, flush=True)
    log["train_seconds"] = round(time.time() - started, 1)
    return model, log


def windows_of(ids, size):
    return [ids[i:i + size] for i in range(0, len(ids) - size + 1, size)]


def ordo_perplexity(ordo, model_dir, windows):
    """Perplexity of the windows as ordo scores them (bos first), or ordo's error."""
    total, count = 0.0, 0
    for w in windows:
        run = subprocess.run([str(ordo), "score", "--model", str(model_dir), "--threads", "1",
                              "--json", "--target-ids", " ".join(map(str, [EOS] + w))],
                             capture_output=True, text=True)
        if run.returncode != 0:
            return {"error": run.stderr.strip().splitlines()[-1]}
        result = json.loads(run.stdout)
        total += result["logprob"]
        count += len(result["token_logprobs"])
    return {"perplexity": math.exp(-total / count), "tokens": count}


@torch.no_grad()
def torch_perplexity(model, windows, batch_size=16):
    """The oracle's perplexity of the same windows (its learned table refuses as ordo's)."""
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(windows), batch_size):
        ids = torch.tensor([[EOS] + w for w in windows[i:i + batch_size]], dtype=torch.long)
        try:
            logits = model.lm_logits(ids)
        except ValueError as e:
            return {"error": str(e)}
        logprobs = torch.log_softmax(logits[:, :-1].double(), dim=-1)
        total += logprobs.gather(-1, ids[:, 1:, None]).sum().item()
        count += ids[:, 1:].numel()
    return {"perplexity": math.exp(-total / count), "tokens": count}


def language_modelling(args, sp):
    pairs = read_tsv(args.data / "train.tsv")[DEV_PAIRS:]
    train_ids = stream(sp, [de for _, de in pairs])
    test_ids = stream(sp, [de for _, de in read_tsv(args.data / "test.tsv")])
    L = args.window
    sizes = [int(L * f) for f in WINDOW_FACTORS]
    test_ids = test_ids[: len(test_ids) // max(sizes) * max(sizes)]  # the same tokens everywhere
    results = {"window": L, "train_tokens": len(train_ids), "test_tokens": len(test_ids),
               "sizes": sizes, "models": {}}
    for scheme in args.schemes:
        model_dir = args.out / f"lm-{scheme}"
        if args.retrain or not (model_dir / "model.safetensors").exists():
            model, log = train_lm(scheme, args, sp.get_piece_size(), train_ids)
            ordo_torch.save_model_dir(model, model_dir, dtype="F32")
            (model_dir / "training.json").write_text(json.dumps(log, indent=2) + "\n")
            (model_dir / "tokenizer.model").write_bytes((args.data.parent / "tokenizer.model").read_bytes())
        model = ordo_torch.load_model_dir(model_dir)
        log = json.loads((model_dir / "training.json").read_text())
        entry = {"train_seconds": log["train_seconds"], "final_loss": log["checkpoints"][-1]["loss"],
                 "parameters": log["parameters"], "perplexity": {}}
        for size in sizes:
            windows = windows_of(test_ids, size)
            measured = ordo_perplexity(args.ordo, model_dir, windows)
            oracle = torch_perplexity(model, windows)
            if ("error" in measured) != ("error" in oracle) or (
                    "perplexity" in measured
                    and abs(measured["perplexity"] / oracle["perplexity"] - 1) > 1e-3):
                raise SystemExit(f"lm-{scheme}, windows of {size}: ordo {measured} but "
                                 f"PyTorch {oracle}")
            measured["torch_perplexity"] = oracle.get("perplexity")
            entry["perplexity"][str(size)] = measured
            print(f"[lm-{scheme}] windows of {size}: {measured}", file=sys.stderr, flush=True)
        results["models"][scheme] = entry
    return results


def translation(args):
    results = {}
    for scheme in TRANSLATORS:
        results[scheme] = {}
        for split in ("test", "swapped", "long"):
            run = subprocess.run([str(args.ordo), "eval", "--model", str(args.data.parent / scheme),
                                  "--data", str(args.data / f"{split}.tsv"), "--json"],
                                 capture_output=True, text=True, check=True)
            results[scheme][split] = json.loads(run.stdout)
        print(f"[translate] {scheme}: " + ", ".join(
            f"{s} EM {r['exact_match']:.2f}" for s, r in results[scheme].items()),
            file=sys.stderr, flush=True)
    return results


def markdown(results):
    lm = results["language_modelling"]
    sizes = lm["sizes"]
    lines = [f"Perplexity on held-out German ({lm['test_tokens']} tokens), models trained on "
             f"windows of L = {lm['window']} tokens:", "",
             "| scheme | " + " | ".join(f"{s} ({s / lm['window']:g}L)" for s in sizes) + " |",
             "| --- |" + " --- |" * len(sizes)]
    for scheme, entry in lm["models"].items():
        cells = []
        for s in sizes:
            m = entry["perplexity"][str(s)]
            cells.append(f"{m['perplexity']:.3f}" if "perplexity" in m else "refused")
        lines.append(f"| {scheme} | " + " | ".join(cells) + " |")
    for scheme, entry in lm["models"].items():  # ordo's own words, at the first refusal
        refused = [s for s in sizes if "error" in entry["perplexity"][str(s)]]
        if refused:
            lines += ["", f"{scheme}, windows of {refused[0]} and more: "
                          f"`{entry['perplexity'][str(refused[0])]['error']}`"]
    lines += ["", "Translation (greedy; exact match / BLEU, %):", "",
              "| scheme | test EM | test BLEU | swapped EM | swapped BLEU | long EM | long BLEU |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for scheme, splits in results["translation"].items():
        cells = []
        for split in ("test", "swapped", "long"):
            r = splits[split]
            cells += [f"{r['exact_match']:.2f}", f"{r['bleu']:.2f}"]
        lines.append(f"| {scheme} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter, ScalarFormatter
    lm = results["language_modelling"]
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    for scheme, entry in lm["models"].items():
        xs = [s for s in lm["sizes"] if "perplexity" in entry["perplexity"][str(s)]]
        ys = [entry["perplexity"][str(s)]["perplexity"] for s in xs]
        refused = len(xs) < len(lm["sizes"])
        label = f"{scheme} (ordo refuses past {max(xs)})" if refused else scheme
        ax.plot(xs, ys, marker="s" if refused else "o", markersize=8 if refused else 6, label=label)
    ax.axvline(lm["window"], color="grey", linestyle=":", linewidth=1)
    ax.text(lm["window"] * 1.02, 0.02, "training length", transform=ax.get_xaxis_transform(),
            va="bottom", fontsize=8, color="grey")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_yticks([4, 5, 6, 7, 8, 9, 10])
    ax.set_xticks(lm["sizes"])
    ax.set_xticklabels([str(s) for s in lm["sizes"]])
    ax.set_xlabel("evaluation window (tokens)")
    ax.set_ylabel("perplexity (log scale)")
    ax.set_title("Held-out perplexity vs window length (trained on 64-token windows)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("weights/data"))
    parser.add_argument("--out", type=Path, default=Path("weights/length-study"))
    parser.add_argument("--ordo", type=Path, default=Path("build/ordo"))
    parser.add_argument("--schemes", nargs="+", default=SCHEMES, choices=SCHEMES)
    parser.add_argument("--retrain", action="store_true", help="train the language models even if present")
    parser.add_argument("--window", type=int, default=64, help="training window L, in tokens")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--from-results", action="store_true",
                        help="only rewrite the tables and the plot from STUDY_DIR/results.json")
    args = parser.parse_args()
    if args.from_results:
        results = json.loads((args.out / "results.json").read_text())
        (args.out / "length_study.md").write_text(markdown(results))
        plot(results, args.out / "length_study.png")
        return
    if not args.ordo.exists():
        raise SystemExit(f"{args.ordo}: no ordo binary (build it first, or pass --ordo)")
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    sp = spm.SentencePieceProcessor(model_file=str(args.data.parent / "tokenizer.model"))
    results = {"language_modelling": language_modelling(args, sp), "translation": translation(args)}
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / "length_study.md").write_text(markdown(results))
    plot(results, args.out / "length_study.png")
    print(markdown(results))


if __name__ == "__main__":
    main()
