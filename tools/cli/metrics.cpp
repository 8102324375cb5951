#include "tools/cli/metrics.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

namespace ordo::tools {

namespace {

using NgramCounts = std::map<std::vector<std::string>, long>;

NgramCounts count_ngrams(const std::vector<std::string>& tokens, std::size_t n) {
  NgramCounts counts;
  for (std::size_t i = 0; i + n <= tokens.size(); ++i)
    ++counts[std::vector<std::string>(tokens.begin() + static_cast<long>(i),
                                      tokens.begin() + static_cast<long>(i + n))];
  return counts;
}

}  // namespace

std::vector<std::string> split_tokens(const std::string& text) {
  std::istringstream stream(text);
  std::vector<std::string> tokens;
  std::string token;
  while (stream >> token) tokens.push_back(token);
  return tokens;
}

BleuStats corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::string>& references) {
  constexpr std::size_t kMaxOrder = 4;
  std::vector<long> matches(kMaxOrder, 0), totals(kMaxOrder, 0);
  BleuStats stats;
  for (std::size_t s = 0; s < hypotheses.size(); ++s) {
    const auto hyp = split_tokens(hypotheses[s]);
    const auto ref = split_tokens(references[s]);
    stats.hypothesis_length += static_cast<long>(hyp.size());
    stats.reference_length += static_cast<long>(ref.size());
    for (std::size_t n = 1; n <= kMaxOrder; ++n) {
      const NgramCounts hyp_counts = count_ngrams(hyp, n);
      const NgramCounts ref_counts = count_ngrams(ref, n);
      for (const auto& [ngram, count] : hyp_counts) {
        const auto found = ref_counts.find(ngram);
        if (found != ref_counts.end()) matches[n - 1] += std::min(count, found->second);
      }
      if (hyp.size() >= n) totals[n - 1] += static_cast<long>(hyp.size() - n + 1);
    }
  }
  // No output, or not a single matching unigram: BLEU 0, as sacreBLEU.
  if (stats.hypothesis_length == 0 || std::all_of(matches.begin(), matches.end(), [](long m) { return m == 0; }))
    return stats;

  double log_sum = 0;
  double smoothing = 1;
  for (std::size_t n = 0; n < kMaxOrder; ++n) {
    double precision;
    if (totals[n] == 0) {
      precision = 0;  // sentence(s) shorter than n: no evidence, BLEU is 0
    } else if (matches[n] == 0) {
      smoothing *= 2;  // sacreBLEU 'exp': 1 / (2^k * total) for the k-th zero order
      precision = 100.0 / (smoothing * static_cast<double>(totals[n]));
    } else {
      precision = 100.0 * static_cast<double>(matches[n]) / static_cast<double>(totals[n]);
    }
    stats.precisions.push_back(precision);
    log_sum += precision > 0 ? std::log(precision / 100.0) : -INFINITY;
  }
  const double c = static_cast<double>(stats.hypothesis_length);
  const double r = static_cast<double>(stats.reference_length);
  stats.brevity_penalty = c < r ? std::exp(1.0 - r / c) : 1.0;
  stats.bleu = std::isinf(log_sum) ? 0.0 : 100.0 * stats.brevity_penalty * std::exp(log_sum / kMaxOrder);
  return stats;
}

AccuracyStats accuracy(const std::vector<std::string>& hypotheses,
                       const std::vector<std::string>& references) {
  AccuracyStats stats;
  if (hypotheses.empty()) return stats;
  long exact = 0, matched = 0, positions = 0;
  for (std::size_t s = 0; s < hypotheses.size(); ++s) {
    if (hypotheses[s] == references[s]) ++exact;
    const auto hyp = split_tokens(hypotheses[s]);
    const auto ref = split_tokens(references[s]);
    positions += static_cast<long>(std::max(hyp.size(), ref.size()));
    for (std::size_t i = 0; i < std::min(hyp.size(), ref.size()); ++i)
      if (hyp[i] == ref[i]) ++matched;
  }
  stats.exact_match = 100.0 * static_cast<double>(exact) / static_cast<double>(hypotheses.size());
  stats.token_accuracy =
      positions == 0 ? 100.0 : 100.0 * static_cast<double>(matched) / static_cast<double>(positions);
  return stats;
}

}  // namespace ordo::tools
