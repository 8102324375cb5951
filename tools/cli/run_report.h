// --verbose (translate, generate): after a run, on stderr, the numbers llama.cpp users
// look for: the model's load time, tokens in and out, and the rates of prefill (the
// encoder and a prompt, read at once) and decode (one step per token):
//
//   ordo: load      0.004 s
//   ordo: prefill       4 tokens in 0.0003 s =  13000.0 tokens/s (encoder and forced decoder input)
//   ordo: decode        4 tokens in 0.0011 s =   3600.0 tokens/s (one decoder step per token)
//   ordo: tokens    in 4, out 4
//   ordo: total     0.006 s
#pragma once

#include <chrono>
#include <memory>

#include <CLI/CLI.hpp>

#include "tools/cli/common.h"

namespace ordo::tools {

// Adds --verbose to a command.
void add_verbose_flag(CLI::App& command, bool& verbose);

// One run's report: made before the model is loaded, printed (when `on`) as it goes out
// of scope after a run that did not throw. The decode numbers are the engine's
// decode_totals() over the run.
class RunReport {
 public:
  explicit RunReport(bool on);
  ~RunReport();
  RunReport(const RunReport&) = delete;
  RunReport& operator=(const RunReport&) = delete;

  // load_model(options), timed.
  Model load(const CommonOptions& options) const;

 private:
  using Clock = std::chrono::steady_clock;
  bool on_;
  Clock::time_point start_;
  DecodeTotals before_;
  mutable double load_seconds_ = 0;
  int exceptions_ = 0;  // in flight when made: a report is printed only after a clean run
};

}  // namespace ordo::tools
