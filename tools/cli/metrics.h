// Translation quality against references, on whitespace-separated tokens.
#pragma once

#include <string>
#include <vector>

namespace ordo::tools {

// Splits on runs of whitespace.
std::vector<std::string> split_tokens(const std::string& text);

struct BleuStats {
  double bleu = 0;                // 0..100
  double brevity_penalty = 1;
  std::vector<double> precisions; // n = 1..4, in percent
  long hypothesis_length = 0;
  long reference_length = 0;
};

// Corpus BLEU-4 (Papineni et al.) as sacreBLEU computes it by default on text that is
// already tokenized (--tokenize none): clipped n-gram counts summed over the corpus,
// geometric mean of the four precisions, brevity penalty exp(1 - r/c) when c < r, and
// sacreBLEU's default 'exp' smoothing for an n whose matches are zero.
BleuStats corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::string>& references);

struct AccuracyStats {
  double exact_match = 0;     // percent of sentences identical to their reference
  double token_accuracy = 0;  // percent: sum of position-wise token matches / sum of max(len)
};
AccuracyStats accuracy(const std::vector<std::string>& hypotheses,
                       const std::vector<std::string>& references);

}  // namespace ordo::tools
