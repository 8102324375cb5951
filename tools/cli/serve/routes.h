// ordo serve's endpoints: HTTP in, jobs to a model's scheduler, JSON out.
//
//   POST /v1/translate    ordo's own translation API
//   POST /translate       LibreTranslate's (q, source, target, format)
//   POST /v1/completions  OpenAI's completions API, streamed as server-sent events with "stream": true
//   GET  /v1/models       the models served
//   GET  /health          200 ready, 503 loading or draining
//   GET  /metrics         Prometheus text
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ordo/ordo.hpp>

#include "tools/cli/serve/metrics.h"
#include "tools/cli/serve/scheduler.h"

namespace httplib {
class Server;
}

namespace ordo::tools::serve {

// The largest request body accepted (413 beyond): far more than any text a model reads
// (4096 tokens), far less than would hurt the server.
inline constexpr std::size_t kMaxBodyBytes = 1 << 20;

struct ServedModel {
  std::string name;
  Model model;
  std::optional<Generator> checker;  // decoder-only models: checks prompts before they queue
  std::unique_ptr<Scheduler> scheduler;
};

// What the routes share. The models are set once, before `ready`; the flags change
// while the server runs.
struct ServeState {
  std::vector<ServedModel> models;  // the first is the default
  std::string api_key;              // empty: no key needed
  Metrics metrics;
  std::atomic<bool> ready{false};
  std::atomic<bool> draining{false};
  // Set when the drain has run out of time (ordo serve --drain-timeout, or a second
  // SIGTERM): every job in flight counts as abandoned, so its scheduler drops it or stops
  // it at the next decoder step, and its client gets 503 with Retry-After (a load
  // balancer sends it to another replica: no answer had begun).
  std::atomic<bool> drain_expired{false};
  std::atomic<std::size_t> cut_short{0};  // requests answered so, for the exit message
  // Streamed answers whose handler has returned but whose content provider has not yet
  // run. httplib skips a provider that has not started once the server stops (its header
  // goes out with no body, and the client sees a broken response), so the drain waits
  // for this to reach 0 before it stops the server. See PendingStream in routes.cpp.
  std::atomic<int> unstarted_streams{0};

  // The model a request names ("": the default); nullptr when none has that name.
  ServedModel* find(const std::string& name);
  std::vector<ModelGauges> gauges() const;
};

// Registers every endpoint, the body limit and the error pages on `server`.
void install_routes(httplib::Server& server, ServeState& state);

}  // namespace ordo::tools::serve
