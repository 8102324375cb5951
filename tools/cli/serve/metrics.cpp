#include "tools/cli/serve/metrics.h"

#include <algorithm>
#include <sstream>

namespace ordo::tools::serve {

namespace {

const std::vector<double> kLatencyBounds{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
const std::vector<double> kBatchBounds{1, 2, 4, 8, 16, 32, 64, 128, 256};

std::string number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

std::string label(const std::string& name, const std::string& value) {
  std::string escaped;
  for (char c : value) {
    if (c == '\\' || c == '"') escaped += '\\';
    if (c == '\n') {
      escaped += "\\n";
      continue;
    }
    escaped += c;
  }
  return name + "=\"" + escaped + "\"";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const auto at = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++counts_[static_cast<std::size_t>(at)];
  sum_ += value;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  const std::string prefix = labels.empty() ? "" : labels + ",";
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? number(bounds_[i]) : "+Inf";
    out += name + "_bucket{" + prefix + "le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  const std::string braces = labels.empty() ? "" : "{" + labels + "}";
  out += name + "_sum" + braces + " " + number(sum_) + "\n";
  out += name + "_count" + braces + " " + std::to_string(count_) + "\n";
}

Metrics::Metrics() = default;

void Metrics::request(const std::string& endpoint, int status, double seconds) {
  const std::lock_guard lock(mutex_);
  ++requests_[{endpoint, status}];
  latency_.try_emplace(endpoint, kLatencyBounds).first->second.observe(seconds);
}

void Metrics::step(const std::string& model, std::size_t texts) {
  const std::lock_guard lock(mutex_);
  batch_sizes_.try_emplace(model, kBatchBounds).first->second.observe(static_cast<double>(texts));
}

void Metrics::tokens(const std::string& model, std::int64_t tokens_in, std::int64_t tokens_out) {
  const std::lock_guard lock(mutex_);
  tokens_in_[model] += tokens_in;
  tokens_out_[model] += tokens_out;
}

std::string Metrics::render(const std::vector<ModelGauges>& gauges) const {
  const std::lock_guard lock(mutex_);
  std::string out;
  out += "# HELP ordo_requests_total HTTP requests answered, by endpoint and status.\n"
         "# TYPE ordo_requests_total counter\n";
  for (const auto& [key, count] : requests_)
    out += "ordo_requests_total{" + label("endpoint", key.first) + "," + label("status", std::to_string(key.second)) +
           "} " + std::to_string(count) + "\n";
  out += "# HELP ordo_request_duration_seconds Time from a request's arrival to its answer.\n"
         "# TYPE ordo_request_duration_seconds histogram\n";
  for (const auto& [endpoint, histogram] : latency_)
    histogram.render(out, "ordo_request_duration_seconds", label("endpoint", endpoint));
  out += "# HELP ordo_batch_size Texts (sources or prompts) live in each decoder step a model ran.\n"
         "# TYPE ordo_batch_size histogram\n";
  for (const auto& [model, histogram] : batch_sizes_) histogram.render(out, "ordo_batch_size", label("model", model));
  out += "# HELP ordo_tokens_in_total Tokens read: sources (eos included) and prompts (bos included).\n"
         "# TYPE ordo_tokens_in_total counter\n";
  for (const auto& [model, tokens] : tokens_in_)
    out += "ordo_tokens_in_total{" + label("model", model) + "} " + std::to_string(tokens) + "\n";
  out += "# HELP ordo_tokens_out_total Tokens generated (of each text's best hypothesis).\n"
         "# TYPE ordo_tokens_out_total counter\n";
  for (const auto& [model, tokens] : tokens_out_)
    out += "ordo_tokens_out_total{" + label("model", model) + "} " + std::to_string(tokens) + "\n";
  out += "# HELP ordo_queue_depth Requests waiting for their model.\n# TYPE ordo_queue_depth gauge\n";
  for (const ModelGauges& g : gauges)
    out += "ordo_queue_depth{" + label("model", g.model) + "} " + std::to_string(g.queued) + "\n";
  out += "# HELP ordo_live_sequences Texts a model is decoding now (its live set).\n# TYPE ordo_live_sequences gauge\n";
  for (const ModelGauges& g : gauges)
    out += "ordo_live_sequences{" + label("model", g.model) + "} " + std::to_string(g.live) + "\n";
  return out;
}

}  // namespace ordo::tools::serve
