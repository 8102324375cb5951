// ordo serve: models behind HTTP, for many clients at once.
//
//   ordo serve                                            -> the shipped model on http://127.0.0.1:8080
//   ordo serve --model en-de=weights/sinusoidal --model german-llama --port 9000
//   curl -s localhost:8080/v1/translate -d '{"text": "cats chase dogs"}'
//
// The endpoints are in tools/cli/serve/routes.h, the request fields in requests.h, and
// what runs together in scheduler.h. The server binds 127.0.0.1 unless --host says
// otherwise; SIGTERM (or Ctrl-C) stops accepting, finishes every request in flight and
// exits 0, within --drain-timeout (past it, or at a second signal, what is left is cut
// and answered 503, and ordo exits 1).
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tools/cli/commands.h"
#include "tools/cli/common.h"
#include "tools/cli/serve/routes.h"
#include "tools/cli/serve/scheduler.h"
#include "tools/cli/stop_signals.h"

namespace ordo::tools {

namespace {

struct ServeOptions {
  std::vector<std::string> models;  // DIR, NAME or NAME=DIR
  std::string host = "127.0.0.1";
  int port = 8080;
  int threads = 0;
  int max_batch = 32;
  int max_queue = 64;
  std::string api_key;
  // Seconds a SIGTERM waits for the requests in flight: under the 30 s Kubernetes grants
  // a pod (and systemd's 90 s) before SIGKILL, so the cut requests are still answered.
  int drain_timeout = 20;
  std::string compute_type = "auto";  // --compute-type, for every model served
  int group_size = -1;                 // --group-size; -1: the compute type's default
};

struct ModelSpec {
  std::string name;
  std::string directory;
};

// "NAME=DIR", "DIR" (named after its last component) or a shipped model's name.
std::vector<ModelSpec> model_specs(const ServeOptions& options) {
  std::vector<std::string> given = options.models;
  if (given.empty()) given.push_back(default_model_directory().string());
  std::vector<ModelSpec> specs;
  std::set<std::string> names;
  for (const std::string& value : given) {
    ModelSpec spec;
    const std::size_t equals = value.find('=');
    spec.directory = equals == std::string::npos ? value : value.substr(equals + 1);
    std::error_code error;
    if (!spec.directory.empty() && !std::filesystem::is_directory(spec.directory, error))
      if (std::optional<std::filesystem::path> shipped = shipped_model(spec.directory)) spec.directory = shipped->string();
    if (equals != std::string::npos) {
      spec.name = value.substr(0, equals);
    } else {
      std::filesystem::path path = std::filesystem::path(value).lexically_normal();
      if (!path.has_filename()) path = path.parent_path();
      spec.name = path.filename().string();
    }
    if (spec.name.empty())
      throw CLI::ValidationError("--model", "'" + value + "' gives the model no name: write NAME=DIR");
    if (!names.insert(spec.name).second)
      throw CLI::ValidationError("--model", "two models are named '" + spec.name + "': name them apart with NAME=DIR");
    specs.push_back(std::move(spec));
  }
  return specs;
}

void run_serve(const ServeOptions& options) {
  const std::vector<ModelSpec> specs = model_specs(options);
  // Flags wrong for any model are usage errors before the port opens, as in every command.
  load_options("", options.compute_type, options.group_size).validate();

  // Before any thread starts: the threads ordo starts inherit the block (tools/cli/stop_signals.h).
  StopSignals stop_signals;

  serve::ServeState state;
  state.api_key = options.api_key;
  httplib::Server server;
  // A thread per request waiting for a model (up to --max-queue each) and per request in
  // its batch: beyond that, connections wait to be accepted.
  const std::size_t handlers =
      std::min<std::size_t>(specs.size() * static_cast<std::size_t>(options.max_queue + options.max_batch) + 4, 1024);
  server.new_task_queue = [handlers] { return new httplib::ThreadPool(handlers); };
  // httplib writes an answer's header and body separately: with Nagle's algorithm the body
  // waited for the client's delayed ACK, 40 ms on most answers of a keep-alive connection.
  server.set_tcp_nodelay(true);
  serve::install_routes(server, state);

  int port = options.port;
  const bool bound = port == 0 ? (port = server.bind_to_any_port(options.host)) > 0
                               : server.bind_to_port(options.host, port);
  if (!bound)
    throw Error("ordo serve", "cannot listen on " + options.host + ":" + std::to_string(options.port),
                "another program may use the port (choose one with --port), or --host is not an address of this machine");
  std::cout << "ordo serve: listening on http://" << options.host << ":" << port << " (loading "
            << specs.size() << (specs.size() == 1 ? " model)" : " models)") << std::endl;
  std::atomic<bool> http_done{false};
  std::thread http([&server, &http_done] {
    server.listen_after_bind();
    http_done = true;
  });
  // stop() does nothing before listening has begun: a model that fails to load must not
  // leave the listener running behind it.
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  // /health answers 503 while the models load.
  try {
    for (const ModelSpec& spec : specs) {
      CommonOptions common;
      common.model_dir = spec.directory;
      common.threads = options.threads;
      common.compute_type = options.compute_type;
      common.group_size = options.group_size;
      serve::ServedModel& served = state.models.emplace_back(serve::ServedModel{spec.name, load_model(common), {}, {}});
      if (served.model.is_decoder_only()) served.checker.emplace(served.model);
      served.scheduler = std::make_unique<serve::ContinuousScheduler>(
          spec.name, served.model, serve::SchedulerLimits{options.max_batch, options.max_queue}, state.metrics);
    }
  } catch (...) {
    server.stop();
    http.join();
    throw;
  }
  state.ready = true;
  std::cout << "ordo serve: ready:";
  for (const serve::ServedModel& m : state.models)
    std::cout << ' ' << m.name << (m.model.is_decoder_only() ? " (/v1/completions)" : " (/v1/translate, /translate)");
  std::cout << std::endl;

  // Until a signal: polled, since the handler may run on a thread not ours.
  stop_signals.unblock_here();
  while (!stop_signals.wait_beyond(0, std::chrono::hours(1))) {
  }
  state.draining = true;
  std::cout << "ordo serve: " << stop_signals.first_name()
            << ": no new connections; finishing the requests in flight (at most " << options.drain_timeout
            << " s, or until a second signal)" << std::endl;
  // The drain is bounded: a supervisor (systemd, Kubernetes) kills a process that
  // outlives its grace period, and then every request in flight would be lost without an
  // answer. Past --drain-timeout, or at a second SIGTERM or Ctrl-C, what is still in
  // flight is cut at its next decoder step and answered 503 with Retry-After.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options.drain_timeout);
  const auto expire_if_due = [&](std::chrono::milliseconds wait) {
    const bool second = stop_signals.wait_beyond(1, wait);
    if (!state.drain_expired && (second || std::chrono::steady_clock::now() >= deadline)) {
      state.drain_expired = true;
      std::cout << "ordo serve: " << (second ? "a second signal" : "the drain timeout passed")
                << ": cutting the requests still in flight" << std::endl;
    }
  };
  // A stream whose header is about to go out must start writing before the server stops:
  // httplib would send the header and skip the body (routes.h, unstarted_streams).
  while (state.unstarted_streams > 0 && !state.drain_expired) expire_if_due(std::chrono::milliseconds(1));
  server.stop();  // returns at once; listen_after_bind returns when every handler has
  while (!http_done) expire_if_due(std::chrono::milliseconds(50));
  http.join();
  for (serve::ServedModel& m : state.models) m.scheduler->stop();
  std::cout << "ordo serve: stopped" << std::endl;
  if (state.cut_short > 0)
    throw Error("ordo serve", "the drain was cut short: " + std::to_string(state.cut_short.load()) +
                                  " request(s) in flight were answered 503 (Retry-After) instead of finishing",
                "give long requests more time with --drain-timeout SECONDS (now " +
                    std::to_string(options.drain_timeout) + ")");
}

}  // namespace

void setup_serve(CLI::App& app) {
  auto options = std::make_shared<ServeOptions>();
  CLI::App* command = app.add_subcommand(
      "serve",
      "Serve models over HTTP to many clients at once (JSON in and out):\n"
      "  POST /v1/translate    {\"text\": \"cats chase dogs\" or [...], \"beam_size\": 4, ...}\n"
      "  POST /translate       LibreTranslate's API: {\"q\": ..., \"source\": \"en\", \"target\": \"de\"}\n"
      "  POST /v1/completions  OpenAI's completions API (\"stream\": true: server-sent events)\n"
      "  GET  /v1/models, /health (200 ready, 503 loading or draining), /metrics (Prometheus)\n"
      "Each model decodes its clients' texts together, step by step (continuous batching): a\n"
      "request's texts join at the next decoder step while fewer than --max-batch are live,\n"
      "and leave when done; beyond --max-queue waiting requests, 503 with Retry-After.\n"
      "Binds 127.0.0.1 unless --host says\n"
      "otherwise. SIGTERM or Ctrl-C: no new connections, every request in flight is\n"
      "answered, exit 0 (within --drain-timeout; what remains then is answered 503, exit 1).\n"
      "Try: ordo serve, then\n"
      "  curl -s localhost:8080/v1/translate -d '{\"text\": \"cats chase dogs\"}'");
  command
      ->add_option("-m,--model", options->models,
                   "Model to serve: a directory, a shipped model's name, or NAME=DIR to name it in requests "
                   "(\"model\": NAME; default name: the directory's). Repeat for more; the first of each kind "
                   "answers requests that name none (default: $ORDO_MODEL, else the shipped model)")
      ->type_name("[NAME=]DIR");
  command->add_option("--host", options->host, "Address to listen on (0.0.0.0: every interface)")
      ->capture_default_str();
  command->add_option("--port", options->port, "Port to listen on (0: any free port, printed at start)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  command->add_option("-t,--threads", options->threads, "Threads each model computes with (0: every core)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  add_compute_type_options(*command, options->compute_type, options->group_size);
  command->add_option("--max-batch", options->max_batch, "Most texts a model decodes at once (each decoder step)")
      ->check(CLI::Range(1, static_cast<int>(kMaxBatchSize)))
      ->capture_default_str();
  command->add_option("--max-queue", options->max_queue, "Most requests per model waiting for a place for their texts; beyond, 503")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  command->add_option("--api-key", options->api_key,
                      "Require \"Authorization: Bearer KEY\" on every request but /health (LibreTranslate "
                      "clients may send \"api_key\" instead)")
      ->envname("ORDO_API_KEY")
      ->type_name("KEY");
  command
      ->add_option("--drain-timeout", options->drain_timeout,
                   "Seconds SIGTERM (or Ctrl-C) waits for the requests in flight; past it, or at a second signal, "
                   "they are cut and answered 503 with Retry-After, and ordo exits 1 (0: cut at once)")
      ->check(CLI::Range(0, 86400))
      ->type_name("SECONDS")
      ->capture_default_str();
  command->callback([options] { run_serve(*options); });
}

}  // namespace ordo::tools
