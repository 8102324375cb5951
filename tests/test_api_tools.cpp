// What the public API gained so that the CLI is written against it (issue 21): each call
// as a program sees it, through <ordo/ordo.hpp> and <ordo/text.hpp> alone. Oracles: the
// shipped models' files and known outputs, the one-call-at-a-time equivalents of the
// batch calls, and the text rules' own definitions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include <ordo/ordo.hpp>
#include <ordo/text.hpp>

namespace {

namespace fs = std::filesystem;

const fs::path kWeights = fs::path(ORDO_SOURCE_DIR) / "weights";

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Oracle: the directory itself (file sizes, tensor count) and the parameters ordo models
// has always listed for the shipped translation model.
TEST(ApiForTools, InfoDescribesTheDirectory) {
  const ordo::Model model = ordo::Model::load(kWeights / "sinusoidal");
  const ordo::ModelInfo info = model.info();
  EXPECT_EQ(info.family, "ordo");
  EXPECT_FALSE(info.decoder_only);
  EXPECT_EQ(info.position_encoding, "sinusoidal");
  EXPECT_EQ(info.parameters, 706560);
  ASSERT_EQ(info.weight_files, std::vector<std::string>{"model.safetensors"});
  EXPECT_EQ(info.weight_bytes, fs::file_size(kWeights / "sinusoidal" / "model.safetensors"));
  EXPECT_FALSE(info.tensors.empty());
  for (const ordo::ModelInfo::Tensor& t : info.tensors) {
    EXPECT_TRUE(t.used) << t.name;
    EXPECT_EQ(t.file, "model.safetensors");
  }
  EXPECT_GT(info.tokenizer_vocab_size, 0);
  EXPECT_TRUE(contains(info.config_json, "\"d_model\":128")) << info.config_json;

  const ordo::ModelInfo llama = ordo::Model::load(kWeights / "german-llama").info();
  EXPECT_EQ(llama.family, "llama");
  EXPECT_TRUE(llama.decoder_only);
  EXPECT_EQ(llama.key_value_heads * 2, llama.attention_heads);
  EXPECT_TRUE(contains(llama.config_json, "\"hidden_size\":128")) << "the family's own keys: " << llama.config_json;
}

// A shipped model loads by its name, as `--model german-llama` does; an unknown name
// lists the shipped ones.
TEST(ApiForTools, ShippedModelsLoadByName) {
  const std::vector<std::string> names = ordo::shipped_model_names();
  EXPECT_NE(std::find(names.begin(), names.end(), ordo::kDefaultLanguageModelName), names.end());
  const ordo::Model llama = ordo::Model::load(ordo::kDefaultLanguageModelName);
  EXPECT_TRUE(llama.is_decoder_only());
  EXPECT_EQ(llama.bos_token_id(), 1);
  EXPECT_EQ(ordo::Model::load("sinusoidal").bos_token_id(), std::nullopt);
  try {
    ordo::Model::load("no-such-model");
    ADD_FAILURE() << "an unknown name loaded";
  } catch (const ordo::Error& e) {
    EXPECT_TRUE(contains(e.what(), "german-llama")) << e.what();
  }
}

// Oracle: the same lines one call each, line i given first_index 10 + i. Hot sampling,
// so that streams differ (checked first: otherwise the test could not fail).
TEST(ApiForTools, FirstIndexKeepsEachLinesSamplingStream) {
  ordo::TranslatorOptions options;
  options.decoding.sample = true;
  options.decoding.seed = 7;
  options.decoding.temperature = 5.0;
  const ordo::Translator translator(ordo::Model::load(kWeights / "sinusoidal"), options);
  const std::vector<std::string> lines{"cats chase dogs", "the dog sees the cat", "birds chase cats"};
  const std::vector<std::string> first{lines[0]};
  ASSERT_NE(translator.translate_batch(first, 10).front().best().ids, translator.translate_batch(first, 11).front().best().ids)
      << "two streams drew the same translation: the test needs hotter sampling";
  const std::vector<ordo::Translation> together = translator.translate_batch(lines, 10);
  ASSERT_EQ(together.size(), lines.size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::vector<std::string> one{lines[i]};
    const ordo::Translation alone = translator.translate_batch(one, 10 + i).front();
    ASSERT_TRUE(alone.ok()) << alone.error;
    EXPECT_EQ(alone.best().ids, together[i].best().ids) << lines[i];
  }
}

// Per-pair errors: a bad id fails its pair alone; lists of different lengths fail the call.
TEST(ApiForTools, ScoreIdsBatchFailsOnePairAtATime) {
  const ordo::Translator translator(ordo::Model::load(kWeights / "sinusoidal"));
  const ordo::Score text = translator.score("cats chase dogs", "Katzen jagen Hunde");
  const std::vector<int> source = translator.model().tokenize_source("cats chase dogs");
  const std::vector<std::vector<int>> sources{source, source};
  const std::vector<std::vector<int>> targets{text.ids, {999999, 2}};
  const std::vector<ordo::Score> scored = translator.score_ids_batch(sources, targets);
  ASSERT_EQ(scored.size(), 2u);
  ASSERT_TRUE(scored[0].ok()) << scored[0].error;
  EXPECT_EQ(scored[0].ids, text.ids);
  EXPECT_EQ(scored[0].token_logprobs, text.token_logprobs);
  EXPECT_FALSE(scored[1].ok());
  EXPECT_TRUE(contains(scored[1].error, "999999")) << scored[1].error;
  EXPECT_THROW(translator.score_ids_batch(sources, std::vector<std::vector<int>>{text.ids}), ordo::Error);
}

// Oracle: attention(source) reads the greedy translation; attention_ids given that
// translation's ids reads the same, matrix for matrix. Bad ids are errors, not reads.
TEST(ApiForTools, AttentionIdsReadsWhatAttentionReads) {
  const ordo::Translator translator(ordo::Model::load(kWeights / "sinusoidal"));
  const std::vector<int> source = translator.model().tokenize_source("cats chase dogs");
  const std::vector<std::vector<int>> sources{source};
  const std::vector<int> output = translator.translate_ids_batch(sources).front().best().ids;
  const ordo::Attention by_text = translator.attention("cats chase dogs");
  const ordo::Attention by_ids = translator.attention_ids(source, output);
  EXPECT_EQ(by_ids.target_tokens, by_text.target_tokens);
  ASSERT_EQ(by_ids.matrices.size(), by_text.matrices.size());
  for (std::size_t i = 0; i < by_ids.matrices.size(); ++i) EXPECT_EQ(by_ids.matrices[i].values, by_text.matrices[i].values);
  EXPECT_THROW(translator.attention_ids(source, std::vector<int>{}), ordo::Error);
  EXPECT_THROW(translator.attention_ids(source, std::vector<int>{5, 999999, 2}), ordo::Error);
  EXPECT_THROW(translator.attention_ids(std::vector<int>{999999, 2}, output), ordo::Error);
}

// Oracle: generate_detailed, which is prepare then generate_prepared in one call.
TEST(ApiForTools, PreparedPromptsContinueAsWholeCalls) {
  const ordo::Generator generator(ordo::Model::load(kWeights / "german-llama"));
  const ordo::Generation whole = generator.generate_detailed("Die Katze");
  ordo::Generation prepared = generator.prepare("Die Katze");
  ASSERT_TRUE(prepared.ok()) << prepared.error;
  EXPECT_EQ(prepared.prompt_ids, whole.prompt_ids);
  std::string streamed;
  const ordo::Generation done =
      generator.generate_prepared(std::move(prepared), [&](std::string_view text) { streamed += text; });
  EXPECT_EQ(done.best().ids, whole.best().ids);
  EXPECT_EQ(streamed, whole.best().text);

  // A batch passes a failed or already answered request through untouched.
  std::vector<ordo::Generation> requests{generator.prepare("Der Hund"), ordo::Generation{}, ordo::Generation{}};
  requests[1].error = "line 2: bad";
  requests[2].hypotheses.emplace_back().finished = true;
  const std::vector<ordo::Generation> results = generator.generate_prepared_batch(requests);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_TRUE(results[0].ok() && !results[0].best().ids.empty());
  EXPECT_EQ(results[1].error, "line 2: bad");
  ASSERT_EQ(results[2].hypotheses.size(), 1u);
  EXPECT_TRUE(results[2].hypotheses[0].ids.empty());
}

// decode_totals counts what a decode did: tokens in and out, across calls.
TEST(ApiForTools, DecodeTotalsCountADecode) {
  const ordo::DecodeTotals before = ordo::decode_totals();
  const ordo::Translation t =
      ordo::Translator(ordo::Model::load(kWeights / "sinusoidal")).translate_detailed("cats chase dogs");
  const ordo::DecodeTotals after = ordo::decode_totals();
  // Source "cats chase dogs </s>" (4 ids) and decoder_start... at least the source.
  EXPECT_GE(after.input_tokens - before.input_tokens, static_cast<std::int64_t>(t.source_ids.size()));
  EXPECT_GE(after.output_tokens - before.output_tokens, static_cast<std::int64_t>(t.best().ids.size()));
  EXPECT_GE(after.decode_seconds, before.decode_seconds);
}

// Oracle: the rules as ordo/text.hpp states them.
TEST(ApiForTools, TextRulesAreTheDocumentedOnes) {
  EXPECT_NO_THROW(ordo::check_input_text("Katzen\tjagen Hunde"));  // tab is a space
  EXPECT_THROW(ordo::check_input_text("cats \x1b[31m"), ordo::Error);
  EXPECT_THROW(ordo::check_input_text(std::string("a\0b", 3)), ordo::Error);
  EXPECT_TRUE(ordo::is_blank(" \t\u3000"));
  EXPECT_FALSE(ordo::is_blank(" a "));
  EXPECT_EQ(ordo::escape_control_characters("a\nb\r\\c\x1b"), "a\\nb\\r\\\\c\\u001b");
  EXPECT_EQ(ordo::printable("x\nordo: y\x1b[2K"), "x\\nordo: y\\x1b[2K");
}

}  // namespace
