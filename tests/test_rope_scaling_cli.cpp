// --rope-scaling TYPE:FACTOR (every command) and LoadOptions::rope_scaling (the library):
// a RoPE scaling chosen at run time instead of the config's, and what a bad one gives:
// one line naming the flag, exit 2; a bad rope_scaling in config.json: one line naming
// the key, exit 1.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include <ordo/ordo.hpp>
#include <ordo/rope_scaling.hpp>

#include "tests/cli_runner.h"
#include "tests/model_factory.h"

namespace ordo {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using testing_support::run_ordo;

bool one_line(const std::string& text) { return !text.empty() && text.find('\n') == text.size() - 1; }

TEST(RopeScalingFlag, BadValuesAreUsageErrorsNamingTheFlag) {
  for (const char* value : {"yarn:0", "linear:-2", "dynamic:nan", "yarn:inf", "llama3:1e999", "yarn", "yarn:",
                            "longrope:2", "default:2", "none:2", "linear:0x2"}) {
    SCOPED_TRACE(value);
    const auto r = run_ordo(std::string("generate --model german-llama --max-length 2 --rope-scaling ") + value +
                            " 'Die Katze'");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_THAT(r.err, HasSubstr("--rope-scaling"));
    EXPECT_TRUE(one_line(r.err)) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

TEST(RopeScalingFlag, AModelWithoutRopeIsAUsageError) {
  const auto r = run_ordo("translate --model sinusoidal --rope-scaling linear:2 'cats chase dogs'");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--rope-scaling"));
  EXPECT_THAT(r.err, HasSubstr("sinusoidal positions, not rope"));
  EXPECT_TRUE(one_line(r.err)) << r.err;
}

// The flag reaches the model: linear:1 is plain RoPE to the last bit, linear:4 is not;
// inspect shows the config the model runs with.
TEST(RopeScalingFlag, ReachesTheModel) {
  const std::string score = "score --model german-llama --json --target 'Die Katze jagt den Hund.'";
  const auto plain = run_ordo(score);
  const auto one = run_ordo(score + " --rope-scaling linear:1");
  const auto four = run_ordo(score + " --rope-scaling linear:4");
  const auto none = run_ordo(score + " --rope-scaling none");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(four.exit_code, 0) << four.err;
  EXPECT_EQ(one.out, plain.out);
  EXPECT_EQ(none.out, plain.out);
  EXPECT_NE(four.out, plain.out);

  const auto r = run_ordo("inspect --model german-llama --json --rope-scaling yarn:4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"rope_type\":\"yarn\""));
  EXPECT_THAT(r.out, HasSubstr("\"factor\":4.0"));
}

TEST(RopeScalingFlag, EveryCommandThatLoadsAModelTakesIt) {
  for (const char* command : {"translate", "generate", "score", "eval", "compare", "inspect", "tokenize",
                              "detokenize", "bench", "viz attention"}) {
    const auto r = run_ordo(std::string(command) + " --help");
    EXPECT_THAT(r.out, HasSubstr("--rope-scaling")) << command;
  }
}

TEST(RopeScalingConfigFile, ABadRopeScalingIsOneLineNamingTheKeyExit1) {
  const fs::path dir = testing_support::temp_dir("rope-scaling");
  nlohmann::json config = {{"model_type", "llama"}, {"vocab_size", 30},       {"hidden_size", 16},
                           {"intermediate_size", 24}, {"num_hidden_layers", 1}, {"num_attention_heads", 2},
                           {"bos_token_id", 2},      {"eos_token_id", 1},      {"max_position_embeddings", 32}};
  testing_support::write_random_model(dir, config);
  config["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 4.0},
                            {"high_freq_factor", 1.0}, {"original_max_position_embeddings", 16}};
  std::ofstream(dir / "config.json") << config.dump();
  const auto r = run_ordo("generate --model " + testing_support::shell_quote(dir.string()) + " --prompt-ids '2 5'");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("key 'rope_scaling.low_freq_factor': must be below high_freq_factor"));
  EXPECT_TRUE(one_line(r.err)) << r.err;
  fs::remove_all(dir);
}

// The library: LoadOptions::rope_scaling, with the config's own parameters of that type
// kept and OptionError (field rope_scaling) for what the model cannot take.
TEST(RopeScalingLibrary, LoadOptionsOverrideTheConfig) {
  LoadOptions options;
  options.rope_scaling = RopeScalingOverride::parse("dynamic:2.5");
  EXPECT_EQ(options.rope_scaling->type, "dynamic");
  EXPECT_EQ(options.rope_scaling->factor, 2.5);
  const Model model = Model::load("german-llama", options);
  EXPECT_THAT(model.info().config_json, HasSubstr("\"rope_type\":\"dynamic\""));
  EXPECT_THAT(Model::load("german-llama").info().config_json, HasSubstr("\"rope_scaling\":null"));

  options.rope_scaling = RopeScalingOverride{"yarn", 0.0};
  try {
    Model::load("german-llama", options);
    ADD_FAILURE() << "a factor of 0 loaded";
  } catch (const OptionError& e) {
    EXPECT_EQ(e.field(), "rope_scaling");
  }
  options.rope_scaling = RopeScalingOverride{"linear", 2.0};
  try {
    Model::load("sinusoidal", options);
    ADD_FAILURE() << "a sinusoidal model took a rope scaling";
  } catch (const OptionError& e) {
    EXPECT_EQ(e.field(), "rope_scaling");
    EXPECT_THAT(e.problem(), HasSubstr("not rope"));
  }
  EXPECT_THROW(RopeScalingOverride::parse("yarn:four"), OptionError);
  EXPECT_EQ(RopeScalingOverride::parse("none").type, "none");
}

}  // namespace
}  // namespace ordo

namespace ordo {
namespace {

// viz pe --scheme rope --rope-scaling: the scaled table beside the plain one, without a
// model and with one; other schemes have nothing to scale.
TEST(RopeScalingViz, DrawsTheScaledTableBesideThePlainOne) {
  const fs::path dir = testing_support::temp_dir("rope-viz");
  const std::string png = testing_support::shell_quote((dir / "rope.png").string());
  auto r = run_ordo("viz pe --scheme rope --rope-scaling yarn:4 --out " + png);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::file_size(dir / "rope.png") > 0);
  EXPECT_THAT(r.out, HasSubstr("plain RoPE"));  // the first of the two panels
  r = run_ordo("viz pe --scheme rope --model german-llama --stack decoder --rope-scaling llama3:8 --out " + png);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("plain RoPE"));
  r = run_ordo("viz pe --scheme sinusoidal --rope-scaling yarn:4 --out " + png);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--rope-scaling"));
  fs::remove_all(dir);
}

// Model-free: the scaled table is a model trained on length / factor positions; linear
// at factor 4 rotates step 4s as plain RoPE rotates step s (tolerance: float rounding of
// values in [-1, 1]).
TEST(RopeScalingViz, LinearTableIsThePlainTableAtAQuarterOfThePositions) {
  const PositionTable plain = rotary_table(64, 16, 10000.0);
  const PositionTable scaled = rotary_table(64, 16, 10000.0, RopeScalingOverride{"linear", 4.0}, 16);
  for (int s = 0; s < 16; ++s)
    for (int c = 0; c < 16; ++c) EXPECT_NEAR(scaled.at(4 * s, c), plain.at(s, c), 1e-6) << s << ", " << c;
  EXPECT_THROW(rotary_table(64, 16, 10000.0, RopeScalingOverride{"yarn", -1.0}, 16), OptionError);
}

}  // namespace
}  // namespace ordo
