// `ordo bench` as a user meets it: every key of its JSON, the decode bound it derives,
// decoder-only models, the flags it refuses, and the shapes it lists. Timings are never
// asserted (they are whatever the machine gives); only that they are there, finite and
// positive. Then its parts (tools/cli/bench/) where a number must be exact: the shapes it
// lists are the ones it builds, and its random numbers are those bench_peer.py computes.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/kernel_path.h"
#include "models/loaded_model.h"
#include "models/safetensors.h"
#include "tests/cli_runner.h"
#include "tests/model_factory.h"
#include "tools/cli/bench/random_model.h"
#include "tools/cli/bench/random_numbers.h"
#include "tools/cli/bench/shapes.h"

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

// The bytes of a float32 tensor run as `compute_type`, from the layout README's
// "Quantized weights" gives: weight matrices (2-D ".weight"s) take the format, norms and
// biases stay float32. int8: a byte a weight and a float32 scale a row; int4 (groups of
// 32): half a byte a weight and an F16 scale a group, in panels of 16 rows (a last one
// padded), or int8's where 32 does not divide
// the width.
double bytes_as(const TensorInfo& t, const std::string& compute_type) {
  const double elements = static_cast<double>(element_count(t.shape));
  if (compute_type == "f32" || t.shape.size() != 2 || !t.name.ends_with(".weight")) return 4.0 * elements;
  const double rows = static_cast<double>(t.shape[0]);
  const bool packs = t.shape[1] % 32 == 0;
  if (compute_type == "int4" && packs) {  // in panels of 16 rows, a last one padded (engine/int4_panels.h)
    const double padded = std::ceil(rows / 16) * 16 * static_cast<double>(t.shape[1]);
    return padded / 2 + 2.0 * padded / 32;
  }
  if (compute_type == "int8" || compute_type == "int4") return elements + 4.0 * rows;
  return 2.0 * elements;  // f16, bf16
}

// The bytes one decode step reads, counted from the file's own tensor list: every
// decoder tensor except the cross-attention K/V projections (once per source) and the
// embedding tables (a step gathers a few rows), plus the output projection, which for
// these tied models is the shared embedding, and its bias.
double decode_step_bytes(const fs::path& dir, const std::string& compute_type = "f32") {
  const SafetensorsFile file = SafetensorsFile::open(dir / "model.safetensors");
  double bytes = 0;
  for (const TensorInfo& t : file.tensors()) {
    const std::string& n = t.name;
    const auto has = [&](const char* part) { return n.find(part) != std::string::npos; };
    const bool decoder = n.starts_with("model.decoder.") && !has("encoder_attn.k_proj") &&
                         !has("encoder_attn.v_proj") && !has("embed_");
    if (decoder || n == "model.shared.weight" || n == "lm_head.weight" || n == "final_logits_bias")
      bytes += bytes_as(t, compute_type);
  }
  return bytes;
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

// The bound is for the format in use: with --compute-type a step reads the bytes of the
// converted matrices (scales included), and the report names what they run as. The model
// is 32 wide with a 40-wide feed-forward in the decoder, so int4 packs 31 matrices in
// groups of 32 and keeps the decoder's two fc2 (40 wide) as int8 with a scale a row.
TEST(BenchCli, DecodeBytesAndBoundAreThoseOfTheComputeType) {
  const fs::path dir = tiny_model("widths", {{"d_model", 32}, {"encoder_ffn_dim", 64}, {"decoder_ffn_dim", 40}});
  struct Case {
    std::string type, weights;
  };
  for (const Case& c : {Case{"f32", "f32"}, Case{"f16", "f16"}, Case{"bf16", "bf16"}, Case{"int8", "int8 (a scale per row)"},
                        Case{"int4", "int4 (groups of 32): 31 matrices and int8 (a scale per row): 2 matrices"}}) {
    SCOPED_TRACE(c.type);
    const json j = bench_json(model_flag(dir) + kQuick + " --compute-type " + c.type);
    EXPECT_EQ(j["decode_weight_bytes"].get<double>(), decode_step_bytes(dir, c.type));
    EXPECT_NEAR(j["decode_bound_tok_s"].get<double>(), j["bandwidth_gbs"].get<double>() * 1e9 / decode_step_bytes(dir, c.type),
                1e-9 * j["decode_bound_tok_s"].get<double>());
    EXPECT_EQ(j["compute_type"].get<std::string>(), c.weights);
  }
  EXPECT_LT(decode_step_bytes(dir, "int4"), decode_step_bytes(dir, "int8"));
  const auto table = run_ordo("bench" + model_flag(dir) + kQuick + " --compute-type int8");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("  weights "), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("int8 (a scale per row)"), std::string::npos) << table.out;
}

// Which kernels ran is part of a measurement: the path this process would take (the
// child inherits ORDO_CPU; CTest runs this file again under narrower ones where it runs
// the kernel suites), in the JSON and the table.
TEST(BenchCli, ReportsTheKernelsThatRan) {
  const json j = bench_json(model_flag(encoder_decoder()) + kQuick);
  EXPECT_EQ(j["kernels"].get<std::string>(), kernels::kernel_path_name(kernels::kernel_path()));
  const auto table = run_ordo("bench" + model_flag(encoder_decoder()) + kQuick);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("  kernels "), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(std::string(kernels::kernel_path_name(kernels::kernel_path()))), std::string::npos);
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

// What tools/bench/make_bench_model.py and bench_peer.py read instead of keeping copies:
// one line per shape, its config.json among the keys.
TEST(BenchCli, ListShapesJsonGivesEachShapesConfig) {
  const auto r = run_ordo("bench --list-shapes --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::vector<json> shapes;
  for (std::string line; std::getline(lines, line);) shapes.push_back(json::parse(line));
  ASSERT_EQ(shapes.size(), 2u) << r.out;
  EXPECT_EQ(shapes[0]["name"], "base");
  EXPECT_EQ(shapes[0]["kind"], "encoder-decoder");
  EXPECT_EQ(shapes[0]["config"]["model_type"], "ordo");
  EXPECT_EQ(shapes[0]["config"]["d_model"], 512);
  EXPECT_EQ(shapes[1]["name"], "llama");
  EXPECT_EQ(shapes[1]["kind"], "decoder-only");
  EXPECT_EQ(shapes[1]["config"]["model_type"], "llama");
  EXPECT_EQ(shapes[1]["parameters"], 99'496'704);  // what --help states
  for (const json& shape : shapes) {
    EXPECT_TRUE(shape["summary"].is_string()) << shape.dump();
    EXPECT_NO_THROW(ModelConfig::from_json(shape["config"], shape["name"].get<std::string>())) << shape.dump();
  }
}

TEST(BenchCli, ListShapesTableNamesEveryShape) {
  const auto r = run_ordo("bench --list-shapes");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* text : {"base", "encoder-decoder", "llama", "decoder-only", "99,496,704", "6+6 layers"})
    EXPECT_NE(r.out.find(text), std::string::npos) << text << " missing in\n" << r.out;
  expect_usage_error(" --list-shapes --shape base", "--list-shapes");
  expect_usage_error(" --list-shapes" + model_flag(encoder_decoder()), "--list-shapes");
}

TEST(BenchCli, LengthsBeyondThePositionsAreUsageErrors) {
  static const fs::path learned = tiny_model("learned", {{"position_encoding", "learned"}});  // 40 positions
  expect_usage_error(model_flag(learned) + " --src-len 41", "--src-len");
  expect_usage_error(model_flag(learned) + " --new-tokens 41", "--new-tokens");
  static const fs::path lm = tiny_model("learned_lm", {{"encoder_layers", 0}, {"position_encoding", "learned"}});
  expect_usage_error(model_flag(lm) + " --src-len 30 --new-tokens 11", "--src-len");
}

// ---- the parts ----

using tools::bench::BenchShape;

// The parameters listed are the elements of the model a shape builds, and its listed
// config is the one it builds from.
TEST(BenchShapes, ListingDescribesTheModelBuilt) {
  for (const BenchShape& shape : tools::bench::bench_shapes()) {
    Index elements = 0;
    for (const TensorSpec& spec : expected_tensors(ModelConfig::from_json(shape.config, shape.name)))
      if (spec.required) elements += element_count(spec.shape);
    const json listed = tools::bench::describe_shape(shape);
    EXPECT_EQ(listed["parameters"].get<Index>(), elements) << shape.name;
    EXPECT_EQ(listed["config"], shape.config) << shape.name;
    EXPECT_EQ(tools::bench::find_bench_shape(shape.name), &shape);
  }
  EXPECT_EQ(tools::bench::find_bench_shape("large"), nullptr);
  EXPECT_EQ(tools::bench::bench_shape_names("|"), "base|llama");
  EXPECT_EQ(tools::bench::with_thousands(99'496'704), "99,496,704");
  EXPECT_EQ(tools::bench::with_thousands(512), "512");
  EXPECT_EQ(tools::bench::with_thousands(1000), "1,000");
}

std::uint32_t bits(float value) { return std::bit_cast<std::uint32_t>(value); }

std::vector<float> weights(const std::string& name, std::uint64_t first, std::size_t count) {
  std::vector<float> values(count);
  tools::bench::random_weights(name, first, values);
  return values;
}

// SplitMix64 seeded with 0 starts 0xE220A8397B1DCDAF (Vigna's reference splitmix64.c).
// The rest are what tools/bench/bench_peer.py's source_ids and random_values give, bit
// for bit: a change on either side must show here.
TEST(BenchNumbers, AreThoseThePeerComputes) {
  EXPECT_EQ(tools::bench::splitmix64(0, 0), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(tools::bench::fnv1a64("model.shared.weight"), 0x3C3B928AFCDE9699ull);
  EXPECT_EQ(tools::bench::random_sources(2, 3, 32000), (std::vector<int>{30448, 3151, 2999, 12401, 13102, 3803}));
  EXPECT_EQ(tools::bench::random_sources(1, 4, 3), (std::vector<int>{2, 1, 2, 1}));  // all ids when vocab <= 3

  const auto expect_bits = [](const std::vector<float>& values, const std::vector<std::uint32_t>& expected) {
    ASSERT_EQ(values.size(), expected.size());
    for (std::size_t i = 0; i < values.size(); ++i) EXPECT_EQ(bits(values[i]), expected[i]) << "value " << i;
  };
  expect_bits(weights("model.shared.weight", 0, 3), {0x3d0d79d8, 0x3cbaf626, 0xbcc73a2a});
  expect_bits(weights("model.decoder.layers.0.final_layer_norm.weight", 0, 3), {0x3f7f84b1, 0x3f80fc62, 0x3f855644});
  expect_bits(weights("model.norm.weight", 0, 3), {0x3f747248, 0x3f76ba6b, 0x3f7d7e1f});
  expect_bits(weights("model.shared.weight", (1u << 20) - 1, 3), {0xbcc197a0, 0xbd1054dd, 0x3d31d658});
}

// The random model goes through the library's writer a chunk at a time: every chunk
// boundary keeps the rule, and the model has exactly the tensors its config requires.
TEST(BenchRandomModel, IsTheRuleInEveryTensorAndLoads) {
  const fs::path dir = testing_support::temp_dir("bench_random_model");
  const BenchShape tiny{"tiny", "a test's", testing_support::tiny_config()};
  tools::bench::write_random_model(dir, tiny);
  const SafetensorsFile file = SafetensorsFile::open(dir / "model.safetensors");
  std::vector<TensorSpec> specs = expected_tensors(ModelConfig::from_json(tiny.config, "tiny"));
  std::erase_if(specs, [](const TensorSpec& spec) { return !spec.required; });
  ASSERT_EQ(file.tensors().size(), specs.size());
  for (const TensorSpec& spec : specs) {
    const TensorInfo* info = file.find(spec.name);
    ASSERT_NE(info, nullptr) << spec.name;
    EXPECT_EQ(info->shape, spec.shape) << spec.name;
    std::vector<float> storage;
    const TensorView view = file.as_float32(*info, storage);
    EXPECT_EQ(std::vector<float>(view.data(), view.data() + view.size()),
              weights(spec.name, 0, static_cast<std::size_t>(view.size())))
        << spec.name;
  }
  EXPECT_EQ(json::parse(std::ifstream(dir / "config.json")), tiny.config);
  EXPECT_NO_THROW(LoadedModel::load(dir, nullptr));

  const std::size_t count = (std::size_t{1} << 21) + 3;  // three chunks, the last of 3 values
  const fs::path big = dir / "big.safetensors";
  ordo::write_safetensors(big, {{"w", {static_cast<std::int64_t>(count)}}}, tools::bench::random_weights);
  const SafetensorsFile read = SafetensorsFile::open(big);
  std::vector<float> storage;
  const TensorView view = read.as_float32(read.tensors().front(), storage);
  EXPECT_EQ(std::vector<float>(view.data(), view.data() + view.size()), weights("w", 0, count));
}

}  // namespace
}  // namespace ordo
