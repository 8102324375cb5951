#include "tools/cli/bench/report.h"

#include <iomanip>
#include <ostream>
#include <sstream>

#include <ordo/model.hpp>

#include "tools/cli/bench/probes.h"
#include "tools/cli/bench/timing.h"

namespace ordo::tools::bench {

nlohmann::json report_json(const std::string& model, bool decoder_only, const BenchOptions& options,
                           const Measurements& m) {
  const double tokens_in = static_cast<double>(options.batch * options.src_len);
  const double tokens_out = static_cast<double>(options.batch * options.new_tokens);
  const double bandwidth = median(m.bandwidth_gbs);
  return {{"engine", "ordo"},
          {"model", model},
          {"decoder_only", decoder_only},
          {"batch", options.batch},
          {"src_len", options.src_len},
          {"new_tokens", options.new_tokens},
          {"beam", options.beam},
          {"threads", options.threads},
          {"kernels", ordo::cpu_kernels()},
          {"compute_type", m.compute_type},
          {"repeats", options.repeats},
          {"warmup", options.warmup},
          {"load_s", median(m.load_s)},
          {"encode_tok_s", tokens_in / median(m.encode_s)},
          {"decode_tok_s", tokens_out / median(m.decode_s)},
          {"peak_rss_mb", m.peak_rss_mb},
          {"gemm_gflops", median(m.gemm_gflops)},
          {"encode_gflops", m.encode_flops / median(m.encode_s) / 1e9},
          {"bandwidth_gbs", bandwidth},
          {"decode_bound_tok_s", bandwidth * 1e9 / m.decode_weight_bytes},
          {"decode_weight_bytes", m.decode_weight_bytes},
          {"encode_flops", m.encode_flops},
          {"sample_ids", m.sample_ids}};
}

void print_table(const nlohmann::json& j, std::ostream& out) {
  const auto num = [&](const char* key, int precision) {
    std::ostringstream s;
    s << std::fixed << std::setprecision(precision) << j[key].get<double>();
    return s.str();
  };
  out << "ordo bench: " << j["model"].get<std::string>() << (j["decoder_only"].get<bool>() ? " (decoder-only)" : "")
      << "\n  batch " << j["batch"] << ", " << (j["decoder_only"].get<bool>() ? "prompt " : "source ") << j["src_len"]
      << " tokens, " << j["new_tokens"] << " new tokens, beam " << j["beam"] << ", " << j["threads"]
      << " threads; medians of " << j["repeats"] << " runs after " << j["warmup"] << " warm-up\n\n";
  const std::vector<std::vector<std::string>> rows = {
      {"load", num("load_s", 4) + " s", "directory open to ready"},
      {"encode", num("encode_tok_s", 1) + " tok/s", num("encode_gflops", 2) + " GFLOP/s of matrix products"},
      {"decode", num("decode_tok_s", 1) + " tok/s", "generated tokens, all sequences of the batch"},
      {"decode bound", num("decode_bound_tok_s", 1) + " tok/s",
       "per sequence: bandwidth / " + num("decode_weight_bytes", 0) + " bytes of weights per step"},
      {"weights", j["compute_type"].get<std::string>(), "what the weight matrices run as (--compute-type)"},
      {"sgemm", num("gemm_gflops", 2) + " GFLOP/s", std::to_string(kGemmSize) + "^3, the compute ceiling"},
      {"bandwidth", num("bandwidth_gbs", 2) + " GB/s", "streaming read of " + std::to_string(kStreamBytes >> 20) + " MB"},
      {"peak RSS", num("peak_rss_mb", 1) + " MB", "before the probes"},
      {"kernels", j["kernels"].get<std::string>(), "ordo's own kernels' instructions (ORDO_CPU caps them)"},
  };
  for (const auto& row : rows)
    out << "  " << std::left << std::setw(14) << row[0] << std::right << std::setw(20) << row[1] << "   " << row[2] << '\n';
}

}  // namespace ordo::tools::bench
