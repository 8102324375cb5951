// ordo::ContinuousBatch, the public live set: requests added between steps, with
// different options, decode what Translator::translate_batch and Generator's calls give
// each of them (the oracle here: those calls, which the parity tests prove). Ids and
// texts must be identical; scores agree to 1e-4, because a different batch shape sums
// the same products in another order (engine/live_batch.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <ordo/ordo.hpp>

namespace ordo {
namespace {

const std::filesystem::path kWeights = std::filesystem::path(ORDO_SOURCE_DIR) / "weights";

std::vector<std::string> test_sources(std::size_t count) {
  std::ifstream in(kWeights / "data" / "test.tsv");
  std::vector<std::string> sources;
  for (std::string line; sources.size() < count && std::getline(in, line);)
    sources.push_back(line.substr(0, line.find('\t')));
  return sources;
}

template <class Request>
void expect_same(const Request& got, const Request& expected, const std::string& what) {
  ASSERT_TRUE(got.ok()) << what << ": " << got.error;
  ASSERT_TRUE(expected.ok()) << what << ": " << expected.error;
  ASSERT_EQ(got.hypotheses.size(), expected.hypotheses.size()) << what;
  for (std::size_t h = 0; h < got.hypotheses.size(); ++h) {
    EXPECT_EQ(got.hypotheses[h].ids, expected.hypotheses[h].ids) << what << " hypothesis " << h;
    EXPECT_EQ(got.hypotheses[h].text, expected.hypotheses[h].text) << what << " hypothesis " << h;
    EXPECT_NEAR(got.hypotheses[h].score, expected.hypotheses[h].score, 1e-4) << what << " hypothesis " << h;
  }
}

// Steps until nothing is live, keeping what finishes by key.
template <class Each>
void run(ContinuousBatch& batch, std::map<ContinuousBatch::Key, ContinuousBatch::Finished>& finished, Each each_step) {
  for (int step = 0; batch.live_requests() > 0 || step == 0; ++step) {
    each_step(step);
    batch.step();
    for (ContinuousBatch::Finished& f : batch.take_finished()) finished.emplace(f.key, std::move(f));
  }
}

std::vector<Translation> prepared(const Translator& translator, std::span<const std::string> lines) {
  std::vector<Translation> requests;
  for (const std::string& line : lines) requests.push_back(translator.prepare(line));
  return requests;
}

TEST(ContinuousBatch, TranslationsJoiningMidFlightDecodeAsTranslateBatchDoes) {
  const Model model = Model::load(kWeights / "sinusoidal");
  const std::vector<std::string> lines = test_sources(9);
  const std::span<const std::string> all(lines);
  TranslatorOptions greedy_options, beam_options, sampled_options;
  beam_options.decoding.beam_size = 4;
  beam_options.decoding.n_best = 2;
  sampled_options.decoding.sample = true;
  sampled_options.decoding.seed = 7;
  sampled_options.decoding.temperature = 1.5f;
  const Translator greedy(model, greedy_options), beam(model, beam_options), sampled(model, sampled_options);

  ContinuousBatch batch(model);
  std::map<ContinuousBatch::Key, ContinuousBatch::Finished> finished;
  std::vector<ContinuousBatch::Key> greedy_keys, beam_keys, sampled_keys;
  const std::vector<std::uint64_t> indexes{6, 7, 8};  // as lines 6..8 of one translate_batch call
  run(batch, finished, [&](int step) {
    if (step == 0) greedy_keys = batch.add(greedy, prepared(greedy, all.subspan(0, 3)));
    if (step == 2) beam_keys = batch.add(beam, prepared(beam, all.subspan(3, 3)));
    if (step == 4) {
      EXPECT_EQ(batch.live_requests(), 6);
      EXPECT_EQ(batch.live_sequences(), 3 + 3 * 4);  // a beam search holds beam_size sequences
      sampled_keys = batch.add(sampled, prepared(sampled, all.subspan(6, 3)), indexes);
    }
  });
  const auto check = [&](const Translator& translator, const std::vector<ContinuousBatch::Key>& keys,
                         std::size_t first, const std::string& what) {
    const std::vector<Translation> expected = translator.translate_batch(all.subspan(first, 3), first);
    ASSERT_EQ(keys.size(), 3u);
    for (std::size_t i = 0; i < 3; ++i) {
      ASSERT_TRUE(finished.count(keys[i])) << what << " " << i;
      expect_same(finished.at(keys[i]).translation(), expected[i], what + " line " + std::to_string(first + i));
    }
  };
  check(greedy, greedy_keys, 0, "greedy");
  check(beam, beam_keys, 3, "beam");
  check(sampled, sampled_keys, 6, "sampled");
  EXPECT_EQ(finished.size(), 9u);
}

TEST(ContinuousBatch, GenerationsStreamTheirTokensAsGenerateStreamedDoes) {
  const Model model = Model::load(kWeights / "german-llama");
  GeneratorOptions greedy_options, beam_options;
  greedy_options.decoding.max_length = 12;
  beam_options.decoding.max_length = 10;
  beam_options.decoding.beam_size = 3;
  const Generator greedy(model, greedy_options), beam(model, beam_options);
  const std::vector<std::string> prompts{"Die Katze", "Der kleine Hund", "Eine Ente"};

  std::map<ContinuousBatch::Key, std::vector<GeneratedToken>> streamed;
  const ContinuousBatch::OnToken collect = [&](ContinuousBatch::Key key, const GeneratedToken& token) {
    streamed[key].push_back(token);
  };
  ContinuousBatch batch(model);
  std::map<ContinuousBatch::Key, ContinuousBatch::Finished> finished;
  std::vector<ContinuousBatch::Key> keys;
  run(batch, finished, [&](int step) {
    if (step == 0) keys.push_back(batch.add(greedy, {greedy.prepare(prompts[0])}, {}, collect).front());
    if (step == 1) keys.push_back(batch.add(beam, {beam.prepare(prompts[1])}, {}, collect).front());
    if (step == 3) keys.push_back(batch.add(greedy, {greedy.prepare(prompts[2])}, {}, collect).front());
  });
  const Generator* generators[] = {&greedy, &beam, &greedy};
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    std::vector<GeneratedToken> expected_tokens;
    const Generation expected = generators[i]->generate_streamed(
        generators[i]->prepare(prompts[i]), [&](const GeneratedToken& t) { expected_tokens.push_back(t); });
    expect_same(finished.at(keys[i]).generation(), expected, prompts[i]);
    const std::vector<GeneratedToken>& got = streamed[keys[i]];
    ASSERT_EQ(got.size(), expected_tokens.size()) << prompts[i];
    for (std::size_t t = 0; t < got.size(); ++t) {
      EXPECT_EQ(got[t].id, expected_tokens[t].id) << prompts[i] << " token " << t;
      EXPECT_EQ(got[t].text, expected_tokens[t].text) << prompts[i] << " token " << t;
      EXPECT_EQ(got[t].eos, expected_tokens[t].eos) << prompts[i] << " token " << t;
      EXPECT_NEAR(got[t].logprob, expected_tokens[t].logprob, 1e-4) << prompts[i] << " token " << t;
    }
  }
}

TEST(ContinuousBatch, CancelledAndFailingRequestsLeaveTheOthersAsTheyWere) {
  const Model model = Model::load(kWeights / "german-llama");
  GeneratorOptions options;
  options.decoding.max_length = 12;
  const Generator generator(model, options);
  const std::vector<std::string> prompts{"Die Katze", "Der Hund", "Eine Ente", "Die Kuh"};
  std::vector<Generation> requests;
  for (const std::string& p : prompts) requests.push_back(generator.prepare(p));

  ContinuousBatch batch(model);
  std::vector<ContinuousBatch::Key> keys;
  int tokens_of_third = 0;
  const ContinuousBatch::OnToken on_token = [&](ContinuousBatch::Key key, const GeneratedToken&) {
    if (keys.empty()) return;  // add() chooses each request's first token before it returns the keys
    if (key == keys.at(2) && ++tokens_of_third == 3) throw std::runtime_error("the client's socket closed");
    if (key == keys.at(3) && tokens_of_third >= 1) batch.cancel(key);  // from inside a callback
  };
  keys = batch.add(generator, requests, {}, on_token);
  std::map<ContinuousBatch::Key, ContinuousBatch::Finished> finished;
  run(batch, finished, [&](int step) {
    if (step == 2) batch.cancel(keys[0]);
  });
  EXPECT_FALSE(finished.count(keys[0])) << "a cancelled request is never reported";
  EXPECT_FALSE(finished.count(keys[3])) << "a request cancelled by its callback is never reported";
  ASSERT_TRUE(finished.count(keys[2]));
  EXPECT_EQ(finished.at(keys[2]).generation().error, "the client's socket closed");
  EXPECT_TRUE(finished.at(keys[2]).generation().hypotheses.empty());
  expect_same(finished.at(keys[1]).generation(), generator.generate_prepared(requests[1]), prompts[1]);
  EXPECT_EQ(batch.live_requests(), 0);
}

TEST(ContinuousBatch, WhatCannotDecodeFinishesAtOnceAndMisuseIsRefused) {
  const Model model = Model::load(kWeights / "sinusoidal");
  const Translator translator(model);
  ContinuousBatch batch(model);
  const std::vector<std::string> lines{"cats chase dogs", "   ", std::string(5000, 'a') + " cats"};
  const std::vector<ContinuousBatch::Key> keys = batch.add(translator, prepared(translator, lines));
  std::vector<ContinuousBatch::Finished> at_once = batch.take_finished();
  ASSERT_EQ(at_once.size(), 2u) << "the blank line and the one too long finish without a step";
  EXPECT_EQ(at_once[0].key, keys[1]);
  ASSERT_EQ(at_once[0].translation().hypotheses.size(), 1u);
  EXPECT_EQ(at_once[0].translation().hypotheses[0].text, "");
  EXPECT_EQ(at_once[1].key, keys[2]);
  EXPECT_FALSE(at_once[1].translation().ok());
  EXPECT_THROW(at_once[1].generation(), Error);
  EXPECT_EQ(batch.live_requests(), 1);

  const Model other = Model::load(kWeights / "rope");
  const Translator elsewhere(other);
  try {
    batch.add(elsewhere, {elsewhere.prepare("cats chase dogs")});
    FAIL() << "a translator of another model was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("another model"), std::string::npos) << e.what();
  }
  const std::vector<std::uint64_t> two{0, 1};
  EXPECT_THROW(batch.add(translator, {translator.prepare("dogs chase cats")}, two), Error);
  EXPECT_EQ(batch.live_requests(), 1) << "a refused add leaves the live set as it was";
  while (batch.live_requests() > 0) batch.step();
  const std::vector<ContinuousBatch::Finished> last = batch.take_finished();
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].translation().best().text, translator.translate("cats chase dogs"));
}

}  // namespace
}  // namespace ordo
