#include "tools/cli/serve/routes.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <mutex>
#include <unistd.h>

#include "tools/cli/serve/connection.h"
#include "tools/cli/serve/requests.h"
#include "tools/cli/serve/stop_text.h"

namespace ordo::tools::serve {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// How clients tell errors apart: OpenAI's {"error": {"message", "type", "param", "code"}}
// on /v1/*, LibreTranslate's {"error": "..."} on /translate.
enum class Dialect { OpenAI, LibreTranslate };

// An answer other than 200, thrown by a route and written by endpoint().
struct Refusal {
  int status;
  std::string message;
  std::string param;  // the request field at fault, if one is
  std::string type = "invalid_request_error";
  int retry_after = 0;  // seconds; 0: no Retry-After
};

// nginx's status for "the client closed the connection before the answer": counted in
// /metrics, never seen by the (gone) client.
constexpr int kClientClosed = 499;

std::string dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

void write_error(httplib::Response& res, Dialect dialect, const Refusal& refusal) {
  res.status = refusal.status;
  json body;
  if (dialect == Dialect::LibreTranslate)
    body = {{"error", refusal.message}};
  else
    body = {{"error",
             {{"message", refusal.message},
              {"type", refusal.type},
              {"param", refusal.param.empty() ? json(nullptr) : json(refusal.param)},
              {"code", nullptr}}}};
  if (refusal.retry_after > 0) res.set_header("Retry-After", std::to_string(refusal.retry_after));
  if (refusal.status == 401) res.set_header("WWW-Authenticate", "Bearer");
  res.set_content(dump(body), "application/json");
}

bool authorized(const ServeState& state, const httplib::Request& req) {
  return state.api_key.empty() || req.get_header_value("Authorization") == "Bearer " + state.api_key;
}

Refusal unauthorized() {
  return {401, "a valid API key is required: send the header Authorization: Bearer KEY (ordo serve --api-key)", "",
          "authentication_error"};
}

// What a route tells endpoint(): when it answers with a stream, the stream records the
// request in /metrics when it ends, not the handler.
struct Context {
  Clock::time_point start = Clock::now();
  bool recorded_later = false;
};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

using Route = std::function<void(const httplib::Request&, httplib::Response&, Context&)>;

// A model endpoint: the key, the server's state, then the route; every refusal in the
// endpoint's dialect; every answer counted.
httplib::Server::Handler endpoint(ServeState& state, const std::string& path, Dialect dialect, bool key_in_body,
                                  Route route) {
  return [&state, path, dialect, key_in_body, route](const httplib::Request& req, httplib::Response& res) {
    Context context;
    try {
      if (!key_in_body && !authorized(state, req)) throw unauthorized();
      if (state.draining) throw Refusal{503, "the server is shutting down", "", "server_error", 1};
      if (!state.ready) throw Refusal{503, "the models are still loading", "", "server_error", 1};
      route(req, res, context);
      if (res.status == -1) res.status = 200;  // what httplib would send; counted below
    } catch (const Refusal& refusal) {
      write_error(res, dialect, refusal);
    } catch (const BadRequest& e) {
      write_error(res, dialect, {400, e.what(), e.field()});
    } catch (const QueueFull& e) {
      write_error(res, dialect, {503, e.what(), "", "server_error", 1});
    } catch (const std::exception& e) {
      write_error(res, dialect, {500, std::string("internal error: ") + e.what(), "", "server_error"});
    }
    if (!context.recorded_later) state.metrics.request(path, res.status, seconds_since(context.start));
  };
}

// The model a request names, or with none the first served model the endpoint can use.
ServedModel& model_for(ServeState& state, const std::string& name, Job::Kind kind) {
  const bool translate = kind == Job::Kind::Translate;
  if (name.empty()) {
    for (ServedModel& m : state.models)
      if (m.model.is_decoder_only() != translate) return m;
    throw BadRequest("model", std::string("no model served here ") +
                                  (translate ? "translates (all are decoder-only: use /v1/completions)"
                                             : "continues prompts (all are encoder-decoder: use /v1/translate)"));
  }
  ServedModel* m = state.find(name);
  if (!m) {
    std::string names;
    for (const ServedModel& served : state.models) names += (names.empty() ? "" : ", ") + served.name;
    throw Refusal{404, "model '" + name + "' is not served here (served: " + names + ")", "model"};
  }
  if (translate && m->model.is_decoder_only())
    throw BadRequest("model", "'" + name + "' is decoder-only: it continues prompts (use /v1/completions)");
  if (!translate && !m->model.is_decoder_only())
    throw BadRequest("model", "'" + name + "' is an encoder-decoder model: it translates (use /v1/translate)");
  return *m;
}

void check_length(const ServedModel& m, int length, const std::string& field) {
  if (length > m.model.max_output_tokens())
    throw BadRequest(field, "is " + std::to_string(length) + ", beyond what model '" + m.name + "' can write (" +
                                std::to_string(m.model.max_output_tokens()) + " tokens)");
}

// Counts a streamed answer in ServeState::unstarted_streams from before the job is
// queued until its content provider first runs (or the response is dropped unsent).
// Counting first and then reading `draining` closes the race with the drain, which sets
// `draining` and then waits for the count: either the drain sees this stream and waits
// for it, or this stream sees the drain and is refused before anything is sent.
class PendingStream {
 public:
  explicit PendingStream(ServeState& state) : count_(state.unstarted_streams) {
    ++count_;
    if (state.draining) {
      started();
      throw Refusal{503, "the server is shutting down", "", "server_error", 1};
    }
  }
  PendingStream(const PendingStream&) = delete;
  PendingStream& operator=(const PendingStream&) = delete;
  ~PendingStream() { started(); }
  void started() {
    if (!started_.exchange(true)) --count_;
  }

 private:
  std::atomic<int>& count_;
  std::atomic<bool> started_{false};
};

// What a request cut short by the end of the drain is told: it was not done, and
// another server (or this one, restarted) may do it.
Refusal cut_short(ServeState& state) {
  ++state.cut_short;
  return {503, "the server shut down before this request was done (ordo serve --drain-timeout): send it again", "",
          "server_error", 1};
}

// Queues a job for the request's client and waits for it.
Outcome run(ServeState& state, ServedModel& m, Job job, const httplib::Request& req) {
  auto watch = std::make_shared<ClientWatch>(req.remote_addr, req.remote_port, req.local_port);
  job.abandoned = [watch, &state] { return state.drain_expired || watch->gone(); };
  std::future<Outcome> future;
  try {
    future = m.scheduler->submit(std::move(job));
  } catch (const QueueFull&) {
    throw;
  } catch (const Error& e) {
    throw Refusal{503, e.what(), "", "server_error", 1};
  }
  Outcome outcome = future.get();
  if (outcome.cancelled && state.drain_expired) throw cut_short(state);
  if (outcome.cancelled) throw Refusal{kClientClosed, "the client closed the connection", "", "server_error"};
  if (!outcome.error.empty()) throw Refusal{500, outcome.error, "", "server_error"};
  return outcome;
}

json hypothesis_json(const Hypothesis& h) { return {{"text", h.text}, {"ids", h.ids}, {"score", h.score}}; }

// POST /v1/translate
void translate(ServeState& state, const httplib::Request& req, httplib::Response& res) {
  TranslateRequest request = parse_translate(parse_object(req.body));
  ServedModel& m = model_for(state, request.model, Job::Kind::Translate);
  check_length(m, request.decoding.max_length, "max_length");
  Job job;
  job.kind = Job::Kind::Translate;
  // The model's generation_config.json under the fields the body gave, as `ordo
  // translate` puts it under its flags (a Marian model's beams and banned pad).
  job.decoding = m.model.with_generation_defaults(request.decoding, request.chosen);
  job.texts = request.texts;
  if (!m.model.language_codes().empty()) {
    // A multilingual model: both codes, known to it, or 400 naming the field (and the codes).
    job.source_lang = request.source_lang;
    job.target_lang = request.target_lang;
    try {
      (void)m.model.language_id(job.source_lang, "source_lang");  // missing or unknown: lists the codes
      (void)m.model.language_id(job.target_lang, "target_lang");
    } catch (const OptionError& e) {
      throw BadRequest(e.field(), e.problem());
    }
  }
  const Outcome outcome = run(state, m, std::move(job), req);
  json translations = json::array();
  for (const Translation& t : outcome.translations) {
    if (!t.ok()) {
      translations.push_back({{"error", t.error}});
      continue;
    }
    json entry = hypothesis_json(t.best());
    if (request.hypotheses) {
      entry["hypotheses"] = json::array();
      for (const Hypothesis& h : t.hypotheses) entry["hypotheses"].push_back(hypothesis_json(h));
    }
    translations.push_back(std::move(entry));
  }
  res.set_content(dump({{"model", m.name}, {"translations", std::move(translations)}}), "application/json");
}

// A LibreTranslate form (application/x-www-form-urlencoded) as the JSON it stands for.
json form_json(const httplib::Request& req) {
  json body = json::object();
  for (const auto& [key, value] : req.params) {
    if (key == "q" && req.get_param_value_count("q") > 1) {
      if (!body.contains("q")) body["q"] = json::array();
      body["q"].push_back(value);
    } else {
      body[key] = value;
    }
  }
  return body;
}

// POST /translate: LibreTranslate. The model is the one named "SOURCE-TARGET" (ordo
// serve --model en-de=DIR), else the first translation model; greedy search.
void libretranslate(ServeState& state, const httplib::Request& req, httplib::Response& res) {
  // A form, unless the body is a JSON object: `curl -d '{...}'` labels JSON as a form.
  const std::size_t first = req.body.find_first_not_of(" \t\r\n");
  const bool form = req.get_header_value("Content-Type").starts_with("application/x-www-form-urlencoded") &&
                    (first == std::string::npos || req.body[first] != '{');
  json body;
  try {
    body = form ? form_json(req) : parse_object(req.body);
  } catch (const BadRequest&) {
    if (!authorized(state, req)) throw unauthorized();
    throw;
  }
  const LibreTranslateRequest request = parse_libretranslate(body);
  if (!authorized(state, req) && (state.api_key.empty() || request.api_key != state.api_key)) throw unauthorized();
  const std::string pair = request.source + "-" + request.target;
  ServedModel& m = model_for(state, state.find(pair) ? pair : "", Job::Kind::Translate);
  Job job;
  job.kind = Job::Kind::Translate;
  job.decoding = m.model.with_generation_defaults(job.decoding, {});  // as `ordo translate` without flags
  job.texts = request.texts;
  const Outcome outcome = run(state, m, std::move(job), req);
  json translated = json::array();
  for (std::size_t i = 0; i < outcome.translations.size(); ++i) {
    const Translation& t = outcome.translations[i];
    if (!t.ok()) throw BadRequest(request.list ? "q[" + std::to_string(i) + "]" : "q", t.error);
    translated.push_back(t.best().text);
  }
  res.set_content(dump({{"translatedText", request.list ? translated : translated.front()}}), "application/json");
}

// A completion's id: unique within this server's life, and across replicas by the pid.
std::string completion_id() {
  static std::atomic<std::uint64_t> next{0};
  return "cmpl-" + std::to_string(::getpid()) + "-" + std::to_string(next++);
}

// One prompt's continuation as it streams: what has been shown, and its tokens.
struct Choice {
  explicit Choice(const std::vector<std::string>& stops) : stop(stops) {}
  StopText stop;
  int generated = 0;     // tokens, eos excluded
  std::size_t offset = 0;  // text_offset of the next token: the prompt's length, then each token's text
  json tokens = json::array(), token_logprobs = json::array(), text_offsets = json::array();
};

// A completion run token by token (stream, stop or logprobs). The scheduler's thread
// fills it through on_token; the HTTP thread writes its events.
struct TokenStream {
  std::string id, model;
  std::int64_t created = 0;
  bool stream = false, logprobs = false;
  bool include_usage = false;  // every event has "usage": null, and a last one the counts
  std::vector<Choice> choices;
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<std::string> events;  // server-sent events not yet written (stream)

  json chunk(std::size_t index, const std::string& text, json logprobs_json, json finish) const {
    json event = {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model},
                  {"choices", json::array({{{"text", text}, {"index", index}, {"logprobs", std::move(logprobs_json)},
                                            {"finish_reason", std::move(finish)}}})}};
    if (include_usage) event["usage"] = nullptr;
    return event;
  }
  // The last event with "stream_options": {"include_usage": true}, as OpenAI sends it.
  json usage_chunk(json counts) const {
    return {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model},
            {"choices", json::array()}, {"usage", std::move(counts)}};
  }
  void push(const json& event) {
    {
      const std::lock_guard lock(mutex);
      events.push_back("data: " + dump(event) + "\n\n");
    }
    ready.notify_one();
  }
  // Runs on the scheduler's thread for each token of prompt `index`.
  bool on_token(std::size_t index, const GeneratedToken& token) {
    if (token.eos) return true;
    Choice& c = choices[index];
    ++c.generated;
    const std::string shown = c.stop.feed(token.text);
    json token_json = nullptr;
    if (logprobs && !c.stop.stopped()) {
      c.tokens.push_back(token.text);
      c.token_logprobs.push_back(token.logprob);
      c.text_offsets.push_back(c.offset);
      token_json = {{"tokens", {token.text}}, {"token_logprobs", {token.logprob}}, {"top_logprobs", nullptr},
                    {"text_offset", {c.offset}}};
    }
    c.offset += token.text.size();
    if (stream && (!shown.empty() || !token_json.is_null())) push(chunk(index, shown, token_json, nullptr));
    return !c.stop.stopped();
  }
  json logprobs_json(const Choice& c) const {
    if (!logprobs) return nullptr;
    return {{"tokens", c.tokens}, {"token_logprobs", c.token_logprobs}, {"top_logprobs", nullptr},
            {"text_offset", c.text_offsets}};
  }
};

std::string finish_reason(const Generation& g, bool stopped) {
  return stopped || (g.ok() && !g.hypotheses.empty() && g.best().finished) ? "stop" : "length";
}

json usage(std::int64_t prompt_tokens, std::int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

// POST /v1/completions
void complete(ServeState& state, const httplib::Request& req, httplib::Response& res, Context& context) {
  const CompletionRequest request = parse_completion(parse_object(req.body));
  ServedModel& m = model_for(state, request.model, Job::Kind::Complete);
  check_length(m, request.max_tokens, "max_tokens");
  // A prompt that cannot be continued is refused before it queues.
  std::int64_t prompt_tokens = 0;
  std::vector<std::size_t> prompt_lengths;
  for (std::size_t i = 0; i < request.prompts.size(); ++i) {
    const std::string field = request.prompts.size() > 1 ? "prompt[" + std::to_string(i) + "]" : "prompt";
    const Generation g = m.checker->prepare(request.prompts[i]);
    if (!g.ok()) throw BadRequest(field, g.error);
    const auto length = static_cast<std::int64_t>(g.prompt_ids.size());
    if (length + request.max_tokens > m.model.max_output_tokens())
      throw BadRequest("max_tokens", std::to_string(request.max_tokens) + " new tokens after the " +
                                         std::to_string(length) + " of " + field + " exceed what model '" + m.name +
                                         "' reads (" + std::to_string(m.model.max_output_tokens()) + " tokens)");
    prompt_tokens += length;
  }
  Job job;
  job.kind = Job::Kind::Complete;
  job.decoding = request.decoding;
  job.texts = request.prompts;

  const std::string id = completion_id();
  const std::int64_t created = std::time(nullptr);
  if (!request.stream && !request.logprobs && request.stop.empty()) {  // batched with other requests
    const Outcome outcome = run(state, m, std::move(job), req);
    json choices = json::array();
    std::int64_t completion_tokens = 0;
    for (std::size_t i = 0; i < outcome.generations.size(); ++i) {
      const Generation& g = outcome.generations[i];
      if (!g.ok()) throw Refusal{500, g.error, "", "server_error"};
      const Hypothesis& h = g.best();
      completion_tokens += static_cast<std::int64_t>(h.ids.size()) - (h.finished ? 1 : 0);
      choices.push_back({{"text", h.text}, {"index", i}, {"logprobs", nullptr}, {"finish_reason", finish_reason(g, false)}});
    }
    res.set_content(dump({{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", m.name},
                          {"choices", std::move(choices)}, {"usage", usage(prompt_tokens, completion_tokens)}}),
                    "application/json");
    return;
  }

  auto stream = std::make_shared<TokenStream>();
  stream->id = id;
  stream->model = m.name;
  stream->created = created;
  stream->stream = request.stream;
  stream->logprobs = request.logprobs;
  stream->include_usage = request.include_usage;
  for (const std::string& prompt : request.prompts) {
    stream->choices.emplace_back(request.stop);
    stream->choices.back().offset = prompt.size();
  }
  job.on_token = [stream](std::size_t index, const GeneratedToken& token) { return stream->on_token(index, token); };
  // The ends of the choices, once the job is done: what was held back, and why it ended.
  const auto finish = [stream](const Outcome& outcome, std::int64_t& completion_tokens) {
    std::vector<std::pair<std::string, std::string>> ends;  // (rest of the text, finish_reason)
    for (std::size_t i = 0; i < stream->choices.size(); ++i) {
      const Generation& g = outcome.generations.at(i);
      if (!g.ok()) throw Refusal{500, g.error, "", "server_error"};
      Choice& c = stream->choices[i];
      completion_tokens += c.generated;
      ends.emplace_back(c.stop.flush(), finish_reason(g, outcome.stopped.at(i) || c.stop.stopped()));
    }
    return ends;
  };

  if (!request.stream) {
    const Outcome outcome = run(state, m, std::move(job), req);
    std::int64_t completion_tokens = 0;
    const auto ends = finish(outcome, completion_tokens);
    json choices = json::array();
    for (std::size_t i = 0; i < ends.size(); ++i)
      choices.push_back({{"text", stream->choices[i].stop.shown()}, {"index", i},
                         {"logprobs", stream->logprobs_json(stream->choices[i])}, {"finish_reason", ends[i].second}});
    res.set_content(dump({{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", m.name},
                          {"choices", std::move(choices)}, {"usage", usage(prompt_tokens, completion_tokens)}}),
                    "application/json");
    return;
  }

  // Streamed: queued now (a full queue is still a 503), written by the content provider
  // on this same thread once the handler returns.
  auto pending = std::make_shared<PendingStream>(state);
  auto watch = std::make_shared<ClientWatch>(req.remote_addr, req.remote_port, req.local_port);
  auto client_gone = std::make_shared<std::atomic<bool>>(false);
  job.abandoned = [watch, client_gone, &state] { return state.drain_expired || *client_gone || watch->gone(); };
  std::shared_ptr<std::future<Outcome>> future;
  try {
    future = std::make_shared<std::future<Outcome>>(m.scheduler->submit(std::move(job)));
  } catch (const QueueFull&) {
    throw;
  } catch (const Error& e) {
    throw Refusal{503, e.what(), "", "server_error", 1};
  }
  res.set_header("Cache-Control", "no-cache");
  auto status = std::make_shared<int>(200);  // what /metrics counts: 499 when the client left
  res.set_chunked_content_provider(
      "text/event-stream",
      [&state, stream, future, client_gone, finish, status, prompt_tokens, pending](std::size_t,
                                                                                     httplib::DataSink& sink) {
        pending->started();
        const auto write = [&](const std::string& event) {
          if (*client_gone || !sink.write(event.data(), event.size())) *client_gone = true;
          return !*client_gone;
        };
        for (;;) {
          // Read before draining: every event pushed before the job ended is drained below.
          const bool done = future->wait_for(std::chrono::seconds(0)) == std::future_status::ready;
          std::deque<std::string> events;
          {
            std::unique_lock lock(stream->mutex);
            if (!done) stream->ready.wait_for(lock, std::chrono::milliseconds(20), [&] { return !stream->events.empty(); });
            events.swap(stream->events);
          }
          for (const std::string& event : events)
            if (!write(event)) break;
          if (*client_gone) {
            future->wait();  // the job stops at its next step; its tokens must not outlive it
            *status = kClientClosed;
            return false;
          }
          if (done) break;
        }
        const Outcome outcome = future->get();
        if (outcome.cancelled && !state.drain_expired) {
          *status = kClientClosed;
          return false;
        }
        try {
          // Its header is sent: the client learns of the cut from an error event.
          if (outcome.cancelled) throw cut_short(state);
          if (!outcome.error.empty()) throw Refusal{500, outcome.error, "", "server_error"};
          std::int64_t completion_tokens = 0;
          const auto ends = finish(outcome, completion_tokens);
          for (std::size_t i = 0; i < ends.size(); ++i)
            if (!write("data: " + dump(stream->chunk(i, ends[i].first, nullptr, ends[i].second)) + "\n\n")) return false;
          if (stream->include_usage &&
              !write("data: " + dump(stream->usage_chunk(usage(prompt_tokens, completion_tokens))) + "\n\n"))
            return false;
        } catch (const Refusal& refusal) {
          *status = refusal.status;
          write("data: " + dump({{"error", {{"message", refusal.message}, {"type", refusal.type}}}}) + "\n\n");
        }
        if (!write("data: [DONE]\n\n")) return false;
        sink.done();
        return true;
      },
      [&state, start = context.start, status](bool) {
        state.metrics.request("/v1/completions", *status, seconds_since(start));
      });
  context.recorded_later = true;
}

json models_json(const ServeState& state) {
  json data = json::array();
  for (const ServedModel& m : state.models)
    data.push_back({{"id", m.name},
                    {"object", "model"},
                    {"created", 0},
                    {"owned_by", "ordo"},
                    {"ordo", {{"model_type", m.model.model_type()},
                              {"endpoint", m.model.is_decoder_only() ? "/v1/completions" : "/v1/translate"},
                              {"max_input_tokens", m.model.max_input_tokens()},
                              {"max_output_tokens", m.model.max_output_tokens()}}}});
  return {{"object", "list"}, {"data", std::move(data)}};
}

}  // namespace

ServedModel* ServeState::find(const std::string& name) {
  for (ServedModel& m : models)
    if (m.name == name) return &m;
  return nullptr;
}

std::vector<ModelGauges> ServeState::gauges() const {
  std::vector<ModelGauges> out;
  for (const ServedModel& m : models) out.push_back(m.scheduler->gauges());
  return out;
}

void install_routes(httplib::Server& server, ServeState& state) {
  server.set_payload_max_length(kMaxBodyBytes);
  server.Post("/v1/translate",
              endpoint(state, "/v1/translate", Dialect::OpenAI, false,
                       [&state](const httplib::Request& req, httplib::Response& res, Context&) {
                         translate(state, req, res);
                       }));
  server.Post("/translate", endpoint(state, "/translate", Dialect::LibreTranslate, true,
                                     [&state](const httplib::Request& req, httplib::Response& res, Context&) {
                                       libretranslate(state, req, res);
                                     }));
  server.Post("/v1/completions",
              endpoint(state, "/v1/completions", Dialect::OpenAI, false,
                       [&state](const httplib::Request& req, httplib::Response& res, Context& context) {
                         complete(state, req, res, context);
                       }));
  server.Get("/v1/models", endpoint(state, "/v1/models", Dialect::OpenAI, false,
                                    [&state](const httplib::Request&, httplib::Response& res, Context&) {
                                      res.set_content(dump(models_json(state)), "application/json");
                                    }));
  // Health and metrics answer while loading and draining, and without the key: a load
  // balancer and Prometheus ask them.
  server.Get("/health", [&state](const httplib::Request&, httplib::Response& res) {
    const char* status = state.draining ? "draining" : !state.ready ? "loading" : "ok";
    res.status = state.draining || !state.ready ? 503 : 200;
    res.set_content(dump({{"status", status}}), "application/json");
  });
  server.Get("/metrics", [&state](const httplib::Request&, httplib::Response& res) {
    res.set_content(state.metrics.render(state.ready ? state.gauges() : std::vector<ModelGauges>{}),
                    "text/plain; version=0.0.4; charset=utf-8");
  });
  // What httplib answers itself (no such endpoint: 404; a body beyond the limit: 413; a
  // request it cannot parse: 400) gets a JSON body too, and is counted.
  server.set_error_handler(httplib::Server::HandlerWithResponse([&state](const httplib::Request& req,
                                                                               httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // a route's own answer
    std::string message = "no such endpoint: " + req.method + " " + req.path +
                          " (POST /v1/translate, /translate, /v1/completions; GET /v1/models, /health, /metrics)";
    // cpp-httplib (compiled into Debian's library) caps a form's body at 8192 bytes, and a
    // form is what `curl -d` labels any body: JSON sent so must be told apart from a body
    // over ordo's own limit, or the message would blame the wrong size.
    const bool form = req.get_header_value("Content-Type").starts_with("application/x-www-form-urlencoded");
    if (res.status == 413 && form && std::strtoull(req.get_header_value("Content-Length").c_str(), nullptr, 10) <= kMaxBodyBytes)
      message = "a body labelled as a form (Content-Type: application/x-www-form-urlencoded, what curl -d sends) "
                "may hold at most " + std::to_string(CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH) +
                " bytes: send JSON with the header Content-Type: application/json (up to " +
                std::to_string(kMaxBodyBytes) + " bytes)";
    else if (res.status == 413)
      message = "the request body is larger than " + std::to_string(kMaxBodyBytes) + " bytes: send fewer texts at once";
    else if (res.status != 404)
      message = "the request could not be read as HTTP";
    write_error(res, Dialect::OpenAI, {res.status, message, ""});
    const bool known = req.path == "/v1/translate" || req.path == "/translate" || req.path == "/v1/completions";
    state.metrics.request(known ? req.path : "other", res.status, 0.0);
    return httplib::Server::HandlerResponse::Handled;
  }));
}

}  // namespace ordo::tools::serve
