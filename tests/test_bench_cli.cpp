// `ordo bench` as a user meets it: every key of its JSON, the decode bound it derives,
// decoder-only models, and the flags it refuses. Timings are never asserted (they are
// whatever the machine gives); only that they are there, finite and positive.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "models/safetensors.h"
#include "tests/cli_runner.h"
#include "tests/model_factory.h"

namespace ordo {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing_support::run_ordo;
using testing_support::shell_quote;

const char* const kMetrics[] = {"load_s",        "encode_tok_s",  "decode_tok_s",  "peak_rss_mb",
                                "gemm_gflops",   "encode_gflops", "bandwidth_gbs", "decode_bound_tok_s"};

// Cheap: one run, no warm-up, one thread.
const std::string kQuick = " --batch 2 --src-len 5 --new-tokens 4 --threads 1 --repeats 1 --warmup 0";

fs::path tiny_model(const std::string& tag, const json& changes) {
  const fs::path dir = testing_support::temp_dir("bench_" + tag);
  json config = testing_support::tiny_config();
  config.update(changes);
  testing_support::write_random_model(dir, config, 3);
  return dir;
}

fs::path encoder_decoder() {
  static const fs::path dir = tiny_model("encdec", json::object());
  return dir;
}

fs::path decoder_only() {
  static const fs::path dir = tiny_model("lm", {{"encoder_layers", 0}, {"normalize_before", true}});
  return dir;
}

std::string model_flag(const fs::path& dir) { return " --model " + shell_quote(dir.string()); }

json bench_json(const std::string& arguments) {
  const auto r = run_ordo("bench" + arguments + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? json::parse(r.out) : json::object();
}

// The bytes one decode step reads, counted from the file's own tensor list: every
// decoder tensor except the cross-attention K/V projections (once per source) and the
// embedding tables (a step gathers a few rows), plus the output projection, which for
// these tied models is the shared embedding, and its bias. float32: 4 bytes an element.
double decode_step_bytes(const fs::path& dir) {
  const SafetensorsFile file = SafetensorsFile::open(dir / "model.safetensors");
  Index elements = 0;
  for (const TensorInfo& t : file.tensors()) {
    const std::string& n = t.name;
    const auto has = [&](const char* part) { return n.find(part) != std::string::npos; };
    const bool decoder = n.starts_with("model.decoder.") && !has("encoder_attn.k_proj") &&
                         !has("encoder_attn.v_proj") && !has("embed_");
    if (decoder || n == "model.shared.weight" || n == "lm_head.weight" || n == "final_logits_bias")
      elements += element_count(t.shape);
  }
  return 4.0 * static_cast<double>(elements);
}

void expect_metrics(const json& j) {
  for (const char* key : kMetrics) {
    ASSERT_TRUE(j.contains(key)) << key << " missing in " << j.dump();
    ASSERT_TRUE(j[key].is_number()) << key;
    const double value = j[key].get<double>();
    EXPECT_TRUE(std::isfinite(value) && value > 0) << key << " = " << value;
  }
}

TEST(BenchCli, JsonHasEveryMetricFiniteAndPositive) {
  const json j = bench_json(model_flag(encoder_decoder()) + kQuick);
  expect_metrics(j);
  EXPECT_EQ(j["sample_ids"].size(), 4u);  // exactly --new-tokens steps, eos or not
}

TEST(BenchCli, DecodeBoundIsBandwidthOverTheWeightsOneStepReads) {
  const json j = bench_json(model_flag(encoder_decoder()) + kQuick);
  const double bytes = decode_step_bytes(encoder_decoder());
  // tiny_config: 2 layers x (self 4x[16,16]+16, cross q/out 2x[16,16]+16, fc1 [24,16]+24,
  // fc2 [16,24]+16, three norms 2x16) + the tied [23, 16] table + final_logits_bias [1, 23].
  EXPECT_EQ(bytes, 4.0 * (2 * (4 * 272 + 2 * 272 + 408 + 400 + 3 * 32) + 23 * 16 + 23));
  EXPECT_EQ(j["decode_weight_bytes"].get<double>(), bytes);
  EXPECT_NEAR(j["decode_bound_tok_s"].get<double>(), j["bandwidth_gbs"].get<double>() * 1e9 / bytes,
              1e-9 * j["decode_bound_tok_s"].get<double>());
}

TEST(BenchCli, WorksOnADecoderOnlyModel) {
  const json j = bench_json(model_flag(decoder_only()) + kQuick + " --beam 2");
  expect_metrics(j);
  EXPECT_TRUE(j["decoder_only"].get<bool>());
  EXPECT_EQ(j["decode_weight_bytes"].get<double>(), decode_step_bytes(decoder_only()));
}

TEST(BenchCli, TextModeIsATable) {
  const auto r = run_ordo("bench" + model_flag(encoder_decoder()) + kQuick + " --beam 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* row : {"load", "encode", "decode", "decode bound", "sgemm", "bandwidth", "peak RSS"})
    EXPECT_NE(r.out.find(row), std::string::npos) << row << " missing in\n" << r.out;
}

// Refused before any work: exit 2, one line naming the flag.
void expect_usage_error(const std::string& arguments, const std::string& flag) {
  const auto r = run_ordo("bench" + arguments);
  EXPECT_EQ(r.exit_code, 2) << arguments << "\n" << r.err;
  EXPECT_NE(r.err.find(flag), std::string::npos) << arguments << "\n" << r.err;
}

TEST(BenchCli, BadFlagsAreUsageErrorsNamingTheFlag) {
  const std::string model = model_flag(encoder_decoder());
  expect_usage_error(model + " --batch 0", "--batch");
  expect_usage_error(model + " --new-tokens 0", "--new-tokens");
  expect_usage_error(model + " --src-len 0", "--src-len");
  expect_usage_error(model + " --beam 24", "--beam");  // more than the 23 tokens
  expect_usage_error(" --shape large", "--shape");
  expect_usage_error(model + " --shape base", "--shape");
  expect_usage_error(model + " --shape llama", "--shape");
  expect_usage_error("", "--model");
}

TEST(BenchCli, HelpNamesBothShapes) {
  const auto r = run_ordo("bench --help");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* text : {"base", "llama", "99,496,704 parameters"})
    EXPECT_NE(r.out.find(text), std::string::npos) << text << " missing in\n" << r.out;
}

// --shape llama builds its 400 MB model (about a second; the smallest workload): a
// decoder-only model whose step reads every weight but the embedding table, so the
// 99,496,704 parameters the help states are 32000 x 768 of embedding plus what it reads.
TEST(BenchCli, LlamaShapeIsADecoderOnlyModelOfTheStatedSize) {
  const json j = bench_json(" --shape llama --batch 1 --src-len 2 --new-tokens 1 --threads 1 --repeats 1 --warmup 0");
  expect_metrics(j);
  EXPECT_TRUE(j["decoder_only"].get<bool>());
  EXPECT_EQ(j["model"].get<std::string>(), "llama (random, in memory)");
  EXPECT_EQ(j["decode_weight_bytes"].get<double>(), 4.0 * (99'496'704 - 32000 * 768));
  EXPECT_EQ(j["sample_ids"].size(), 1u);
}

TEST(BenchCli, LengthsBeyondThePositionsAreUsageErrors) {
  static const fs::path learned = tiny_model("learned", {{"position_encoding", "learned"}});  // 40 positions
  expect_usage_error(model_flag(learned) + " --src-len 41", "--src-len");
  expect_usage_error(model_flag(learned) + " --new-tokens 41", "--new-tokens");
  static const fs::path lm = tiny_model("learned_lm", {{"encoder_layers", 0}, {"position_encoding", "learned"}});
  expect_usage_error(model_flag(lm) + " --src-len 30 --new-tokens 11", "--src-len");
}

}  // namespace
}  // namespace ordo
