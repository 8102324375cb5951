// The report of one `ordo bench` run: one JSON object (--json; the keys bench_peer.py
// reports too, which tools/bench/bench.sh compares) or a table, both of medians.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/cli/bench/options.h"

namespace ordo::tools::bench {

// Every measurement of the run, and what the work costs (costs.h).
struct Measurements {
  std::vector<double> load_s, encode_s, decode_s, gemm_gflops, bandwidth_gbs;  // one per measured run
  double peak_rss_mb = 0;
  double decode_weight_bytes = 0, encode_flops = 0;
  std::string compute_type;  // what the weight matrices ran as: ModelInfo::compute_type
  std::vector<int> sample_ids;
};

// `model` names the model ("base (random, in memory)" or the --model directory).
nlohmann::json report_json(const std::string& model, bool decoder_only, const BenchOptions& options,
                           const Measurements& m);

void print_table(const nlohmann::json& report, std::ostream& out);

}  // namespace ordo::tools::bench
