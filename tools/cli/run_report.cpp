#include "tools/cli/run_report.h"

#include <exception>
#include <iomanip>
#include <iostream>
#include <sstream>

namespace ordo::tools {

void add_verbose_flag(CLI::App& command, bool& verbose) {
  command.add_flag("-v,--verbose", verbose,
                   "After the run, print to stderr: load time, tokens in and out, prefill (encoder and\n"
                   "prompt) and decode rates in tokens/s");
}

RunReport::RunReport(bool on)
    : on_(on), start_(Clock::now()), before_(decode_totals()), exceptions_(std::uncaught_exceptions()) {}

Model RunReport::load(const CommonOptions& options) const {
  const auto started = Clock::now();
  auto model = load_model(options);
  load_seconds_ = std::chrono::duration<double>(Clock::now() - started).count();
  return model;
}

namespace {

std::string rate(std::int64_t tokens, double seconds) {
  std::ostringstream text;
  text << std::setw(7) << tokens << " tokens in " << std::fixed << std::setprecision(4) << seconds << " s = ";
  if (seconds > 0)
    text << std::setw(10) << std::setprecision(1) << static_cast<double>(tokens) / seconds << " tokens/s";
  else
    text << "(too fast to time)";
  return text.str();
}

}  // namespace

RunReport::~RunReport() {
  if (!on_ || std::uncaught_exceptions() > exceptions_) return;
  const DecodeTotals after = decode_totals();
  const std::int64_t in = after.input_tokens - before_.input_tokens;
  const std::int64_t stepped = after.stepped_tokens - before_.stepped_tokens;
  const std::int64_t out = after.output_tokens - before_.output_tokens;
  const double prefill = after.prefill_seconds - before_.prefill_seconds;
  const double decode = after.decode_seconds - before_.decode_seconds;
  const double total = std::chrono::duration<double>(Clock::now() - start_).count();
  std::ostringstream report;
  report << std::fixed << std::setprecision(4) << "ordo: load    " << load_seconds_ << " s\n"
         << "ordo: prefill " << rate(in, prefill) << " (encoder and forced decoder input)\n"
         << "ordo: decode  " << rate(stepped, decode) << " (one decoder step per token; beams count each)\n"
         << "ordo: tokens  in " << in << ", out " << out << "\n"
         << "ordo: total   " << total << " s\n";
  std::cout.flush();  // the run's last output line first, on a terminal shared with stderr
  std::cerr << report.str() << std::flush;
}

}  // namespace ordo::tools
