// ordo::Translator, the request-level facade, on the shipped default model: calls from
// several threads at once (each borrows its own buffers from the translator's pool)
// give what the same calls give one after another, and copies share that pool safely.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/thread_pool.h"
#include "engine/blas.h"
#include "models/api/internal.h"

namespace ordo {
namespace {

std::vector<std::string> test_sources(std::size_t count) {
  std::ifstream in(std::filesystem::path(ORDO_SOURCE_DIR) / "weights" / "data" / "test.tsv");
  std::vector<std::string> sources;
  std::string line;
  while (sources.size() < count && std::getline(in, line)) sources.push_back(line.substr(0, line.find('\t')));
  return sources;
}

std::vector<std::string> texts(const std::vector<Translation>& translations) {
  std::vector<std::string> out;
  for (const Translation& t : translations) {
    EXPECT_TRUE(t.ok()) << t.error;
    for (const auto& h : t.hypotheses) out.push_back(h.text + " " + std::to_string(h.score));
  }
  return out;
}

// Four threads, each translating its own slice of 48 sentences with beam 2 in batches
// of 5, through two copies of one translator, twice over (so workspaces are both
// created under contention and reused). Oracle: the same slices translated serially.
// Scores are compared exactly: each call decodes the same batches whichever thread
// runs it, and OpenBLAS is pinned to one thread so no GEMM splits differently.
TEST(Translator, ConcurrentCallsGiveWhatSerialCallsGive) {
  threads::set_count(1);
  auto model = Model::load(std::filesystem::path(ORDO_SOURCE_DIR) / "weights" / "sinusoidal");
  TranslatorOptions options;
  options.decoding.beam_size = 2;
  options.decoding.n_best = 2;
  options.batch_size = 5;
  const Translator translator(model, options);
  const Translator copy = translator;
  const auto sources = test_sources(48);
  ASSERT_EQ(sources.size(), 48u);
  constexpr std::size_t kThreads = 4;
  const std::size_t slice = sources.size() / kThreads;
  const auto slice_of = [&](std::size_t i) { return std::span(sources).subspan(i * slice, slice); };

  std::vector<std::vector<std::string>> serial(kThreads);
  for (std::size_t i = 0; i < kThreads; ++i) serial[i] = texts(translator.translate_batch(slice_of(i)));

  for (int round = 0; round < 2; ++round) {
    std::vector<std::vector<std::string>> parallel(kThreads);
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < kThreads; ++i)
      threads.emplace_back([&, i] {
        const Translator& mine = i % 2 == 0 ? translator : copy;
        parallel[i] = texts(mine.translate_batch(slice_of(i)));
      });
    for (std::thread& thread : threads) thread.join();
    for (std::size_t i = 0; i < kThreads; ++i) EXPECT_EQ(parallel[i], serial[i]) << "round " << round << ", thread " << i;
  }
}

}  // namespace
}  // namespace ordo
