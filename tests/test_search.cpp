// Batched search (engine/search.h) on small random models: beam search, greedy search,
// the output constraints of DecodingOptions, and batching.
//
// Each test names its oracle: brute force over every possible output, a naive greedy
// loop over Decoder::step, the same sources decoded one at a time, or logits processed
// by hand in double. What the model computes is checked against PyTorch in test_parity;
// here the numbers are whatever random weights give, and what is under test is the
// search around them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/decode_inputs.h"
#include "engine/error.h"
#include "engine/ops.h"
#include "engine/score.h"
#include "engine/search.h"
#include "models/loaded_model.h"
#include "tests/model_factory.h"
#include "tests/reference.h"
#include "tests/search_support.h"

namespace ordo {
namespace {

using testing_support::temp_dir;
using testing_support::tiny_config;
using testing_support::write_random_model;

std::shared_ptr<const LoadedModel> random_model(const nlohmann::json& config, unsigned seed,
                                          const std::function<void(std::vector<NamedTensor>&)>& edit = {}) {
  const auto dir = temp_dir("search");
  write_random_model(dir, config, seed, edit);
  auto model = LoadedModel::load(dir);
  std::filesystem::remove_all(dir);  // the weights are mmapped: unlinking keeps them
  return model;
}

nlohmann::json with(nlohmann::json config, const nlohmann::json& changes) {
  config.update(changes);
  return config;
}

// Every position scheme config.json accepts (models/config.h), each post-norm and pre-norm.
std::vector<nlohmann::json> every_scheme_and_norm() {
  std::vector<nlohmann::json> variants;
  for (const std::string_view scheme : position_encoding_names())
    for (const bool pre_norm : {false, true})
      variants.push_back({{"position_encoding", scheme}, {"normalize_before", pre_norm}});
  return variants;
}

// A tokenized sentence: `length` tokens, random ids in [2, vocab) and eos last.
std::vector<int> random_source(std::mt19937& rng, Index length, const Transformer& t) {
  const Index vocab = t.encoder ? t.encoder->embedding().vocab_size() : t.decoder.vocab_size();
  std::uniform_int_distribution<int> id(2, static_cast<int>(vocab) - 1);
  std::vector<int> source;
  for (Index i = 0; i + 1 < length; ++i) source.push_back(id(rng));
  source.push_back(t.tokens.eos);
  return source;
}

double sum(std::span<const float> logprobs) { return std::accumulate(logprobs.begin(), logprobs.end(), 0.0); }

bool contains(std::span<const int> ids, int token) { return std::ranges::find(ids, token) != ids.end(); }

DecodingOptions beam_options(Index beam_size, Index n_best, double length_penalty, Index max_length) {
  DecodingOptions options;
  options.beam_size = beam_size;
  options.n_best = n_best;
  options.length_penalty = length_penalty;
  options.max_length = max_length;
  return options;
}

Hypothesis greedy(const Transformer& t, std::span<const int> source, DecodingOptions options) {
  options.beam_size = 1;
  options.n_best = 1;
  return decode(t, source, options).front();
}

// The raw logits [V] (no processing) after each token of [decoder_start, ids...]: row k
// is the distribution of ids[k]. One sequence, fed one token at a time.
std::vector<std::vector<float>> raw_logits(const Transformer& t, std::span<const int> source,
                                           std::span<const int> ids) {
  const std::vector<std::vector<int>> sources{std::vector<int>(source.begin(), source.end())};
  const EncodedBatch memory = encode_batch(t, sources);
  DecoderState state;
  t.decoder.start(state, memory, std::vector<Index>{0}, 1, static_cast<Index>(ids.size()));
  Matrix logits;
  std::vector<std::vector<float>> rows;
  int token = t.tokens.decoder_start;
  for (std::size_t k = 0; k < ids.size(); ++k) {
    t.decoder.step(state, std::span<const int>(&token, 1), logits);
    rows.emplace_back(logits.row(0).begin(), logits.row(0).end());
    token = ids[k];
  }
  return rows;
}

// A model and source with `property` (given greedy search's output under `options`),
// found by trying random sources on models of a few seeds; nullopt if none has it.
struct Case {
  std::shared_ptr<const LoadedModel> model;
  std::vector<int> source;
  Hypothesis greedy;
};

std::optional<Case> find_case(const nlohmann::json& config, const DecodingOptions& options,
                              const std::function<bool(const Case&)>& property) {
  for (unsigned seed = 1; seed <= 6; ++seed) {
    auto model = random_model(config, seed);
    std::mt19937 rng(seed);
    for (int attempt = 0; attempt < 50; ++attempt) {
      Case c{model, random_source(rng, 2 + attempt % 9, model->transformer()), {}};
      c.greedy = greedy(model->transformer(), c.source, options);
      if (property(c)) return c;
    }
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------
// Beam search against brute force.

// vocab 6, d_model 8, 2 heads, 1+1 layers, ffn 8; eos 1, pad 0, decoder_start 0: small
// enough to enumerate every output of up to 4 tokens (781 of them).
nlohmann::json brute_force_config() {
  return with(tiny_config(), {{"vocab_size", 6},
                              {"d_model", 8},
                              {"encoder_layers", 1},
                              {"decoder_layers", 1},
                              {"encoder_ffn_dim", 8},
                              {"decoder_ffn_dim", 8}});
}

struct Output {
  std::vector<int> ids;
  double score;  // sum of teacher-forced log-probs
  bool finished;
};

// Every output a search of at most max_length tokens can produce: each eos-free prefix
// of length < max_length followed by eos (finished), and each eos-free sequence of
// max_length tokens (cut there, unfinished). Scored by teacher forcing (score_target).
std::vector<Output> every_output(const Transformer& t, std::span<const int> source, Index max_length) {
  const int vocab = static_cast<int>(t.decoder.vocab_size());
  const int eos = t.tokens.eos;
  std::vector<Output> outputs;
  const auto add = [&](std::vector<int> ids, bool finished) {
    const double score = sum(score_target(t, source, ids));
    outputs.push_back({std::move(ids), score, finished});
  };
  std::vector<std::vector<int>> prefixes{{}};  // the eos-free prefixes of one length
  for (Index length = 0; length < max_length; ++length) {
    std::vector<std::vector<int>> longer;
    for (const auto& prefix : prefixes) {
      std::vector<int> ended = prefix;
      ended.push_back(eos);
      add(std::move(ended), true);
      for (int token = 0; token < vocab; ++token) {
        if (token == eos) continue;
        longer.push_back(prefix);
        longer.back().push_back(token);
      }
    }
    prefixes = std::move(longer);
  }
  for (auto& prefix : prefixes) add(std::move(prefix), false);
  return outputs;
}

double normalized(const Output& output, double length_penalty) {
  return output.score / std::pow(static_cast<double>(output.ids.size()), length_penalty);
}

// A beam of 1024 (the widest validate() allows; 6^4 = 1296 is refused) is wide enough
// never to drop a candidate: at most 125 x 6 = 750 candidates exist at a step, so every
// one ranks among the first K, and its pool of K never fills (781 outputs < 1024), so
// the early stop never fires. It must return exactly the best of all outputs.
// Oracle: every output scored by teacher forcing and ranked by score / length^penalty.
// Tolerance 1e-4 on scores: float32 log-probs from the KV cache against the same
// computed all at once (another summation order), at most 4 of them summed.
TEST(BeamSearch, WideBeamReturnsTheExhaustiveBest) {
  constexpr Index kMaxLength = 4;
  constexpr Index kWideBeam = 1024;
  const std::vector<std::vector<int>> sources = {{2, 3, 1}, {5, 4, 4, 2, 1}, {3}, {4, 2, 5, 3, 3, 2, 1}};
  Index compared = 0, unfinished_best = 0;
  for (const bool pre_norm : {false, true}) {
    SCOPED_TRACE(pre_norm ? "pre-norm" : "post-norm");
    const auto model = random_model(with(brute_force_config(), {{"normalize_before", pre_norm}}), 11);
    const Transformer& t = model->transformer();
    for (const auto& source : sources) {
      SCOPED_TRACE(::testing::PrintToString(source));
      const std::vector<Output> outputs = every_output(t, source, kMaxLength);
      ASSERT_EQ(outputs.size(), 1u + 5 + 25 + 125 + 625);
      for (const double penalty : {0.0, 1.0, 0.6}) {
        SCOPED_TRACE("length_penalty " + std::to_string(penalty));
        std::vector<const Output*> ranking;
        for (const Output& o : outputs) ranking.push_back(&o);
        std::ranges::stable_sort(ranking, [&](const Output* a, const Output* b) {
          return normalized(*a, penalty) > normalized(*b, penalty);
        });
        for (const Index n_best : {Index{1}, Index{3}}) {
          // A near-tie within the tolerance would leave the expected order undefined.
          for (Index i = 0; i < n_best; ++i)
            ASSERT_GT(normalized(*ranking[i], penalty) - normalized(*ranking[i + 1], penalty), 1e-4)
                << "near-tie at rank " << i << ": choose another source or seed";
          const auto found = decode(t, source, beam_options(kWideBeam, n_best, penalty, kMaxLength));
          ASSERT_EQ(found.size(), static_cast<std::size_t>(n_best));
          for (Index i = 0; i < n_best; ++i) {
            const Hypothesis& got = found[static_cast<std::size_t>(i)];
            const Output& want = *ranking[static_cast<std::size_t>(i)];
            EXPECT_EQ(got.ids, want.ids) << "rank " << i;
            EXPECT_NEAR(got.score, want.score, 1e-4) << "rank " << i;
            EXPECT_NEAR(got.normalized_score, normalized(want, penalty), 1e-4) << "rank " << i;
            EXPECT_EQ(got.finished, want.finished) << "rank " << i;
            ASSERT_EQ(got.token_logprobs.size(), got.ids.size());
            EXPECT_NEAR(sum(got.token_logprobs), got.score, 1e-9);
            ++compared;
            unfinished_best += want.finished ? 0 : 1;
          }
        }
      }
    }
  }
  // Both kinds of output were at stake: some of the best were cut at max_length.
  EXPECT_GT(unfinished_best, 0);
  EXPECT_LT(unfinished_best, compared);
}

// ---------------------------------------------------------------------------------------
// Beam 1 against a naive greedy loop.

struct NaiveGreedy {
  std::vector<int> ids;
  std::vector<float> logprobs;
  double score = 0.0;
  bool finished = false;
};

// Greedy search written as plainly as possible over Decoder::step: one sequence, the
// argmax of the log-softmax (ties: the lowest id), until eos or max_length. The
// log-softmax is the engine's own ops::log_softmax_rows (checked against the double
// oracle in test_ops), so that the comparison can be bit for bit; the search around it
// is independent of engine/search.cpp.
NaiveGreedy naive_greedy(const Transformer& t, std::span<const int> source, Index max_length) {
  const std::vector<std::vector<int>> sources{std::vector<int>(source.begin(), source.end())};
  const EncodedBatch memory = encode_batch(t, sources);
  DecoderState state;
  t.decoder.start(state, memory, std::vector<Index>{0}, 1, max_length);
  Matrix logits;
  NaiveGreedy out;
  int token = t.tokens.decoder_start;
  while (static_cast<Index>(out.ids.size()) < max_length) {
    t.decoder.step(state, std::span<const int>(&token, 1), logits);
    std::vector<float> row(logits.row(0).begin(), logits.row(0).end());
    ops::log_softmax_rows(MatrixRef(row.data(), 1, static_cast<Index>(row.size())));
    std::size_t best = 0;
    for (std::size_t v = 1; v < row.size(); ++v)
      if (row[v] > row[best]) best = v;
    token = static_cast<int>(best);
    out.ids.push_back(token);
    out.logprobs.push_back(row[best]);
    out.score += row[best];
    if (token == t.tokens.eos) {
      out.finished = true;
      break;
    }
  }
  return out;
}

// search.h's contract: a beam of 1 is greedy search, token for token and bit for bit.
// Oracle: naive_greedy above. Tolerance: none (EXPECT_EQ on floats and doubles): both
// run the same decoder on one sequence and sum the same floats in the same order.
TEST(GreedySearch, BeamOfOneIsANaiveGreedyLoopBitForBit) {
  constexpr Index kMaxLength = 16;
  int finished = 0, cut = 0;
  for (const auto& variant : every_scheme_and_norm()) {
    SCOPED_TRACE(variant.dump());
    // vocab 8 so that eos (1 in 8) ends some outputs before max_length.
    const auto model = random_model(with(with(tiny_config(), {{"vocab_size", 8}}), variant), 5);
    const Transformer& t = model->transformer();
    std::mt19937 rng(17);
    for (int i = 0; i < 6; ++i) {
      const auto source = random_source(rng, 1 + 3 * i, t);
      SCOPED_TRACE(::testing::PrintToString(source));
      const NaiveGreedy want = naive_greedy(t, source, kMaxLength);
      const auto got = decode(t, source, beam_options(1, 1, 1.0, kMaxLength));
      ASSERT_EQ(got.size(), 1u);
      const Hypothesis& h = got.front();
      EXPECT_EQ(h.ids, want.ids);
      EXPECT_EQ(h.token_logprobs, want.logprobs);
      EXPECT_EQ(h.score, want.score);
      EXPECT_EQ(h.finished, want.finished);
      EXPECT_EQ(h.normalized_score, want.score / static_cast<double>(want.ids.size()));
      (want.finished ? finished : cut) += 1;
    }
  }
  // Both ways of ending were compared.
  EXPECT_GT(finished, 0);
  EXPECT_GT(cut, 0);
}

// ---------------------------------------------------------------------------------------
// Narrow beams against the spec in search.h, written out naively.

// The log-probabilities (double) of the token after `prefix`: the decoder fed
// [decoder_start, prefix...] one token at a time, its last raw logits log-softmaxed.
std::vector<double> next_logprobs(const Transformer& t, std::span<const int> source, std::span<const int> prefix) {
  std::vector<int> fed(prefix.begin(), prefix.end());
  fed.push_back(0);  // raw_logits reads one row per token; the last one's value is unused
  const std::vector<float> logits = raw_logits(t, source, fed).back();
  const double most = *std::ranges::max_element(logits);
  double total = 0.0;
  for (const float x : logits) total += std::exp(x - most);
  std::vector<double> logprobs;
  for (const float x : logits) logprobs.push_back(x - most - std::log(total));
  return logprobs;
}

struct SpecRun {
  std::vector<Hypothesis> best;
  bool stopped_early = false;    // the pool rule ended the search before max_length
  bool dropped_an_eos = false;   // an eos candidate ranked in [K, 2K) was left out of a
                                 // pool that would have taken it
  bool replaced_in_pool = false; // a full pool swapped its worst for a better one
};

// search.h's beam search, per source, as its header comment states it, on one source:
// no batching, no per-beam top-2K shortcut, histories recomputed from scratch.
SpecRun spec_beam_search(const Transformer& t, std::span<const int> source, const DecodingOptions& options) {
  const Index k = options.beam_size;
  const auto normalize = [&](double score, std::size_t length) {
    return score / std::pow(static_cast<double>(length), options.length_penalty);
  };
  struct Pooled {
    Hypothesis h;
    int order;
  };
  std::vector<Pooled> pool;
  int offered = 0;
  SpecRun run;
  const auto worst = [&] {
    return std::ranges::min_element(pool, [](const Pooled& a, const Pooled& b) {
      return a.h.normalized_score < b.h.normalized_score ||
             (a.h.normalized_score == b.h.normalized_score && a.order > b.order);
    });
  };
  const auto offer = [&](Hypothesis h) {
    h.normalized_score = normalize(h.score, h.ids.size());
    if (static_cast<Index>(pool.size()) < k) {
      pool.push_back({std::move(h), offered++});
    } else if (h.normalized_score > worst()->h.normalized_score) {
      *worst() = {std::move(h), offered++};
      run.replaced_in_pool = true;
    } else {
      ++offered;
    }
  };

  std::vector<Hypothesis> live(1);
  for (std::size_t length = 1;; ++length) {
    struct Candidate {
      double total;
      std::size_t beam;
      int token;
      double logprob;
    };
    std::vector<Candidate> candidates;
    for (std::size_t b = 0; b < live.size(); ++b) {
      const auto logprobs = next_logprobs(t, source, live[b].ids);
      for (std::size_t v = 0; v < logprobs.size(); ++v)
        candidates.push_back({live[b].score + logprobs[v], b, static_cast<int>(v), logprobs[v]});
    }
    std::ranges::stable_sort(candidates, [](const Candidate& a, const Candidate& b) {
      if (a.total != b.total) return a.total > b.total;
      if (a.beam != b.beam) return a.beam < b.beam;
      return a.token < b.token;
    });
    std::vector<Hypothesis> next;
    for (std::size_t rank = 0; rank < candidates.size() && rank < static_cast<std::size_t>(2 * k) &&
                               static_cast<Index>(next.size()) < k;
         ++rank) {
      const Candidate& c = candidates[rank];
      Hypothesis h = live[c.beam];
      h.ids.push_back(c.token);
      h.token_logprobs.push_back(static_cast<float>(c.logprob));
      h.score = c.total;
      if (c.token != t.tokens.eos) {
        next.push_back(std::move(h));
      } else if (static_cast<Index>(rank) < k) {
        h.finished = true;
        offer(std::move(h));
      } else if (static_cast<Index>(pool.size()) < k || normalize(h.score, h.ids.size()) > worst()->h.normalized_score) {
        run.dropped_an_eos = true;
      }
    }
    if (next.empty()) break;
    if (static_cast<Index>(length) >= options.max_length) {
      for (Hypothesis& h : next) offer(std::move(h));
      break;
    }
    if (static_cast<Index>(pool.size()) >= k) {
      double best_live = -INFINITY;
      for (const Hypothesis& h : next) best_live = std::max(best_live, h.score);
      if (normalize(best_live, length) <= worst()->h.normalized_score) {
        run.stopped_early = true;
        break;
      }
    }
    live = std::move(next);
  }
  std::ranges::stable_sort(pool, [](const Pooled& a, const Pooled& b) {
    return a.h.normalized_score > b.h.normalized_score ||
           (a.h.normalized_score == b.h.normalized_score && a.order < b.order);
  });
  for (std::size_t i = 0; i < pool.size() && static_cast<Index>(i) < options.n_best; ++i)
    run.best.push_back(std::move(pool[i].h));
  return run;
}

// Beams of 2 to 4, where candidates are dropped, eos candidates ranked below K are lost,
// the pool fills and the early stop fires, give what the spec gives.
// Oracle: spec_beam_search above, with log-probs in double from one sequence fed from
// scratch. Tolerance 1e-4 on scores (float vs double log-probs, up to 10 of them);
// ids exactly (these seeds have no candidate ties that close).
TEST(BeamSearch, NarrowBeamsFollowTheSpec) {
  constexpr Index kMaxLength = 10;
  // Raises eos's logit so that hypotheses finish often: the pool fills, and eos
  // candidates compete for the first K ranks.
  constexpr float kEosBias = 2.5f;
  int stopped_early = 0, dropped_an_eos = 0, replaced_in_pool = 0, cut = 0;
  for (const bool pre_norm : {false, true}) {
    SCOPED_TRACE(pre_norm ? "pre-norm" : "post-norm");
    const auto model = random_model(with(tiny_config(), {{"vocab_size", 6}, {"normalize_before", pre_norm}}), 19,
                                    [](std::vector<NamedTensor>& tensors) {
                                      for (NamedTensor& tensor : tensors)
                                        if (tensor.name == "final_logits_bias") tensor.values[1] += kEosBias;
                                    });
    const Transformer& t = model->transformer();
    std::mt19937 rng(23);
    for (int i = 0; i < 6; ++i) {
      const auto source = random_source(rng, 1 + 2 * i, t);
      SCOPED_TRACE(::testing::PrintToString(source));
      for (const double penalty : {0.0, 1.0, 0.6}) {
        for (const Index beam : {Index{2}, Index{3}, Index{4}}) {
          SCOPED_TRACE("beam " + std::to_string(beam) + ", length_penalty " + std::to_string(penalty));
          const DecodingOptions options = beam_options(beam, beam, penalty, kMaxLength);
          const SpecRun want = spec_beam_search(t, source, options);
          const std::vector<Hypothesis> got = decode(t, source, options);
          ASSERT_EQ(got.size(), want.best.size());
          for (std::size_t h = 0; h < got.size(); ++h) {
            EXPECT_EQ(got[h].ids, want.best[h].ids) << "hypothesis " << h;
            EXPECT_NEAR(got[h].score, want.best[h].score, 1e-4) << "hypothesis " << h;
            EXPECT_NEAR(got[h].normalized_score, want.best[h].normalized_score, 1e-4) << "hypothesis " << h;
            EXPECT_EQ(got[h].finished, want.best[h].finished) << "hypothesis " << h;
            reference::expect_close(got[h].token_logprobs, reference::to_double(want.best[h].token_logprobs), 1e-4, 0.0);
            cut += want.best[h].finished ? 0 : 1;
          }
          stopped_early += want.stopped_early ? 1 : 0;
          dropped_an_eos += want.dropped_an_eos ? 1 : 0;
          replaced_in_pool += want.replaced_in_pool ? 1 : 0;
        }
      }
    }
  }
  // Every rule of the spec was in play somewhere.
  EXPECT_GT(stopped_early, 0);
  EXPECT_GT(dropped_an_eos, 0);
  EXPECT_GT(replaced_in_pool, 0);
  EXPECT_GT(cut, 0);
}

// Ties, on a model whose every logit is exactly 0 (zero embeddings, tied to the output
// projection, and zero final_logits_bias): every token has log-prob L = -log 8, so every
// candidate of a step has the same total, and only the tie rules decide. Vocabulary 8:
// the sums k L and the normalized scores below are exact in double.
// Oracle: the spec in search.h, worked by hand (ranks are by beam, then by id):
//   length_penalty 1, K = 2: step 1 ranks [0], [1]=eos, [2]: [1] is pooled, [0] and [2]
//   live. Step 2 ranks [0,0], [0,1]=eos, [0,2]: [0,1] is pooled (pool full), and the best
//   live beam, 2L/2 = L, does not beat the worst pooled, L: done. Both pooled are at L;
//   the earlier offered comes first: [1], then [0,1].
//   length_penalty 2 (longer is better: k L / k^2 = L / k), K = 2, max_length 4: each
//   step's eos candidate [0,...,0,1] replaces the worst pooled, and at max_length the
//   live [0,0,0,0] (L/4) replaces [0,0,1] (L/3); [0,0,0,2] ties the worst and is not
//   taken. Best first: [0,0,0,1] (offered before [0,0,0,0], both at L/4).
//   Beam 1: token 0 every step, cut at max_length.
TEST(BeamSearch, TiesGoToTheEarlierBeamThenTheLowerIdThenTheEarlierFinished) {
  const auto model = random_model(with(tiny_config(), {{"vocab_size", 8}}), 1, [](std::vector<NamedTensor>& tensors) {
    for (NamedTensor& tensor : tensors)
      if (tensor.name == "model.shared.weight" || tensor.name == "final_logits_bias")
        std::fill(tensor.values.begin(), tensor.values.end(), 0.0f);
  });
  const Transformer& t = model->transformer();
  const std::vector<int> source = {2, 3, 1};
  const double l = decode(t, source, beam_options(1, 1, 0.0, 1)).front().score;
  ASSERT_EQ(l, static_cast<double>(-static_cast<float>(std::log(8.0)))) << "the logits are not all equal";

  const auto ids_of = [](const std::vector<Hypothesis>& found) {
    std::vector<std::vector<int>> ids;
    for (const Hypothesis& h : found) ids.push_back(h.ids);
    return ids;
  };
  const auto finished_of = [](const std::vector<Hypothesis>& found) {
    std::vector<bool> finished;
    for (const Hypothesis& h : found) finished.push_back(h.finished);
    return finished;
  };

  const auto even = decode(t, source, beam_options(2, 2, 1.0, 4));
  EXPECT_EQ(ids_of(even), (std::vector<std::vector<int>>{{1}, {0, 1}}));
  EXPECT_EQ(finished_of(even), (std::vector<bool>{true, true}));

  const auto longer_is_better = decode(t, source, beam_options(2, 2, 2.0, 4));
  EXPECT_EQ(ids_of(longer_is_better), (std::vector<std::vector<int>>{{0, 0, 0, 1}, {0, 0, 0, 0}}));
  EXPECT_EQ(finished_of(longer_is_better), (std::vector<bool>{true, false}));
  ASSERT_EQ(longer_is_better.size(), 2u);
  EXPECT_EQ(longer_is_better[0].normalized_score, 4 * l / 16);
  EXPECT_EQ(longer_is_better[1].normalized_score, 4 * l / 16);

  const auto greedy_ties = decode(t, source, beam_options(1, 1, 1.0, 4));
  EXPECT_EQ(ids_of(greedy_ties), (std::vector<std::vector<int>>{{0, 0, 0, 0}}));
  EXPECT_EQ(finished_of(greedy_ties), (std::vector<bool>{false}));
}

// Beam search keeps the greedy path among its candidates at every step, and without a
// length penalty scores only fall as outputs grow, so its best is normally at least the
// greedy output. (Not a theorem: greedy's prefix can be pushed out by K better prefixes
// that all end badly later; on these fixed models and sources it does not happen, and a
// failure here means either that or a bug in the ranking.)
// Oracle: decode at beam 1. Tolerance 1e-4, the oracle tolerance: the same hypothesis
// reached with one live sequence (matrix-vector products) or four (GEMM) is computed in
// another summation order, and its up to 12 float log-probs may differ in the last bits.
TEST(BeamSearch, BestBeamScoresAtLeastGreedyWithoutLengthPenalty) {
  constexpr Index kMaxLength = 12;
  int strictly_better = 0, compared = 0;
  for (unsigned seed = 1; seed <= 3; ++seed) {
    const auto model = random_model(with(tiny_config(), {{"vocab_size", 8}}), 40 + seed);
    const Transformer& t = model->transformer();
    std::mt19937 rng(seed);
    for (int i = 0; i < 40; ++i) {
      const auto source = random_source(rng, 1 + i % 10, t);
      SCOPED_TRACE(::testing::PrintToString(source));
      const Hypothesis greedy_best = decode(t, source, beam_options(1, 1, 0.0, kMaxLength)).front();
      const Hypothesis beam_best = decode(t, source, beam_options(4, 1, 0.0, kMaxLength)).front();
      EXPECT_GE(beam_best.score, greedy_best.score - 1e-4);
      strictly_better += beam_best.score > greedy_best.score + 1e-4 ? 1 : 0;
      ++compared;
    }
  }
  // The beam is not just greedy search again: it finds better outputs on some sources.
  EXPECT_GT(strictly_better, 0);
  EXPECT_LT(strictly_better, compared);
}

// ---------------------------------------------------------------------------------------
// Batching.

// Sources of lengths spread from 1 to 40 (the longest the encoder's positions allow).
std::vector<std::vector<int>> spread_sources(const Transformer& t) {
  std::mt19937 rng(29);
  std::vector<std::vector<int>> sources;
  for (Index i = 0; i < 12; ++i) sources.push_back(random_source(rng, 1 + (39 * i) / 11, t));
  return sources;
}

// Decoding a batch gives each source what decoding it alone gives: the same ids, and
// token log-probs within 1e-4 absolute (the batch runs its GEMMs over more rows, which
// may sum in another order; padding and the other sources must change nothing else).
// Greedy, and beam 3 with n_best 3 (beam and batch together), with max_length 20; and
// greedy with the automatic max_length, 2 x source length + 10, which differs from
// source to source (capped at 64 for learned positions).
// max_position_embeddings 64 lets the learned table hold 40 source and 20 target
// positions.
TEST(BatchedSearch, EachSourceDecodesAsItWouldAlone) {
  for (const auto& variant : every_scheme_and_norm()) {
    SCOPED_TRACE(variant.dump());
    const auto model = random_model(with(with(tiny_config(), {{"max_position_embeddings", 64}}), variant), 7);
    const Transformer& t = model->transformer();
    const auto sources = spread_sources(t);
    for (const DecodingOptions& options :
         {beam_options(1, 1, 1.0, 20), beam_options(3, 3, 1.0, 20), beam_options(1, 1, 1.0, 0)}) {
      SCOPED_TRACE("beam " + std::to_string(options.beam_size) + ", max_length " + std::to_string(options.max_length));
      const std::vector<DecodeResult> batch = decode_batch(t, sources, options);
      ASSERT_EQ(batch.size(), sources.size());
      for (std::size_t i = 0; i < sources.size(); ++i) {
        SCOPED_TRACE("source " + std::to_string(i) + " of length " + std::to_string(sources[i].size()));
        ASSERT_TRUE(batch[i].ok()) << batch[i].error;
        const std::vector<Hypothesis> alone = decode(t, sources[i], options);
        ASSERT_EQ(batch[i].hypotheses.size(), alone.size());
        for (std::size_t h = 0; h < alone.size(); ++h) {
          const Hypothesis& got = batch[i].hypotheses[h];
          EXPECT_EQ(got.ids, alone[h].ids) << "hypothesis " << h;
          EXPECT_EQ(got.finished, alone[h].finished) << "hypothesis " << h;
          reference::expect_close(got.token_logprobs, reference::to_double(alone[h].token_logprobs), 1e-4, 0.0);
        }
      }
    }
  }
}

// score_batch gives each pair what score_target gives it alone, for sources and
// targets of mixed lengths (1 to 20 target tokens, so each is padded differently).
// Tolerance 1e-4 absolute per token, as above.
TEST(BatchedSearch, EachPairScoresAsItWouldAlone) {
  for (const auto& variant : every_scheme_and_norm()) {
    SCOPED_TRACE(variant.dump());
    const auto model = random_model(with(with(tiny_config(), {{"max_position_embeddings", 64}}), variant), 8);
    const Transformer& t = model->transformer();
    const auto sources = spread_sources(t);
    std::mt19937 rng(31);
    std::vector<std::vector<int>> targets;
    for (std::size_t i = 0; i < sources.size(); ++i)
      targets.push_back(random_source(rng, 1 + static_cast<Index>((i * 7) % 20), t));
    const std::vector<Score> batch = score_batch(t, sources, targets);
    ASSERT_EQ(batch.size(), sources.size());
    for (std::size_t i = 0; i < sources.size(); ++i) {
      SCOPED_TRACE("pair " + std::to_string(i));
      ASSERT_TRUE(batch[i].ok()) << batch[i].error;
      const std::vector<float> alone = score_target(t, sources[i], targets[i]);
      ASSERT_EQ(batch[i].token_logprobs.size(), targets[i].size());
      reference::expect_close(batch[i].token_logprobs, reference::to_double(alone), 1e-4, 0.0);
      EXPECT_NEAR(batch[i].logprob, sum(batch[i].token_logprobs), 1e-9);
    }
  }
}

// Decoder-only models continue a batch of prompts of mixed lengths (1 to 20 tokens, so
// the prefill pads them differently) as they would one at a time: same ids, log-probs
// within 1e-4 (the oracle tolerance: GEMMs over more rows may sum in another order).
// Every scheme, post- and pre-norm, grouped-query 2:1, greedy and beam 3; and the LLaMA
// layout. Scoring the prompts in one batch matches scoring each alone too.
TEST(BatchedSearch, DecoderOnlyPromptsContinueAsTheyWouldAlone) {
  std::vector<nlohmann::json> configs;
  for (auto variant : every_scheme_and_norm()) {
    variant.update({{"encoder_layers", 0}, {"num_key_value_heads", 1}, {"max_position_embeddings", 64}});
    configs.push_back(with(tiny_config(), variant));
  }
  configs.push_back({{"model_type", "llama"}, {"vocab_size", 23}, {"hidden_size", 16}, {"intermediate_size", 24},
                     {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                     {"bos_token_id", 2}, {"eos_token_id", 1}});
  for (const auto& config : configs) {
    SCOPED_TRACE(config.dump());
    const auto model = random_model(config, 12);
    const Transformer& t = model->transformer();
    std::mt19937 rng(37);
    std::vector<DecodeRequest> requests;
    std::vector<std::vector<int>> prompts;
    for (Index i = 0; i < 8; ++i) {
      std::vector<int> prompt = random_source(rng, 1 + (19 * i) / 7, t);
      prompt.pop_back();  // random_source ends with eos; a prompt need not
      if (prompt.empty()) prompt.push_back(5);
      prompts.push_back(prompt);
      requests.push_back({{}, prompt});
    }
    for (const DecodingOptions& options : {beam_options(1, 1, 1.0, 12), beam_options(3, 2, 1.0, 12)}) {
      SCOPED_TRACE("beam " + std::to_string(options.beam_size));
      DecodeWorkspace workspace;
      const std::vector<DecodeResult> batch = decode_requests(t, requests, options, {}, workspace);
      for (std::size_t i = 0; i < requests.size(); ++i) {
        SCOPED_TRACE("prompt " + std::to_string(i));
        const DecodeResult alone = decode_requests(t, std::span(&requests[i], 1), options, {}, workspace).front();
        ASSERT_TRUE(batch[i].ok()) << batch[i].error;
        ASSERT_TRUE(alone.ok()) << alone.error;
        ASSERT_EQ(batch[i].hypotheses.size(), alone.hypotheses.size());
        for (std::size_t h = 0; h < alone.hypotheses.size(); ++h) {
          EXPECT_EQ(batch[i].hypotheses[h].ids, alone.hypotheses[h].ids);
          reference::expect_close(batch[i].hypotheses[h].token_logprobs,
                                  reference::to_double(alone.hypotheses[h].token_logprobs), 1e-4, 0.0);
        }
      }
    }
    std::vector<std::vector<int>> scored;
    for (const auto& p : prompts)
      if (p.size() >= 2) scored.push_back(p);
    const std::vector<Score> together = score_batch(t, {}, scored);
    for (std::size_t i = 0; i < scored.size(); ++i) {
      ASSERT_TRUE(together[i].ok()) << together[i].error;
      reference::expect_close(together[i].token_logprobs, reference::to_double(score_target(t, {}, scored[i])), 1e-4, 0.0);
    }
  }
}

// A workspace carried from call to call gives, bit for bit, what a fresh one gives:
// nothing left in its buffers by a larger batch, a wider beam, sampling or scoring
// leaks into the next call. The calls alternate shapes (the workspace grows, then
// serves smaller batches from larger buffers, then grows again). Oracle: the same call
// with its own new workspace; exact equality, as both run the same arithmetic.
TEST(BatchedSearch, AReusedWorkspaceGivesWhatAFreshOneGives) {
  const auto model = random_model(with(tiny_config(), {{"max_position_embeddings", 64}}), 10);
  const Transformer& t = model->transformer();
  const auto sources = spread_sources(t);
  const std::vector<std::vector<int>> few(sources.begin(), sources.begin() + 3);
  const std::vector<std::vector<int>> targets(sources.rbegin(), sources.rend());
  DecodingOptions sampled = beam_options(1, 1, 1.0, 20);
  sampled.sample = true;
  sampled.seed = 5;

  DecodeWorkspace reused;
  const auto same_decode = [&](std::span<const std::vector<int>> batch, const DecodingOptions& options) {
    const auto got = decode_batch(t, batch, options, {}, reused);
    const auto fresh = decode_batch(t, batch, options);
    ASSERT_EQ(got.size(), fresh.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].hypotheses.size(), fresh[i].hypotheses.size()) << "source " << i;
      for (std::size_t h = 0; h < got[i].hypotheses.size(); ++h) {
        EXPECT_EQ(got[i].hypotheses[h].ids, fresh[i].hypotheses[h].ids) << "source " << i;
        EXPECT_EQ(got[i].hypotheses[h].token_logprobs, fresh[i].hypotheses[h].token_logprobs) << "source " << i;
      }
    }
  };
  const auto same_scores = [&](std::span<const std::vector<int>> batch, std::span<const std::vector<int>> wanted) {
    const auto got = score_batch(t, batch, wanted, reused);
    const auto fresh = score_batch(t, batch, wanted);
    ASSERT_EQ(got.size(), fresh.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].token_logprobs, fresh[i].token_logprobs) << "pair " << i;
  };
  {
    SCOPED_TRACE("12 sources, beam 4");
    same_decode(sources, beam_options(4, 2, 1.0, 20));
  }
  {
    SCOPED_TRACE("3 sources, greedy");
    same_decode(few, beam_options(1, 1, 1.0, 0));
  }
  {
    SCOPED_TRACE("12 pairs scored");
    same_scores(sources, targets);
  }
  {
    SCOPED_TRACE("3 sources sampled");
    same_decode(few, sampled);
  }
  {
    SCOPED_TRACE("12 sources, beam 5, longer outputs");
    same_decode(sources, beam_options(5, 5, 0.5, 24));
  }
  {
    SCOPED_TRACE("3 pairs scored");
    same_scores(few, std::span(targets).first(3));
  }
}

// One source that cannot be decoded (empty, an id outside the vocabulary, longer than
// the learned positions) gets an error of its own; the others decode as they would
// alone. Oracle: decode() of each good source; tolerance 1e-4 as above.
TEST(BatchedSearch, BadSourcesFailAloneNotTheBatch) {
  const auto model = random_model(with(tiny_config(), {{"position_encoding", "learned"}}), 9);
  const Transformer& t = model->transformer();
  const std::vector<std::vector<int>> sources = {
      {5, 9, 3, 1}, {}, {7, 2, 13, 11, 1}, {3, 23, 1}, {4, 1}, std::vector<int>(41, 6)};
  const std::vector<std::size_t> bad = {1, 3, 5};
  const std::vector<std::vector<const char*>> mentions = {{"empty"}, {"id 23"}, {"max_position_embeddings"}};
  for (const Index beam : {Index{1}, Index{3}}) {
    SCOPED_TRACE("beam " + std::to_string(beam));
    const DecodingOptions options = beam_options(beam, 2 <= beam ? 2 : 1, 1.0, 12);
    const std::vector<DecodeResult> batch = decode_batch(t, sources, options);
    ASSERT_EQ(batch.size(), sources.size());
    for (std::size_t i = 0; i < sources.size(); ++i) {
      SCOPED_TRACE("source " + std::to_string(i));
      const auto where = std::ranges::find(bad, i);
      if (where != bad.end()) {
        EXPECT_FALSE(batch[i].ok());
        EXPECT_TRUE(batch[i].hypotheses.empty());
        for (const char* part : mentions[static_cast<std::size_t>(where - bad.begin())])
          EXPECT_NE(batch[i].error.find(part), std::string::npos) << batch[i].error;
        continue;
      }
      ASSERT_TRUE(batch[i].ok()) << batch[i].error;
      const std::vector<Hypothesis> alone = decode(t, sources[i], options);
      ASSERT_EQ(batch[i].hypotheses.size(), alone.size());
      for (std::size_t h = 0; h < alone.size(); ++h) {
        EXPECT_EQ(batch[i].hypotheses[h].ids, alone[h].ids);
        reference::expect_close(batch[i].hypotheses[h].token_logprobs, reference::to_double(alone[h].token_logprobs),
                                1e-4, 0.0);
      }
    }
  }
  // Scoring too: a bad target fails its own pair only.
  const std::vector<std::vector<int>> score_sources = {{5, 9, 3, 1}, {4, 1}, {7, 2, 1}};
  const std::vector<std::vector<int>> targets = {{3, 4, 1}, {3, 99, 1}, {}};
  const std::vector<Score> scored = score_batch(t, score_sources, targets);
  ASSERT_EQ(scored.size(), 3u);
  ASSERT_TRUE(scored[0].ok()) << scored[0].error;
  reference::expect_close(scored[0].token_logprobs, reference::to_double(score_target(t, score_sources[0], targets[0])),
                          1e-4, 0.0);
  EXPECT_NE(scored[1].error.find("id 99"), std::string::npos) << scored[1].error;
  EXPECT_NE(scored[2].error.find("empty"), std::string::npos) << scored[2].error;
}

// ---------------------------------------------------------------------------------------
// Output constraints. Each test shows the unconstrained output breaking the rule (so the
// check has something to catch), the constrained output keeping it, and the constrained
// output equal to greedy search with the rule applied by hand.

// The rules of logits_processor.h written out by hand, in double, on one row of raw
// logits: CTRL's penalty on every distinct used token, log-softmax, then -inf for eos
// before min_length and for every token that would complete an n-gram already used.
std::vector<double> hand_processed(std::span<const float> logits, std::span<const int> used,
                                   const DecodingOptions& rules, int eos) {
  std::vector<double> z(logits.begin(), logits.end());
  const double penalty = rules.repetition_penalty;
  for (const int token : std::set<int>(used.begin(), used.end())) {
    double& x = z[static_cast<std::size_t>(token)];
    x = x > 0 ? x / penalty : x * penalty;
  }
  const double most = *std::ranges::max_element(z);
  double total = 0.0;
  for (const double x : z) total += std::exp(x - most);
  for (double& x : z) x = x - most - std::log(total);

  if (static_cast<Index>(used.size()) + 1 < rules.min_length) z[static_cast<std::size_t>(eos)] = -INFINITY;
  const auto n = static_cast<std::size_t>(rules.no_repeat_ngram_size);
  if (n > 0 && used.size() + 1 >= n) {
    for (std::size_t v = 0; v < z.size(); ++v) {
      std::vector<int> gram(used.end() - static_cast<std::ptrdiff_t>(n - 1), used.end());  // the last n-1 used
      gram.push_back(static_cast<int>(v));
      for (std::size_t start = 0; start + n <= used.size(); ++start)
        if (std::equal(gram.begin(), gram.end(), used.begin() + static_cast<std::ptrdiff_t>(start)))
          z[v] = -INFINITY;
    }
  }
  return z;
}

// Greedy search over Decoder::step on hand_processed rows: the argmax (ties: the lowest
// id) until eos or rules.max_length.
NaiveGreedy hand_constrained_greedy(const Transformer& t, std::span<const int> source, const DecodingOptions& rules) {
  const std::vector<std::vector<int>> sources{std::vector<int>(source.begin(), source.end())};
  const EncodedBatch memory = encode_batch(t, sources);
  DecoderState state;
  t.decoder.start(state, memory, std::vector<Index>{0}, 1, rules.max_length);
  Matrix logits;
  NaiveGreedy out;
  int token = t.tokens.decoder_start;
  while (static_cast<Index>(out.ids.size()) < rules.max_length) {
    t.decoder.step(state, std::span<const int>(&token, 1), logits);
    const std::vector<double> row = hand_processed(logits.row(0), out.ids, rules, t.tokens.eos);
    std::size_t best = 0;
    for (std::size_t v = 1; v < row.size(); ++v)
      if (row[v] > row[best]) best = v;
    token = static_cast<int>(best);
    out.ids.push_back(token);
    out.logprobs.push_back(static_cast<float>(row[best]));
    out.score += row[best];
    if (token == t.tokens.eos) {
      out.finished = true;
      break;
    }
  }
  return out;
}

// Oracle: hand_constrained_greedy. Ids exactly; log-probs within 1e-5 (float vs double
// log-softmax of the same logits, values of a few units).
void expect_hand_greedy(const Hypothesis& got, const NaiveGreedy& want,
                        reference::CallSite where = reference::CallSite::here()) {
  SCOPED_TRACE(::testing::Message() << "called from line " << where.line);
  EXPECT_EQ(got.ids, want.ids);
  EXPECT_EQ(got.finished, want.finished);
  reference::expect_close(got.token_logprobs, reference::to_double(want.logprobs), 1e-5, 0.0);
}

// Tokens a constraint makes impossible are not renormalized away (logits_processor.h):
// the reported log-probs are the model's own. Oracle: score_target; tolerance 1e-4 as
// for batching (incremental vs all at once).
void expect_unrenormalized(const Transformer& t, std::span<const int> source, const Hypothesis& h) {
  reference::expect_close(h.token_logprobs, reference::to_double(score_target(t, source, h.ids)), 1e-4, 0.0);
}

// The first t at which ids[t-n+1..t] repeats an n-gram that ended before t; nullopt
// when no n-gram repeats.
std::optional<std::size_t> first_repeated_ngram(std::span<const int> ids, std::size_t n) {
  for (std::size_t t = n - 1; t < ids.size(); ++t)
    for (std::size_t end = n - 1; end < t; ++end)
      if (std::equal(ids.begin() + static_cast<std::ptrdiff_t>(t + 1 - n), ids.begin() + static_cast<std::ptrdiff_t>(t + 1),
                     ids.begin() + static_cast<std::ptrdiff_t>(end + 1 - n)))
        return t;
  return std::nullopt;
}

bool same_prefix(std::span<const int> a, std::span<const int> b, std::size_t length) {
  return a.size() >= length && b.size() >= length && std::equal(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(length), b.begin());
}

// Greedy search stops after 1 to 3 tokens; min_length N (chosen so that eos comes at
// exactly the N-th token, the earliest the rule allows) makes it go on to N.
TEST(Constraints, MinLengthForbidsAnEarlierEos) {
  constexpr Index kMaxLength = 12;
  DecodingOptions options = beam_options(1, 1, 1.0, kMaxLength);
  Index n = 0;
  const auto found = find_case(with(tiny_config(), {{"vocab_size", 8}}), options, [&](const Case& c) {
    if (!c.greedy.finished || c.greedy.ids.size() > 3) return false;
    for (n = static_cast<Index>(c.greedy.ids.size()) + 1; n <= kMaxLength; ++n) {
      DecodingOptions rules = options;
      rules.min_length = n;
      const NaiveGreedy want = hand_constrained_greedy(c.model->transformer(), c.source, rules);
      if (want.finished && static_cast<Index>(want.ids.size()) == n) return true;
    }
    return false;
  });
  ASSERT_TRUE(found) << "no source with a short greedy output that ends as soon as min_length allows";
  const Transformer& t = found->model->transformer();
  const std::vector<int>& plain = found->greedy.ids;
  // Without the option the output is shorter than the minimum.
  ASSERT_LT(static_cast<Index>(plain.size()), n);

  options.min_length = n;
  const Hypothesis constrained = greedy(t, found->source, options);
  expect_hand_greedy(constrained, hand_constrained_greedy(t, found->source, options));
  // Exactly n: eos is impossible before the n-th token, and possible (chosen) at it.
  EXPECT_EQ(static_cast<Index>(constrained.ids.size()), n);
  EXPECT_TRUE(constrained.finished);
  EXPECT_FALSE(contains(std::span<const int>(constrained.ids).first(static_cast<std::size_t>(n - 1)), t.tokens.eos));
  // Up to where greedy chose eos, nothing changes.
  EXPECT_TRUE(same_prefix(plain, constrained.ids, plain.size() - 1));
  expect_unrenormalized(t, found->source, constrained);

  options.beam_size = 3;
  options.n_best = 3;
  for (const Hypothesis& h : decode(t, found->source, options)) {
    EXPECT_GE(static_cast<Index>(h.ids.size()), n);
    EXPECT_FALSE(contains(std::span<const int>(h.ids).first(static_cast<std::size_t>(n - 1)), t.tokens.eos));
  }
}

// Greedy search repeats a bigram (and, on another source, a trigram); with
// no_repeat_ngram_size 2 (3) no bigram (trigram) occurs twice.
TEST(Constraints, NoRepeatNgramForbidsARepeatedNgram) {
  for (const std::size_t n : {std::size_t{2}, std::size_t{3}}) {
    SCOPED_TRACE("no_repeat_ngram_size " + std::to_string(n));
    DecodingOptions options = beam_options(1, 1, 1.0, 30);
    const auto found = find_case(tiny_config(), options, [&](const Case& c) {
      return first_repeated_ngram(c.greedy.ids, n).has_value();
    });
    ASSERT_TRUE(found) << "no source whose greedy output repeats an n-gram";
    const Transformer& t = found->model->transformer();
    const std::vector<int>& plain = found->greedy.ids;
    const std::size_t repeat_at = *first_repeated_ngram(plain, n);

    options.no_repeat_ngram_size = static_cast<Index>(n);
    const Hypothesis constrained = greedy(t, found->source, options);
    expect_hand_greedy(constrained, hand_constrained_greedy(t, found->source, options));
    EXPECT_EQ(first_repeated_ngram(constrained.ids, n), std::nullopt) << ::testing::PrintToString(constrained.ids);
    // The ban changes nothing before the first repeat, and that token there.
    ASSERT_GT(constrained.ids.size(), repeat_at);
    EXPECT_TRUE(same_prefix(plain, constrained.ids, repeat_at));
    EXPECT_NE(constrained.ids[repeat_at], plain[repeat_at]);
    expect_unrenormalized(t, found->source, constrained);

    options.beam_size = 3;
    options.n_best = 3;
    for (const Hypothesis& h : decode(t, found->source, options))
      EXPECT_EQ(first_repeated_ngram(h.ids, n), std::nullopt) << ::testing::PrintToString(h.ids);
  }
}

// Greedy repeats token x at step r. A penalty lowers the log-prob x gets there, and a
// large one steers the output to a token not yet used; before r nothing changes (the
// penalty only lowers tokens already used, and greedy chose none of those before r).
TEST(Constraints, RepetitionPenaltySteersAwayFromARepeat) {
  DecodingOptions options = beam_options(1, 1, 1.0, 20);
  const auto found =
      find_case(tiny_config(), options, [](const Case& c) { return first_repeated_ngram(c.greedy.ids, 1).has_value(); });
  ASSERT_TRUE(found) << "no source whose greedy output repeats a token";
  const Transformer& t = found->model->transformer();
  const std::vector<int>& plain = found->greedy.ids;
  const std::size_t r = *first_repeated_ngram(plain, 1);

  // A mild penalty that still lets x win at r: x's log-prob there is lower than without.
  // (Not a law: penalizing the other used tokens raises x's share. Here x is the most
  // likely token, and its own penalty outweighs that.)
  options.repetition_penalty = 1.1;
  const Hypothesis mild = greedy(t, found->source, options);
  expect_hand_greedy(mild, hand_constrained_greedy(t, found->source, options));
  ASSERT_TRUE(same_prefix(plain, mild.ids, r + 1)) << "the mild penalty already changes the output: choose a milder one";
  EXPECT_LT(mild.token_logprobs[r], found->greedy.token_logprobs[r]);
  // Nothing was used before step 0: no penalty there, bit for bit.
  EXPECT_EQ(mild.token_logprobs[0], found->greedy.token_logprobs[0]);

  options.repetition_penalty = 10.0;
  const Hypothesis strong = greedy(t, found->source, options);
  expect_hand_greedy(strong, hand_constrained_greedy(t, found->source, options));
  ASSERT_GT(strong.ids.size(), r);
  EXPECT_TRUE(same_prefix(plain, strong.ids, r));
  EXPECT_FALSE(contains(std::span<const int>(strong.ids).first(r), strong.ids[r]))
      << "token " << strong.ids[r] << " repeats at step " << r;
}

// The exact CTRL form, step by step. Oracle: the raw logits (Decoder::step on the
// hypothesis), each token already in the hypothesis's prefix divided by R when its logit
// is positive and multiplied by R when negative, then log-softmax, all in double.
// Tolerance 1e-5: float log-softmax and float logits from a batch of beams vs one
// sequence, on values of a few units.
// Beam 6 over a vocabulary of 6 keeps unlikely continuations too, so that used tokens
// with negative logits get chosen, not only the likely positive ones.
TEST(Constraints, RepetitionPenaltyIsCtrlsFormExactly) {
  constexpr double kPenalty = 1.7;
  const auto model = random_model(with(tiny_config(), {{"vocab_size", 8}}), 13);
  const Transformer& t = model->transformer();
  DecodingOptions options = beam_options(16, 16, 0.0, 8);
  options.repetition_penalty = kPenalty;

  enum Form { kCtrl, kAlwaysDivide, kNone };
  const auto penalized_logprob = [](std::span<const float> logits, std::span<const int> used, int token, Form form) {
    std::vector<double> z(logits.begin(), logits.end());
    for (const int u : std::set<int>(used.begin(), used.end())) {
      double& x = z[static_cast<std::size_t>(u)];
      if (form == kCtrl) x = x > 0 ? x / kPenalty : x * kPenalty;
      if (form == kAlwaysDivide) x = x / kPenalty;
    }
    const double most = *std::ranges::max_element(z);
    double total = 0.0;
    for (const double x : z) total += std::exp(x - most);
    return z[static_cast<std::size_t>(token)] - most - std::log(total);
  };

  int used_positive = 0, used_negative = 0;
  double off_always_divide = 0.0, off_none = 0.0;
  const std::vector<std::vector<int>> sources = {{2, 3, 1}, {5, 4, 4, 2, 1}, {7}, {6, 6, 3, 7, 2, 5, 1}};
  for (const std::vector<int>& source : sources) {
    for (const Hypothesis& h : decode(t, source, options)) {
      SCOPED_TRACE(::testing::PrintToString(h.ids));
      const auto logits = raw_logits(t, source, h.ids);
      for (std::size_t k = 0; k < h.ids.size(); ++k) {
        const auto used = std::span<const int>(h.ids).first(k);
        const int token = h.ids[k];
        EXPECT_NEAR(h.token_logprobs[k], penalized_logprob(logits[k], used, token, kCtrl), 1e-5) << "step " << k;
        off_always_divide = std::max(off_always_divide, std::abs(h.token_logprobs[k] -
                                                                 penalized_logprob(logits[k], used, token, kAlwaysDivide)));
        off_none = std::max(off_none, std::abs(h.token_logprobs[k] - penalized_logprob(logits[k], used, token, kNone)));
        if (contains(used, token)) (logits[k][static_cast<std::size_t>(token)] > 0 ? used_positive : used_negative) += 1;
      }
    }
  }
  // Both branches were exercised on the chosen token itself, and the check tells CTRL's
  // form from dividing every logit and from no penalty at all.
  EXPECT_GT(used_positive, 0);
  EXPECT_GT(used_negative, 0);
  EXPECT_GT(off_always_divide, 1e-3);
  EXPECT_GT(off_none, 1e-3);
}

// ---------------------------------------------------------------------------------------
// Options.

// validate() throws an OptionError whose field() is the option at fault, as
// DecodingOptions spells it (the CLI maps it to its own flag).
TEST(DecodingOptions, ValidateNamesTheBadField) {
  EXPECT_NO_THROW(DecodingOptions{}.validate());  // the defaults are valid: each throw below is the edit's
  const std::vector<std::pair<std::string, std::function<void(DecodingOptions&)>>> cases = {
      {"beam_size", [](DecodingOptions& o) { o.beam_size = 0; }},
      {"n_best", [](DecodingOptions& o) { o.beam_size = 2, o.n_best = 3; }},
      {"temperature", [](DecodingOptions& o) { o.temperature = 0.0; }},
      {"temperature", [](DecodingOptions& o) { o.temperature = -1.0; }},
      {"top_p", [](DecodingOptions& o) { o.top_p = 0.0; }},
      {"top_p", [](DecodingOptions& o) { o.top_p = 1.5; }},
      {"top_k", [](DecodingOptions& o) { o.top_k = -1; }},
      {"sample", [](DecodingOptions& o) { o.sample = true, o.beam_size = 2; }},
      {"min_length", [](DecodingOptions& o) { o.max_length = 5, o.min_length = 6; }},
  };
  for (const auto& [field, edit] : cases) {
    DecodingOptions options;
    edit(options);
    try {
      options.validate();
      ADD_FAILURE() << field << ": no OptionError";
    } catch (const OptionError& e) {
      EXPECT_EQ(e.field(), field) << e.what();
    }
  }
  // The edge values just inside are valid.
  DecodingOptions edge;
  edge.beam_size = 2;
  edge.n_best = 2;
  edge.top_p = 1.0;
  edge.max_length = 5;
  edge.min_length = 5;
  EXPECT_NO_THROW(edge.validate());
  // And every search validates first.
  const auto model = random_model(brute_force_config(), 3);
  DecodingOptions bad;
  bad.beam_size = 0;
  try {
    decode(model->transformer(), std::vector<int>{2, 1}, bad);
    ADD_FAILURE() << "decode accepted beam_size 0";
  } catch (const OptionError& e) {
    EXPECT_EQ(e.field(), "beam_size");
  }
}

}  // namespace
}  // namespace ordo
