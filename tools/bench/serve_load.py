#!/usr/bin/env python3
"""ordo serve under load, side by side with what it replaces (issue 25's benchmark).

For each endpoint, the same requests three ways, at each client count C:
  server   C clients at once against one `ordo serve` (each client a thread with its own
           keep-alive connection, sending its next request when the last is answered);
  serial   the same requests sent one at a time to the same server (C = 1 only: the
           single-request latency and the one-at-a-time throughput);
  process  one ordo process per request, C at a time: `ordo translate --input FILE` for
           /v1/translate, `ordo generate` for /v1/completions (each a process start and
           a model load).
Endpoints: `translate`, /v1/translate on the showcase model (one sentence per request,
greedy); `completions`, /v1/completions on german-llama (one prompt per request, greedy,
max_tokens 32); `llama`, the same completions on the `ordo bench --shape llama` model
(99M parameters, vocab 32000, random weights: decoding dominates, as in a real model),
written once by make_bench_model.py --tokenizer to --llama-dir and reused while its
stamp is current (as tools/bench/bench.sh reuses it), with a SentencePiece tokenizer of
its 32000 pieces (tools/bench/bench_tokenizer.py; written again each run, a second) so
that its random ids come back as text. Each row: requests, sentences/s, tokens/s
(output tokens: ids written, eos included for a translation; completion_tokens for a
completion), p50 and p99 latency. The issue's target is checked at 32 clients:
throughput >= 5x serial, p99 < 3x serial's p50.

A benchmark, not a test: run it on a quiet machine. It checks every answer is 200
(a failed request is reported, never timed as a success).

  /usr/bin/python3 tools/bench/serve_load.py                      # the whole table
  /usr/bin/python3 tools/bench/serve_load.py --clients 1,2 --requests 8 --modes server,process
      [--ordo build/ordo] [--threads 2] [--endpoints translate,completions,llama] [--max-batch 32]
      [--llama-dir /tmp/ordo-bench-llama] [--json FILE]

Python's standard library only (threads and http.client); the llama model is written by
$PYTHON (default /usr/bin/python3, Debian's, with torch and sentencepiece), as bench.sh
writes it.
"""

import argparse
import concurrent.futures
import http.client
import json
import math
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

SOURCE_DIR = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SOURCE_DIR / "tools" / "deploy"))
from serve_process import ServeProcess, ordo_binary  # noqa: E402

TRANSLATION_MODEL = SOURCE_DIR / "weights" / "sinusoidal"
LANGUAGE_MODEL = SOURCE_DIR / "weights" / "german-llama"
BENCH_DIR = pathlib.Path(__file__).resolve().parent
LLAMA_MODEL = pathlib.Path("/tmp/ordo-bench-llama")  # bench.sh's directory for --shape llama
ENDPOINTS = ("translate", "completions", "llama")
SERVED_NAME = {"completions": "german-llama", "llama": "llama"}  # --model NAME=DIR
DATA = SOURCE_DIR / "weights" / "data" / "test.tsv"
MAX_TOKENS = 32
REQUEST_SECONDS = 600


def workload(endpoint, count):
    """`count` request bodies for `endpoint`: test.tsv's sources, or the first two words of
    its German targets as prompts, in file order (repeated when count exceeds the file)."""
    rows = [line.rstrip("\n").split("\t") for line in DATA.read_text(encoding="utf-8").splitlines() if line]
    if endpoint == "translate":
        texts = [row[0] for row in rows]
        return [{"text": texts[i % len(texts)]} for i in range(count)]
    prompts = [" ".join(row[1].split()[:2]) for row in rows]
    return [{"model": SERVED_NAME[endpoint], "prompt": prompts[i % len(prompts)], "max_tokens": MAX_TOKENS,
             "temperature": 0} for i in range(count)]


def output_tokens(endpoint, answer):
    if endpoint == "translate":
        return sum(len(t["ids"]) for t in answer["translations"])
    return answer["usage"]["completion_tokens"]


class Client:
    """One keep-alive connection; reconnects when the server closed it."""

    def __init__(self, port):
        self.port = port
        self.connection = None

    def post(self, path, body):
        for attempt in range(2):
            if self.connection is None:
                self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=REQUEST_SECONDS)
            try:
                self.connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
                response = self.connection.getresponse()
                return response.status, response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.connection.close()
                self.connection = None
                if attempt == 1:
                    raise
        raise AssertionError("unreachable")


def run_server(port, endpoint, bodies, clients):
    """Sends `bodies` with `clients` threads; (wall seconds, latencies, tokens, failures)."""
    path = "/v1/translate" if endpoint == "translate" else "/v1/completions"
    next_index = 0
    lock = threading.Lock()
    latencies, tokens, failures = [], [0], []

    def client_loop():
        nonlocal next_index
        client = Client(port)
        while True:
            with lock:
                if next_index >= len(bodies):
                    return
                body = bodies[next_index]
                next_index += 1
            start = time.perf_counter()
            try:
                status, data = client.post(path, body)
            except OSError as e:
                status, data = None, str(e).encode()
            elapsed = time.perf_counter() - start
            with lock:
                if status == 200:
                    latencies.append(elapsed)
                    tokens[0] += output_tokens(endpoint, json.loads(data))
                else:
                    failures.append(f"{status}: {data[:200]!r}")

    threads = [threading.Thread(target=client_loop) for _ in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start, latencies, tokens[0], failures


def run_processes(ordo, endpoint, model, bodies, clients, threads, scratch):
    """One ordo process per request on the model directory `model`, `clients` at a time."""
    latencies, tokens, failures = [], [0], []
    lock = threading.Lock()

    def one(i):
        body = bodies[i]
        if endpoint == "translate":
            source = pathlib.Path(scratch) / f"input-{i}.txt"
            source.write_text(body["text"] + "\n", encoding="utf-8")
            command = [ordo, "translate", "--model", str(model), "--threads", str(threads),
                       "--json", "--input", str(source)]
        else:
            command = [ordo, "generate", "--model", str(model), "--threads", str(threads), "--json",
                       "--max-length", str(MAX_TOKENS), body["prompt"]]
        start = time.perf_counter()
        run = subprocess.run(command, capture_output=True, text=True, timeout=REQUEST_SECONDS)
        elapsed = time.perf_counter() - start
        with lock:
            if run.returncode != 0:
                failures.append(f"exit {run.returncode}: {run.stderr.strip()[:200]}")
                return
            latencies.append(elapsed)
            result = json.loads(run.stdout.splitlines()[0])
            if endpoint == "translate":
                tokens[0] += len(result["target_ids"])
            else:
                tokens[0] += len(result["generated_ids"]) - bool(result["finished"])

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        list(pool.map(one, range(len(bodies))))
    return time.perf_counter() - start, latencies, tokens[0], failures


def llama_model(ordo, directory):
    """The `--shape llama` bench model at `directory`, with its tokenizer. Written by
    make_bench_model.py unless config.json's stamp is make_bench_model.py's for this ordo
    (bench.sh's rule, so that both reuse one directory); its tokenizer.model is written
    again every time (it takes a second, and is then never a stale one). A directory
    that is neither empty nor a bench model is refused, never replaced."""
    python = os.environ.get("PYTHON") or "/usr/bin/python3"

    def tool(what, *args):
        run = subprocess.run([python, *map(str, args)], capture_output=True, text=True)
        if run.returncode != 0:
            raise SystemExit(f"serve_load.py: {what} failed (exit {run.returncode}): {run.stderr.strip()[-400:]}; "
                             f"$PYTHON ({python}) needs torch and sentencepiece (Debian's /usr/bin/python3)")
        return run.stdout.strip()

    want = tool("reading the llama shape's stamp (make_bench_model.stamp)", "-c",
                "import sys; sys.path.insert(0, sys.argv[1]); import make_bench_model as m; "
                "print(m.stamp('llama', ordo=sys.argv[2]))", BENCH_DIR, ordo)
    try:
        have = json.loads((directory / "config.json").read_text()).get("bench_model")
    except (OSError, ValueError, AttributeError):
        have = None
    if have == want and (directory / "model.safetensors").is_file():
        tool(f"writing {directory}/tokenizer.model", BENCH_DIR / "bench_tokenizer.py", directory)
        return directory
    if have is None and directory.exists() and any(directory.iterdir()):
        raise SystemExit(f"serve_load.py: --llama-dir {directory} holds something other than a bench model "
                         f"(its config.json has no bench_model stamp); give a new or empty directory")
    print(f"serve_load: writing the llama bench model to {directory} (398 MB, once)", file=sys.stderr, flush=True)
    shutil.rmtree(directory, ignore_errors=True)
    tool(f"writing the llama bench model to {directory}", BENCH_DIR / "make_bench_model.py", "--shape", "llama",
         "--tokenizer", "--ordo", ordo, "--out", directory)
    return directory


def percentile(values, fraction):
    """The nearest-rank percentile (p99 of 100 values is the 99th smallest)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def row(endpoint, mode, clients, wall, latencies, tokens, failures):
    done = len(latencies)
    return {"endpoint": endpoint, "mode": mode, "clients": clients, "requests": done + len(failures),
            "failed": len(failures), "sentences_per_s": done / wall if wall else 0.0,
            "tokens_per_s": tokens / wall if wall else 0.0,
            "p50_ms": 1000 * statistics.median(latencies) if latencies else float("nan"),
            "p99_ms": 1000 * percentile(latencies, 0.99) if latencies else float("nan"),
            "first_failure": failures[0] if failures else ""}


def print_table(rows):
    print("| endpoint | mode | clients | requests | sentences/s | tokens/s | p50 ms | p99 ms |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        failed = f" ({r['failed']} failed)" if r["failed"] else ""
        print(f"| {r['endpoint']} | {r['mode']} | {r['clients']} | {r['requests']}{failed} | "
              f"{r['sentences_per_s']:.1f} | {r['tokens_per_s']:.0f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} |")


def progress(r):
    """One measured row, on stderr while the rest runs."""
    print(f"serve_load: {r['endpoint']} {r['mode']} x{r['clients']}: {r['sentences_per_s']:.1f} sentences/s, "
          f"p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, {r['failed']} failed", file=sys.stderr, flush=True)


def check_target(rows):
    """The issue's target at 32 clients, per endpoint, when both rows were measured."""
    for endpoint in sorted({r["endpoint"] for r in rows}):
        serial = next((r for r in rows if r["endpoint"] == endpoint and r["mode"] == "serial"), None)
        at32 = next((r for r in rows if r["endpoint"] == endpoint and r["mode"] == "server" and r["clients"] == 32), None)
        if not serial or not at32 or not serial["sentences_per_s"]:
            continue
        speedup = at32["sentences_per_s"] / serial["sentences_per_s"]
        tail = at32["p99_ms"] / serial["p50_ms"]
        verdict = "met" if speedup >= 5 and tail < 3 else "NOT met"
        print(f"{endpoint}: at 32 clients {speedup:.1f}x the one-at-a-time throughput (target >= 5x), "
              f"p99 {tail:.1f}x the single-request latency (target < 3x): {verdict}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ordo", help="the ordo binary (default: $ORDO_CLI, else build/ordo)")
    parser.add_argument("--clients", default="1,8,32,128", help="client counts, comma-separated")
    parser.add_argument("--requests", type=int, default=0,
                        help="requests per row (default: 256, or 4 per client when more)")
    parser.add_argument("--endpoints", default=",".join(ENDPOINTS), help="some of " + ", ".join(ENDPOINTS))
    parser.add_argument("--modes", default="serial,server,process")
    parser.add_argument("--threads", type=int, default=2, help="threads of the server and of each process")
    parser.add_argument("--max-batch", type=int, default=32, help="ordo serve --max-batch")
    parser.add_argument("--llama-dir", type=pathlib.Path, default=LLAMA_MODEL,
                        help="where the llama endpoint's model is kept (written when missing or stale)")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    ordo = ordo_binary(args.ordo)
    clients = [int(c) for c in args.clients.split(",")]
    endpoints = args.endpoints.split(",")
    modes = args.modes.split(",")
    for value, allowed, flag in ((endpoints, set(ENDPOINTS), "--endpoints"),
                                 (modes, {"serial", "server", "process"}, "--modes")):
        if not set(value) <= allowed:
            parser.error(f"{flag}: expected some of {', '.join(sorted(allowed))}, got {','.join(value)}")
    if any(c < 1 for c in clients) or args.requests < 0:
        parser.error("--clients and --requests must be positive")

    def count(c):
        return args.requests or max(256, 4 * c)

    models = {"translate": TRANSLATION_MODEL, "completions": LANGUAGE_MODEL}
    if "llama" in endpoints:
        models["llama"] = llama_model(ordo, args.llama_dir)
    rows = []
    # The queue must hold every client's request: a 503 would be a failure, not load.
    queue = max(64, max(clients))
    served = [arg for e, d in models.items()
              for arg in ("--model", f"{SERVED_NAME[e]}={d}" if e in SERVED_NAME else str(d))]
    with ServeProcess(ordo, ["--threads", str(args.threads), "--max-batch", str(args.max_batch),
                             "--max-queue", str(queue), *served]) as server, \
            tempfile.TemporaryDirectory(prefix="ordo-serve-load.") as scratch:
        for endpoint in endpoints:
            run_server(server.port, endpoint, workload(endpoint, 4), 1)  # warm: first-touch costs
            if "serial" in modes:
                bodies = workload(endpoint, count(1))
                rows.append(row(endpoint, "serial", 1, *run_server(server.port, endpoint, bodies, 1)))
                progress(rows[-1])
            for c in clients:
                bodies = workload(endpoint, count(c))
                if "server" in modes and not (c == 1 and "serial" in modes):  # the serial row is that
                    rows.append(row(endpoint, "server", c, *run_server(server.port, endpoint, bodies, c)))
                    progress(rows[-1])
                if "process" in modes:
                    rows.append(row(endpoint, "process", c,
                                    *run_processes(ordo, endpoint, models[endpoint], bodies, c, args.threads,
                                                   scratch)))
                    progress(rows[-1])
    print_table(rows)
    check_target(rows)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    failed = [r for r in rows if r["failed"]]
    for r in failed:
        print(f"{r['endpoint']} {r['mode']} {r['clients']}: {r['failed']} failed, first: {r['first_failure']}",
              file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
