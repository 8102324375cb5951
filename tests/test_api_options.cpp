// The public options (<ordo/options.hpp>, <ordo/translator.hpp>, <ordo/generator.hpp>)
// are the engine's own: the search reads the very struct a program fills, so there is
// no second set of defaults to drift and nothing to convert. What is left to check is
// that the defaults are the ones the headers document.
// Oracle: the comments of the public headers, read by hand.
#include <gtest/gtest.h>

#include <functional>

#include "engine/search.h"
#include "ordo/ordo.hpp"

namespace {

// The search's own parameter is the public struct (a compile-time check: a second
// engine struct would not compile here).
[[maybe_unused]] constexpr auto kSearchReadsThePublicStruct =
    static_cast<std::vector<ordo::DecodeResult> (*)(const ordo::Transformer&, std::span<const ordo::DecodeRequest>,
                                                    const ordo::DecodingOptions&, std::span<const std::uint64_t>,
                                                    ordo::DecodeWorkspace&, const ordo::TokenCallback&,
                                                    const ordo::InterruptCheck&)>(
        &ordo::decode_requests);

TEST(ApiOptions, DefaultsAreTheDocumentedOnes) {
  const ordo::DecodingOptions d;
  EXPECT_EQ(d.beam_size, 1);  // greedy
  EXPECT_EQ(d.n_best, 1);
  EXPECT_EQ(d.length_penalty, 1.0);
  EXPECT_EQ(d.max_length, 0);  // automatic
  EXPECT_EQ(d.min_length, 0);
  EXPECT_EQ(d.no_repeat_ngram_size, 0);
  EXPECT_EQ(d.repetition_penalty, 1.0);
  EXPECT_FALSE(d.sample);
  EXPECT_EQ(d.temperature, 1.0);
  EXPECT_EQ(d.top_k, 0);
  EXPECT_EQ(d.top_p, 1.0);
  EXPECT_EQ(d.seed, 0u);
  EXPECT_NO_THROW(d.validate());

  const ordo::TranslatorOptions t;
  EXPECT_EQ(t.batch_size, 32);
  EXPECT_EQ(t.max_input_tokens, 0);
  EXPECT_FALSE(t.truncate);
  EXPECT_NO_THROW(t.validate());

  const ordo::GeneratorOptions g;
  EXPECT_EQ(g.batch_size, 32);
  EXPECT_TRUE(g.add_bos);
  EXPECT_EQ(g.max_input_tokens, 0);
  EXPECT_FALSE(g.truncate);
  EXPECT_NO_THROW(g.validate());
}

// batch_size has one bound, kMaxBatchSize, for both option structs (it was written
// three times, with three bounds).
TEST(ApiOptions, BatchSizeHasOneBound) {
  ordo::TranslatorOptions t;
  ordo::GeneratorOptions g;
  t.batch_size = g.batch_size = static_cast<int>(ordo::kMaxBatchSize);
  EXPECT_NO_THROW(t.validate());
  EXPECT_NO_THROW(g.validate());
  for (const int bad : {0, static_cast<int>(ordo::kMaxBatchSize) + 1}) {
    t.batch_size = g.batch_size = bad;
    for (const auto& check : {std::function<void()>([&] { t.validate(); }), std::function<void()>([&] { g.validate(); })}) {
      try {
        check();
        ADD_FAILURE() << "batch_size " << bad << " was accepted";
      } catch (const ordo::OptionError& e) {
        EXPECT_EQ(e.field(), "batch_size") << e.what();
      }
    }
  }
}

}  // namespace
