// ordo serve's counters, rendered in Prometheus' text format (GET /metrics). Thread-safe:
// the HTTP threads count requests, the schedulers count batches and tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace ordo::tools::serve {

// A Prometheus histogram: cumulative counts per upper bound, their sum and count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // Appends its _bucket, _sum and _count lines for metric `name` with extra `labels`
  // ("model=\"x\"", or empty).
  void render(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;  // per bound, not cumulative; the last is +Inf
  double sum_ = 0;
  std::uint64_t count_ = 0;
};

// What a scheduler reports about its model at render time.
struct ModelGauges {
  std::string model;
  std::size_t queued = 0;  // requests waiting for the model
  std::size_t live = 0;    // sequences in the batch being decoded
};

class Metrics {
 public:
  Metrics();

  // One answered request: its endpoint ("/v1/translate"), status and seconds taken.
  void request(const std::string& endpoint, int status, double seconds);
  // One decoder step a model ran, with `texts` live texts (sources or prompts).
  void step(const std::string& model, std::size_t texts);
  // One answered job's tokens: read (sources, prompts) and written.
  void tokens(const std::string& model, std::int64_t tokens_in, std::int64_t tokens_out);

  // The Prometheus text; `gauges` gives each model's queue depth and live sequences.
  std::string render(const std::vector<ModelGauges>& gauges) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::uint64_t> requests_;  // (endpoint, status)
  std::map<std::string, Histogram> latency_;                        // per endpoint
  std::map<std::string, Histogram> batch_sizes_;                    // per model
  std::map<std::string, std::int64_t> tokens_in_, tokens_out_;      // per model
};

}  // namespace ordo::tools::serve
