// The public options (<ordo/options.hpp>) restate the engine's defaults so that a
// program reads them in its own header; this is the check that the two never drift.
// Oracle: the engine's own structs, default-constructed.
#include <gtest/gtest.h>

// The engine's headers before the public one (models/api/internal.h says why).
#include "engine/decoding_options.h"
#include "models/generator.h"
#include "models/translator.h"
#include "ordo/options.hpp"

namespace {

void expect_same_defaults(const ordo::api::DecodingOptions& got, const ordo::DecodingOptions& want) {
  EXPECT_EQ(got.beam_size, want.beam_size);
  EXPECT_EQ(got.n_best, want.n_best);
  EXPECT_EQ(got.length_penalty, want.length_penalty);
  EXPECT_EQ(got.max_length, want.max_length);
  EXPECT_EQ(got.min_length, want.min_length);
  EXPECT_EQ(got.no_repeat_ngram_size, want.no_repeat_ngram_size);
  EXPECT_EQ(got.repetition_penalty, want.repetition_penalty);
  EXPECT_EQ(got.sample, want.sample);
  EXPECT_EQ(got.temperature, want.temperature);
  EXPECT_EQ(got.top_k, want.top_k);
  EXPECT_EQ(got.top_p, want.top_p);
  EXPECT_EQ(got.seed, want.seed);
}

TEST(ApiOptions, DefaultsAreTheEngines) {
  const ordo::api::TranslatorOptions translator;
  const ordo::TranslatorOptions engine_translator;
  expect_same_defaults(translator.decoding, engine_translator.decoding);
  EXPECT_EQ(translator.batch_size, engine_translator.batch_size);
  EXPECT_EQ(translator.max_input_tokens, engine_translator.max_input_tokens);
  EXPECT_EQ(translator.truncate, engine_translator.truncate);

  const ordo::api::GeneratorOptions generator;
  const ordo::GeneratorOptions engine_generator;
  expect_same_defaults(generator.decoding, engine_generator.decoding);
  EXPECT_EQ(generator.batch_size, engine_generator.batch_size);
  EXPECT_EQ(generator.add_bos, engine_generator.add_bos);
  EXPECT_EQ(generator.max_input_tokens, engine_generator.max_input_tokens);
  EXPECT_EQ(generator.truncate, engine_generator.truncate);
}

}  // namespace
