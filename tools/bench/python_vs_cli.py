#!/usr/bin/env python3
"""What the Python bindings cost: weights/data/test.tsv's sources translated by
`ordo translate --input FILE` and by ordo.Translator.translate_batch in a Python
process, alternately for several rounds, each a whole process (start, model load,
translation, output written), on the same threads. Prints each side's median wall
time and the median of the per-round ratios python / cli (the issue's target: at
most 1.05), for the whole input in one call and for one call per 32 lines. Both sides get OPENBLAS_NUM_THREADS=T and OMP_WAIT_POLICY=PASSIVE, and
both write their translations (to files compared at the end: they must be equal).

  /usr/bin/python3 tools/bench/python_vs_cli.py --threads 2 --rounds 7
      [--build build] [--model sinusoidal] [--data weights/data/test.tsv]
"""

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

SOURCE_DIR = pathlib.Path(__file__).resolve().parents[2]

# The Python side: the whole list in one translate_batch call (what a program does; the
# batches are then the whole input's, sorted by length), or with `chunk` > 0 one call
# per `chunk` lines in input order, the batches the CLI makes as it reads: the same
# work, so the difference is what the bindings cost.
PYTHON_SIDE = """
import sys
import ordo
source, output, model, threads, chunk = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
translator = ordo.Translator(model, threads=threads)
with open(source, encoding="utf-8") as f:
    lines = f.read().splitlines()
step = chunk or len(lines)
with open(output, "w", encoding="utf-8") as out:
    for first in range(0, len(lines), step):
        for result in translator.translate_batch(lines[first:first + step], max_batch_size=32):
            out.write((result.hypotheses[0] if result.error is None else "") + "\\n")
"""


def timed(command, env):
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--build", default=str(SOURCE_DIR / "build"))
    parser.add_argument("--model", default="sinusoidal")
    parser.add_argument("--data", default=str(SOURCE_DIR / "weights" / "data" / "test.tsv"))
    args = parser.parse_args()

    build = pathlib.Path(args.build)
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(args.threads), OMP_WAIT_POLICY="PASSIVE",
               PYTHONPATH=str(build / "python"))
    env.pop("ORDO_MODEL", None)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        source = tmp / "source.txt"
        with open(args.data, encoding="utf-8") as data:
            source.write_text("".join(line.split("\t")[0] + "\n" for line in data), encoding="utf-8")
        outputs = {name: tmp / f"{name}.txt" for name in ("cli", "whole", "chunks")}
        commands = {
            "cli": [str(build / "ordo"), "translate", "--model", args.model, "--threads", str(args.threads),
                    "--batch-size", "32", "--input", str(source), "--output", str(outputs["cli"])],
            "whole": [sys.executable, "-c", PYTHON_SIDE, str(source), str(outputs["whole"]), args.model,
                      str(args.threads), "0"],
            "chunks": [sys.executable, "-c", PYTHON_SIDE, str(source), str(outputs["chunks"]), args.model,
                       str(args.threads), "32"],
        }
        for command in commands.values():  # warm the page cache and the loader
            timed(command, env)
        times = {name: [] for name in commands}
        for _ in range(args.rounds):  # alternately, so that both see the same machine
            for name, command in commands.items():
                times[name].append(timed(command, env))
        want = outputs["cli"].read_text(encoding="utf-8")
        same = all(outputs[name].read_text(encoding="utf-8") == want for name in ("whole", "chunks"))
    lines = sum(1 for _ in open(args.data, encoding="utf-8"))
    print(f"{lines} lines, model {args.model}, {args.threads} threads, {args.rounds} rounds, wall time per process")
    labels = {"cli": "ordo translate --input", "whole": "translate_batch(all lines)",
              "chunks": "translate_batch per 32 lines"}
    for name, label in labels.items():
        print(f"{label:30} median {statistics.median(times[name]):.3f} s  "
              f"({', '.join(f'{t:.3f}' for t in times[name])})")
    for name in ("whole", "chunks"):
        ratios = [p / c for p, c in zip(times[name], times["cli"])]
        print(f"{labels[name]} / cli: median of per-round ratios {statistics.median(ratios):.3f}")
    print(f"translations identical: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
