#!/usr/bin/env python3
"""What the Python bindings cost: weights/data/test.tsv's sources translated by
`ordo translate --input FILE` and by ordo.Translator.translate_batch in a Python
process, alternately for several rounds, each a whole process (start, model load,
translation, output written), on the same threads. Prints each side's median wall
time and the median of the per-round ratios python / cli (the issue's target: at
most 1.05). Both sides get OPENBLAS_NUM_THREADS=T and OMP_WAIT_POLICY=PASSIVE, and
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

PYTHON_SIDE = """
import sys
import ordo
source, output, model, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
translator = ordo.Translator(model, threads=threads)
with open(source, encoding="utf-8") as f:
    lines = f.read().splitlines()
with open(output, "w", encoding="utf-8") as out:
    for result in translator.translate_batch(lines):
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
        cli_out, python_out = tmp / "cli.txt", tmp / "python.txt"
        cli = [str(build / "ordo"), "translate", "--model", args.model, "--threads", str(args.threads),
               "--input", str(source), "--output", str(cli_out)]
        python = [sys.executable, "-c", PYTHON_SIDE, str(source), str(python_out), args.model, str(args.threads)]
        timed(cli, env), timed(python, env)  # warm the page cache and the loader
        cli_times, python_times = [], []
        for _ in range(args.rounds):
            cli_times.append(timed(cli, env))
            python_times.append(timed(python, env))
        same = cli_out.read_text(encoding="utf-8") == python_out.read_text(encoding="utf-8")
    ratios = [p / c for p, c in zip(python_times, cli_times)]
    lines = sum(1 for _ in open(args.data, encoding="utf-8"))
    print(f"{lines} lines, model {args.model}, {args.threads} threads, {args.rounds} rounds")
    print(f"ordo translate --input       median {statistics.median(cli_times):.3f} s  "
          f"({', '.join(f'{t:.3f}' for t in cli_times)})")
    print(f"Translator.translate_batch   median {statistics.median(python_times):.3f} s  "
          f"({', '.join(f'{t:.3f}' for t in python_times)})")
    print(f"python / cli: median of per-round ratios {statistics.median(ratios):.3f}")
    print(f"translations identical: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
