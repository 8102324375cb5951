// BLEU and accuracies of `ordo eval`. Expected values are worked by hand from the
// definitions (Papineni et al. 2002; sacreBLEU's 'exp' smoothing), written next to
// each case. Tolerance 1e-9: the arithmetic is a handful of doubles.
#include <gtest/gtest.h>

#include <cmath>

#include "tools/cli/metrics.h"

namespace ordo::tools {
namespace {

TEST(Bleu, IdenticalCorpusScoresHundred) {
  const std::vector<std::string> refs = {"Katzen jagen Hunde", "Die Katze jagt den Hund ."};
  EXPECT_NEAR(corpus_bleu(refs, refs).bleu, 100.0, 1e-9);
}

TEST(Bleu, BrevityPenaltyForShortOutput) {
  // All n-gram precisions 100%, c = 4, r = 8: BP = exp(1 - 8/4).
  const BleuStats s = corpus_bleu({"a b c d"}, {"a b c d e f g h"});
  EXPECT_NEAR(s.brevity_penalty, std::exp(-1.0), 1e-12);
  EXPECT_NEAR(s.bleu, 36.787944117144235, 1e-9);
}

TEST(Bleu, GeometricMeanOfClippedPrecisions) {
  // p1 = 4/5, p2 = 3/4, p3 = 2/3, p4 = 1/2; BP = 1.
  EXPECT_NEAR(corpus_bleu({"a b c d e"}, {"a b c d f"}).bleu, 66.8740304976422, 1e-9);
  // Clipping: "the the the" against "the cat": unigram matches clipped to 1 of 3.
  const BleuStats clipped = corpus_bleu({"the the the"}, {"the cat"});
  ASSERT_FALSE(clipped.precisions.empty());
  EXPECT_NEAR(clipped.precisions[0], 100.0 / 3.0, 1e-9);
}

TEST(Bleu, ExpSmoothingForZeroHigherOrders) {
  // p1 = 2/4; p2, p3, p4 have no match: 1/(2*3), 1/(4*2), 1/(8*1).
  EXPECT_NEAR(corpus_bleu({"a x b y"}, {"a b c d"}).bleu, 18.995892141289815, 1e-9);
}

TEST(Bleu, NothingInCommonOrNoOutputIsZero) {
  EXPECT_EQ(corpus_bleu({"x y z w"}, {"a b c d"}).bleu, 0.0);
  EXPECT_EQ(corpus_bleu({""}, {"a b c d"}).bleu, 0.0);
}

TEST(Bleu, CountsAreSummedOverTheCorpusNotAveraged) {
  // Sentence 1 matches fully; sentence 2 ("x y z" vs "x q z") only in unigrams x, z.
  // Corpus: p1 = (4+2)/(4+3), p2 = (3+0)/(3+2), p3 = (2+0)/(2+1), p4 = 1/1; c = r = 7.
  const double want = 100.0 * std::pow((6.0 / 7) * (3.0 / 5) * (2.0 / 3) * 1.0, 0.25);
  EXPECT_NEAR(corpus_bleu({"a b c d", "x y z"}, {"a b c d", "x q z"}).bleu, want, 1e-9);
}

TEST(Accuracy, ExactMatchAndPositionWiseTokens) {
  const AccuracyStats s =
      accuracy({"Katzen jagen Hunde", "Hunde jagen", "Die Katze"}, {"Katzen jagen Hunde", "Hunde jagen Katzen", "Der Hund"});
  EXPECT_NEAR(s.exact_match, 100.0 / 3.0, 1e-9);
  // matches 3 + 2 + 0 over max lengths 3 + 3 + 2.
  EXPECT_NEAR(s.token_accuracy, 100.0 * 5.0 / 8.0, 1e-9);
}

}  // namespace
}  // namespace ordo::tools
