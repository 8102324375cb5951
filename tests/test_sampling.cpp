// Sampling (DecodingOptions::sample): what engine/sampler.h promises, checked.
//   - reproducible: the same seed gives the same output across runs, batch orders and
//     compositions (each source keeps its stream), and BLAS thread counts; another
//     seed gives another output;
//   - faithful: the first sampled token follows softmax(logits / T) (a chi-square
//     goodness-of-fit test at significance 0.001, with a fixed seed so it is
//     deterministic, and shown to reject a wrong temperature);
//   - top-k and top-p never draw outside their set, ties going to the lower id, and
//     impossible (-inf) tokens are never drawn;
//   - SequenceRandom: uniform() in [0, 1), one stream per (seed, sequence).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "engine/score.h"
#include "engine/thread_pool.h"
#include "engine/blas.h"
#include "engine/sampler.h"
#include "engine/search.h"
#include "models/loaded_model.h"
#include "tests/model_factory.h"
#include "tests/search_support.h"

namespace ordo {
namespace {

constexpr int kEos = 1;  // tiny_config()'s eos

// One random tiny model for the whole suite (vocab 23), written on first use. Random
// weights give eos about 1/500 of the mass, so outputs would almost always run to
// max_length; a bias of +3.5 on eos's logit (final_logits_bias) makes it ~1/15, so that
// outputs end at varied lengths, some in eos, as a trained model's do.
const Transformer& tiny() {
  static const std::shared_ptr<const LoadedModel> model = [] {
    const auto dir = testing_support::temp_dir("sampling_model");
    testing_support::write_random_model(dir, testing_support::tiny_config(), 11, [](std::vector<NamedTensor>& tensors) {
      const auto bias = std::find_if(tensors.begin(), tensors.end(), [](const NamedTensor& t) { return t.name == "final_logits_bias"; });
      if (bias == tensors.end()) throw std::logic_error("the random model has no final_logits_bias");
      bias->values.at(kEos) += 3.5f;
    });
    auto loaded = LoadedModel::load(dir);
    std::filesystem::remove_all(dir);  // the weights are in memory now
    return loaded;
  }();
  return model->transformer();
}

// `count` random sources of 3 to 12 tokens: ids in [2, 23) then eos.
std::vector<std::vector<int>> random_sources(std::size_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> length(2, 11), id(2, 22);
  std::vector<std::vector<int>> sources(count);
  for (auto& s : sources) {
    s.resize(static_cast<std::size_t>(length(rng)));
    for (int& x : s) x = id(rng);
    s.push_back(kEos);
  }
  return sources;
}

DecodingOptions sampling(std::uint64_t seed) {
  DecodingOptions options;
  options.sample = true;
  options.seed = seed;
  return options;
}

// Same tokens, same finished flag; log-probs equal to float rounding. The tokens must
// match exactly: that is the promise. The log-probs may differ in the last bits when
// a batch of another size runs GEMMs of another shape; 1e-5 is ~100 float ulps at the
// magnitudes here (|log p| < 10) and far below any difference between two tokens.
void expect_same(const std::vector<DecodeResult>& a, const std::vector<DecodeResult>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE("source " + std::to_string(i));
    ASSERT_TRUE(a[i].ok()) << a[i].error;
    ASSERT_TRUE(b[i].ok()) << b[i].error;
    ASSERT_EQ(a[i].hypotheses.size(), 1u);
    ASSERT_EQ(b[i].hypotheses.size(), 1u);
    const Hypothesis& x = a[i].hypotheses[0];
    const Hypothesis& y = b[i].hypotheses[0];
    EXPECT_EQ(x.ids, y.ids);
    EXPECT_EQ(x.finished, y.finished);
    ASSERT_EQ(x.token_logprobs.size(), y.token_logprobs.size());
    for (std::size_t t = 0; t < x.token_logprobs.size(); ++t) EXPECT_NEAR(x.token_logprobs[t], y.token_logprobs[t], 1e-5);
    EXPECT_NEAR(x.score, y.score, 1e-4);
  }
}

// ---------------------------------------------------------------------------------
// 1. Reproducibility

TEST(Sampling, SameSeedSameOutputAcrossRunsBatchesAndThreads) {
  const Transformer& model = tiny();
  const auto sources = random_sources(8, 3);
  const DecodingOptions options = sampling(7);
  const auto reference = decode_batch(model, sources, options);

  // The outputs are real samples, not all cut at max_length or empty: some end in eos,
  // and they are not all the same length (else "equal" below would say little).
  std::set<std::size_t> lengths;
  int finished = 0;
  for (const auto& r : reference) {
    ASSERT_TRUE(r.ok()) << r.error;
    lengths.insert(r.hypotheses[0].ids.size());
    finished += r.hypotheses[0].finished;
  }
  EXPECT_GE(lengths.size(), 3u);
  EXPECT_GE(finished, 1);

  {
    SCOPED_TRACE("(a) a second run");
    expect_same(reference, decode_batch(model, sources, options));
  }
  {
    SCOPED_TRACE("(b) shuffled, each source with its stream");
    std::vector<std::size_t> order(sources.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::shuffle(order.begin(), order.end(), std::mt19937(42));
    ASSERT_NE(order, (std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 6, 7}));
    std::vector<std::vector<int>> shuffled;
    std::vector<std::uint64_t> streams;
    for (std::size_t i : order) {
      shuffled.push_back(sources[i]);
      streams.push_back(i);
    }
    const auto results = decode_batch(model, shuffled, options, streams);
    std::vector<DecodeResult> unshuffled(sources.size());
    for (std::size_t k = 0; k < order.size(); ++k) unshuffled[order[k]] = results[k];
    expect_same(reference, unshuffled);
  }
  {
    SCOPED_TRACE("(b) another composition: the odd sources only, in reverse");
    std::vector<std::vector<int>> some;
    std::vector<std::uint64_t> streams;
    std::vector<DecodeResult> expected;
    for (std::size_t i = sources.size() - 1; i < sources.size(); i -= 2) {
      some.push_back(sources[i]);
      streams.push_back(i);
      expected.push_back(reference[i]);
    }
    expect_same(expected, decode_batch(model, some, options, streams));
  }
  {
    SCOPED_TRACE("(b) each source alone, with its stream");
    for (std::size_t i = 0; i < sources.size(); ++i) {
      const std::vector<std::vector<int>> one{sources[i]};
      const std::vector<std::uint64_t> stream{i};
      expect_same({reference[i]}, decode_batch(model, one, options, stream));
    }
  }
  {
    SCOPED_TRACE("(c) BLAS threads 1 and 2");
    threads::set_count(1);
    const auto one_thread = decode_batch(model, sources, options);
    threads::set_count(2);
    const auto two_threads = decode_batch(model, sources, options);
    expect_same(reference, one_thread);
    expect_same(reference, two_threads);
  }

  // The test can fail: another seed draws other tokens (for 8 sequences of several
  // random draws each, the same output would be an astronomically rare coincidence),
  // and so does sending a source another stream.
  const auto other_seed = decode_batch(model, sources, sampling(8));
  int differ = 0;
  for (std::size_t i = 0; i < sources.size(); ++i) differ += other_seed[i].hypotheses[0].ids != reference[i].hypotheses[0].ids;
  EXPECT_GE(differ, 4);
  std::vector<std::uint64_t> shifted(sources.size());
  std::iota(shifted.begin(), shifted.end(), std::uint64_t{100});
  const auto other_streams = decode_batch(model, sources, options, shifted);
  differ = 0;
  for (std::size_t i = 0; i < sources.size(); ++i) differ += other_streams[i].hypotheses[0].ids != reference[i].hypotheses[0].ids;
  EXPECT_GE(differ, 4);
}

// The tiny model's GEMMs are below OpenBLAS's threading threshold, so part (c) above
// runs one thread either way. The shipped model (d_model 128, 344 tokens) is large
// enough for OpenBLAS to split its GEMMs with 2 threads.
TEST(Sampling, ShippedModelSamplesTheSameWithOneOrTwoThreads) {
  const auto model = LoadedModel::load(std::filesystem::path(ORDO_SOURCE_DIR) / "weights" / "sinusoidal");
  std::vector<std::vector<int>> sources;
  for (const char* text : {"cats chase dogs", "The big dog sees a small cat.", "A small duck chases a bird.",
                           "the cat chases the dog", "dogs chase cats", "The cow catches the big young dog"})
    for (int copy = 0; copy < 6; ++copy) sources.push_back(model->tokenize_source(text));
  DecodingOptions options = sampling(5);
  options.temperature = 1.5;  // flatter, so that the draws vary
  threads::set_count(1);
  const auto one_thread = decode_batch(model->transformer(), sources, options);
  threads::set_count(2);
  const auto two_threads = decode_batch(model->transformer(), sources, options);
  expect_same(one_thread, two_threads);
  // Copies of a sentence draw from different streams: at T = 1.5 they do not all agree.
  std::set<std::vector<int>> distinct;
  for (const auto& r : one_thread) distinct.insert(r.hypotheses[0].ids);
  EXPECT_GT(distinct.size(), 6u);
}

// ---------------------------------------------------------------------------------
// 2. The first token follows softmax(logits / T): chi-square goodness of fit

// The 0.999 quantiles of the chi-square distribution for 1..30 degrees of freedom
// (significance 0.001), as in any table (e.g. NIST/SEMATECH e-Handbook 1.3.6.7.4).
constexpr double kChiSquare999[] = {10.828, 13.816, 16.266, 18.467, 20.515, 22.458, 24.322, 26.124,
                                    27.877, 29.588, 31.264, 32.909, 34.528, 36.123, 37.697, 39.252,
                                    40.790, 42.312, 43.820, 45.315, 46.797, 48.268, 49.728, 51.179,
                                    52.620, 54.052, 55.476, 56.892, 58.301, 59.703};

struct ChiSquare {
  double statistic = 0.0;
  int degrees_of_freedom = 0;
  double critical() const { return kChiSquare999[degrees_of_freedom - 1]; }
  bool rejects() const { return statistic > critical(); }
};

// Pearson's statistic of `counts` against `probabilities` (summing to 1). Bins whose
// expected count is 5 or more stand alone; the others are pooled, smallest first, into
// groups of at least 5 (the usual validity rule), a remainder joining the last group
// (or, if there is none, the smallest bin). An observation in a bin of probability 0 is
// an outright rejection (infinite statistic).
ChiSquare chi_square(const std::vector<long>& counts, const std::vector<double>& probabilities) {
  const double total = static_cast<double>(std::accumulate(counts.begin(), counts.end(), 0L));
  std::vector<std::size_t> order(counts.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return probabilities[a] < probabilities[b]; });
  std::vector<std::pair<double, double>> big, groups;  // (expected, observed)
  std::pair<double, double> pool{0.0, 0.0};
  for (std::size_t v : order) {
    const double expected = total * probabilities[v], observed = static_cast<double>(counts[v]);
    if (expected == 0.0 && observed > 0.0) return {INFINITY, 1};
    if (expected >= 5.0) {
      big.emplace_back(expected, observed);
      continue;
    }
    pool.first += expected;
    pool.second += observed;
    if (pool.first >= 5.0) {
      groups.push_back(pool);
      pool = {0.0, 0.0};
    }
  }
  if (pool.first > 0.0) {
    auto& into = !groups.empty() ? groups.back() : !big.empty() ? big.front() : groups.emplace_back(0.0, 0.0);
    into.first += pool.first;
    into.second += pool.second;
  }
  ChiSquare result;
  for (const auto* bins : {&big, &groups})
    for (const auto& [expected, observed] : *bins) result.statistic += (observed - expected) * (observed - expected) / expected;
  result.degrees_of_freedom = std::max(1, static_cast<int>(big.size() + groups.size()) - 1);
  return result;
}

std::vector<double> softmax(const std::vector<float>& logprobs, double temperature) {
  double best = -INFINITY;
  for (float x : logprobs) best = std::max(best, static_cast<double>(x));
  std::vector<double> p(logprobs.size());
  double total = 0.0;
  for (std::size_t v = 0; v < p.size(); ++v) total += p[v] = std::exp((logprobs[v] - best) / temperature);
  for (double& x : p) x /= total;
  return p;
}

// The chi-square helper itself: a hand-worked case, and pooling.
TEST(Sampling, ChiSquareHelperMatchesAHandWorkedCase) {
  // Expected 50/30/20 of 100, observed 40/35/25: 100/50 + 25/30 + 25/20 = 4.0833.
  const ChiSquare simple = chi_square({40, 35, 25}, {0.5, 0.3, 0.2});
  EXPECT_NEAR(simple.statistic, 2.0 + 25.0 / 30 + 1.25, 1e-12);
  EXPECT_EQ(simple.degrees_of_freedom, 2);
  EXPECT_FALSE(simple.rejects());
  // Expected 90/4/3/2/1 of 100: the small bins pool smallest first into 1+2+3 = 6, and
  // the remainder 4 joins that group: bins 90 and 10, observed 85 and 15, so the
  // statistic is 25/90 + 25/10 on 1 degree of freedom.
  const ChiSquare pooled = chi_square({85, 6, 4, 3, 2}, {0.9, 0.04, 0.03, 0.02, 0.01});
  EXPECT_NEAR(pooled.statistic, 25.0 / 90 + 25.0 / 10, 1e-12);
  EXPECT_EQ(pooled.degrees_of_freedom, 1);
  EXPECT_TRUE(chi_square({0, 100}, {0.0, 1.0}).statistic == 0.0);
  EXPECT_TRUE(chi_square({1, 99}, {0.0, 1.0}).rejects());
}

TEST(Sampling, FirstTokenFollowsSoftmaxOverTemperature) {
  const Transformer& model = tiny();
  const std::vector<int> source{5, 8, 13, 2, kEos};
  const Index vocab = model.decoder.vocab_size();

  // The oracle: the model's first-step log-probabilities, from teacher-forced scoring
  // of every one-token target (an independent path from decode_batch's step()).
  std::vector<std::vector<int>> sources(static_cast<std::size_t>(vocab), source), targets;
  for (int v = 0; v < vocab; ++v) targets.push_back({v});
  std::vector<float> logprobs;
  for (const Score& r : score_batch(model, sources, targets)) {
    ASSERT_TRUE(r.ok()) << r.error;
    logprobs.push_back(r.token_logprobs[0]);
  }

  // N first tokens: N copies of the source, one token each, streams 0..N-1.
  constexpr std::size_t kDraws = 20000;
  const std::vector<std::vector<int>> copies(kDraws, source);
  const auto first_tokens = [&](double temperature) {
    DecodingOptions options = sampling(2024);
    options.temperature = temperature;
    options.max_length = 1;
    std::vector<long> counts(static_cast<std::size_t>(vocab), 0);
    for (const DecodeResult& r : decode_batch(model, copies, options)) {
      EXPECT_TRUE(r.ok()) << r.error;
      if (r.ok()) ++counts.at(static_cast<std::size_t>(r.hypotheses[0].ids.at(0)));
    }
    return counts;
  };
  const std::vector<long> at_one = first_tokens(1.0), at_half = first_tokens(0.5);

  // The model's first-step distribution runs from 0.29 down to 1e-4 (and sharper at
  // T = 0.5), so the smallest bins are pooled: 22 bins remain at T = 1 (21 degrees of
  // freedom, critical value 46.797) and 20 at T = 0.5 (19, critical value 43.820).
  // The counts are fixed by the seed, so the test is deterministic; a correct sampler
  // would fail it for 0.1% of seeds (it passes here with statistics ~24 and ~13).
  const ChiSquare fit_one = chi_square(at_one, softmax(logprobs, 1.0));
  const ChiSquare fit_half = chi_square(at_half, softmax(logprobs, 0.5));
  EXPECT_FALSE(fit_one.rejects()) << "T=1: chi2 " << fit_one.statistic << " on " << fit_one.degrees_of_freedom
                                  << " df, critical " << fit_one.critical();
  EXPECT_FALSE(fit_half.rejects()) << "T=0.5: chi2 " << fit_half.statistic << " on " << fit_half.degrees_of_freedom
                                   << " df, critical " << fit_half.critical();
  EXPECT_EQ(fit_one.degrees_of_freedom, 21);
  EXPECT_EQ(fit_half.degrees_of_freedom, 19);

  // Power: the same counts against the wrong temperature are rejected, by far (the
  // statistics are ~4e4 for T 0.5 vs 2 and 1 vs 0.5, ~190 for T 1 vs 1.1).
  const ChiSquare wrong_half = chi_square(at_half, softmax(logprobs, 2.0));
  const ChiSquare wrong_one = chi_square(at_one, softmax(logprobs, 0.5));
  const ChiSquare near_one = chi_square(at_one, softmax(logprobs, 1.1));  // 10% off
  EXPECT_TRUE(wrong_half.rejects()) << wrong_half.statistic;
  EXPECT_TRUE(wrong_one.rejects()) << wrong_one.statistic;
  EXPECT_TRUE(near_one.rejects()) << near_one.statistic;
}

// ---------------------------------------------------------------------------------
// 3. top-k and top-p: never outside their set

// Log-probabilities (float, as the decoder gives them) of the given probabilities;
// 0 -> -inf.
std::vector<float> log_of(const std::vector<double>& p) {
  std::vector<float> lp;
  for (double x : p) lp.push_back(x > 0.0 ? static_cast<float>(std::log(x)) : -INFINITY);
  return lp;
}

std::vector<long> draw_counts(const std::vector<float>& logprobs, const DecodingOptions& options, std::size_t draws,
                              std::uint64_t sequence = 0) {
  Sampler sampler(options, static_cast<Index>(logprobs.size()));
  SequenceRandom random(options.seed, sequence);
  std::vector<long> counts(logprobs.size(), 0);
  for (std::size_t i = 0; i < draws; ++i) {
    const int token = sampler.draw(logprobs, random);
    EXPECT_GE(token, 0);
    EXPECT_LT(token, static_cast<int>(logprobs.size()));
    if (token >= 0 && token < static_cast<int>(logprobs.size())) ++counts[static_cast<std::size_t>(token)];
  }
  return counts;
}

std::set<int> drawn(const std::vector<long>& counts) {
  std::set<int> ids;
  for (std::size_t v = 0; v < counts.size(); ++v)
    if (counts[v] > 0) ids.insert(static_cast<int>(v));
  return ids;
}

// p restricted to `allowed` and renormalized: the distribution a cut sampler draws from.
std::vector<double> restricted(std::vector<double> p, const std::set<int>& allowed) {
  double total = 0.0;
  for (std::size_t v = 0; v < p.size(); ++v) total += allowed.contains(static_cast<int>(v)) ? p[v] : (p[v] = 0.0);
  for (double& x : p) x /= total;
  return p;
}

// Hand-made distributions, so the sets are known without any computation: each set
// below is worked out by hand in its comment. 20000 draws per case; every allowed
// token has probability >= 0.1 within its set, so each appears (missing one would be
// a (0.9)^20000 event), and the counts fit the renormalized distribution (chi-square
// at 0.001 as above).
TEST(Sampler, TopKDrawsOnlyTheKLikeliestAndAllOfThem) {
  //                         0     1     2     3     4    5     6     7     8     9
  const std::vector<double> p{0.05, 0.30, 0.02, 0.20, 0.0, 0.25, 0.08, 0.10, 0.0, 0.0};
  DecodingOptions options = sampling(1);
  options.top_k = 3;  // 1 (0.30), 5 (0.25), 3 (0.20)
  const std::vector<float> lp = log_of(p);
  const auto counts = draw_counts(lp, options, 20000);
  EXPECT_EQ(drawn(counts), (std::set<int>{1, 3, 5}));
  EXPECT_FALSE(chi_square(counts, restricted(p, {1, 3, 5})).rejects());

  // Temperature applies within the set: T = 0.5 squares the ratios.
  options.temperature = 0.5;
  const auto sharp = draw_counts(lp, options, 20000);
  EXPECT_EQ(drawn(sharp), (std::set<int>{1, 3, 5}));
  std::vector<double> squared(p.size());
  for (std::size_t v = 0; v < p.size(); ++v) squared[v] = p[v] * p[v];
  EXPECT_FALSE(chi_square(sharp, restricted(squared, {1, 3, 5})).rejects());
  EXPECT_TRUE(chi_square(sharp, restricted(p, {1, 3, 5})).rejects());  // power: T matters

  // Ties at the cut go to the lower id: 4 and 7 tie for third place, 4 is kept.
  const std::vector<double> tied{0.1, 0.3, 0.05, 0.2, 0.15, 0.05, 0.0, 0.15};
  options.temperature = 1.0;
  options.top_k = 3;  // 1, 3, then 4 (not 7)
  const auto tie_counts = draw_counts(log_of(tied), options, 20000);
  EXPECT_EQ(drawn(tie_counts), (std::set<int>{1, 3, 4}));

  // A top_k of the vocabulary size or more is no cut: every possible token appears.
  options.top_k = 10;
  EXPECT_EQ(drawn(draw_counts(lp, options, 20000)), (std::set<int>{0, 1, 2, 3, 5, 6, 7}));
}

TEST(Sampler, TopPDrawsOnlyTheSmallestLikeliestPrefixReachingP) {
  //                         0     1     2     3     4     5     6     7
  const std::vector<double> p{0.04, 0.28, 0.10, 0.0, 0.08, 0.15, 0.35, 0.0};
  DecodingOptions options = sampling(2);
  options.top_p = 0.6;  // 6 (0.35) + 1 (0.28) = 0.63 >= 0.6: {6, 1}
  const auto counts = draw_counts(log_of(p), options, 20000);
  EXPECT_EQ(drawn(counts), (std::set<int>{1, 6}));
  EXPECT_FALSE(chi_square(counts, restricted(p, {1, 6})).rejects());

  options.top_p = 0.7;  // 0.63 < 0.7, + 5 (0.15) = 0.78: {6, 1, 5}
  EXPECT_EQ(drawn(draw_counts(log_of(p), options, 20000)), (std::set<int>{1, 5, 6}));

  // Ties in likelihood go to the lower id: 1 (0.4), 4 (0.2) = 0.6 < 0.7, then 2 and 3
  // tie at 0.15: 2 is taken (0.75 >= 0.7) and 3 never is.
  const std::vector<double> tied{0.1, 0.4, 0.15, 0.15, 0.2};
  EXPECT_EQ(drawn(draw_counts(log_of(tied), options, 20000)), (std::set<int>{1, 2, 4}));

  // Temperature first, then the nucleus (Hugging Face's order of warpers): at T = 0.5
  // the probabilities 0.5/0.3/0.2 become 0.658/0.237/0.105, and 0.6 holds token 0
  // alone; at T = 1 it takes {0, 1}.
  const std::vector<double> three{0.5, 0.3, 0.2};
  options.top_p = 0.6;
  EXPECT_EQ(drawn(draw_counts(log_of(three), options, 20000)), (std::set<int>{0, 1}));
  options.temperature = 0.5;
  EXPECT_EQ(drawn(draw_counts(log_of(three), options, 20000)), (std::set<int>{0}));

  // top-k then top-p: top_k 2 leaves {6, 1} (0.63 of the mass); renormalized, 6 holds
  // 0.556 and reaches top_p 0.5 alone.
  options.temperature = 1.0;
  options.top_k = 2;
  options.top_p = 0.5;
  EXPECT_EQ(drawn(draw_counts(log_of(p), options, 20000)), (std::set<int>{6}));
}

TEST(Sampler, ImpossibleTokensAreNeverDrawn) {
  // -inf at the first and last ids and in between, with and without a cut (top_k 5 is
  // more than the 3 possible tokens: no cut). Exactly the expected ids are drawn, each
  // of them (probability >= 0.2 in 5000 draws) and nothing else. (A -inf token has
  // weight exp(-inf) = 0, so only a cut that counted it, e.g. top-k taking the k first
  // *ids*, or a rounding fallback landing on it, could draw it.)
  const std::vector<double> p{0.0, 0.2, 0.0, 0.5, 0.3, 0.0};
  const std::vector<float> lp = log_of(p);
  for (const auto& [k, top_p] : std::vector<std::pair<Index, double>>{{0, 1.0}, {2, 1.0}, {5, 1.0}, {0, 0.99}, {3, 0.9}}) {
    SCOPED_TRACE("top_k " + std::to_string(k) + " top_p " + std::to_string(top_p));
    DecodingOptions options = sampling(3);
    options.top_k = k;
    options.top_p = top_p;
    const auto counts = draw_counts(lp, options, 5000);
    const std::set<int> expected = k == 2 ? std::set<int>{3, 4} : std::set<int>{1, 3, 4};
    EXPECT_EQ(drawn(counts), expected);
  }
  // One possible token: always it, even at a high temperature.
  DecodingOptions options = sampling(4);
  options.temperature = 100.0;
  const auto only = draw_counts(log_of({0.0, 0.0, 1.0, 0.0}), options, 1000);
  EXPECT_EQ(only[2], 1000);
}

// End to end on the model: every token a top-k or top-p decode samples is in the set
// computed here from that step's log-probabilities. The oracle recomputes the
// distribution at each step of each output by teacher-forced scoring of every
// continuation of the prefix (score_batch), independently of decode_batch's step().
TEST(Sampling, DecodedTokensStayInsideTheTopKAndTopPSets) {
  const Transformer& model = tiny();
  const Index vocab = model.decoder.vocab_size();
  const auto sources = random_sources(12, 9);

  // The log-probs [V] after source + prefix, by scoring prefix + v for every v.
  const auto step_logprobs = [&](const std::vector<int>& source, const std::vector<int>& prefix) {
    std::vector<std::vector<int>> s(static_cast<std::size_t>(vocab), source), t;
    for (int v = 0; v < vocab; ++v) {
      t.push_back(prefix);
      t.back().push_back(v);
    }
    std::vector<float> lp;
    for (const Score& r : score_batch(model, s, t)) lp.push_back(r.token_logprobs.back());
    return lp;
  };
  // The allowed set, most likely first, ties to the lower id; top-p on the tempered
  // probabilities, as the sampler's contract (see the Sampler tests above).
  const auto allowed = [&](const std::vector<float>& lp, const DecodingOptions& o) {
    std::vector<int> ids(lp.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return lp[static_cast<std::size_t>(a)] > lp[static_cast<std::size_t>(b)]; });
    if (o.top_k > 0) ids.resize(std::min(ids.size(), static_cast<std::size_t>(o.top_k)));
    std::vector<double> w;
    for (int v : ids) w.push_back(std::exp((lp[static_cast<std::size_t>(v)] - lp[static_cast<std::size_t>(ids[0])]) / o.temperature));
    const double total = std::accumulate(w.begin(), w.end(), 0.0);
    double mass = 0.0;
    std::size_t keep = 0;
    while (keep < ids.size() && mass < o.top_p * total) mass += w[keep++];
    return std::set<int>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(keep));
  };

  DecodingOptions top_k = sampling(31);
  top_k.top_k = 3;
  DecodingOptions top_p = sampling(32);
  top_p.top_p = 0.6;
  top_p.temperature = 0.8;
  DecodingOptions unrestricted = sampling(33);  // for the check's power
  for (const auto& [name, options, expect_outside] :
       std::vector<std::tuple<std::string, DecodingOptions, bool>>{{"top_k 3", top_k, false},
                                                                   {"top_p 0.6, T 0.8", top_p, false},
                                                                   {"no cut", unrestricted, true}}) {
    SCOPED_TRACE(name);
    std::size_t steps = 0, outside = 0, cut_steps = 0;
    const auto results = decode_batch(model, sources, options);
    for (std::size_t i = 0; i < sources.size(); ++i) {
      ASSERT_TRUE(results[i].ok()) << results[i].error;
      const Hypothesis& h = results[i].hypotheses[0];
      for (std::size_t t = 0; t < h.ids.size(); ++t) {
        const std::vector<int> prefix(h.ids.begin(), h.ids.begin() + static_cast<std::ptrdiff_t>(t));
        const std::vector<float> lp = step_logprobs(sources[i], prefix);
        // The recomputation lines up with the decode: same log-prob for the token.
        EXPECT_NEAR(lp[static_cast<std::size_t>(h.ids[t])], h.token_logprobs[t], 1e-4) << "step " << t;
        const std::set<int> set = allowed(lp, options);
        ++steps;
        cut_steps += set.size() < static_cast<std::size_t>(vocab);
        if (!set.contains(h.ids[t])) {
          ++outside;
          if (!expect_outside) ADD_FAILURE() << "source " << i << " step " << t << ": token " << h.ids[t] << " outside the set";
        }
      }
    }
    EXPECT_GE(steps, 60u);  // enough draws to mean something
    if (expect_outside) {
      // The same check on an unrestricted sampler finds tokens outside the top-3 set:
      // the model's distributions are flat enough that the cut matters.
      DecodingOptions k3 = options;
      k3.top_k = 3;
      std::size_t outside_top3 = 0;
      for (std::size_t i = 0; i < sources.size(); ++i) {
        const Hypothesis& h = results[i].hypotheses[0];
        for (std::size_t t = 0; t < h.ids.size(); ++t) {
          const std::vector<int> prefix(h.ids.begin(), h.ids.begin() + static_cast<std::ptrdiff_t>(t));
          outside_top3 += !allowed(step_logprobs(sources[i], prefix), k3).contains(h.ids[t]);
        }
      }
      EXPECT_GE(outside_top3, 5u);
    } else {
      EXPECT_EQ(cut_steps, steps);  // every step's set was a real cut
    }
  }
}

// ---------------------------------------------------------------------------------
// 4. SequenceRandom

TEST(SequenceRandom, UniformIsInTheUnitIntervalAndLooksUniform) {
  SequenceRandom random(123, 4);
  constexpr int kDraws = 100000;
  std::vector<long> deciles(10, 0);
  double sum = 0.0;
  for (int i = 0; i < kDraws; ++i) {
    const double u = random.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    ++deciles[static_cast<std::size_t>(u * 10)];
  }
  // Mean 1/2 with standard error sqrt(1/12 / 1e5) = 0.0009: 0.005 is over 5 sigma.
  EXPECT_NEAR(sum / kDraws, 0.5, 0.005);
  EXPECT_FALSE(chi_square(deciles, std::vector<double>(10, 0.1)).rejects());
}

// The generator is fully specified (sampler.h): xoshiro256** seeded by splitmix64 as
// in sampler.cpp. These first outputs come from an independent Python implementation
// of Blackman and Vigna's reference code with the same seeding; a change here changes
// every sampled output for every seed.
TEST(SequenceRandom, FirstOutputsAreFixedOnEveryPlatform) {
  SequenceRandom zero(0, 0);
  EXPECT_EQ(zero.next(), 0xfb5405f7bd79c540ULL);
  EXPECT_EQ(zero.next(), 0x780c98e26cea5883ULL);
  EXPECT_EQ(zero.next(), 0x2a146e0980febc66ULL);
  SequenceRandom other(5, 3);
  EXPECT_EQ(other.next(), 0x643bb077a9ac78bcULL);
  EXPECT_EQ(other.next(), 0xa2b763327daab3d8ULL);
}

TEST(SequenceRandom, EachSeedAndSequenceHasItsOwnStream) {
  // Same pair, same stream.
  SequenceRandom a(9, 9), b(9, 9);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(a.next(), b.next());

  // 32 seeds x 64 sequences, neighbours included, and seed/sequence swapped: the first
  // 4 outputs of every pair differ from every other pair's (a shared 64-bit output by
  // chance has probability ~1e-13 here).
  std::map<std::vector<std::uint64_t>, std::pair<std::uint64_t, std::uint64_t>> seen;
  std::set<std::uint64_t> firsts;
  for (std::uint64_t seed = 0; seed < 32; ++seed)
    for (std::uint64_t sequence = 0; sequence < 64; ++sequence) {
      SequenceRandom random(seed, sequence);
      std::vector<std::uint64_t> head;
      for (int i = 0; i < 4; ++i) head.push_back(random.next());
      const auto [it, fresh] = seen.emplace(head, std::make_pair(seed, sequence));
      EXPECT_TRUE(fresh) << "(" << seed << ", " << sequence << ") repeats (" << it->second.first << ", "
                         << it->second.second << ")";
      firsts.insert(head[0]);
    }
  EXPECT_EQ(firsts.size(), 32u * 64u);
  SequenceRandom swapped_a(1, 2), swapped_b(2, 1);
  EXPECT_NE(swapped_a.next(), swapped_b.next());
}

}  // namespace
}  // namespace ordo
