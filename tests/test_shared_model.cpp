// One loaded model shared by many threads, as an embedding application shares it:
// eight threads call ONE Translator (or ONE Generator) at once with different inputs,
// and every result is byte-identical to the same call made serially. The compute pool
// runs two threads, so concurrent calls also meet in it. tools/scripts/sanitize.sh runs these
// tests under ThreadSanitizer, where any data race fails them.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/thread_pool.h"
#include "engine/blas.h"
#include "models/api/internal.h"
#include "models/api/internal.h"

namespace ordo {
namespace {

constexpr std::size_t kThreads = 8;

// Exact text of a float: byte-identical results have identical bits.
std::string bits(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%a", value);
  return text;
}

// Everything a hypothesis carries, exactly.
std::string describe(const Hypothesis& h) {
  // Appended piece by piece: GCC 12 warns (-Wrestrict, a false positive) on " " + string.
  std::string text = h.text;
  text += " |";
  for (int id : h.ids) text.append(" ").append(std::to_string(id));
  text.append(" | ").append(bits(h.score)).append(" |");
  for (float logprob : h.token_logprobs) text.append(" ").append(bits(logprob));
  text += h.finished ? " finished" : " cut";
  return text;
}

template <class Result>
std::vector<std::string> describe_all(const std::vector<Result>& results) {
  std::vector<std::string> out;
  for (const Result& r : results) {
    out.push_back(r.error);
    for (const Hypothesis& h : r.hypotheses) out.push_back(describe(h));
  }
  return out;
}

std::vector<std::string> column(const char* file, std::size_t which, std::size_t count) {
  std::ifstream in(std::filesystem::path(ORDO_SOURCE_DIR) / "weights" / "data" / file);
  std::vector<std::string> lines;
  std::string line;
  while (lines.size() < count && std::getline(in, line)) {
    std::size_t begin = 0;
    for (std::size_t k = 0; k < which; ++k) begin = line.find('\t', begin) + 1;
    lines.push_back(line.substr(begin, line.find('\t', begin) - begin));
  }
  return lines;
}

// Runs call(i) for i in [0, kThreads) once serially and then on kThreads threads at
// once, twice (workspaces first created under contention, then reused); the
// concurrent results must equal the serial ones.
template <class Call>
void expect_concurrent_equals_serial(const Call& call) {
  std::vector<std::vector<std::string>> serial(kThreads);
  for (std::size_t i = 0; i < kThreads; ++i) serial[i] = call(i);
  for (int round = 0; round < 2; ++round) {
    std::vector<std::vector<std::string>> concurrent(kThreads);
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < kThreads; ++i) threads.emplace_back([&, i] { concurrent[i] = call(i); });
    for (std::thread& thread : threads) thread.join();
    for (std::size_t i = 0; i < kThreads; ++i)
      EXPECT_EQ(concurrent[i], serial[i]) << "round " << round << ", thread " << i;
  }
}

// Translations with beam 3 and 2-best lists: each thread its own 5 sentences, through
// translate_batch, and one of them again through translate().
TEST(SharedModel, EightThreadsShareOneTranslator) {
  threads::set_count(2);
  const auto model = Model::load(std::filesystem::path(ORDO_SOURCE_DIR) / "weights" / "sinusoidal");
  TranslatorOptions options;
  options.decoding.beam_size = 3;
  options.decoding.n_best = 2;
  options.batch_size = 4;
  const Translator translator(model, options);
  const auto sources = column("test.tsv", 0, 5 * kThreads);
  ASSERT_EQ(sources.size(), 5 * kThreads);
  expect_concurrent_equals_serial([&](std::size_t i) {
    const std::span<const std::string> mine = std::span(sources).subspan(5 * i, 5);
    auto result = describe_all(translator.translate_batch(mine));
    const Translation single = translator.translate_detailed(mine.front());
    for (const Hypothesis& h : single.hypotheses) result.push_back(describe(h));
    return result;
  });
}

// The shipped LLaMA-layout model continuing different prompts by sampling (seeded per
// prompt, so the draws are deterministic), each thread its own 3 prompts.
TEST(SharedModel, EightThreadsShareOneGenerator) {
  threads::set_count(2);
  const auto model = Model::load(std::filesystem::path(ORDO_SOURCE_DIR) / "weights" / "german-llama");
  GeneratorOptions options;
  options.decoding.sample = true;
  options.decoding.seed = 11;
  options.decoding.top_p = 0.9;
  options.decoding.max_length = 12;
  const Generator generator(model, options);
  const auto targets = column("test.tsv", 1, 3 * kThreads);
  ASSERT_EQ(targets.size(), 3 * kThreads);
  std::vector<std::string> prompts;  // the first two words of each German sentence
  for (const std::string& t : targets) prompts.push_back(t.substr(0, t.find(' ', t.find(' ') + 1)));
  expect_concurrent_equals_serial([&](std::size_t i) {
    return describe_all(generator.generate_batch(std::span(prompts).subspan(3 * i, 3), {}, 3 * i));
  });
}

}  // namespace
}  // namespace ordo
