#!/usr/bin/env python3
"""The length-extrapolation study: which positional schemes handle inputs longer than
anything seen in training, and does RoPE scaling make RoPE one of them?

    /usr/bin/python3 tools/training/length_study.py                 # trains what is missing, measures, writes
    /usr/bin/python3 tools/training/length_study.py --retrain       # trains every language model again
    /usr/bin/python3 tools/training/length_study.py --schemes rope  # only rope (and its scalings and
                                                                     # fine-tunes); other rows kept
    /usr/bin/python3 tools/training/length_study.py --from-results  # only the tables and the plot

Three parts, all measured with ordo itself (build/ordo; build it first):

1. Language modelling, as Press et al. ("Train Short, Test Long") measure it, which
   isolates positions: one small decoder-only model per scheme (sinusoidal, learned,
   rope, alibi, t5_relative, none), all with the same size, data, seed and budget,
   trained on the German side of weights/data/train.tsv as one continuous stream (each
   sentence followed by eos) cut into windows of L tokens. Each training sequence is eos
   (as bos) + a window, so the models see positions 0..L. Perplexity is then measured on
   the German side of weights/data/test.tsv (held out), as one stream cut into
   non-overlapping windows of n = L, 1.5L, 2L, 4L and 8L tokens, every token scored given
   the ones before it in its window (`ordo score --target-ids`, bos first). The same
   tokens are scored at every window size. Where ordo refuses a window (learned
   positions past max_position_embeddings) the table says what ordo said. Each
   perplexity is also computed by the PyTorch oracle, and the two must agree (relative
   difference at most 1e-3; the worst one is recorded).
2. RoPE scaling, on the same RoPE model and the same windows: (a) without fine-tuning,
   `ordo score --rope-scaling TYPE:FACTOR` for linear, dynamic, yarn and llama3, once
   with the factor fitted to each window (n/L: the window's last position lands on the
   last trained one; dynamic: factor 1, whose NTK scale is by itself the window's
   length over the trained one) and once with one fixed factor, the longest window's
   (8: a config written once for the longest use, as Llama 3.1's factor 8); (b) after a
   short fine-tune at the longest window (Chen et al.'s position interpolation: the
   scaling in place, then a few steps at the target length): the RoPE model is
   fine-tuned with linear, yarn and llama3 at factor 8, and without scaling as the
   control, each for the same steps on the same stream and seed with the same optimizer
   (--ft-*: by default 200 steps of 4 windows of 8L, lr 2e-4, 20 warmup steps; dynamic
   is not fine-tuned, its scale follows the length), written as model directories whose config.json carries the rope_scaling
   that ordo then reads. The oracle applies the same scaling (the parameters
   --rope-scaling fills in: yarn's and llama3's original_max_position_embeddings =
   max_position_embeddings, llama3's low/high_freq_factor 1/4) and must agree as in 1.
   A fine-tune is redone when its base model changed (training.json records the
   base's sha256).
3. Translation: exact match and BLEU of every shipped encoder-decoder scheme on the
   held-out test, the swapped test and the long test (`ordo eval --json`).

Writes STUDY_DIR/results.json, STUDY_DIR/length_study.md (the tables) and
STUDY_DIR/length_study.png (perplexity against window length: the schemes, the
scalings without fine-tuning, the fine-tunes); the language models go to
STUDY_DIR/lm-SCHEME, the fine-tunes to STUDY_DIR/lm-rope-ft-TYPE (none: the control).
STUDY_DIR defaults to weights/length-study. With --schemes, the rows of the schemes left
out (and, without rope, the scaling rows) are kept from STUDY_DIR/results.json.

Needs Debian's python3-torch, python3-sentencepiece and python3-matplotlib.
"""

import argparse
import hashlib
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
from ordo_torch.model_dirs import load_checked  # noqa: E402
from train_models import EOS, PAD, optimize, read_tsv  # noqa: E402

SCHEMES = ["sinusoidal", "learned", "rope", "alibi", "t5_relative", "none"]
TRANSLATORS = ["sinusoidal", "learned", "rope", "alibi", "t5_relative", "none"]
WINDOW_FACTORS = [1.0, 1.5, 2.0, 4.0, 8.0]
DEV_PAIRS = 500  # the first pairs of train.tsv, held out as train_models.py does

# RoPE scaling rows without fine-tuning: name -> (rope_type, factor). FITTED is n/L for a
# window of n tokens; FIXED the longest window's n/L (8). Dynamic scaling computes its own
# NTK scale from the sequence, factor * n / max - (factor - 1) for n positions past
# max_position_embeddings: factor 1 makes that n / max, the window fitted by itself.
FITTED, FIXED = "n/L", "fixed"
SCALED_ROWS = {
    "linear, factor n/L": ("linear", FITTED),
    "dynamic, factor 1": ("dynamic", 1.0),
    "yarn, factor n/L": ("yarn", FITTED),
    "llama3, factor n/L": ("llama3", FITTED),
    "linear, factor 8": ("linear", FIXED),
    "dynamic, factor 8": ("dynamic", FIXED),
    "yarn, factor 8": ("yarn", FIXED),
    "llama3, factor 8": ("llama3", FIXED),
}
# Fine-tunes of lm-rope at the longest window: directory suffix -> rope_type (None: no
# scaling, the control). Dynamic is left out: its scale follows the sequence length, so
# a fine-tune on windows of one length trains a single one of its scales.
FINE_TUNES = {"none": None, "linear": "linear", "yarn": "yarn", "llama3": "llama3"}

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


def rope_scaling(kind, factor, max_positions):
    """The rope_scaling dict of `kind` at `factor` with the parameters ordo's
    --rope-scaling TYPE:FACTOR gives a model whose config has none (models/
    rope_scaling_config.h): yarn's original_max_position_embeddings, beta_fast/slow and
    attention factor are left to their defaults (max_position_embeddings, 32, 1,
    0.1 ln(factor) + 1); llama3's are Llama 3.1's low/high_freq_factor 1 and 4 and
    original_max_position_embeddings = max_position_embeddings. None for no scaling."""
    if kind is None:
        return None
    scaling = {"rope_type": kind, "factor": float(factor)}
    if kind == "llama3":
        scaling.update(low_freq_factor=1.0, high_freq_factor=4.0,
                       original_max_position_embeddings=max_positions)
    return scaling


def train_windows(model, tag, train_ids, L, hp, seed, log):
    """Trains `model` on eos + non-overlapping windows of L tokens of train_ids in an order
    shuffled by `seed`, Adam (0.9, 0.98), hp.lr with hp.warmup steps then cosine decay
    over hp.steps, hp.batch_size windows a step; fills `log` (checkpoints, seconds). The
    caller seeds torch (dropout), so that a new model's initial weights draw first."""
    rng = random.Random(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=hp.lr, betas=(0.9, 0.98), eps=1e-9)
    starts = list(range(0, len(train_ids) - L + 1, L))
    log.update({"parameters": sum(p.numel() for p in model.parameters()), "steps": hp.steps,
                "batch_size": hp.batch_size, "window": L, "lr": hp.lr, "warmup": hp.warmup,
                "train_windows": len(starts), "seed": seed, "checkpoints": []})
    print(f"[{tag}] {log['parameters']} parameters, {len(starts)} windows of {L}",
          file=sys.stderr, flush=True)
    every = max(1, hp.steps // 4)
    step, started, losses, order = 0, time.time(), [], []
    while step < hp.steps:
        if not order:
            order = starts[:]
            rng.shuffle(order)
        batch = [order.pop() for _ in range(min(hp.batch_size, len(order)))]
        ids = torch.tensor([[EOS] + train_ids[s:s + L] for s in batch], dtype=torch.long)
        model.train()
        logits = model.lm_logits(ids)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1))
        losses.append(optimize(model, optimizer, loss, step, hp))
        step += 1
        if step % every == 0 or step == hp.steps:
            mean = sum(losses) / len(losses)
            losses = []
            log["checkpoints"].append({"step": step, "loss": round(mean, 4),
                                       "seconds": round(time.time() - started, 1)})
            print(f"[{tag}] step {step} loss {mean:.4f} ({time.time() - started:.0f}s)",
                  file=sys.stderr, flush=True)
    log["train_seconds"] = round(time.time() - started, 1)
    return log


def train_lm(scheme, args, vocab_size, train_ids):
    torch.manual_seed(args.seed)  # the initial weights
    model = ordo_torch.OrdoModel(lm_config(scheme, vocab_size, args.window), dropout=args.dropout)
    log = train_windows(model, f"lm-{scheme}", train_ids, args.window, args, args.seed,
                        {"scheme": scheme})
    return model, log


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def scaled_model(model_dir, scaling, dropout=0.0):
    """The model of model_dir with `scaling` as its rope_scaling instead of its config's."""
    config = json.loads((model_dir / "config.json").read_text())
    model = ordo_torch.OrdoModel({**config, "rope_scaling": scaling}, dropout=dropout)
    tensors = ordo_torch.read_safetensors(model_dir / "model.safetensors")
    return load_checked(model, model_dir / "model.safetensors", tensors, None)


def fine_tune(name, kind, args, base_dir, train_ids, out_dir):
    """Fine-tunes the model of base_dir with rope_type `kind` (None: none) at factor
    args.ft_factor on windows of args.ft_factor * L; writes out_dir (config.json with
    that rope_scaling, model.safetensors, tokenizer.model, training.json)."""
    L = round(args.window * args.ft_factor)
    max_positions = json.loads((base_dir / "config.json").read_text())["max_position_embeddings"]
    scaling = rope_scaling(kind, args.ft_factor, max_positions)
    model = scaled_model(base_dir, scaling, dropout=args.dropout)
    torch.manual_seed(args.seed)  # dropout
    hp = argparse.Namespace(lr=args.ft_lr, warmup=args.ft_warmup, steps=args.ft_steps,
                            batch_size=args.ft_batch_size)
    log = train_windows(model, name, train_ids, L, hp, args.seed,
                        {"fine_tuned_from": base_dir.name,
                         "base_sha256": sha256(base_dir / "model.safetensors"),
                         "rope_scaling": scaling})
    ordo_torch.save_model_dir(model, out_dir, dtype="F32")
    (out_dir / "training.json").write_text(json.dumps(log, indent=2) + "\n")
    (out_dir / "tokenizer.model").write_bytes((base_dir / "tokenizer.model").read_bytes())


def windows_of(ids, size):
    return [ids[i:i + size] for i in range(0, len(ids) - size + 1, size)]


def ordo_perplexity(ordo, model_dir, windows, flags=()):
    """Perplexity of the windows as ordo scores them (bos first), or ordo's error."""
    total, count = 0.0, 0
    for w in windows:
        run = subprocess.run([str(ordo), "score", "--model", str(model_dir), "--threads", "1",
                              *flags, "--json", "--target-ids", " ".join(map(str, [EOS] + w))],
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


def perplexities(tag, args, model_dir, test_ids, sizes, scaling_at=None):
    """{size: ordo's perplexity with PyTorch's beside it} for windows of every size;
    scaling_at(size) -> (rope_type, factor) runs ordo with --rope-scaling and the oracle
    with the same scaling (None: both as the config says). Stops at a disagreement."""
    config_model = ordo_torch.load_model_dir(model_dir)
    out = {}
    for size in sizes:
        windows = windows_of(test_ids, size)
        flags, model = (), config_model
        if scaling_at is not None:
            kind, factor = scaling_at(size)
            flags = ("--rope-scaling", f"{kind}:{factor!r}")
            model = scaled_model(model_dir, rope_scaling(
                kind, factor, config_model.config["max_position_embeddings"]))
        measured = ordo_perplexity(args.ordo, model_dir, windows, flags)
        oracle = torch_perplexity(model, windows)
        if ("error" in measured) != ("error" in oracle) or (
                "perplexity" in measured
                and abs(measured["perplexity"] / oracle["perplexity"] - 1) > 1e-3):
            raise SystemExit(f"{tag}, windows of {size} {' '.join(flags)}: ordo {measured} but "
                             f"PyTorch {oracle}")
        measured["torch_perplexity"] = oracle.get("perplexity")
        if flags:
            measured["rope_scaling"] = flags[1]
        out[str(size)] = measured
        print(f"[{tag}] windows of {size}: {measured}", file=sys.stderr, flush=True)
    return out


def rope_scaling_rows(args, test_ids, sizes):
    """Part 2a: the RoPE model under each scaling of SCALED_ROWS, not fine-tuned."""
    L = args.window
    fixed = max(sizes) / L
    rows = {}
    for name, (kind, factor) in SCALED_ROWS.items():
        def scaling_at(size, kind=kind, factor=factor):
            return kind, size / L if factor == FITTED else fixed if factor == FIXED else factor
        rows[name] = {"rope_type": kind, "fitted": factor != FIXED,  # dynamic 1: by itself
                      "factor": factor if factor == FITTED else scaling_at(max(sizes))[1],
                      "perplexity": perplexities(f"lm-rope {name}", args, args.out / "lm-rope",
                                                 test_ids, sizes, scaling_at)}
    return rows


def fine_tuned_rows(args, train_ids, test_ids, sizes):
    """Part 2b: lm-rope fine-tuned at args.ft_factor * L with each of FINE_TUNES."""
    base_dir = args.out / "lm-rope"
    rows = {}
    for suffix, kind in FINE_TUNES.items():
        model_dir = args.out / f"lm-rope-ft-{suffix}"
        stale = (not (model_dir / "model.safetensors").exists() or json.loads(
            (model_dir / "training.json").read_text()).get("base_sha256")
            != sha256(base_dir / "model.safetensors"))
        if args.retrain or stale:
            fine_tune(f"lm-rope-ft-{suffix}", kind, args, base_dir, train_ids, model_dir)
        log = json.loads((model_dir / "training.json").read_text())
        rows[suffix] = {"rope_scaling": log["rope_scaling"], "train_seconds": log["train_seconds"],
                        "final_loss": log["checkpoints"][-1]["loss"],
                        "checkpoints": log["checkpoints"],
                        "perplexity": perplexities(f"lm-rope-ft-{suffix}", args, model_dir,
                                                   test_ids, sizes)}
    return {"window": round(args.window * args.ft_factor), "factor": args.ft_factor,
            "steps": args.ft_steps, "batch_size": args.ft_batch_size, "lr": args.ft_lr,
            "warmup": args.ft_warmup, "models": rows}


def language_modelling(args, sp, previous):
    """Parts 1 and 2; rows not measured this time (--schemes) come from `previous`."""
    pairs = read_tsv(args.data / "train.tsv")[DEV_PAIRS:]
    train_ids = stream(sp, [de for _, de in pairs])
    test_ids = stream(sp, [de for _, de in read_tsv(args.data / "test.tsv")])
    L = args.window
    sizes = [int(L * f) for f in WINDOW_FACTORS]
    test_ids = test_ids[: len(test_ids) // max(sizes) * max(sizes)]  # the same tokens everywhere
    results = {"window": L, "train_tokens": len(train_ids), "test_tokens": len(test_ids),
               "sizes": sizes, "models": {}}
    if previous and (previous["window"], previous["sizes"], previous["test_tokens"]) != (
            L, sizes, len(test_ids)):
        previous = None  # another setting: nothing to keep
    for scheme in SCHEMES:
        if scheme not in args.schemes:
            if previous and scheme in previous["models"]:
                results["models"][scheme] = previous["models"][scheme]
            continue
        model_dir = args.out / f"lm-{scheme}"
        if args.retrain or not (model_dir / "model.safetensors").exists():
            model, log = train_lm(scheme, args, sp.get_piece_size(), train_ids)
            ordo_torch.save_model_dir(model, model_dir, dtype="F32")
            (model_dir / "training.json").write_text(json.dumps(log, indent=2) + "\n")
            (model_dir / "tokenizer.model").write_bytes((args.data.parent / "tokenizer.model").read_bytes())
        log = json.loads((model_dir / "training.json").read_text())
        results["models"][scheme] = {
            "train_seconds": log["train_seconds"], "final_loss": log["checkpoints"][-1]["loss"],
            "parameters": log["parameters"],
            "perplexity": perplexities(f"lm-{scheme}", args, model_dir, test_ids, sizes)}
    if "rope" in args.schemes:
        results["rope_scaling"] = rope_scaling_rows(args, test_ids, sizes)
        results["fine_tuned"] = fine_tuned_rows(args, train_ids, test_ids, sizes)
    elif previous:
        for key in ("rope_scaling", "fine_tuned"):
            if key in previous:
                results[key] = previous[key]
    results["worst_relative_difference"] = max(
        abs(m["perplexity"] / m["torch_perplexity"] - 1) for m in measurements(results))
    return results


def measurements(lm):
    """Every measured perplexity of the language-modelling results (errors left out)."""
    entries = list(lm["models"].values()) + list(lm.get("rope_scaling", {}).values()) + list(
        lm.get("fine_tuned", {}).get("models", {}).values())
    return [m for e in entries for m in e["perplexity"].values() if "perplexity" in m]


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


def perplexity_row(name, entry, sizes):
    cells = []
    for s in sizes:
        m = entry["perplexity"][str(s)]
        cells.append(f"{m['perplexity']:.3f}" if "perplexity" in m else "refused")
    return f"| {name} | " + " | ".join(cells) + " |"


def markdown(results):
    lm = results["language_modelling"]
    sizes, L = lm["sizes"], lm["window"]
    header = ["| {} | " + " | ".join(f"{s} ({s / L:g}L)" for s in sizes) + " |",
              "| --- |" + " --- |" * len(sizes)]
    lines = [f"Perplexity on held-out German ({lm['test_tokens']} tokens), models trained on "
             f"windows of L = {L} tokens:", "", header[0].format("scheme"), header[1]]
    for scheme, entry in lm["models"].items():
        lines.append(perplexity_row(scheme, entry, sizes))
    for scheme, entry in lm["models"].items():  # ordo's own words, at the first refusal
        refused = [s for s in sizes if "error" in entry["perplexity"][str(s)]]
        if refused:
            lines += ["", f"{scheme}, windows of {refused[0]} and more: "
                          f"`{entry['perplexity'][str(refused[0])]['error']}`"]
    references = [(name, lm["models"][scheme]) for name, scheme in
                  (("rope, no scaling", "rope"), ("alibi (reference)", "alibi"))
                  if scheme in lm["models"]]
    if "rope_scaling" in lm:
        lines += ["", "The rope model under RoPE scaling, not fine-tuned (`ordo score "
                  "--rope-scaling TYPE:FACTOR`); factor n/L: the factor is the window's "
                  "length over L, so it changes with the column:", "",
                  header[0].format("rope with"), header[1]]
        lines += [perplexity_row(name, entry, sizes) for name, entry in references]
        lines += [perplexity_row(name, entry, sizes) for name, entry in lm["rope_scaling"].items()]
    if "fine_tuned" in lm:
        ft = lm["fine_tuned"]
        lines += ["", f"The rope model fine-tuned {ft['steps']} steps of {ft['batch_size']} windows "
                  f"of {ft['window']} tokens ({ft['window'] / L:g}L; lr {ft['lr']:g}, "
                  f"{ft['warmup']} warmup steps), with the scaling in place at factor "
                  f"{ft['factor']:g} (config.json's rope_scaling) or none (the control):", "",
                  header[0].format("rope fine-tuned with") + f" loss, last {ft['steps'] // 4} steps |",
                  header[1] + " --- |"]
        lines += [perplexity_row(f"*{name}, not fine-tuned*", entry, sizes) + " |"
                  for name, entry in references]
        for suffix, entry in ft["models"].items():
            name = "no scaling (control)" if entry["rope_scaling"] is None else \
                f"{suffix}, factor {ft['factor']:g}"
            lines.append(perplexity_row(name, entry, sizes) + f" {entry['final_loss']:.4f} |")
    if "worst_relative_difference" in lm:
        lines += ["", "ordo and PyTorch agree on every perplexity above to within "
                      f"{lm['worst_relative_difference']:.1e} relative."]
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


TYPE_COLORS = {"linear": "tab:blue", "dynamic": "tab:orange", "yarn": "tab:green",
               "llama3": "tab:purple"}


def plot(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter
    lm = results["language_modelling"]
    sizes = lm["sizes"]
    # The scaling panels show 4.5-5.5, where the rows differ; above 1.15 x rope's
    # perplexity at L a curve leaves the panel and its legend entry gives the values.
    cap = None
    if "rope" in lm["models"] and "perplexity" in lm["models"]["rope"]["perplexity"][str(sizes[0])]:
        cap = 1.15 * lm["models"]["rope"]["perplexity"][str(sizes[0])]["perplexity"]

    def curve(ax, entry, cap=None, **style):
        xs = [s for s in sizes if "perplexity" in entry["perplexity"][str(s)]]
        ys = [entry["perplexity"][str(s)]["perplexity"] for s in xs]
        above = [f"{x / lm['window']:g}L {y:.2f}" for x, y in zip(xs, ys) if cap and y > cap]
        if len(above) == len(ys):
            style["label"] += f" (off scale: {min(ys):.2f}-{max(ys):.2f})"
        elif above:
            style["label"] += " (off scale: " + ", ".join(above) + ")"
        ax.plot(xs, ys, **style)
        return min(ys)

    panels = 1 + ("rope_scaling" in lm) + ("fine_tuned" in lm)
    fig, axes = plt.subplots(1, panels, figsize=(6.4 * panels, 6.4), dpi=110, squeeze=False)
    axes = axes[0]
    ax = axes[0]
    for scheme, entry in lm["models"].items():
        xs = [s for s in sizes if "perplexity" in entry["perplexity"][str(s)]]
        refused = len(xs) < len(sizes)
        curve(ax, entry, marker="s" if refused else "o", markersize=8 if refused else 6,
              label=f"{scheme} (ordo refuses past {max(xs)})" if refused else scheme)
    ax.set_title("Positional schemes")
    references = [(scheme, style) for scheme, style in (
        ("rope", dict(color="black", marker="o", label="rope, no scaling")),
        ("alibi", dict(color="grey", marker="o", linestyle="--", label="alibi (reference)")))
        if scheme in lm["models"]]
    lowest = []
    if "rope_scaling" in lm:
        ax = axes[1]
        for scheme, style in references:
            lowest.append(curve(ax, lm["models"][scheme], cap, **style))
        for name, entry in lm["rope_scaling"].items():
            fitted = entry["fitted"]
            lowest.append(curve(ax, entry, cap, color=TYPE_COLORS[entry["rope_type"]],
                                marker="o" if fitted else "^", linestyle="-" if fitted else ":",
                                label=name))
        ax.set_title("RoPE scaling, not fine-tuned (solid: factor fitted to the window)",
                     fontsize=10)
    if "fine_tuned" in lm:
        ax = axes[-1]
        ft = lm["fine_tuned"]
        for scheme, style in references:
            lowest.append(curve(ax, lm["models"][scheme], cap,
                                **{**style, "label": style["label"] + ", not fine-tuned"}))
        # Curves that coincide stay visible: a large hollow marker under smaller ones.
        looks = {None: dict(color="black", marker="D", markersize=11, markerfacecolor="none",
                            linestyle="--"),
                 "linear": dict(color=TYPE_COLORS["linear"], marker="D", markersize=6),
                 "yarn": dict(color=TYPE_COLORS["yarn"], marker="o", markersize=7),
                 "llama3": dict(color=TYPE_COLORS["llama3"], marker="x", markersize=7)}
        for suffix, entry in ft["models"].items():
            kind = None if entry["rope_scaling"] is None else entry["rope_scaling"]["rope_type"]
            lowest.append(curve(ax, entry, cap, **looks.get(kind, dict(marker="D")),
                                label=f"{kind}, factor {ft['factor']:g}" if kind
                                else "no scaling (control)"))
        ax.axvline(ft["window"], color="grey", linestyle="--", linewidth=1)
        ax.text(ft["window"] * 0.98, 0.02, "fine-tuning length", transform=ax.get_xaxis_transform(),
                va="bottom", ha="right", fontsize=8, color="grey")
        ax.set_title(f"RoPE fine-tuned {ft['steps']} steps at {ft['window']} tokens, factor "
                     f"{ft['factor']:g}", fontsize=10)
    for i, ax in enumerate(axes):
        ax.axvline(lm["window"], color="grey", linestyle=":", linewidth=1)
        ax.text(lm["window"] * 1.02, 0.02, "training length", transform=ax.get_xaxis_transform(),
                va="bottom", fontsize=8, color="grey")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        if i > 0 and cap:
            ax.set_ylim(min(lowest) * 0.985, cap)
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=[x / 10 for x in range(10, 100)]))
        else:
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=range(1, 10)))
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xticks(sizes)
        ax.set_xticklabels([str(s) for s in sizes])
        ax.set_xlabel("evaluation window (tokens)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    axes[0].set_ylabel("held-out perplexity (log scale)")
    fig.suptitle(f"Held-out perplexity vs window length (trained on {lm['window']}-token windows)")
    fig.tight_layout()
    fig.savefig(path)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("weights/data"))
    parser.add_argument("--out", type=Path, default=Path("weights/length-study"))
    parser.add_argument("--ordo", type=Path, default=Path("build/ordo"))
    parser.add_argument("--schemes", nargs="+", default=SCHEMES, choices=SCHEMES,
                        help="measure (training if missing) only these; the others' rows are "
                             "kept from STUDY_DIR/results.json")
    parser.add_argument("--retrain", action="store_true",
                        help="train the language models (and the fine-tunes) even if present")
    parser.add_argument("--window", type=int, default=64, help="training window L, in tokens")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--ft-factor", type=float, default=max(WINDOW_FACTORS),
                        help="the fine-tunes' window in units of L, and their scaling factor")
    parser.add_argument("--ft-steps", type=int, default=200)
    parser.add_argument("--ft-batch-size", type=int, default=4,
                        help="windows a fine-tune step (4 x 8L = the tokens of 32 x L)")
    parser.add_argument("--ft-lr", type=float, default=2e-4, help="a tenth of --lr's default")
    parser.add_argument("--ft-warmup", type=int, default=20)
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
    previous = None
    if (args.out / "results.json").exists():
        previous = json.loads((args.out / "results.json").read_text())["language_modelling"]
    sp = spm.SentencePieceProcessor(model_file=str(args.data.parent / "tokenizer.model"))
    results = {"language_modelling": language_modelling(args, sp, previous),
               "translation": translation(args)}
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / "length_study.md").write_text(markdown(results))
    plot(results, args.out / "length_study.png")
    print(markdown(results))


if __name__ == "__main__":
    main()
