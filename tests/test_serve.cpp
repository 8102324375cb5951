// ordo serve, tested as its users meet it: the real binary on a free loopback port,
// talked to over HTTP (cpp-httplib's client, and a raw socket to walk away mid-request).
// Every server stops itself: SIGTERM in the fixture's teardown, SIGKILL past a timeout.
// Oracle: the ordo CLI on the same request (translate/generate --json); what the server
// answers must equal it exactly (texts and ids) whatever else it decodes at the time.
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/cli_runner.h"
#include "tests/model_factory.h"
#include "tools/cli/serve/requests.h"
#include "tools/cli/serve/stop_text.h"

namespace ordo {
namespace {

namespace serve = ordo::tools::serve;
using nlohmann::json;
using testing_support::run_ordo;
using testing_support::Running;
using testing_support::shell_quote;

const std::string kTranslationModel = std::string(ORDO_SOURCE_DIR) + "/weights/sinusoidal";
const std::string kLanguageModel = std::string(ORDO_SOURCE_DIR) + "/weights/german-llama";
constexpr double kStartSeconds = 60;    // loading two tiny models
constexpr double kRequestSeconds = 60;  // any one request, and a drain

// A running `ordo serve --port 0`: the port it printed, a client, SIGTERM at the end.
class Server {
 public:
  explicit Server(std::vector<std::string> extra = {}) {
    std::vector<std::string> arguments{"serve", "--port", "0", "--threads", "1", "--model", kTranslationModel,
                                       "--model", kLanguageModel};
    arguments.insert(arguments.end(), extra.begin(), extra.end());
    process_ = std::make_unique<Running>(arguments);
    const std::string listening = process_->read_line(kStartSeconds);
    const std::string marker = "listening on http://127.0.0.1:";
    const auto at = listening.find(marker);
    if (at == std::string::npos) throw std::runtime_error("ordo serve did not start: '" + listening + "'");
    port_ = std::stoi(listening.substr(at + marker.size()));
    const std::string ready = process_->read_line(kStartSeconds);
    if (ready.find("ready:") == std::string::npos) throw std::runtime_error("ordo serve is not ready: '" + ready + "'");
  }
  ~Server() {
    if (!process_->running()) return;
    process_->signal(SIGTERM);
    process_->wait_for(kRequestSeconds);  // past it, ~Running kills it
  }

  int port() const { return port_; }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(static_cast<time_t>(kRequestSeconds));
    c.set_write_timeout(static_cast<time_t>(kRequestSeconds));
    return c;
  }
  Running& process() { return *process_; }

  // POST `body` as JSON; the status and the parsed answer (null when not JSON).
  std::pair<int, json> post(const std::string& path, const json& body, const httplib::Headers& headers = {}) const {
    auto c = client();
    const auto r = c.Post(path.c_str(), headers, body.dump(), "application/json");
    if (!r) throw std::runtime_error("POST " + path + ": no answer (" + httplib::to_string(r.error()) + ")");
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  // The value of a /metrics sample ("ordo_queue_depth{model=\"x\"}"), or -1 when absent.
  double metric(const std::string& sample) const {
    auto c = client();
    const auto r = c.Get("/metrics");
    if (!r) return -1;
    std::istringstream lines(r->body);
    for (std::string line; std::getline(lines, line);)
      if (line.starts_with(sample + " ")) return std::stod(line.substr(sample.size() + 1));
    return -1;
  }
  // Waits until `condition` holds, polling; false after kRequestSeconds.
  static bool eventually(const std::function<bool()>& condition) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kRequestSeconds);
    while (std::chrono::steady_clock::now() < deadline) {
      if (condition()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

 private:
  std::unique_ptr<Running> process_;
  int port_ = 0;
};

// The CLI's --json lines for `arguments`.
std::vector<json> cli_json(const std::string& arguments) {
  const auto r = run_ordo(arguments + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<json> out;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) out.push_back(json::parse(line));
  return out;
}

std::string quoted(const std::vector<std::string>& texts) {
  std::string out;
  for (const std::string& t : texts) {
    out += ' ';
    out += shell_quote(t);
  }
  return out;
}

const std::vector<std::string> kSentences{"cats chase dogs", "the dog sees a cat", "birds sing",
                                          "the small cat sleeps", "dogs run"};

// One shared server for the tests that only ask it things.
class Serve : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new Server(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static Server* server_;
};
Server* Serve::server_ = nullptr;

TEST_F(Serve, GreedyTranslationsEqualTheCli) {
  const auto [status, answer] = server_->post("/v1/translate", {{"text", kSentences}});
  ASSERT_EQ(status, 200) << answer.dump();
  EXPECT_EQ(answer["model"], "sinusoidal");
  const std::vector<json> cli = cli_json("translate --model " + shell_quote(kTranslationModel) + quoted(kSentences));
  ASSERT_EQ(answer["translations"].size(), kSentences.size());
  ASSERT_EQ(cli.size(), kSentences.size());
  for (std::size_t i = 0; i < kSentences.size(); ++i) {
    const json& t = answer["translations"][i];
    EXPECT_EQ(t["text"], cli[i]["translation"]) << "sentence " << i;
    EXPECT_EQ(t["ids"], cli[i]["target_ids"]) << "sentence " << i;
    EXPECT_NEAR(t["score"].get<double>(), cli[i]["score"].get<double>(), 1e-4) << "sentence " << i;
    EXPECT_FALSE(t.contains("hypotheses"));
  }
}

TEST_F(Serve, BeamHypothesesEqualTheCli) {
  const auto [status, answer] =
      server_->post("/v1/translate", {{"text", kSentences}, {"beam_size", 4}, {"num_hypotheses", 2}});
  ASSERT_EQ(status, 200) << answer.dump();
  const std::vector<json> cli =
      cli_json("translate --beam 4 --n-best 2 --model " + shell_quote(kTranslationModel) + quoted(kSentences));
  ASSERT_EQ(cli.size(), kSentences.size());
  for (std::size_t i = 0; i < kSentences.size(); ++i) {
    const json& t = answer["translations"][i];
    ASSERT_EQ(t["hypotheses"].size(), 2u) << "sentence " << i;
    for (std::size_t h = 0; h < 2; ++h) {
      EXPECT_EQ(t["hypotheses"][h]["text"], cli[i]["hypotheses"][h]["translation"]) << i << "," << h;
      EXPECT_EQ(t["hypotheses"][h]["ids"], cli[i]["hypotheses"][h]["target_ids"]) << i << "," << h;
    }
    EXPECT_EQ(t["text"], t["hypotheses"][0]["text"]);
  }
}

TEST_F(Serve, SeededSamplingEqualsTheCli) {
  const auto [status, answer] = server_->post(
      "/v1/translate", {{"text", kSentences}, {"sampling", true}, {"seed", 11}, {"temperature", 0.9}});
  ASSERT_EQ(status, 200) << answer.dump();
  const std::vector<json> cli = cli_json("translate --sample --seed 11 --temperature 0.9 --model " +
                                         shell_quote(kTranslationModel) + quoted(kSentences));
  ASSERT_EQ(cli.size(), kSentences.size());
  for (std::size_t i = 0; i < kSentences.size(); ++i)
    EXPECT_EQ(answer["translations"][i]["ids"], cli[i]["target_ids"]) << "sentence " << i;
}

TEST_F(Serve, ConcurrentRequestsEqualSerialOnes) {
  // Each client sends its own sentence (or two), greedy, beam or seeded sampling; at the
  // same time, the greedy ones share batches. Each answer must equal that request sent alone.
  std::vector<json> requests;
  for (std::size_t i = 0; i < 24; ++i) {
    json r = {{"text", i % 3 == 0 ? json(kSentences[i % kSentences.size()])
                                  : json({kSentences[i % kSentences.size()], kSentences[(i + 2) % kSentences.size()]})}};
    if (i % 4 == 1) r["beam_size"] = 3;
    if (i % 4 == 2) r.update({{"sampling", true}, {"seed", i}});
    requests.push_back(r);
  }
  std::vector<json> serial;
  for (const json& r : requests) {
    const auto [status, answer] = server_->post("/v1/translate", r);
    ASSERT_EQ(status, 200) << answer.dump();
    serial.push_back(answer);
  }
  std::vector<std::future<std::pair<int, json>>> concurrent;
  for (const json& r : requests)
    concurrent.push_back(std::async(std::launch::async, [r] { return server_->post("/v1/translate", r); }));
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const auto [status, answer] = concurrent[i].get();
    ASSERT_EQ(status, 200) << answer.dump();
    // Texts and ids exactly; scores to float rounding: a batch's shape (how many texts,
    // how long the longest) changes the order BLAS sums in.
    ASSERT_EQ(answer["translations"].size(), serial[i]["translations"].size());
    for (std::size_t t = 0; t < answer["translations"].size(); ++t) {
      const json& got = answer["translations"][t];
      const json& alone = serial[i]["translations"][t];
      EXPECT_EQ(got["text"], alone["text"]) << "request " << i << " text " << t << ": " << requests[i].dump();
      EXPECT_EQ(got["ids"], alone["ids"]) << "request " << i << " text " << t << ": " << requests[i].dump();
      EXPECT_NEAR(got["score"].get<double>(), alone["score"].get<double>(), 1e-4) << "request " << i;
    }
  }
}

TEST_F(Serve, ATextThatFailsDoesNotFailTheOthers) {
  const auto [status, answer] = server_->post("/v1/translate", {{"text", {"cats chase dogs", "bad\x01text"}}});
  ASSERT_EQ(status, 200) << answer.dump();
  EXPECT_TRUE(answer["translations"][0].contains("text"));
  EXPECT_TRUE(answer["translations"][1].contains("error"));
  EXPECT_FALSE(answer["translations"][1].contains("text"));
}

TEST_F(Serve, LibreTranslateAnswersAsLibreTranslateDoes) {
  const std::vector<json> cli = cli_json("translate --model " + shell_quote(kTranslationModel) + quoted(kSentences));
  const auto [status, one] =
      server_->post("/translate", {{"q", kSentences[0]}, {"source", "en"}, {"target", "de"}, {"format", "text"}});
  ASSERT_EQ(status, 200) << one.dump();
  EXPECT_EQ(one["translatedText"], cli[0]["translation"]);
  const auto [list_status, list] = server_->post("/translate", {{"q", kSentences}, {"source", "en"}, {"target", "de"}});
  ASSERT_EQ(list_status, 200);
  for (std::size_t i = 0; i < kSentences.size(); ++i) EXPECT_EQ(list["translatedText"][i], cli[i]["translation"]);
  // A form, as LibreTranslate's web clients post it.
  auto c = server_->client();
  const auto form = c.Post("/translate", httplib::Params{{"q", kSentences[1]}, {"source", "en"}, {"target", "de"}});
  ASSERT_TRUE(form);
  EXPECT_EQ(form->status, 200) << form->body;
  EXPECT_EQ(json::parse(form->body)["translatedText"], cli[1]["translation"]);
  const auto [html_status, html] = server_->post("/translate", {{"q", "x"}, {"format", "html"}});
  EXPECT_EQ(html_status, 400);
  EXPECT_TRUE(html["error"].is_string());
}

TEST_F(Serve, GreedyCompletionsEqualTheCli) {
  const std::vector<std::string> prompts{"Die Katze", "Der Hund"};
  const auto [status, answer] =
      server_->post("/v1/completions", {{"model", "german-llama"}, {"prompt", prompts}, {"max_tokens", 12}, {"temperature", 0}});
  ASSERT_EQ(status, 200) << answer.dump();
  EXPECT_EQ(answer["object"], "text_completion");
  EXPECT_EQ(answer["model"], "german-llama");
  const std::vector<json> cli =
      cli_json("generate --max-length 12 --model " + shell_quote(kLanguageModel) + quoted(prompts));
  ASSERT_EQ(cli.size(), prompts.size());
  std::int64_t completion_tokens = 0, prompt_tokens = 0;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const json& choice = answer["choices"][i];
    EXPECT_EQ(choice["index"], i);
    EXPECT_EQ(choice["text"], cli[i]["text"]) << "prompt " << i;
    EXPECT_EQ(choice["finish_reason"], cli[i]["finished"].get<bool>() ? "stop" : "length");
    completion_tokens += static_cast<std::int64_t>(cli[i]["generated_ids"].size()) - cli[i]["finished"].get<bool>();
    prompt_tokens += static_cast<std::int64_t>(cli[i]["prompt_ids"].size());
  }
  EXPECT_EQ(answer["usage"]["completion_tokens"], completion_tokens);
  EXPECT_EQ(answer["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(answer["usage"]["total_tokens"], prompt_tokens + completion_tokens);
}

TEST_F(Serve, SeededSampledCompletionsEqualTheCli) {
  const std::vector<std::string> prompts{"Die Katze", "Der Hund"};
  const auto [status, answer] = server_->post(
      "/v1/completions", {{"prompt", prompts}, {"max_tokens", 15}, {"temperature", 0.8}, {"seed", 3}});
  ASSERT_EQ(status, 200) << answer.dump();
  const std::vector<json> cli = cli_json("generate --sample --temperature 0.8 --seed 3 --max-length 15 --model " +
                                         shell_quote(kLanguageModel) + quoted(prompts));
  for (std::size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(answer["choices"][i]["text"], cli[i]["text"]) << i;
}

// The events of a streamed completion: each `data:` payload, [DONE] last.
std::vector<std::string> events(const std::string& body) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < body.size()) {
    const std::size_t end = body.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << "an event without its blank line: " << body.substr(at);
    if (end == std::string::npos) break;
    const std::string event = body.substr(at, end - at);
    EXPECT_TRUE(event.starts_with("data: ")) << event;
    out.push_back(event.substr(6));
    at = end + 2;
  }
  return out;
}

// A streamed completion: the text of each choice joined from its events, and the
// finish_reason of each.
struct Streamed {
  std::vector<std::string> texts;
  std::vector<std::string> finish;
  std::size_t text_events = 0;
};

Streamed stream(const Server& server, json request) {
  request["stream"] = true;
  auto c = server.client();
  const auto r = c.Post("/v1/completions", request.dump(), "application/json");
  Streamed s;
  if (!r) throw std::runtime_error("no answer to a streamed completion");
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_TRUE(r->get_header_value("Content-Type").starts_with("text/event-stream"));
  const std::vector<std::string> data = events(r->body);
  EXPECT_FALSE(data.empty());
  if (data.empty()) return s;
  EXPECT_EQ(data.back(), "[DONE]");
  for (std::size_t e = 0; e + 1 < data.size(); ++e) {
    const json chunk = json::parse(data[e]);
    EXPECT_EQ(chunk["object"], "text_completion");
    const json& choice = chunk["choices"][0];
    const std::size_t index = choice["index"];
    if (s.texts.size() <= index) s.texts.resize(index + 1), s.finish.resize(index + 1);
    s.texts[index] += choice["text"].get<std::string>();
    s.text_events += !choice["text"].get<std::string>().empty();
    if (!choice["finish_reason"].is_null()) s.finish[index] = choice["finish_reason"];
  }
  return s;
}

TEST_F(Serve, StreamedTokensEqualTheWholeAnswer) {
  for (const json& request :
       {json{{"prompt", {"Die Katze", "Der Hund"}}, {"max_tokens", 20}, {"temperature", 0}},
        json{{"prompt", "Die Katze"}, {"max_tokens", 20}, {"temperature", 0.7}, {"seed", 9}}}) {
    const auto [status, whole] = server_->post("/v1/completions", request);
    ASSERT_EQ(status, 200) << whole.dump();
    const Streamed streamed = stream(*server_, request);
    ASSERT_EQ(streamed.texts.size(), whole["choices"].size()) << request.dump();
    for (std::size_t i = 0; i < streamed.texts.size(); ++i) {
      EXPECT_EQ(streamed.texts[i], whole["choices"][i]["text"]) << request.dump();
      EXPECT_EQ(streamed.finish[i], whole["choices"][i]["finish_reason"]) << request.dump();
    }
    EXPECT_GT(streamed.text_events, streamed.texts.size()) << "the text came in one piece: not streamed per token";
  }
}

void expect_refused(const Server& server, const std::string& path, const json& body, int status,
                    const std::string& param);

// The requests of OpenAI's official client (the openai npm package 6.49.0, captured on
// the wire): its headers, gzip accepted, and with "stream_options": {"include_usage":
// true} a last event whose choices are empty and whose usage counts the tokens, the
// same as the whole answer's ("usage": null on every other event).
TEST_F(Serve, OpenAIClientRequestsAreAnsweredAsOpenAIDoes) {
  const httplib::Headers headers{{"Accept", "application/json"},      {"User-Agent", "OpenAI/JS 6.49.0"},
                                 {"X-Stainless-Retry-Count", "0"},     {"X-Stainless-Lang", "js"},
                                 {"Authorization", "Bearer sk-unused"}, {"Accept-Language", "*"},
                                 {"Sec-Fetch-Mode", "cors"},           {"Accept-Encoding", "gzip, deflate"}};
  auto c = server_->client();
  const auto whole = c.Post("/v1/completions", headers,
                            R"({"model":"german-llama","prompt":"Die Katze","max_tokens":12,"temperature":0})",
                            "application/json");
  ASSERT_TRUE(whole);
  ASSERT_EQ(whole->status, 200) << whole->body;
  const json answer = json::parse(whole->body);
  const auto streamed = c.Post(
      "/v1/completions", headers,
      R"({"model":"german-llama","prompt":"Die Katze","max_tokens":12,"temperature":0,"stream":true,)"
      R"("stream_options":{"include_usage":true}})",
      "application/json");
  ASSERT_TRUE(streamed);
  ASSERT_EQ(streamed->status, 200) << streamed->body;
  const std::vector<std::string> data = events(streamed->body);
  ASSERT_GE(data.size(), 3u) << streamed->body;
  ASSERT_EQ(data.back(), "[DONE]");
  std::string text;
  for (std::size_t e = 0; e + 2 < data.size(); ++e) {
    const json chunk = json::parse(data[e]);
    ASSERT_TRUE(chunk.contains("usage") && chunk["usage"].is_null()) << data[e];
    text += chunk["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, answer["choices"][0]["text"]);
  const json last = json::parse(data[data.size() - 2]);
  EXPECT_TRUE(last["choices"].is_array() && last["choices"].empty()) << last.dump();
  EXPECT_EQ(last["usage"], answer["usage"]);
  // Without include_usage, no event has a usage key (OpenAI's shape); stream_options needs a stream.
  const auto plain = c.Post("/v1/completions", headers, R"({"prompt":"Die","max_tokens":3,"temperature":0,"stream":true})",
                            "application/json");
  ASSERT_TRUE(plain);
  for (const std::string& event : events(plain->body)) {
    if (event == "[DONE]") continue;
    EXPECT_FALSE(json::parse(event).contains("usage")) << event;
  }
  expect_refused(*server_, "/v1/completions", {{"prompt", "Die"}, {"stream_options", {{"include_usage", true}}}}, 400,
                 "stream_options");
  expect_refused(*server_, "/v1/completions",
                 {{"prompt", "Die"}, {"stream", true}, {"stream_options", {{"include_usage", 1}}}}, 400,
                 "stream_options.include_usage");
}

TEST_F(Serve, StopSequencesCutTheCompletionStreamedOrNot) {
  const json greedy = {{"prompt", "Die Katze"}, {"max_tokens", 24}, {"temperature", 0}};
  const std::string full = server_->post("/v1/completions", greedy).second["choices"][0]["text"];
  ASSERT_GT(full.size(), 6u) << full;
  const std::string stop = full.substr(full.size() / 2, 3);  // a piece in the middle
  const std::string expected = full.substr(0, full.find(stop));
  json with_stop = greedy;
  with_stop["stop"] = {stop, "never in this text \xe2\x9c\x93"};
  const auto [status, cut] = server_->post("/v1/completions", with_stop);
  ASSERT_EQ(status, 200) << cut.dump();
  EXPECT_EQ(cut["choices"][0]["text"], expected) << "stop " << stop;
  EXPECT_EQ(cut["choices"][0]["finish_reason"], "stop");
  const Streamed streamed = stream(*server_, with_stop);
  ASSERT_EQ(streamed.texts.size(), 1u);
  EXPECT_EQ(streamed.texts[0], expected);
  EXPECT_EQ(streamed.finish[0], "stop");
}

TEST_F(Serve, LogprobsAreTheChosenTokens) {
  const json request = {{"prompt", "Die Katze"}, {"max_tokens", 10}, {"temperature", 0}, {"logprobs", 0}};
  const auto [status, answer] = server_->post("/v1/completions", request);
  ASSERT_EQ(status, 200) << answer.dump();
  const json& choice = answer["choices"][0];
  const json& logprobs = choice["logprobs"];
  std::string joined;
  for (const json& t : logprobs["tokens"]) joined += t.get<std::string>();
  EXPECT_EQ(joined, choice["text"]);
  EXPECT_EQ(logprobs["token_logprobs"].size(), logprobs["tokens"].size());
  for (const json& lp : logprobs["token_logprobs"]) EXPECT_LE(lp.get<double>(), 0.0);
  EXPECT_EQ(answer["usage"]["completion_tokens"], logprobs["tokens"].size());
  const json plain = server_->post("/v1/completions", {{"prompt", "Die Katze"}, {"max_tokens", 10}, {"temperature", 0}}).second;
  EXPECT_EQ(choice["text"], plain["choices"][0]["text"]);
}

TEST_F(Serve, ModelsHealthAndMetrics) {
  auto c = server_->client();
  const auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  ASSERT_EQ(models->status, 200);
  const json list = json::parse(models->body);
  EXPECT_EQ(list["object"], "list");
  ASSERT_EQ(list["data"].size(), 2u);
  EXPECT_EQ(list["data"][0]["id"], "sinusoidal");
  EXPECT_EQ(list["data"][1]["id"], "german-llama");
  const auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(json::parse(health->body)["status"], "ok");

  const double before = server_->metric("ordo_requests_total{endpoint=\"/v1/translate\",status=\"200\"}");
  const double tokens_before = server_->metric("ordo_tokens_out_total{model=\"sinusoidal\"}");
  ASSERT_EQ(server_->post("/v1/translate", {{"text", "cats chase dogs"}}).first, 200);
  EXPECT_EQ(server_->metric("ordo_requests_total{endpoint=\"/v1/translate\",status=\"200\"}"), std::max(before, 0.0) + 1);
  EXPECT_GT(server_->metric("ordo_tokens_out_total{model=\"sinusoidal\"}"), tokens_before);
  const auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_TRUE(metrics->get_header_value("Content-Type").starts_with("text/plain"));
  for (const char* name : {"# TYPE ordo_requests_total counter", "# TYPE ordo_request_duration_seconds histogram",
                           "# TYPE ordo_batch_size histogram", "ordo_queue_depth{model=\"sinusoidal\"}",
                           "ordo_live_sequences{model=\"german-llama\"}", "ordo_tokens_in_total{model=\"sinusoidal\"}",
                           "ordo_request_duration_seconds_bucket{endpoint=\"/v1/translate\",le=\"+Inf\"}"})
    EXPECT_NE(metrics->body.find(name), std::string::npos) << name;
}

// Status, OpenAI error param, for a bad request.
void expect_refused(const Server& server, const std::string& path, const json& body, int status,
                    const std::string& param) {
  const auto [got, answer] = server.post(path, body);
  EXPECT_EQ(got, status) << body.dump() << " -> " << answer.dump();
  ASSERT_TRUE(answer.contains("error")) << answer.dump();
  EXPECT_EQ(answer["error"]["param"], param) << answer.dump();
  EXPECT_FALSE(answer["error"]["message"].get<std::string>().empty());
}

TEST_F(Serve, BadRequestsAre400NamingTheField) {
  auto c = server_->client();
  const auto malformed = c.Post("/v1/translate", "{\"text\": ", "application/json");
  ASSERT_TRUE(malformed);
  EXPECT_EQ(malformed->status, 400);
  EXPECT_EQ(json::parse(malformed->body)["error"]["param"], "body");
  // A number beyond a double is valid JSON's grammar but not a value nlohmann can hold:
  // a 400, not a 500 "internal error" (found writing the requests fuzz target).
  for (const char* path : {"/v1/translate", "/v1/completions", "/translate"}) {
    const auto huge = c.Post(path, R"({"text": "cats", "prompt": "Die", "q": "cats", "temperature": 1e400})",
                             "application/json");
    ASSERT_TRUE(huge);
    EXPECT_EQ(huge->status, 400) << path << ": " << huge->body;
  }
  expect_refused(*server_, "/v1/translate", json::array({1}), 400, "body");
  expect_refused(*server_, "/v1/translate", {{"txt", "cats"}}, 400, "text");
  expect_refused(*server_, "/v1/translate", {{"text", 5}}, 400, "text");
  expect_refused(*server_, "/v1/translate", {{"text", {"a", 2}}}, 400, "text[1]");
  expect_refused(*server_, "/v1/translate", {{"text", "cats"}, {"beam_size", "4"}}, 400, "beam_size");
  expect_refused(*server_, "/v1/translate", {{"text", "cats"}, {"beam_size", 0}}, 400, "beam_size");
  expect_refused(*server_, "/v1/translate", {{"text", "cats"}, {"beam_size", 2}, {"num_hypotheses", 3}}, 400,
                 "num_hypotheses");
  expect_refused(*server_, "/v1/translate", {{"text", "cats"}, {"top_p", 0}, {"sampling", true}}, 400, "top_p");
  expect_refused(*server_, "/v1/translate", {{"text", "cats"}, {"seed", -1}}, 400, "seed");
  expect_refused(*server_, "/v1/translate", {{"text", "cats"}, {"max_length", 100000}}, 400, "max_length");
  expect_refused(*server_, "/v1/translate", {{"text", "cats"}, {"model", "german-llama"}}, 400, "model");
  expect_refused(*server_, "/v1/translate", {{"text", "cats"}, {"model", "nope"}}, 404, "model");
  expect_refused(*server_, "/v1/completions", {{"prompt", "Die"}, {"max_tokens", "5"}}, 400, "max_tokens");
  expect_refused(*server_, "/v1/completions", {{"prompt", "Die"}, {"max_tokens", 100000}}, 400, "max_tokens");
  // The bound is the model's: the prompt ("Die" is at least 2 tokens, bos included) and
  // max_tokens together, as /v1/models reports it.
  auto c2 = server_->client();
  const int limit = json::parse(c2.Get("/v1/models")->body)["data"][1]["ordo"]["max_output_tokens"];
  expect_refused(*server_, "/v1/completions", {{"prompt", "Die"}, {"max_tokens", limit - 1}}, 400, "max_tokens");
  expect_refused(*server_, "/v1/completions", {{"prompt", "Die"}, {"stream", "yes"}}, 400, "stream");
  expect_refused(*server_, "/v1/completions", {{"prompt", "Die"}, {"temperature", 3}}, 400, "temperature");
  expect_refused(*server_, "/v1/completions", {{"prompt", "Die"}, {"logprobs", 3}}, 400, "logprobs");
  expect_refused(*server_, "/v1/completions", {{"prompt", "Die"}, {"stop", {"a", "b", "c", "d", "e"}}}, 400, "stop");
  expect_refused(*server_, "/v1/completions", {{"prompt", {"Die", "bad\x01"}}}, 400, "prompt[1]");
  expect_refused(*server_, "/v1/completions", {{"prompt", "Die"}, {"model", "sinusoidal"}}, 400, "model");
}

// An answer is written in two pieces (header, then body). With Nagle's algorithm on, the
// second waited for the client's delayed ACK: about 40 ms on most requests of a keep-alive
// connection, whatever the work (found by tools/bench/serve_load.py: one sentence took
// 44 ms through the server, 37 ms as a whole `ordo translate` process). The median is
// compared, so a stall of the machine does not fail the test.
TEST_F(Serve, KeepAliveAnswersDoNotWaitForDelayedAcks) {
  auto c = server_->client();
  c.set_keep_alive(true);
  std::vector<double> milliseconds;
  for (int i = 0; i < 21; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const auto r = c.Get("/health");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200);
    milliseconds.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(milliseconds.begin(), milliseconds.end());
  EXPECT_LT(milliseconds[milliseconds.size() / 2], 20.0) << "median of 21 GET /health on one connection";
}

TEST_F(Serve, TooLargeBodiesAre413AndUnknownPaths404) {
  auto c = server_->client();
  const std::string huge = json{{"text", std::string(2 << 20, 'a')}}.dump();
  const auto r = c.Post("/v1/translate", huge, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_TRUE(json::parse(r->body)["error"].contains("message"));
  // JSON labelled as a form (curl -d's default) over cpp-httplib's 8192-byte form limit:
  // the 413 says so, instead of blaming ordo's 1 MiB limit.
  const std::string form = json{{"text", std::string(10000, 'a')}}.dump();
  const auto as_form = c.Post("/v1/translate", form, "application/x-www-form-urlencoded");
  ASSERT_TRUE(as_form);
  EXPECT_EQ(as_form->status, 413);
  EXPECT_NE(json::parse(as_form->body)["error"]["message"].get<std::string>().find("Content-Type: application/json"),
            std::string::npos)
      << as_form->body;
  const auto missing = c.Get("/v1/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_TRUE(json::parse(missing->body)["error"].contains("message"));
}

TEST(ServeAuth, AnApiKeyIsRequiredWhenSet) {
  Server server({"--api-key", "s3cret"});
  const json body = {{"text", "cats chase dogs"}};
  const auto [none, refused] = server.post("/v1/translate", body);
  EXPECT_EQ(none, 401);
  EXPECT_EQ(refused["error"]["type"], "authentication_error");
  EXPECT_EQ(server.post("/v1/translate", body, {{"Authorization", "Bearer wrong"}}).first, 401);
  EXPECT_EQ(server.post("/v1/translate", body, {{"Authorization", "Bearer s3cret"}}).first, 200);
  EXPECT_EQ(server.post("/v1/completions", {{"prompt", "Die"}}, {{"Authorization", "Bearer s3cret"}}).first, 200);
  // LibreTranslate's clients send the key in the body.
  EXPECT_EQ(server.post("/translate", {{"q", "cats"}}).first, 401);
  EXPECT_EQ(server.post("/translate", {{"q", "cats"}, {"api_key", "s3cret"}}).first, 200);
  auto c = server.client();
  const auto health = c.Get("/health");  // a load balancer has no key
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  const auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 401);
}

// Many sentences in one request: a job that keeps the model busy long enough for what
// a test does meanwhile (the test waits for /metrics to show it running; it never
// counts on time).
json long_job(std::size_t texts) {
  json t = json::array();
  for (std::size_t i = 0; i < texts; ++i) t.push_back(kSentences[i % kSentences.size()] + " and " + kSentences[(i + 1) % kSentences.size()]);
  return {{"text", t}, {"beam_size", 4}};
}

// Sends a request on a raw socket (so the test can walk away from it); the socket.
int send_raw(int port, const std::string& path, const std::string& body) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) throw std::runtime_error("connect");
  const std::string request = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                              "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size()))
    throw std::runtime_error("send");
  return fd;
}

TEST(ServeFaults, AClientThatLeavesCancelsItsWorkAndFreesTheModel) {
  Server server({"--max-batch", "8"});
  const std::string live = "ordo_live_sequences{model=\"sinusoidal\"}";
  const std::string cancelled = "ordo_requests_total{endpoint=\"/v1/translate\",status=\"499\"}";
  const int fd = send_raw(server.port(), "/v1/translate", long_job(4000).dump());
  ASSERT_TRUE(Server::eventually([&] { return server.metric(live) > 0; })) << "the long job never ran";
  ::close(fd);
  // Cancelled at a decoder step, not finished: /metrics counts it as 499, and the model is free.
  ASSERT_TRUE(Server::eventually([&] { return server.metric(cancelled) == 1; })) << "the job was not cancelled";
  EXPECT_TRUE(Server::eventually([&] { return server.metric(live) == 0; }));
  EXPECT_EQ(server.metric("ordo_requests_total{endpoint=\"/v1/translate\",status=\"200\"}"), -1);
  EXPECT_EQ(server.post("/v1/translate", {{"text", "cats chase dogs"}}).first, 200);
}

TEST(ServeFaults, AFullQueueIs503WithRetryAfter) {
  Server server({"--max-queue", "1", "--max-batch", "8"});
  const std::string live = "ordo_live_sequences{model=\"sinusoidal\"}";
  const std::string queued = "ordo_queue_depth{model=\"sinusoidal\"}";
  // 4000 texts, 8 live at a time: the request waits for places for the rest, and fills
  // the queue of one...
  const int fd = send_raw(server.port(), "/v1/translate", long_job(4000).dump());
  ASSERT_TRUE(Server::eventually([&] { return server.metric(live) > 0 && server.metric(queued) == 1; }));
  // ...so the next is refused while it still waits.
  auto c = server.client();
  const auto refused = c.Post("/v1/translate", json{{"text", "dogs"}}.dump(), "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503) << refused->body;
  EXPECT_EQ(refused->get_header_value("Retry-After"), "1");
  ::close(fd);  // the long one leaves at the next step, and the queue is free again
  ASSERT_TRUE(Server::eventually([&] { return server.metric(queued) == 0; }));
  EXPECT_EQ(server.post("/v1/translate", {{"text", "dogs"}}).first, 200);
}

// Continuous batching: a request joins the live set at the next decoder step, beside a
// long one of another client, and is answered long before it, as it would be alone.
TEST(ServeFaults, AShortRequestJoinsALongOneAtTheNextStep) {
  Server server({"--max-batch", "8"});
  const std::string live = "ordo_live_sequences{model=\"sinusoidal\"}";
  const json alone_request = {{"text", {"cats chase dogs", "the dog sees a small cat"}}, {"beam_size", 2}};
  const auto [alone_status, alone] = server.post("/v1/translate", alone_request);
  ASSERT_EQ(alone_status, 200) << alone.dump();
  const std::string answered = "ordo_requests_total{endpoint=\"/v1/translate\",status=\"200\"}";
  const int fd = send_raw(server.port(), "/v1/translate", long_job(4000).dump());
  ASSERT_TRUE(Server::eventually([&] { return server.metric(live) > 0; })) << "the long job never ran";
  const auto [status, answer] = server.post("/v1/translate", alone_request);
  EXPECT_EQ(server.metric(answered), 2) << "the short request waited for the long one";
  ASSERT_EQ(status, 200) << answer.dump();
  for (std::size_t t = 0; t < 2; ++t) {
    EXPECT_EQ(answer["translations"][t]["text"], alone["translations"][t]["text"]) << t;
    EXPECT_EQ(answer["translations"][t]["ids"], alone["translations"][t]["ids"]) << t;
  }
  ::close(fd);  // the long one is cancelled at the next step
  EXPECT_TRUE(Server::eventually([&] { return server.metric(live) == 0; }));
}

TEST(ServeFaults, SigtermFinishesTheRequestsInFlightAndExitsZero) {
  Server server({"--drain-timeout", "600"});  // the bound is tested below: here, never reached
  const std::string live = "ordo_live_sequences{model=\"sinusoidal\"}";
  const json job = long_job(400);
  auto in_flight = std::async(std::launch::async, [&] { return server.post("/v1/translate", job); });
  ASSERT_TRUE(Server::eventually([&] { return server.metric(live) > 0; }));
  server.process().signal(SIGTERM);
  const auto [status, answer] = in_flight.get();
  EXPECT_EQ(status, 200);
  ASSERT_EQ(answer["translations"].size(), job["text"].size());
  for (const json& t : answer["translations"]) EXPECT_TRUE(t.contains("text")) << t.dump();
  EXPECT_EQ(server.process().wait_for(kRequestSeconds), std::optional<int>(0));
  auto c = server.client();
  EXPECT_FALSE(c.Get("/health")) << "still accepting after SIGTERM";
}

// A request that outlasts the drain: cut at a decoder step, answered 503 with
// Retry-After (a load balancer sends it elsewhere), and ordo exits 1 saying so. The
// long job would take far longer than the test waits.
struct CutShort {
  int status = 0;
  std::string retry_after, message;
};

CutShort cut_short_request(Server& server, const std::function<void()>& stop) {
  const std::string live = "ordo_live_sequences{model=\"sinusoidal\"}";
  auto in_flight = std::async(std::launch::async, [&] {
    auto c = server.client();
    const auto r = c.Post("/v1/translate", long_job(4000).dump(), "application/json");
    if (!r) throw std::runtime_error("no answer to the long job");
    const json body = json::parse(r->body, nullptr, false);
    return CutShort{r->status, r->get_header_value("Retry-After"),
                    body.is_object() && body.contains("error") ? body["error"].value("message", "") : r->body};
  });
  if (!Server::eventually([&] { return server.metric(live) > 0; })) throw std::runtime_error("the long job never ran");
  const auto start = std::chrono::steady_clock::now();
  stop();
  const CutShort got = in_flight.get();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30.0)
      << "the drain was not cut short";
  return got;
}

TEST(ServeFaults, ADrainPastItsTimeoutCutsWhatIsInFlightWith503AndExitsOne) {
  Server server({"--drain-timeout", "1"});
  const CutShort got = cut_short_request(server, [&] { server.process().signal(SIGTERM); });
  EXPECT_EQ(got.status, 503) << got.message;
  EXPECT_EQ(got.retry_after, "1");
  EXPECT_NE(got.message.find("--drain-timeout"), std::string::npos) << got.message;
  EXPECT_EQ(server.process().wait_for(kRequestSeconds), std::optional<int>(1));
}

// A streamed completion has sent its header when the drain runs out: it ends with an
// error event (OpenAI's clients raise it) and [DONE], not a silently short text.
TEST(ServeFaults, AStreamCutByTheDrainEndsWithAnErrorEvent) {
  Server server({"--drain-timeout", "1"});
  const std::string live = "ordo_live_sequences{model=\"german-llama\"}";
  const json request = {{"model", "german-llama"}, {"prompt", std::vector<std::string>(10000, "Die Katze")},
                        {"max_tokens", 60}, {"temperature", 0}, {"stream", true}};
  auto in_flight = std::async(std::launch::async, [&] {
    auto c = server.client();
    const auto r = c.Post("/v1/completions", request.dump(), "application/json");
    if (!r) throw std::runtime_error("no answer to the long stream");
    return std::make_pair(r->status, r->body);
  });
  ASSERT_TRUE(Server::eventually([&] { return server.metric(live) > 0; })) << "the long stream never ran";
  server.process().signal(SIGTERM);
  const auto [status, body] = in_flight.get();
  EXPECT_EQ(status, 200);  // sent before the cut
  const std::vector<std::string> data = events(body);
  ASSERT_GE(data.size(), 2u) << body.substr(0, 500);
  EXPECT_EQ(data.back(), "[DONE]");
  const json last = json::parse(data[data.size() - 2]);
  ASSERT_TRUE(last.contains("error")) << last.dump();
  EXPECT_NE(last["error"]["message"].get<std::string>().find("--drain-timeout"), std::string::npos) << last.dump();
  EXPECT_EQ(server.process().wait_for(kRequestSeconds), std::optional<int>(1));
}

TEST(ServeFaults, ASecondSigtermCutsTheDrainAtOnce) {
  Server server({"--drain-timeout", "600"});
  const CutShort got = cut_short_request(server, [&] {
    server.process().signal(SIGTERM);
    // Signals of one kind do not queue: the second must come after the first was taken.
    const std::string line = server.process().read_line(kRequestSeconds);
    EXPECT_NE(line.find("SIGTERM: no new connections"), std::string::npos) << line;
    server.process().signal(SIGTERM);
  });
  EXPECT_EQ(got.status, 503) << got.message;
  EXPECT_EQ(server.process().wait_for(kRequestSeconds), std::optional<int>(1));
}

// --compute-type converts every served model at load, as it does for the other commands:
// the answers are the CLI's with the same flag (int4: far from the stored weights').
TEST(ServeQuantized, ModelsConvertedAtLoadAnswerAsTheCliDoes) {
  Server server({"--compute-type", "int4"});
  const auto [status, answer] = server.post("/v1/translate", {{"text", kSentences}});
  ASSERT_EQ(status, 200) << answer.dump();
  const std::string model = " --model " + shell_quote(kTranslationModel);
  const std::vector<json> int4 = cli_json("translate --compute-type int4" + model + quoted(kSentences));
  const std::vector<json> stored = cli_json("translate" + model + quoted(kSentences));
  ASSERT_EQ(answer["translations"].size(), kSentences.size());
  ASSERT_EQ(int4.size(), kSentences.size());
  double farthest = 0;
  for (std::size_t i = 0; i < kSentences.size(); ++i) {
    const json& t = answer["translations"][i];
    EXPECT_EQ(t["ids"], int4[i]["target_ids"]) << "sentence " << i;
    EXPECT_NEAR(t["score"].get<double>(), int4[i]["score"].get<double>(), 1e-4) << "sentence " << i;
    farthest = std::max(farthest, std::abs(t["score"].get<double>() - stored[i]["score"].get<double>()));
  }
  EXPECT_GT(farthest, 1e-3);
  const auto [completed, completion] = server.post(
      "/v1/completions", {{"model", "german-llama"}, {"prompt", "Die Katze"}, {"max_tokens", 12}, {"temperature", 0}});
  ASSERT_EQ(completed, 200) << completion.dump();
  const std::vector<json> generated =
      cli_json("generate --compute-type int4 --max-length 12 --model " + shell_quote(kLanguageModel) + " 'Die Katze'");
  ASSERT_EQ(generated.size(), 1u);
  EXPECT_EQ(completion["choices"][0]["text"], generated[0]["text"]);
}

TEST(ServeCli, BadFlagsAreUsageErrors) {
  auto r = run_ordo("serve --port 70000");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  r = run_ordo("serve --max-batch 0");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  r = run_ordo("serve --drain-timeout -1");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--drain-timeout"), std::string::npos) << r.err;
  r = run_ordo("serve --model a=" + shell_quote(kTranslationModel) + " --model a=" + shell_quote(kLanguageModel) +
               " --port 0");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("two models are named 'a'"), std::string::npos) << r.err;
  r = run_ordo("serve --compute-type int4 --group-size 48 --port 0");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("ordo: --group-size: 48 is not a group size for int4", 0), 0u) << r.err;
  EXPECT_EQ(r.out, "") << "the port opened before the flags were checked";
  r = run_ordo("serve --group-size 64 --port 0");  // no --compute-type: wrong for any model
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.out, "") << "the port opened before the flags were checked";
  r = run_ordo("serve --model /no/such/model --port 0");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("/no/such/model"), std::string::npos) << r.err;
  r = run_ordo("serve --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("/v1/completions"), std::string::npos);
}

// The parts that need no server.
TEST(ServeRequests, FieldsAreCheckedByName) {
  using serve::BadRequest;
  const auto field_of = [](auto parse, const json& body) -> std::string {
    try {
      parse(body);
    } catch (const BadRequest& e) {
      return e.field();
    }
    return "(accepted)";
  };
  EXPECT_EQ(field_of(serve::parse_translate, {{"text", "a"}, {"num_hypotheses", 2}}), "num_hypotheses");
  EXPECT_EQ(field_of(serve::parse_translate, {{"text", "a"}, {"top_k", 1.5}}), "top_k");
  EXPECT_EQ(field_of(serve::parse_translate, {{"text", json::array()}}), "text");
  EXPECT_EQ(field_of(serve::parse_completion, {{"prompt", "a"}, {"n", 2}}), "n");
  EXPECT_EQ(field_of(serve::parse_completion, {{"prompt", "a"}, {"echo", true}}), "echo");
  EXPECT_EQ(field_of(serve::parse_completion, {{"prompt", "a"}, {"stop", {""}}}), "stop[0]");
  EXPECT_EQ(field_of(serve::parse_completion, {{"prompt", "a"}, {"user", "x"}, {"temperature", nullptr}}), "(accepted)");
  const serve::CompletionRequest greedy = serve::parse_completion({{"prompt", "a"}, {"temperature", 0}});
  EXPECT_FALSE(greedy.decoding.sample);
  EXPECT_EQ(greedy.decoding.max_length, 16);  // OpenAI's default max_tokens
  const serve::CompletionRequest sampled = serve::parse_completion({{"prompt", "a"}, {"seed", 4}});
  EXPECT_TRUE(sampled.decoding.sample);  // OpenAI samples at temperature 1 by default
  EXPECT_EQ(sampled.decoding.seed, 4u);
  EXPECT_EQ(field_of([](const json&) { return serve::parse_object("[1]"); }, {}), "body");
}

TEST(ServeRequests, StopTextHoldsBackOnlyWhatCouldBeAStop) {
  serve::StopText text({"END", "xy"});
  std::string shown;
  for (const char* piece : {"ab", "cE", "N", "dE", "ND", "more"}) shown += text.feed(piece);
  EXPECT_EQ(shown, "abcENd");  // the text before the stop, though "E" and "EN" were held back on the way
  EXPECT_TRUE(text.stopped());
  EXPECT_EQ(text.shown(), "abcENd");
  EXPECT_EQ(text.flush(), "");
  serve::StopText none({"zz"});
  std::string all = none.feed("caf\xc3");
  all += none.feed("\xa9 z");
  all += none.flush();
  EXPECT_EQ(all, "caf\xc3\xa9 z");
  EXPECT_FALSE(none.stopped());
}

// A multilingual model (NLLB-200's layout, a random parity model from the oracle):
// source_lang and target_lang apply as `ordo translate --source-lang/--target-lang`
// apply them (the oracle's reference ids, the target's code first); a missing or
// unknown code is a 400 naming the field and listing the model's codes.
TEST(ServeLanguages, SourceAndTargetLangTranslateAsTheOracleAndBadCodesAre400) {
  const std::filesystem::path parity = ORDO_PARITY_DIR;
  const std::string name = json::parse(std::ifstream(parity / "index.json")).at("m2m100_models").at(0);
  const json reference = json::parse(std::ifstream(parity / name / "reference.json"));
  Server server({"--model", "nllb=" + (parity / name).string()});
  const json& c = reference.at("translations").at(0);
  const auto [status, answer] = server.post(
      "/v1/translate", {{"model", "nllb"}, {"text", c.at("text")}, {"source_lang", c.at("source_lang")},
                        {"target_lang", c.at("target_lang")}, {"max_length", c.at("ids").size()}});
  ASSERT_EQ(status, 200) << answer.dump();
  EXPECT_EQ(answer["translations"][0]["ids"], c.at("ids"));
  const json base = {{"model", "nllb"}, {"text", "cats"}, {"source_lang", c.at("source_lang")},
                     {"target_lang", c.at("target_lang")}};
  json missing = base;
  missing.erase("target_lang");
  json unknown = base;
  unknown["source_lang"] = "xxx_Xxxx";
  for (const auto& [body, field] : {std::pair{missing, "target_lang"}, {unknown, "source_lang"}}) {
    const auto [code, refused] = server.post("/v1/translate", body);
    EXPECT_EQ(code, 400) << refused.dump();
    EXPECT_EQ(refused["error"]["param"], field) << refused.dump();
    EXPECT_NE(refused["error"]["message"].get<std::string>().find(c.at("target_lang").get<std::string>()),
              std::string::npos)
        << "the codes are listed: " << refused.dump();
  }
}

// A checkpoint's generation_config.json gives /v1/translate and /translate their
// defaults, under the fields a request gives, as `ordo translate` applies it under its
// flags. The shipped marian with 2 beams and translations cut at 3 tokens: without the
// defaults every answer would be the whole greedy translation. Oracle: the CLI.
TEST(ServeGenerationDefaults, AModelsGenerationConfigAppliesUnderTheRequestsFields) {
  const std::filesystem::path dir = testing_support::temp_dir("serve-generation-defaults");
  std::filesystem::copy(std::string(ORDO_SOURCE_DIR) + "/weights/marian", dir,
                        std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
  std::ofstream(dir / "generation_config.json")
      << R"({"num_beams": 2, "max_length": 4, "bad_words_ids": [[317]], "decoder_start_token_id": 317, "eos_token_id": 0})";
  const std::string model = " --model " + shell_quote(dir.string());
  const std::vector<json> defaults = cli_json("translate" + model + quoted(kSentences));
  const std::vector<json> chosen_cli = cli_json("translate" + model + " --beam 1 --max-length 0" + quoted(kSentences));
  Server server({"--model", "en-de=" + dir.string()});
  const auto [status, answer] = server.post("/v1/translate", {{"model", "en-de"}, {"text", kSentences}});
  ASSERT_EQ(status, 200) << answer.dump();
  const auto [chosen_status, chosen] = server.post(
      "/v1/translate", {{"model", "en-de"}, {"text", kSentences}, {"beam_size", 1}, {"max_length", 0}});
  ASSERT_EQ(chosen_status, 200) << chosen.dump();
  const auto [libre_status, libre] = server.post("/translate", {{"q", kSentences}, {"source", "en"}, {"target", "de"}});
  ASSERT_EQ(libre_status, 200) << libre.dump();
  bool differ = false;
  for (std::size_t i = 0; i < kSentences.size(); ++i) {
    SCOPED_TRACE("sentence " + std::to_string(i));
    EXPECT_EQ(answer["translations"][i]["ids"], defaults[i]["target_ids"]);
    EXPECT_LE(answer["translations"][i]["ids"].size(), 3u);
    EXPECT_EQ(chosen["translations"][i]["ids"], chosen_cli[i]["target_ids"]);
    EXPECT_EQ(libre["translatedText"][i], defaults[i]["translation"]);
    differ = differ || defaults[i]["target_ids"] != chosen_cli[i]["target_ids"];
  }
  EXPECT_TRUE(differ) << "the defaults and the request's fields give the same translations: nothing is tested";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ordo
