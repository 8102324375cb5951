#!/usr/bin/env bash
# ordo against its PyTorch peer, side by side, on one model and one workload.
#
#   tools/bench/bench.sh --shape base  --batch 16 --src-len 32 --new-tokens 32 --threads 2 [--beam K] [--rounds 5]
#   tools/bench/bench.sh --shape llama --batch 1  --src-len 32 --new-tokens 32 --threads 2
#   tools/bench/bench.sh --model DIR   --batch 1  --src-len 32 --new-tokens 32 --threads 1
#   tools/bench/bench.sh --shape llama --batch 1  --src-len 32 --new-tokens 32 --threads 1 --compute-type int8
#
# Builds nothing: runs $ORDO (default build/ordo) and tools/bench/bench_peer.py under $PYTHON
# (default /usr/bin/python3, Debian's, with torch). --shape NAME (ordo bench --list-shapes) writes that random
# model (make_bench_model.py) once, to $ORDO_BENCH_DIR (default /tmp/ordo-bench-SHAPE),
# and hands that same directory to both engines (decoder-only: --src-len is the prompt
# length). Each round runs both, each with --json, alternating which goes first; every
# engine gets OPENBLAS_NUM_THREADS=T and OMP_WAIT_POLICY=PASSIVE (and
# OMP/MKL_NUM_THREADS=T). Printed per metric: the median of each engine over the rounds
# and the median of the per-round ratios ordo/peer (on a noisy machine, only ratios
# measured side by side mean much). Other flags (--repeats, --warmup) are passed to both
# engines; the raw JSON lines are kept in a temp file. --compute-type T (auto, f32, f16,
# bf16, int8, int4; default auto) is ordo's --compute-type; with int8 the peer runs
# torch.ao.quantization.quantize_dynamic(qint8) on its linears and output projection
# (bench_peer.py --quantize int8), with any other type it stays float32, and the header
# says which.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$(dirname "$here")")"
ordo="${ORDO:-$root/build/ordo}"
python="${PYTHON:-/usr/bin/python3}"

usage() {
  sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
fail() {
  echo "bench.sh: $*" >&2
  exit 2
}

model="" shape="" threads="" rounds=5 compute_type=auto
pass=()  # flags both engines take as they are
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) model="${2:?--model needs a directory}"; shift 2 ;;
    --shape) shape="${2:?--shape needs a value}"; shift 2 ;;
    --threads) threads="${2:?--threads needs a number}"; shift 2 ;;
    --rounds) rounds="${2:?--rounds needs a number}"; shift 2 ;;
    --compute-type) compute_type="${2:?--compute-type needs a type}"; shift 2 ;;
    --batch|--src-len|--new-tokens|--beam|--repeats|--warmup)
      [[ $# -ge 2 ]] || fail "$1 needs a value"
      pass+=("$1" "$2"); shift 2 ;;
    -h|--help) usage ;;
    *) fail "unknown argument '$1' (see tools/bench/bench.sh --help)" ;;
  esac
done
[[ -n "$model" && -n "$shape" ]] && fail "give --model DIR or --shape NAME (ordo bench --list-shapes), not both"
[[ -z "$model" && -z "$shape" ]] && fail "give --model DIR or --shape NAME (ordo bench --list-shapes)"
[[ -z "$shape" || "$shape" == base || "$shape" == llama ]] || fail "--shape: '$shape' is not a known shape (known: base, llama)"
[[ "$threads" =~ ^[1-9][0-9]*$ ]] || fail "--threads: give a positive number of threads"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || fail "--rounds: give a positive number of rounds"
case "$compute_type" in
  int8) peer_quantize=int8 peer_weights="int8 (quantize_dynamic, qint8 linears and output projection)" ;;
  auto|f32) peer_quantize=none peer_weights="f32" ;;
  f16|bf16|int4) peer_quantize=none
    peer_weights="f32 (the peer has no $compute_type counterpart here: ordo $compute_type against PyTorch float32)" ;;
  *) fail "--compute-type: '$compute_type' is not a type (auto, f32, f16, bf16, int8, int4)" ;;
esac
[[ -x "$ordo" ]] || fail "no ordo binary at $ordo (build it, or set ORDO=path/to/ordo)"
"$python" -c "import torch" 2>/dev/null || fail "$python has no torch (set PYTHON=, e.g. Debian's /usr/bin/python3)"

if [[ -n "$shape" ]]; then
  # Reused while its stamp matches make_bench_model.py's stamp for this shape.
  shape_dir="${ORDO_BENCH_DIR:-/tmp/ordo-bench-$shape}"
  want="$("$python" -c "import sys; sys.path.insert(0, sys.argv[1]); import make_bench_model as m; print(m.stamp(sys.argv[2]))" \
            "$here" "$shape")"
  have="$("$python" -c "import json, sys; print(json.load(open(sys.argv[1])).get('bench_model', ''))" \
            "$shape_dir/config.json" 2>/dev/null || true)"
  if [[ "$have" != "$want" || ! -f "$shape_dir/model.safetensors" ]]; then
    echo "bench.sh: writing the $shape model to $shape_dir" >&2
    rm -rf "$shape_dir"
    "$python" "$here/make_bench_model.py" --shape "$shape" --out "$shape_dir" >/dev/null
  fi
  model="$shape_dir"
fi

export OPENBLAS_NUM_THREADS="$threads" OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads" OMP_WAIT_POLICY=PASSIVE
results="$(mktemp /tmp/ordo-bench-results.XXXXXX)"
run_ordo() { "$ordo" bench --model "$model" --threads "$threads" --compute-type "$compute_type" "${pass[@]}" --json; }
run_peer() {
  "$python" "$here/bench_peer.py" --model "$model" --threads "$threads" --quantize "$peer_quantize" "${pass[@]}" --json
}

echo "bench.sh: $rounds rounds, ordo = $ordo, peer = $python bench_peer.py; load now: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "bench.sh: ordo --compute-type $compute_type; peer weights: $peer_weights" >&2
for ((round = 1; round <= rounds; round++)); do
  if ((round % 2 == 1)); then order=(ordo peer); else order=(peer ordo); fi
  for engine in "${order[@]}"; do
    line="$(run_$engine)" || fail "$engine failed in round $round"
    printf '%s\t%s\t%s\n' "$round" "$engine" "$line" >>"$results"
  done
  echo "bench.sh: round $round/$rounds done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
done

"$python" - "$results" "$compute_type" "$peer_weights" <<'EOF'
import json, statistics, sys

rows = [line.rstrip("\n").split("\t", 2) for line in open(sys.argv[1])]
runs = {}
for round_, engine, text in rows:
    runs.setdefault(round_, {})[engine] = json.loads(text)
first = next(iter(runs.values()))["ordo"]
print(f"model {first['model']}: batch {first['batch']}, src-len {first['src_len']}, "
      f"new-tokens {first['new_tokens']}, beam {first['beam']}, threads {first['threads']}; "
      f"{len(runs)} rounds, each engine's medians of {first['repeats']} runs after {first['warmup']} warm-up")
print(f"weights: ordo --compute-type {sys.argv[2]}, as {first['compute_type']}, on its {first['kernels']} kernels; "
      f"peer {sys.argv[3]}")
keys = [("load_s", "lower"), ("encode_tok_s", "higher"), ("decode_tok_s", "higher"),
        ("peak_rss_mb", "lower"), ("gemm_gflops", "higher"), ("encode_gflops", "higher"),
        ("bandwidth_gbs", "higher"), ("decode_bound_tok_s", "higher")]
print(f"{'metric':<20}{'ordo':>14}{'peer':>14}{'ordo/peer':>12}   better")
for key, better in keys:
    ordo = statistics.median(r["ordo"][key] for r in runs.values())
    peer = statistics.median(r["peer"][key] for r in runs.values())
    ratio = statistics.median(r["ordo"][key] / r["peer"][key] for r in runs.values())
    print(f"{key:<20}{ordo:>14.4g}{peer:>14.4g}{ratio:>12.3f}   {better}")
same = all(r["ordo"]["sample_ids"] == r["peer"]["sample_ids"] for r in runs.values())
peer = next(iter(runs.values()))["peer"]
print(f"decode weight bytes per step: ordo {first['decode_weight_bytes']:.0f}, peer {peer['decode_weight_bytes']:.0f}; "
      f"encode FLOPs: {first['encode_flops']:.4g}; same tokens in both engines: {'yes' if same else 'NO'}")
EOF
echo "bench.sh: raw JSON lines in $results" >&2
