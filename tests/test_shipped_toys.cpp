// The shipped toy models in Hugging Face layouts (issue 22): weights/marian (MarianMTModel
// as opus-mt publishes it: source.spm, target.spm, vocab.json) and weights/t5
// (T5ForConditionalGeneration, v1.1's gated-gelu, spiece.model), trained by
// tools/training/train_hf_models.py. Tests never retrain.
//
// Oracle: the training script loaded each saved directory back into the PyTorch oracle
// (tools/oracle/ordo_torch/marian.py, t5.py, in float64 from the F16 file) and recorded in
// training.json ("oracle_test_sample") every 20th pair of weights/data/test.tsv: the
// source and reference ids as MarianTokenizer / T5Tokenizer give them, the oracle's greedy
// ids with the smallest top-1 - top-2 margin on the path, and the reference's
// log-probabilities. Tolerances are test_marian.cpp's: ids identical (greedy compared,
// one at a time and as one padded batch, where the margin is >= 1e-2), log-probabilities
// within 1e-4 absolute.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/score.h"
#include "models/loaded_model.h"
#include "tests/cli_runner.h"
#include "tests/greedy.h"
#include "tests/model_factory.h"
#include "tests/reference.h"
#include "tests/search_support.h"

namespace ordo {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing_support::run_ordo;

const fs::path kWeights = fs::path(ORDO_SOURCE_DIR) / "weights";

json oracle_sample(const std::string& name) {
  std::ifstream in(kWeights / name / "training.json");
  EXPECT_TRUE(in) << name;
  return json::parse(in).at("oracle_test_sample");
}

class ShippedToys : public testing::TestWithParam<std::string> {};

TEST_P(ShippedToys, AreTheirFamilysLayout) {
  const auto model = LoadedModel::load(kWeights / GetParam());
  const ModelConfig& c = model->config();
  if (GetParam() == "marian") {
    EXPECT_EQ(c.family, Family::Marian);
    for (const char* file : {"source.spm", "target.spm", "vocab.json", "generation_config.json"})
      EXPECT_TRUE(fs::is_regular_file(kWeights / "marian" / file)) << file;
  } else {
    EXPECT_EQ(c.family, Family::T5);
    EXPECT_EQ(c.to_json().at("feed_forward_proj"), "gated-gelu");
    EXPECT_FALSE(c.tie_word_embeddings);
    EXPECT_TRUE(fs::is_regular_file(kWeights / "t5" / "spiece.model"));
  }
  EXPECT_FALSE(fs::exists(kWeights / GetParam() / "tokenizer.model"));  // the family's own files only
  EXPECT_LT(fs::file_size(kWeights / GetParam() / "model.safetensors"), 5u << 20);
}

TEST_P(ShippedToys, TokenizeAsTheirTokenizers) {
  const auto model = LoadedModel::load(kWeights / GetParam());
  // Held in a local: a range-for over a member of a temporary reads freed memory (C++20).
  const json sample = oracle_sample(GetParam());
  for (const json& c : sample.at("cases")) {
    SCOPED_TRACE(c.at("source").get<std::string>());
    EXPECT_EQ(model->tokenize_source(c.at("source").get<std::string>()), c.at("source_ids").get<std::vector<int>>());
    EXPECT_EQ(model->tokenize_target(c.at("reference").get<std::string>()),
              c.at("reference_ids").get<std::vector<int>>());
  }
}

TEST_P(ShippedToys, DecodeTheHeldOutSampleAsTheOracle) {
  const auto model = LoadedModel::load(kWeights / GetParam());
  const Transformer& t = model->transformer();
  const json sample = oracle_sample(GetParam());
  ASSERT_GE(sample.at("cases").size(), 100u);
  std::size_t compared = 0;
  for (const json& c : sample.at("cases")) {
    SCOPED_TRACE(c.at("source").get<std::string>());
    const auto source = c.at("source_ids").get<std::vector<int>>();
    const auto reference = c.at("reference_ids").get<std::vector<int>>();
    reference::expect_close(score_target(t, source, reference),
                            c.at("reference_logprobs").get<std::vector<double>>(), 1e-4, 0.0);
    if (c.at("min_margin").get<double>() < 1e-2) continue;  // a near tie: float32 may pick the other
    ++compared;
    const auto want = c.at("greedy_ids").get<std::vector<int>>();
    EXPECT_EQ(testing_support::greedy(t, source, 64).ids, want);
  }
  EXPECT_GE(compared, sample.at("cases").size() * 9 / 10);  // the margins are wide: most are compared

  // The same sources as one padded batch, as translate and eval run them.
  std::vector<std::vector<int>> sources;
  for (const json& c : sample.at("cases")) sources.push_back(c.at("source_ids").get<std::vector<int>>());
  DecodingOptions greedy;
  greedy.max_length = 64;
  const std::vector<DecodeResult> decoded = decode_batch(t, sources, greedy);
  for (std::size_t i = 0; i < sources.size(); ++i) {
    const json& c = sample.at("cases")[i];
    if (c.at("min_margin").get<double>() < 1e-2) continue;
    ASSERT_TRUE(decoded[i].ok()) << decoded[i].error;
    EXPECT_EQ(decoded[i].hypotheses.front().ids, c.at("greedy_ids").get<std::vector<int>>()) << "batch entry " << i;
  }
}

// The text a user sees, through the command line and the model's own generation defaults
// (the Marian model's generation_config.json asks for 4 beams, as opus-mt's do).
TEST_P(ShippedToys, TranslateTheShowcaseByName) {
  const auto r = run_ordo("translate --model " + GetParam() + " 'cats chase dogs' 'dogs chase cats'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Katzen jagen Hunde\nHunde jagen Katzen\n");
}

// A directory as a Hugging Face repository may be downloaded, with tokenizer.json (the
// fast tokenizer) but without the SentencePiece files: the message names the files this
// family reads (it said "add the model's tokenizer.model" for every family, a file no
// Marian or T5 repository has and that ordo would not read for them).
TEST_P(ShippedToys, WithOnlyTokenizerJsonTheMessageNamesTheFamilysFiles) {
  const fs::path dir = testing_support::temp_dir("toys_tokenizer_json");
  const std::vector<std::string> files = GetParam() == "marian"
                                             ? std::vector<std::string>{"source.spm", "target.spm", "vocab.json"}
                                             : std::vector<std::string>{"spiece.model"};
  for (const auto& entry : fs::directory_iterator(kWeights / GetParam()))
    if (std::find(files.begin(), files.end(), entry.path().filename()) == files.end())
      fs::copy(entry.path(), dir / entry.path().filename());
  std::ofstream(dir / "tokenizer.json") << "{}";
  const auto r = run_ordo("translate --model '" + dir.string() + "' 'cats chase dogs'");
  EXPECT_EQ(r.exit_code, 1);
  const std::string named = GetParam() == "marian" ? "source.spm, target.spm and vocab.json" : "spiece.model";
  EXPECT_EQ(r.err, "ordo: " + dir.string() +
                       ": has only tokenizer.json (Hugging Face tokenizers), and ordo reads the text of a " +
                       "model_type \"" + GetParam() + "\" directory with SentencePiece: " + named +
                       " (add the model's " + named +
                       " from its repository, or pass token ids (--source-ids, --target-ids, --prompt-ids))\n");
  fs::remove(dir / "tokenizer.json");
  const auto without = run_ordo("translate --model '" + dir.string() + "' 'cats chase dogs'");
  EXPECT_EQ(without.exit_code, 1);
  EXPECT_NE(without.err.find("has no tokenizer (" + named + ")"), std::string::npos) << without.err;
  fs::remove_all(dir);
}

// Marian's positions are sinusoids, computed into a table of max_position_embeddings rows
// as MarianMTModel builds it: a longer source is refused, and the message says so (it
// said "the model's learned positions", which a Marian model does not have).
TEST(ShippedToysMarian, ALongerSourceThanTheSinusoidTableIsRefusedAsSuch) {
  std::string text = "the cat";
  for (int i = 0; i < 200; ++i) text += " and the dog";
  const auto r = run_ordo("translate --model marian '" + text + " chase the mouse'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("has more than 512 tokens (eos included), what the model's table of sinusoidal positions "
                       "holds (max_position_embeddings=512)"),
            std::string::npos)
      << r.err;
}

INSTANTIATE_TEST_SUITE_P(Weights, ShippedToys, testing::Values("marian", "t5"));

}  // namespace
}  // namespace ordo
