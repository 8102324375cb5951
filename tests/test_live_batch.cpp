// The live set (engine/live_batch.h): requests that join while others decode, leave
// when done or cancelled, and decode as they would alone. Oracle: decode_requests on
// each request by itself (the path every parity test covers). Tokens must be identical;
// scores agree to 1e-4, because a different batch shape (how many rows a step has, how
// long the padded sources are) changes the order BLAS sums in.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/decode_inputs.h"
#include "engine/live_batch.h"
#include "engine/search.h"
#include "models/loaded_model.h"

namespace ordo {
namespace {

const std::filesystem::path kWeights = std::filesystem::path(ORDO_SOURCE_DIR) / "weights";

DecodeResult alone(const Transformer& model, const DecodeRequest& request, const DecodingOptions& options,
                   std::uint64_t stream) {
  DecodeWorkspace workspace;
  return std::move(decode_requests(model, std::span(&request, 1), options, std::span(&stream, 1), workspace).front());
}

// A live set that admits each request at its own step and records what finishes.
struct Driver {
  const Transformer& model;
  DecodeWorkspace workspace;
  LiveBatch live{model, workspace.buffers()};
  std::map<std::uint64_t, DecodeResult> finished;
  std::vector<std::uint64_t> order;  // keys in the order they finished

  explicit Driver(const Transformer& m) : model(m) {}

  void admit(const DecodeRequest& request, const DecodingOptions& options, std::uint64_t key) {
    const Index length = resolve_max_length(options, model.decoder, static_cast<Index>(request.source.size()),
                                            decoder_input_length(model, request));
    live.admit(std::span(&request, 1), std::span(&length, 1), std::span(&key, 1),
               std::make_shared<SearchRules>(model, options), std::span(&key, 1));
    collect();
  }
  void step() {
    live.step();
    collect();
  }
  void collect() {
    for (auto& [key, result] : live.take_finished()) {
      order.push_back(key);
      finished.emplace(key, std::move(result));
    }
  }
};

void expect_same(const DecodeResult& got, const DecodeResult& expected, const std::string& what) {
  ASSERT_TRUE(got.ok()) << what << ": " << got.error;
  ASSERT_TRUE(expected.ok()) << what << ": " << expected.error;
  ASSERT_EQ(got.hypotheses.size(), expected.hypotheses.size()) << what;
  for (std::size_t h = 0; h < got.hypotheses.size(); ++h) {
    EXPECT_EQ(got.hypotheses[h].ids, expected.hypotheses[h].ids) << what << " hypothesis " << h;
    EXPECT_NEAR(got.hypotheses[h].score, expected.hypotheses[h].score, 1e-4) << what << " hypothesis " << h;
  }
}

DecodingOptions greedy() { return {}; }
DecodingOptions beam(Index k) {
  DecodingOptions o;
  o.beam_size = k;
  o.n_best = k;
  return o;
}
DecodingOptions sampled(std::uint64_t seed) {
  DecodingOptions o;
  o.sample = true;
  o.seed = seed;
  o.temperature = 0.9;
  return o;
}

TEST(LiveBatch, TranslationsThatJoinMidFlightDecodeAsTheyWouldAlone) {
  const auto loaded = LoadedModel::load(kWeights / "sinusoidal");
  const Transformer& model = loaded->transformer();
  // Short sources first, then a longer one (the cross-attention slots grow while others
  // read theirs), with greedy, beam and sampled options side by side.
  const std::vector<std::string> texts{"birds sing", "cats chase dogs", "the small cat sleeps",
                                       "the dog sees a cat and the cat sees the dog"};
  const std::vector<DecodingOptions> options{greedy(), beam(3), sampled(7), beam(2)};
  std::vector<DecodeRequest> requests;
  for (const std::string& t : texts) requests.push_back({loaded->tokenize_source(t), {}});

  Driver driver(model);
  driver.admit(requests[0], options[0], 0);
  driver.step();
  driver.admit(requests[1], options[1], 1);
  driver.admit(requests[2], options[2], 2);
  driver.step();
  driver.step();
  driver.admit(requests[3], options[3], 3);
  while (!driver.live.empty()) driver.step();

  ASSERT_EQ(driver.finished.size(), texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i)
    expect_same(driver.finished.at(i), alone(model, requests[i], options[i], i), texts[i]);
  // The first, admitted alone two steps ahead, did not wait for the others.
  EXPECT_EQ(driver.order.front(), 0u);
}

TEST(LiveBatch, PromptsThatJoinMidFlightContinueAsTheyWouldAlone) {
  const auto loaded = LoadedModel::load(kWeights / "german-llama");
  const Transformer& model = loaded->transformer();
  DecodingOptions longer = greedy();
  longer.max_length = 40;  // more steps than the first prompt's: the self-attention caches grow
  const std::vector<std::string> prompts{"Die Katze", "Der Hund", "Ein Mann sieht"};
  const std::vector<DecodingOptions> options{greedy(), sampled(3), longer};
  std::vector<DecodeRequest> requests;
  for (const std::string& p : prompts) requests.push_back({{}, loaded->tokenize_prompt(p, true)});

  Driver driver(model);
  DecodingOptions first = greedy();
  first.max_length = 8;
  driver.admit(requests[0], first, 0);
  driver.step();
  driver.admit(requests[1], options[1], 1);
  for (int s = 0; s < 3; ++s) driver.step();
  driver.admit(requests[2], options[2], 2);
  while (!driver.live.empty()) driver.step();

  ASSERT_EQ(driver.finished.size(), prompts.size());
  expect_same(driver.finished.at(0), alone(model, requests[0], first, 0), prompts[0]);
  for (std::size_t i = 1; i < prompts.size(); ++i)
    expect_same(driver.finished.at(i), alone(model, requests[i], options[i], i), prompts[i]);
}

TEST(LiveBatch, ACancelledRequestLeavesAndTheOthersAreUntouched) {
  const auto loaded = LoadedModel::load(kWeights / "sinusoidal");
  const Transformer& model = loaded->transformer();
  const std::vector<DecodeRequest> requests{{loaded->tokenize_source("cats chase dogs"), {}},
                                            {loaded->tokenize_source("the dog sees a cat"), {}},
                                            {loaded->tokenize_source("birds sing"), {}}};
  Driver driver(model);
  for (std::uint64_t k = 0; k < requests.size(); ++k) driver.admit(requests[k], beam(3), k);
  driver.step();
  const Index before = driver.live.sequences();
  driver.live.cancel(1);
  driver.live.cancel(99);  // unknown: ignored
  driver.step();
  EXPECT_LT(driver.live.sequences(), before);
  while (!driver.live.empty()) driver.step();
  EXPECT_EQ(driver.finished.count(1), 0u);
  ASSERT_EQ(driver.finished.size(), 2u);
  for (const std::uint64_t k : {0u, 2u})
    expect_same(driver.finished.at(k), alone(model, requests[k], beam(3), k), "request " + std::to_string(k));
  // The freed slots serve a newcomer.
  driver.admit(requests[1], beam(3), 1);
  while (!driver.live.empty()) driver.step();
  expect_same(driver.finished.at(1), alone(model, requests[1], beam(3), 1), "request 1, admitted again");
}

TEST(LiveBatch, AnAdmissionThatFailsLeavesTheLiveSetAsItWas) {
  const auto loaded = LoadedModel::load(kWeights / "sinusoidal");
  const Transformer& model = loaded->transformer();
  const DecodeRequest good{loaded->tokenize_source("cats chase dogs"), {}};
  Driver driver(model);
  driver.admit(good, greedy(), 0);
  const Index live = driver.live.sequences();
  const DecodeRequest bad{{static_cast<int>(model.decoder.vocab_size()) + 5, model.tokens.eos}, {}};  // an id past the vocabulary
  EXPECT_THROW(driver.admit(bad, greedy(), 1), Error);
  EXPECT_EQ(driver.live.sequences(), live);
  EXPECT_EQ(driver.live.requests(), 1);
  while (!driver.live.empty()) driver.step();
  expect_same(driver.finished.at(0), alone(model, good, greedy(), 0), "the request already live");
}

}  // namespace
}  // namespace ordo
