// Half-precision and quantized weight matrices (engine/weight_matrix.h): the formats,
// the kernels against the float32 kernels on the dequantized weights (bit for bit: the
// same sums in the same order), `ordo quantize` against --compute-type, and every bad
// quantized file refused with a message naming the tensor and the rule.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/blas.h"
#include "engine/half.h"
#include "engine/integer_product.h"
#include "engine/matvec.h"
#include "engine/quantized_matvec.h"
#include "engine/thread_pool.h"
#include "models/quantize.h"
#include "ordo/ordo.hpp"
#include "tests/cli_runner.h"
#include "tests/model_factory.h"
#include "tests/reference.h"

namespace ordo {
namespace {

namespace fs = std::filesystem;
using testing_support::file_text;
using testing_support::run_ordo;
using testing_support::shell_quote;
using testing_support::temp_dir;

const fs::path kWeights = fs::path(ORDO_SOURCE_DIR) / "weights";

// ordo quantize's options for `type`, its group size the type's default.
QuantizeOptions to(ComputeType type) {
  QuantizeOptions options;
  options.type = type;
  return options;
}

std::vector<float> random_values(Index count, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  return reference::random_vector(count, rng, -scale, scale);
}

struct Case {
  WeightFormat format;
  Index group;  // 0: the format's default (int8 a scale a row, int4 32)
  Index cols;
};

std::string name_of(const Case& c) {
  return std::string(weight_format_name(c.format)) + " group " + std::to_string(c.group) + " cols " +
         std::to_string(c.cols);
}

// Every format, with widths that leave each tail of the vector loops (int8 and the
// halves: around 8 and 32; int4 comes in runs of 32) and groups that split rows.
const Case kCases[] = {
    {WeightFormat::F16, 0, 37},  {WeightFormat::F16, 0, 515},  {WeightFormat::BF16, 0, 9},
    {WeightFormat::BF16, 0, 64}, {WeightFormat::Int8, 0, 37},  {WeightFormat::Int8, 0, 512},
    {WeightFormat::Int8, 32, 96}, {WeightFormat::Int8, 3, 12}, {WeightFormat::Int8, 8, 72},
    {WeightFormat::Int4, 32, 64}, {WeightFormat::Int4, 64, 192}, {WeightFormat::Int4, 32, 512},
};

Quantization target_of(const Case& c) {
  Quantization q{c.format, c.group};
  if (c.format == WeightFormat::Int4 && c.group == 0) q.group_size = kInt4Run;
  return q;
}

// F16 and BF16 matrices give exactly what the float32 matrix of their converted weights
// gives, bit for bit: one row (the kernel converts in registers and sums as the float32
// kernel does), a few rows (a converted block in the small-batch kernel), many (sgemm
// on converted blocks); with a small matrix and one large enough to be split across
// threads and to take the small-batch kernel. So a model stored in F16 decodes exactly
// as its float32 conversion does. Int8 and int4 matrices quantize the activations and
// give the integer products' definition (engine/integer_product.h) at every batch size:
// each row of x its own numbers, alone or among 70.
TEST(Quantized, AStoredMatrixGivesTheFloatMatrixsNumbersExactly) {
  for (const Case& c : kCases)
    for (const Index rows : {Index{19}, Index{200}}) {
      if (rows == 200 && c.cols < 500) continue;
      SCOPED_TRACE(name_of(c) + " rows " + std::to_string(rows));
      const std::vector<float> original = random_values(rows * c.cols, 7);
      const EncodedMatrix encoded =
          encode_matrix(TensorView(original.data(), {rows, c.cols}), target_of(c), "test matrix");
      const WeightMatrix w = encoded.view();
      std::vector<float> dequantized(original.size());
      w.dequantize(0, rows, dequantized.data(), c.cols);
      // The portable definition agrees with whatever path dequantize took.
      std::vector<float> row(static_cast<std::size_t>(c.cols));
      for (Index r = 0; r < rows; ++r) {
        kernels::dequantize(w, r, 1, row.data(), c.cols);
        ASSERT_EQ(0, std::memcmp(row.data(), dequantized.data() + r * c.cols, row.size() * sizeof(float)));
      }
      const WeightMatrix as_float(TensorView(dequantized.data(), {rows, c.cols}));
      const std::vector<float> x = random_values(70 * c.cols, 8);
      const bool integer = kernels::integer_product_takes(w);
      for (const Index m : {1, 2, 3, 17, 64, 70}) {
        SCOPED_TRACE("rows of x: " + std::to_string(m));
        Matrix got(m, rows), want(m, rows);
        blas::gemm_nt(ConstMatrixRef(x.data(), m, c.cols), w, got, Epilogue{});
        if (integer) {
          kernels::QuantizedActivations activations;
          activations.quantize(ConstMatrixRef(x.data(), m, c.cols), w.group());
          kernels::integer_product_on(kernels::KernelPath::Portable, activations, w, 0, rows, want.data(), rows);
        } else {
          blas::gemm_nt(ConstMatrixRef(x.data(), m, c.cols), as_float, want, Epilogue{});
        }
        ASSERT_EQ(0, std::memcmp(got.data(), want.data(), static_cast<std::size_t>(m * rows) * sizeof(float)));
      }
    }
}

// Int8 and int4 products split across threads give what one thread gives, bit for bit:
// the workers read the activations the calling thread quantized (a lambda does not
// capture a thread_local: each worker once read its own, empty one, and a model decoded
// garbage at --threads 2). 300 rows of x quantize on both threads too (engine/blas.cpp's
// kParallelQuantize) and, int8 in rows of 512, run on AMX's tiles where the CPU has them,
// in two copies of activations (256 rows, then 44).
TEST(Quantized, SplitIntegerProductsEqualOneThreadBitForBit) {
  for (const Case& c : {Case{WeightFormat::Int8, 0, 320}, Case{WeightFormat::Int8, 0, 512},
                        Case{WeightFormat::Int4, 32, 320}}) {
    SCOPED_TRACE(name_of(c));
    constexpr Index rows = 4099;  // large enough to be split
    const std::vector<float> original = random_values(rows * c.cols, 21);
    const EncodedMatrix encoded = encode_matrix(TensorView(original.data(), {rows, c.cols}), target_of(c), "test matrix");
    for (const Index m : {1, 8, 300}) {
      const std::vector<float> x = random_values(m * c.cols, 22);
      std::vector<Matrix> out;
      for (const int threads : {1, 2}) {
        threads::set_count(threads);
        out.emplace_back(m, rows);
        blas::gemm_nt(ConstMatrixRef(x.data(), m, c.cols), encoded.view(), out.back(), Epilogue{});
      }
      threads::set_count(1);
      ASSERT_EQ(0, std::memcmp(out[0].data(), out[1].data(), static_cast<std::size_t>(m * rows) * sizeof(float)))
          << "rows of x " << m;
    }
  }
}

// One row of int8 or int4 through kernels::matvec_on gives the same numbers, bit for
// bit, on every SIMD path (integer sums, one float order: engine/integer_product.h), so
// the path a CPU takes never changes an output; alpha and beta apply after. Oracle: the
// AVX2 path. Widths and groups
// the AVX-512 kernels take (a run of 32 a group, several runs a group, one scale a row,
// more groups than the sixteen scales converted at once) and ones they leave to AVX2;
// odd and even row counts (rows go in pairs half the matrix apart); a zero group,
// zeros and negative zeros in x; alpha and beta.
TEST(Quantized, OneRowGivesTheSameNumbersOnEverySimdPath) {
  if (kernels::widest_kernel_path() < kernels::KernelPath::Avx512) GTEST_SKIP() << "this CPU has no AVX-512";
  const Case cases[] = {
      {WeightFormat::Int8, 0, 512},  {WeightFormat::Int8, 0, 96},   {WeightFormat::Int8, 32, 96},
      {WeightFormat::Int8, 64, 768}, {WeightFormat::Int8, 0, 37},   {WeightFormat::Int8, 3, 12},
      {WeightFormat::Int4, 32, 64},  {WeightFormat::Int4, 32, 768}, {WeightFormat::Int4, 64, 192},
      {WeightFormat::Int4, 128, 1024}, {WeightFormat::Int4, 512, 512},
  };
  for (const Case& c : cases)
    for (const Index rows : {Index{1}, Index{2}, Index{7}, Index{34}}) {
      SCOPED_TRACE(name_of(c) + " rows " + std::to_string(rows));
      std::vector<float> original = random_values(rows * c.cols, 11);
      std::fill(original.begin(), original.begin() + std::min<Index>(c.cols, 32), 0.0f);  // a zero group
      const EncodedMatrix encoded =
          encode_matrix(TensorView(original.data(), {rows, c.cols}), target_of(c), "test matrix");
      std::vector<float> x = random_values(c.cols, 12);
      x[1] = 0.0f;
      x[2] = -0.0f;
      for (const auto& [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.5f, 0.25f}}) {
        SCOPED_TRACE("alpha " + std::to_string(alpha) + " beta " + std::to_string(beta));
        std::vector<float> want = random_values(rows, 13), got = want;
        kernels::matvec_on(kernels::KernelPath::Avx2, encoded.view(), x.data(), want.data(), alpha, beta);
        kernels::matvec_on(kernels::KernelPath::Avx512, encoded.view(), x.data(), got.data(), alpha, beta);
        for (Index r = 0; r < rows; ++r)
          ASSERT_EQ(float_to_bits(got[static_cast<std::size_t>(r)]), float_to_bits(want[static_cast<std::size_t>(r)]))
              << "row " << r << ": avx512 " << got[static_cast<std::size_t>(r)] << ", avx2 "
              << want[static_cast<std::size_t>(r)];
      }
    }
}

// What the formats promise: int8 within half a scale of the original, scale max|w|/127;
// int4 within half a scale, max|w|/7 rounded to F16; the halves exactly as PyTorch rounds.
TEST(Quantized, EncodingKeepsEachWeightWithinHalfAStep) {
  const Index rows = 5, cols = 64;
  std::vector<float> w = random_values(rows * cols, 3, 2.0f);
  std::fill(w.begin() + 2 * cols, w.begin() + 3 * cols, 0.0f);  // an all-zero row: scale 1, all exact
  for (const Case c : {Case{WeightFormat::Int8, 0, cols}, Case{WeightFormat::Int8, 16, cols},
                       Case{WeightFormat::Int4, 32, cols}}) {
    SCOPED_TRACE(name_of(c));
    const EncodedMatrix e = encode_matrix(TensorView(w.data(), {rows, cols}), target_of(c), "m");
    const WeightMatrix m = e.view();
    std::vector<float> back(w.size());
    m.dequantize(0, rows, back.data(), cols);
    const Index group = m.group();
    for (Index r = 0; r < rows; ++r)
      for (Index g = 0; g < cols / group; ++g) {
        float amax = 0.0f;
        for (Index k = g * group; k < (g + 1) * group; ++k) amax = std::max(amax, std::fabs(w[r * cols + k]));
        const float step = c.format == WeightFormat::Int8 ? amax / 127.0f : half_to_float(float_to_half(amax / 7.0f));
        for (Index k = g * group; k < (g + 1) * group; ++k) {
          const float got = back[static_cast<std::size_t>(r * cols + k)];
          if (amax == 0.0f)
            ASSERT_EQ(got, 0.0f);
          else
            ASSERT_LE(std::fabs(got - w[static_cast<std::size_t>(r * cols + k)]), 0.5f * step * (1 + 1e-6f));
        }
      }
  }
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);   // the tie rounds to even: infinity
  EXPECT_EQ(float_to_half(5.96046448e-8f), 0x0001);  // the smallest subnormal
  EXPECT_EQ(float_to_half(1.0f + 1.0f / 2048), 0x3c00);  // a tie: to even
  EXPECT_EQ(float_to_bfloat16(1.0f + 1.0f / 256), 0x3f80);  // a tie: to even
  EXPECT_EQ(float_to_bfloat16(-2.5f), 0xc020);
}

// The encoders' rounding is std::nearbyint's (halves to even) and their clamp the
// format's, bit for bit, written here as the format's text says: values that land on
// halves (k + 0.5 at a scale of 1: a group whose maximum is 127, or 7 for int4), values
// across 40 binary orders of magnitude, subnormal groups, and groups so small that
// max|w| / 127 rounds to 0 (int8's scale is then the smallest float, which holds them
// exactly); 512 rows, split across both threads.
TEST(Quantized, EncodingRoundsHalvesToEvenAsTheFormatSays) {
  const Index rows = 512, cols = 256;
  std::mt19937 generator(11);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> w(static_cast<std::size_t>(rows * cols));
  for (Index r = 0; r < rows; ++r)
    for (Index k = 0; k < cols; ++k) {
      float& v = w[static_cast<std::size_t>(r * cols + k)];
      switch (r % 5) {
        case 0: v = k == 0 ? 127.0f : static_cast<float>(static_cast<int>(generator() % 255) - 127) + 0.5f; break;
        case 1: v = k % 32 == 0 ? 7.0f : static_cast<float>(static_cast<int>(generator() % 15) - 7) + 0.5f; break;
        case 2: v = uniform(generator) * std::ldexp(1.0f, static_cast<int>(generator() % 40) - 30); break;
        case 3: v = uniform(generator) * 1e-38f; break;
        default: v = static_cast<float>(static_cast<int>(generator() % 127) - 63) * std::numeric_limits<float>::denorm_min();
      }
    }
  threads::set_count(2);
  for (const Case c : {Case{WeightFormat::Int8, 0, cols}, Case{WeightFormat::Int8, 32, cols},
                       Case{WeightFormat::Int4, 32, cols}}) {
    SCOPED_TRACE(name_of(c));
    const EncodedMatrix e = encode_matrix(TensorView(w.data(), {rows, cols}), target_of(c), "m");
    const bool int4 = c.format == WeightFormat::Int4;
    const Index group = c.group == 0 ? cols : c.group;
    for (Index r = 0; r < rows; ++r)
      for (Index g = 0; g < cols / group; ++g) {
        const float* in = w.data() + r * cols + g * group;
        float amax = 0.0f;
        for (Index k = 0; k < group; ++k) amax = std::max(amax, std::fabs(in[k]));
        float scale = amax > 0.0f ? amax / 127.0f : 1.0f;
        if (scale == 0.0f) scale = std::numeric_limits<float>::denorm_min();
        if (int4) {
          const std::uint16_t half = float_to_half(amax > 0.0f ? amax / 7.0f : 1.0f);
          scale = half_to_float(half == 0 ? std::uint16_t{1} : half);
        } else {
          ASSERT_EQ(float_to_bits(reinterpret_cast<const float*>(e.scales.data())[r * (cols / group) + g]),
                    float_to_bits(scale))
              << "row " << r << ", group " << g;
        }
        for (Index k = 0; k < group; ++k) {
          const float limit = int4 ? 8.0f : 127.0f;
          const int want = static_cast<int>(std::clamp(std::nearbyint(in[k] / scale), -limit, int4 ? 7.0f : 127.0f));
          const Index at = r * cols + g * group + k;
          const auto byte = static_cast<unsigned>(e.values[static_cast<std::size_t>(int4 ? at / 32 * 16 + at % 16 : at)]);
          const int got = !int4 ? static_cast<int>(static_cast<std::int8_t>(byte))
                                : static_cast<int>(at % 32 < 16 ? byte & 15 : byte >> 4) - 8;
          ASSERT_EQ(got, want) << "row " << r << ", weight " << g * group + k << ": " << in[k] << " / " << scale;
        }
      }
  }
  threads::set_count(1);
}

// The int4 layout as the README documents it: in each run of 32, byte j holds weight j
// (low nibble) and weight j + 16 (high nibble), each as q + 8.
TEST(Quantized, Int4PacksTheLowAndHighHalvesOfEachRunOf32) {
  std::vector<float> w(64);
  for (int k = 0; k < 64; ++k) w[static_cast<std::size_t>(k)] = static_cast<float>(k % 15 - 7);  // -7..7: scale 1
  const EncodedMatrix e = encode_matrix(TensorView(w.data(), {1, 64}), {WeightFormat::Int4, 32}, "m");
  ASSERT_EQ(e.values.size(), 32u);
  for (int run = 0; run < 2; ++run)
    for (int j = 0; j < 16; ++j) {
      const auto byte = static_cast<unsigned>(e.values[static_cast<std::size_t>(run * 16 + j)]);
      EXPECT_EQ(static_cast<int>(byte & 15) - 8, (run * 32 + j) % 15 - 7) << run << " " << j;
      EXPECT_EQ(static_cast<int>(byte >> 4) - 8, (run * 32 + j + 16) % 15 - 7) << run << " " << j;
    }
  EXPECT_EQ(e.scales_shape(), (Shape{1, 2}));
  EXPECT_EQ(e.values_shape(), (Shape{1, 32}));
}

TEST(Quantized, AMatrixThatCannotTakeTheFormatIsNamed) {
  const std::vector<float> w = random_values(4 * 48, 1);
  const auto message = [&](Quantization q) {
    return reference::error_message([&] { encode_matrix(TensorView(w.data(), {4, 48}), q, "layer.weight"); });
  };
  EXPECT_NE(message({WeightFormat::Int4, 48}).find("layer.weight"), std::string::npos);
  EXPECT_NE(message({WeightFormat::Int4, 48}).find("runs of 32"), std::string::npos);
  EXPECT_NE(message({WeightFormat::Int8, 7}).find("groups of 7"), std::string::npos);
  std::vector<float> big(32, 1e6f);
  EXPECT_NE(reference::error_message([&] {
              encode_matrix(TensorView(big.data(), {1, 32}), {WeightFormat::F16, 0}, "big.weight");
            }).find("beyond F16's range"),
            std::string::npos);
  // A group wider than the integer products sum exactly (engine/integer_product.h).
  const Index wide = kernels::kMaxIntegerGroup + 32;
  const std::vector<float> row(static_cast<std::size_t>(wide), 0.5f);
  const std::string too_wide = reference::error_message(
      [&] { encode_matrix(TensorView(row.data(), {1, wide}), {WeightFormat::Int8, 0}, "wide.weight"); });
  EXPECT_NE(too_wide.find("wide.weight"), std::string::npos) << too_wide;
  EXPECT_NE(too_wide.find("exactly up to 1048576"), std::string::npos) << too_wide;
}

// int4 on a width its group does not divide (48 in groups of 32; 96 in groups of 64,
// though a multiple of 32) is int8 with a scale per row: byte for byte what int8 writes.
// A width the group divides stays int4.
TEST(Quantized, Int4ThatCannotPackAWidthWritesInt8WithAScalePerRow) {
  for (const auto& [cols, group] : {std::pair<Index, Index>{48, 32}, {344, 32}, {96, 64}, {40, 128}}) {
    SCOPED_TRACE(std::to_string(cols) + " in groups of " + std::to_string(group));
    const std::vector<float> w = random_values(5 * cols, 3);
    const TensorView view(w.data(), {5, cols});
    const Quantization int4{WeightFormat::Int4, group};
    EXPECT_EQ(int4.stored_as(cols).type, WeightFormat::Int8);
    EXPECT_EQ(int4.stored_as(cols).group_size, 0);
    const EncodedMatrix fallback = encode_matrix(view, int4, "m");
    const EncodedMatrix int8 = encode_matrix(view, {WeightFormat::Int8, 0}, "m");
    EXPECT_EQ(fallback.format, WeightFormat::Int8);
    EXPECT_EQ(fallback.group, cols);
    EXPECT_EQ(fallback.values_dtype(), DType::I8);
    EXPECT_EQ(fallback.scales_dtype(), DType::F32);
    EXPECT_EQ(fallback.scales_shape(), (Shape{5}));
    EXPECT_EQ(fallback.values, int8.values);
    EXPECT_EQ(fallback.scales, int8.scales);
  }
  const std::vector<float> w = random_values(5 * 128, 4);
  for (const Index group : {Index{32}, Index{64}, Index{128}}) {
    const EncodedMatrix e = encode_matrix(TensorView(w.data(), {5, 128}), {WeightFormat::Int4, group}, "m");
    EXPECT_EQ(e.format, WeightFormat::Int4) << group;
    EXPECT_EQ(e.scales_shape(), (Shape{5, 128 / group})) << group;
  }
}

// int4 on a width its group does not divide falls back to int8 with one group a row;
// a row wider than an integer group may hold cannot take that, and the advice is a
// group size that divides the width (before: "choose a group size of at most 1048576",
// which 64 already is).
TEST(Quantized, ARowTooWideForInt4sFallbackAsksForAGroupThatDividesIt) {
  const Index cols = kernels::kMaxIntegerGroup + 32;  // a multiple of 32, not of 64
  std::vector<float> row(static_cast<std::size_t>(cols), 0.5f);
  try {
    encode_matrix(TensorView(row.data(), {1, cols}), Quantization{WeightFormat::Int4, 64}, "wide matrix");
    ADD_FAILURE() << "encoded";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "wide matrix: cannot be int4 in groups of 64, which do not divide its rows of 1048608 weights, nor int8 "
              "with a scale per row (int4's fallback for such a width), whose groups hold at most 1048576 weights "
              "(choose an int4 group size that divides 1048608)");
  }
  EXPECT_EQ(encode_matrix(TensorView(row.data(), {1, cols}), Quantization{WeightFormat::Int4, 32}, "wide matrix").format,
            WeightFormat::Int4);
}

// ---- Whole models, through the command line.

// ordo quantize writes what --compute-type converts at load: the same translations and
// the same scores, bit for bit (as printed), for every format.
TEST(Quantized, AQuantizedDirectoryRunsAsTheComputeTypeDoes) {
  const fs::path dir = temp_dir("quantize");
  const std::string text = "cats chase dogs";
  for (const char* type : {"f32", "f16", "bf16", "int8", "int4"}) {
    SCOPED_TRACE(type);
    const fs::path out = dir / type;
    const auto written = run_ordo("quantize --model " + shell_quote((kWeights / "sinusoidal").string()) + " --out " +
                                  shell_quote(out.string()) + " --type " + type);
    ASSERT_EQ(written.exit_code, 0) << written.err;
    EXPECT_TRUE(fs::exists(out / "tokenizer.model") || fs::exists(out / "source.model"));
    const auto stored = run_ordo("translate --json --beam 3 --model " + shell_quote(out.string()) + " " + shell_quote(text));
    const auto converted = run_ordo("translate --json --beam 3 --model " + shell_quote((kWeights / "sinusoidal").string()) +
                                    " --compute-type " + type + " " + shell_quote(text));
    ASSERT_EQ(stored.exit_code, 0) << stored.err;
    ASSERT_EQ(converted.exit_code, 0) << converted.err;
    EXPECT_EQ(stored.out, converted.out);
    const auto inspect = run_ordo("inspect --json --model " + shell_quote(out.string()));
    ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
    const auto info = nlohmann::json::parse(inspect.out);
    EXPECT_EQ(info["compute_type"].get<std::string>().substr(0, std::string(type).size()), type);
  }
  // int8 halves an F16 model's matrices, int4 quarters them (and adds the scales).
  const auto bytes = [&](const char* type) { return fs::file_size(dir / type / "model.safetensors"); };
  EXPECT_LT(bytes("int8"), bytes("f16") * 6 / 10);
  EXPECT_LT(bytes("int4"), bytes("int8") * 7 / 10);
  fs::remove_all(dir);
}

// Every command that loads a model takes --compute-type and runs the converted model, as
// the quantized directory runs: eval (whose report names the format), viz attention (the
// same numbers), and tokenize and detokenize (which read no weights: the same output).
TEST(Quantized, EveryCommandThatLoadsAModelTakesTheComputeType) {
  const fs::path dir = temp_dir("every-command");
  const fs::path original = kWeights / "sinusoidal", stored = dir / "int4";
  quantize_model(original, stored, to(ComputeType::Int4));
  std::ofstream(dir / "set.tsv") << "cats chase dogs\tKatzen jagen Hunde\nthe dog sleeps\tder Hund schläft\n";
  // The output with the quantized directory and with --compute-type int4 on the original.
  const auto both = [&](const std::string& run) {
    const auto from_stored = run_ordo(run + " --model " + shell_quote(stored.string()));
    const auto converted = run_ordo(run + " --model " + shell_quote(original.string()) + " --compute-type int4");
    EXPECT_EQ(from_stored.exit_code, 0) << run << "\n" << from_stored.err;
    EXPECT_EQ(converted.exit_code, 0) << run << "\n" << converted.err;
    return std::pair{from_stored.out, converted.out};
  };
  auto [eval_stored, eval_converted] = both("eval --json --data " + shell_quote((dir / "set.tsv").string()));
  nlohmann::json a = nlohmann::json::parse(eval_stored), b = nlohmann::json::parse(eval_converted);
  EXPECT_EQ(a["compute_type"], "int4 (groups of 32)");
  a.erase("model");  // the directories' paths
  b.erase("model");
  EXPECT_EQ(a, b);
  const auto csv = dir / "attention.csv";
  const std::string attention = "viz attention 'cats chase dogs' --kind cross --head all --out " + shell_quote(csv.string());
  const auto stored_run = run_ordo(attention + " --model " + shell_quote(stored.string()));
  ASSERT_EQ(stored_run.exit_code, 0) << stored_run.err;
  const std::string stored_numbers = file_text(csv);
  const auto converted_run = run_ordo(attention + " --model " + shell_quote(original.string()) + " --compute-type int4");
  ASSERT_EQ(converted_run.exit_code, 0) << converted_run.err;
  EXPECT_EQ(file_text(csv), stored_numbers);
  const auto f32_run = run_ordo(attention + " --model " + shell_quote(original.string()));
  ASSERT_EQ(f32_run.exit_code, 0) << f32_run.err;
  EXPECT_NE(file_text(csv), stored_numbers);  // int4 moves the weights, so the probabilities
  for (const std::string run : {"tokenize --json 'cats chase dogs'", "detokenize '133 85 123 1'"}) {
    const auto [from_stored, converted] = both(run);
    EXPECT_EQ(from_stored, converted) << run;
    EXPECT_EQ(converted, run_ordo(run + " --model " + shell_quote(original.string())).out) << run;
    // They read no weights, so a conversion the model cannot take does not stop them
    // (before: "cannot be int8 in groups of 3", exit 1); a flag wrong for any model does.
    const auto unconverted = run_ordo(run + " --model " + shell_quote(original.string()) + " --compute-type int8 --group-size 3");
    EXPECT_EQ(unconverted.exit_code, 0) << unconverted.err;
    EXPECT_EQ(unconverted.out, converted) << run;
    EXPECT_EQ(run_ordo(run + " --model " + shell_quote(original.string()) + " --group-size 3").exit_code, 2) << run;
  }
  fs::remove_all(dir);
}

// A random model with widths int4 packs (d_model 64) beside ones it cannot in groups of
// 32 (the encoder's feed-forward, 40) or 64 (also the decoder's, 96).
nlohmann::json mixed_width_config() {
  nlohmann::json config = testing_support::tiny_config();
  config["d_model"] = 64;
  config["encoder_ffn_dim"] = 40;
  config["decoder_ffn_dim"] = 96;
  return config;
}

// A model with widths int4 cannot pack beside ones it can: ordo quantize --type int4
// writes int8 with a scale per row for the first and int4 for the rest, the directory
// runs exactly as --compute-type int4 (with the same --group-size) converts the original
// (bit for bit, as printed), and quantize and inspect count the fallbacks. german-llama (its feed-forward's output
// projection is 344 wide: 3 of its 22 matrices) and a random model in groups of 32 and
// of 64 (where 96, a multiple of 32, falls back too).
TEST(Quantized, AMixedInt4DirectoryRunsAsTheComputeTypeDoes) {
  const fs::path dir = temp_dir("quantize-mixed");
  const fs::path random = dir / "random";
  testing_support::write_random_model(random, mixed_width_config());
  struct Mixed {
    fs::path model;
    int group;
    std::vector<std::string> runs;  // commands, each run on both directories
    int fallbacks;
  };
  const std::string ids = " --source-ids 3,4,5,6,1 --target-ids 7,8,9,1";
  const std::vector<Mixed> cases = {
      {kWeights / "german-llama", 32,
       {"generate --json --beam 3 'Der Hund'", "score --json --target 'Die Katze schläft.'"}, 3},
      {random, 32, {"score --json" + ids, "translate --json --beam 2 --source-ids 3,4,5,6,1"}, 2},
      {random, 64, {"score --json" + ids, "translate --json --beam 2 --source-ids 3,4,5,6,1"}, 4},
  };
  for (const Mixed& c : cases) {
    const std::string group = std::to_string(c.group);
    SCOPED_TRACE(c.model.string() + " in groups of " + group);
    const fs::path out = dir / ("int4-" + c.model.filename().string() + "-" + group);
    const auto written = run_ordo("quantize --json --model " + shell_quote(c.model.string()) + " --out " +
                                  shell_quote(out.string()) + " --type int4 --group-size " + group);
    ASSERT_EQ(written.exit_code, 0) << written.err;
    const auto report = nlohmann::json::parse(written.out);
    EXPECT_EQ(report["int8_fallbacks"], c.fallbacks);
    const int matrices = report["matrices"];
    // The directory holds both: U8 and I8 weights under one int4 config.
    const SafetensorsFile file = SafetensorsFile::open(out / "model.safetensors");
    int i8 = 0, u8 = 0;
    for (const TensorInfo& t : file.tensors()) {
      i8 += t.dtype == DType::I8;
      u8 += t.dtype == DType::U8;
    }
    EXPECT_EQ(i8, c.fallbacks);
    EXPECT_EQ(u8, matrices - c.fallbacks);
    std::ifstream config_file(out / "config.json");
    EXPECT_EQ(nlohmann::json::parse(config_file)["quantization"],
              (nlohmann::json{{"type", "int4"}, {"group_size", c.group}}));
    for (const std::string& command : c.runs) {
      SCOPED_TRACE(command);
      const auto stored = run_ordo(command + " --model " + shell_quote(out.string()));
      const auto converted = run_ordo(command + " --model " + shell_quote(c.model.string()) +
                                      " --compute-type int4 --group-size " + group);
      ASSERT_EQ(stored.exit_code, 0) << stored.err;
      ASSERT_EQ(converted.exit_code, 0) << converted.err;
      EXPECT_EQ(stored.out, converted.out);
      // The fallback matters: plain int8 (a scale per row everywhere) prints otherwise.
      const auto int8 = run_ordo(command + " --model " + shell_quote(c.model.string()) + " --compute-type int8");
      EXPECT_NE(stored.out, int8.out);
    }
    if (c.model == random) {  // the library too, in any group size: scores as exact floats
      LoadOptions int4;
      int4.compute_type = ComputeType::Int4;
      int4.group_size = c.group;
      const std::vector<std::vector<int>> sources{{3, 4, 5, 6, 1}, {9, 1}}, targets{{7, 8, 9, 1}, {2, 2, 1}};
      const auto scores = [&](const Model& model) {
        std::vector<float> logprobs;
        for (const Score& score : Translator(model).score_ids_batch(sources, targets)) {
          EXPECT_TRUE(score.error.empty()) << score.error;
          logprobs.insert(logprobs.end(), score.token_logprobs.begin(), score.token_logprobs.end());
        }
        return logprobs;
      };
      const std::vector<float> stored = scores(Model::load(out));
      EXPECT_EQ(stored, scores(Model::load(c.model, int4)));
      EXPECT_EQ(stored.size(), 7u);
    }
    const std::string formats = "int4 (groups of " + group + "): " + std::to_string(matrices - c.fallbacks) +
                                " matrices and int8 (a scale per row): " + std::to_string(c.fallbacks) + " matrices";
    std::vector<std::string> inspected{" --model " + shell_quote(out.string())};
    inspected.push_back(" --compute-type int4 --group-size " + group + " --model " + shell_quote(c.model.string()));
    for (const std::string& flags : inspected) {
      const auto inspect = run_ordo("inspect --json" + flags);
      ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
      EXPECT_EQ(nlohmann::json::parse(inspect.out)["compute_type"], formats) << flags;
    }
  }
  fs::remove_all(dir);
}

TEST(Quantized, QuantizeRefusesToWriteOverFilesAndBadOptions) {
  const fs::path dir = temp_dir("quantize-bad");
  const std::string model = shell_quote((kWeights / "sinusoidal").string());
  std::ofstream(dir / "keep.txt") << "mine";
  auto r = run_ordo("quantize --model " + model + " --out " + shell_quote(dir.string()) + " --type int8");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("not empty"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(dir / "keep.txt"));
  r = run_ordo("quantize --model " + model + " --out " + shell_quote((dir / "x").string()) + " --type int5");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  r = run_ordo("quantize --model " + model + " --out " + shell_quote((dir / "x").string()) + " --type f16 --group-size 32");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("ordo: --group-size: is set for f16, which has no scales", 0), 0u) << r.err;
  r = run_ordo("quantize --model " + model + " --out " + shell_quote((dir / "x").string()) + " --type int4 --group-size 48");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("multiple of 32"), std::string::npos) << r.err;
  r = run_ordo("translate --compute-type int3 --model " + model + " 'cats'");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  // --group-size beside --compute-type: a usage error naming the flag, for a type
  // without groups or a size the type cannot take.
  r = run_ordo("translate --group-size 64 --model " + model + " 'cats'");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("ordo: --group-size: ", 0), 0u) << r.err;
  r = run_ordo("translate --compute-type int4 --group-size 48 --model " + model + " 'cats'");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("ordo: --group-size: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("multiple of 32"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "x"));
  fs::remove_all(dir);
}

// The output as a user names it: with a trailing slash (a shell's completion), or an
// existing empty directory, which is filled and kept as it was: its permissions, and a
// symbolic link to it. What cannot be written is one line naming the user's path, never
// the temporary directory's, and no "internal error".
TEST(Quantized, QuantizeFillsTheDirectoryAsTheUserNamedIt) {
  const fs::path dir = temp_dir("quantize-out");
  const std::string model = " --type int8 --model " + shell_quote((kWeights / "sinusoidal").string());
  const auto quantize_to = [&](const std::string& out) { return run_ordo("quantize --out " + shell_quote(out) + model); };
  const auto written = [](const fs::path& d) { return fs::exists(d / "config.json") && fs::exists(d / "model.safetensors"); };
  auto r = quantize_to((dir / "slash").string() + "/");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(written(dir / "slash"));
  // --json says the group size written: int8 0 (a scale a row), int4 its groups, float -1.
  for (const auto& [flags, group] : std::vector<std::pair<std::string, int>>{
           {"--type int8", 0}, {"--type int4 --group-size 64", 64}, {"--type f16", -1}}) {
    const auto j = run_ordo("quantize --json " + flags + " --out " + shell_quote((dir / "json").string()) +
                            " --model " + shell_quote((kWeights / "sinusoidal").string()));
    ASSERT_EQ(j.exit_code, 0) << j.err;
    EXPECT_EQ(nlohmann::json::parse(j.out)["group_size"], group) << flags;
    fs::remove_all(dir / "json");
  }
  fs::create_directory(dir / "shared");
  fs::permissions(dir / "shared", fs::perms::owner_all | fs::perms::group_all | fs::perms::set_gid);
  r = quantize_to((dir / "shared").string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(written(dir / "shared"));
  EXPECT_EQ(fs::status(dir / "shared").permissions() & fs::perms::mask,
            fs::perms::owner_all | fs::perms::group_all | fs::perms::set_gid);
  fs::create_directory(dir / "target");
  fs::create_directory_symlink("target", dir / "link");
  r = quantize_to((dir / "link").string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(dir / "link"));
  EXPECT_TRUE(written(dir / "target"));
  fs::create_directory_symlink("nowhere", dir / "dangling");
  r = quantize_to((dir / "dangling").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "ordo: " + (dir / "dangling").string() +
                       ": is a symbolic link to nowhere, which does not exist (create the directory it names, or choose "
                       "another)\n");
  std::ofstream(dir / "afile") << "a file, not a directory";
  r = quantize_to((dir / "afile" / "sub").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("ordo: " + (dir / "afile" / "sub").string() + ": cannot be written: Not a directory", 0), 0u) << r.err;
  // Nothing else appeared: no temporary directory was left beside the outputs.
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"afile", "dangling", "link", "shared", "slash", "target"}));
  fs::remove_all(dir);
}

// What a killed pass left (its process gone) does not stop the next one: the partial
// directory inside an existing output, or beside a new one, is removed. A live
// process's is another pass at work: the output is not empty. A pass stopped before the
// end removes the parents it made too.
TEST(Quantized, QuantizeClearsWhatAKilledPassLeftAndNothingElse) {
  const fs::path dir = temp_dir("quantize-killed");
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ::waitpid(gone, nullptr, 0);
  const std::string stale = ".partial-" + std::to_string(gone) + "-0";
  fs::create_directories(dir / "existing" / stale);
  std::ofstream(dir / "existing" / stale / "model.safetensors") << "half a model";
  quantize_model(kWeights / "sinusoidal", dir / "existing", to(ComputeType::Int8));
  EXPECT_FALSE(fs::exists(dir / "existing" / stale));
  EXPECT_TRUE(fs::exists(dir / "existing" / "config.json"));
  fs::create_directories(dir / (".new" + stale));
  quantize_model(kWeights / "sinusoidal", dir / "new", to(ComputeType::Int8));
  EXPECT_FALSE(fs::exists(dir / (".new" + stale)));
  // pid 1 is alive: its partial directory is someone's pass in progress.
  fs::create_directories(dir / "busy" / ".partial-1-0");
  EXPECT_THROW(quantize_model(kWeights / "sinusoidal", dir / "busy", to(ComputeType::Int8)), Error);
  EXPECT_TRUE(fs::exists(dir / "busy" / ".partial-1-0"));
  QuantizeOptions stopped = to(ComputeType::Int8);
  stopped.stop_requested = [] { return true; };
  EXPECT_THROW(quantize_model(kWeights / "sinusoidal", dir / "a" / "b" / "c", stopped), Error);
  EXPECT_FALSE(fs::exists(dir / "a"));
  fs::remove_all(dir);
}

// Filling an existing directory never replaces a file: one that another program puts
// there while the pass writes is an error, and the pass moves none of its files in.
TEST(Quantized, QuantizeNeverReplacesAFileThatAppearedWhileItWrote) {
  const fs::path dir = temp_dir("quantize-race");
  fs::create_directory(dir / "out");
  QuantizeOptions options = to(ComputeType::Int8);
  options.stop_requested = [&] {  // asked between tensors: the other program writes then
    if (!fs::exists(dir / "out" / "model.safetensors")) std::ofstream(dir / "out" / "model.safetensors") << "theirs";
    return false;
  };
  try {
    quantize_model(kWeights / "sinusoidal", dir / "out", options);
    ADD_FAILURE() << "wrote over their file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gained 'model.safetensors' while ordo quantize wrote it"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(file_text(dir / "out" / "model.safetensors"), "theirs");
  EXPECT_FALSE(fs::exists(dir / "out" / "config.json"));
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir / "out")) names.push_back(entry.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"model.safetensors"});
  fs::create_directory_symlink("loop", dir / "loop");
  const auto r = run_ordo("quantize --type int8 --out " + shell_quote((dir / "loop").string()) + " --model " +
                          shell_quote((kWeights / "sinusoidal").string()));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is a symbolic link that leads back to itself"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

// A Hugging Face config's torch_dtype names the weights' dtype: quantize to a float type
// rewrites it (before, a bf16 or f32 directory still said float16, which transformers'
// torch_dtype="auto" would have cast it to); int8 and int4 keep it for the norms.
TEST(Quantized, QuantizeSaysTheNewFloatDtypeInTorchDtype) {
  const fs::path dir = temp_dir("torch-dtype");
  for (const auto& [type, want] : std::vector<std::pair<ComputeType, std::string>>{
           {ComputeType::BF16, "bfloat16"}, {ComputeType::F32, "float32"}, {ComputeType::Int8, "float16"}}) {
    const fs::path out = dir / std::string(compute_type_name(type));
    quantize_model(kWeights / "german-llama", out, to(type));
    std::ifstream in(out / "config.json");
    EXPECT_EQ(nlohmann::json::parse(in)["torch_dtype"], want) << compute_type_name(type);
  }
  fs::remove_all(dir);
}

// A pass asked to stop (ordo quantize asks at SIGINT and SIGTERM) stops between tensors,
// says so, and leaves nothing: neither the output nor its temporary directory, and an
// existing empty output stays empty.
TEST(Quantized, AStoppedQuantizeLeavesNothingBehind) {
  const fs::path dir = temp_dir("quantize-stop");
  for (const bool exists : {false, true}) {
    SCOPED_TRACE(exists ? "into an empty directory" : "into a new one");
    if (exists) fs::create_directory(dir / "out");
    for (const int after : {0, 3, 40}) {  // tensors written before the stop
      int asked = 0;
      QuantizeOptions options = to(ComputeType::Int4);
      options.stop_requested = [&] { return ++asked > after; };
      try {
        quantize_model(kWeights / "sinusoidal", dir / "out", options);
        ADD_FAILURE() << "not stopped after " << after;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("stopped before it was complete; nothing was written"), std::string::npos)
            << e.what();
      }
      EXPECT_GT(asked, after);
      std::vector<fs::path> left;
      for (const auto& entry : fs::recursive_directory_iterator(dir)) left.push_back(entry.path());
      EXPECT_EQ(left, exists ? std::vector<fs::path>{dir / "out"} : std::vector<fs::path>{}) << after;
    }
  }
  fs::remove_all(dir);
}

// A model with widths int4 cannot pack (d_model 16 and feed-forwards of 24: no multiple
// of 32) runs as int4 with every matrix int8, a scale per row: int8's numbers exactly.
// Before the int8 fallback, this was refused ("int4 packs runs of 32").
TEST(Quantized, Int4OnAModelWithNoWidthItCanPackRunsAsInt8) {
  const fs::path dir = temp_dir("int4-narrow");
  testing_support::write_random_model(dir, testing_support::tiny_config());  // d_model 16
  const auto score = [&](const char* type) {
    return run_ordo("score --json --compute-type " + std::string(type) + " --model " + shell_quote(dir.string()) +
                    " --source-ids 3,4,1 --target-ids 5,1");
  };
  const auto int4 = score("int4");
  const auto int8 = score("int8");
  ASSERT_EQ(int4.exit_code, 0) << int4.err;
  ASSERT_EQ(int8.exit_code, 0) << int8.err;
  EXPECT_EQ(int4.out, int8.out);
  const auto inspect = run_ordo("inspect --json --compute-type int4 --model " + shell_quote(dir.string()));
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_EQ(nlohmann::json::parse(inspect.out)["compute_type"], "int8 (a scale per row)");
  fs::remove_all(dir);
}

// ---- Bad quantized files: each refused with one line naming the tensor and the rule.

// A model directory's model.safetensors rewritten by `edit`.
fs::path rewrite_weights(const fs::path& dir, const std::function<void(std::vector<EncodedTensor>&)>& edit) {
  const SafetensorsFile file = SafetensorsFile::open(dir / "model.safetensors");
  std::vector<std::vector<std::byte>> data;
  std::vector<EncodedTensor> tensors;
  for (const TensorInfo& t : file.tensors()) {
    data.emplace_back(t.bytes.begin(), t.bytes.end());
    tensors.push_back({t.name, t.dtype, t.shape, [bytes = data.back()] { return bytes; }});
  }
  edit(tensors);
  fs::remove(dir / "model.safetensors");
  write_encoded_safetensors(dir / "model.safetensors", tensors);
  return dir;
}

// The int8 directory of the shipped model, its model.safetensors rewritten by `edit`.
fs::path broken_int8_copy(const fs::path& dir, const std::function<void(std::vector<EncodedTensor>&)>& edit,
                          const std::string& type = "int8", int group_size = -1) {
  QuantizeOptions options;
  options.type = parse_compute_type(type);
  options.group_size = group_size;
  quantize_model(kWeights / "sinusoidal", dir, options);
  return rewrite_weights(dir, edit);
}

EncodedTensor& tensor_named(std::vector<EncodedTensor>& tensors, const std::string& name) {
  for (EncodedTensor& t : tensors)
    if (t.name == name) return t;
  throw std::runtime_error("no tensor " + name);
}

template <class T>
std::function<std::vector<std::byte>()> filled(Index count, T value) {
  return [count, value] {
    std::vector<std::byte> bytes(static_cast<std::size_t>(count) * sizeof(T));
    for (Index i = 0; i < count; ++i) std::memcpy(bytes.data() + i * sizeof(T), &value, sizeof(T));
    return bytes;
  };
}

// Rewrites tensor `name` [rows, cols] and its scale as int8 with a scale per row: what an
// int4 model holds for a width its group does not divide.
void store_as_int8(std::vector<EncodedTensor>& tensors, const std::string& name, Index rows, Index cols) {
  EncodedTensor& w = tensor_named(tensors, name);
  w.dtype = DType::I8;
  w.shape = {rows, cols};
  w.bytes = filled<std::int8_t>(rows * cols, 1);
  EncodedTensor& s = tensor_named(tensors, name + "_scale");
  s.dtype = DType::F32;
  s.shape = {rows};
  s.bytes = filled<float>(rows, 0.01f);
}

TEST(Quantized, BadQuantizedFilesAreRefusedNamingTheTensorAndTheRule) {
  const std::string weight = "model.decoder.layers.0.fc1.weight";
  const std::string scale = weight + "_scale";
  struct Broken {
    std::string what;
    std::string type;
    std::function<void(std::vector<EncodedTensor>&)> edit;
    std::vector<std::string> says;
  };
  const std::vector<Broken> cases = {
      {"an I8 weight without its scale", "int8",
       [&](auto& t) { std::erase_if(t, [&](const EncodedTensor& e) { return e.name == scale; }); },
       {weight, "no '" + scale + "'"}},
      {"a scale of the wrong shape", "int8",
       [&](auto& t) {
         EncodedTensor& s = tensor_named(t, scale);
         s.shape = {256, 2};
         s.bytes = filled<float>(512, 0.01f);
       },
       {scale, "[256, 2]", "one scale per row"}},
      {"a zero scale", "int8", [&](auto& t) { tensor_named(t, scale).bytes = filled<float>(256, 0.0f); },
       {scale, "finite and > 0"}},
      {"a negative scale", "int8", [&](auto& t) { tensor_named(t, scale).bytes = filled<float>(256, -0.5f); },
       {scale, "finite and > 0"}},
      {"a NaN scale", "int8", [&](auto& t) { tensor_named(t, scale).bytes = filled<float>(256, std::nanf("")); },
       {scale, "finite and > 0"}},
      {"a scale whose weights overflow float32", "int8", [&](auto& t) { tensor_named(t, scale).bytes = filled<float>(256, 3e36f); },
       {scale, "scale 0 is 3e+36", "beyond float32's range", "at most 2.6584558e+36"}},
      {"an F16 scale for int8", "int8",
       [&](auto& t) {
         EncodedTensor& s = tensor_named(t, scale);
         s.dtype = DType::F16;
         s.bytes = filled<std::uint16_t>(256, 0x3c00);
       },
       {scale, "F16", "expected F32"}},
      {"an int4 tensor of the wrong length", "int4",
       [&](auto& t) {
         EncodedTensor& w = tensor_named(t, weight);
         w.shape = {256, 32};
         w.bytes = filled<std::uint8_t>(256 * 32, 0x88);
       },
       {weight, "[256, 32]", "two weights a byte"}},
      {"an infinite int4 scale", "int4", [&](auto& t) { tensor_named(t, scale).bytes = filled<std::uint16_t>(256 * 4, 0x7c00); },
       {scale, "finite and > 0"}},
      {"an I8 weight in an int4 model, where int4 would fit", "int4",
       [&](auto& t) {
         store_as_int8(t, weight, 256, 128);
       },
       {weight, "I8 (int8) in an int4 model", "128 weights", "group_size=32", "only when group_size does not divide"}},
      {"an I16 weight with a scale", "int8",  // the weight is wrong, not its scale
       [&](auto& t) {
         EncodedTensor& w = tensor_named(t, weight);
         w.dtype = DType::I16;
         w.bytes = filled<std::int16_t>(element_count(w.shape), 1);
       },
       {weight, "has dtype I16, which a weight matrix cannot have"}},
      {"a scale beside an F32 weight", "f32",
       [&](auto& t) { t.push_back({scale, DType::F32, {256}, filled<float>(256, 1.0f)}); },
       {scale, "not quantized"}},
  };
  for (const Broken& c : cases) {
    SCOPED_TRACE(c.what);
    const fs::path dir = broken_int8_copy(temp_dir("broken-quantized") / "model", c.edit, c.type);
    const auto r = run_ordo("translate --model " + shell_quote(dir.string()) + " 'cats chase dogs'");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    for (const std::string& s : c.says) EXPECT_NE(r.err.find(s), std::string::npos) << "'" << s << "' in " << r.err;
    fs::remove_all(dir.parent_path());
  }
}

// One scale a row has two spellings in the contract: [out] and [out, in / group_size]
// with one group a row, [out, 1]. Both load, as the same numbers.
TEST(Quantized, Int8ScalesOfOneGroupARowMayBeShapedOutByOne) {
  const fs::path root = temp_dir("scales-out-by-one");
  quantize_model(kWeights / "sinusoidal", root / "rows", to(ComputeType::Int8));
  int reshaped = 0;
  const fs::path dir = broken_int8_copy(root / "columns", [&](std::vector<EncodedTensor>& tensors) {
    for (EncodedTensor& t : tensors)
      if (t.name.ends_with("_scale") && t.shape.size() == 1) {
        t.shape = {t.shape[0], 1};
        ++reshaped;
      }
  });
  ASSERT_GT(reshaped, 0);
  const auto as_rows = run_ordo("translate --json --model " + shell_quote((root / "rows").string()) + " 'cats chase dogs'");
  const auto as_columns = run_ordo("translate --json --model " + shell_quote(dir.string()) + " 'cats chase dogs'");
  ASSERT_EQ(as_columns.exit_code, 0) << as_columns.err;
  EXPECT_EQ(as_columns.out, as_rows.out);
  fs::remove_all(root);
}

// --compute-type on a model it cannot convert: one line naming the tensor and the rule,
// exit 1 (the flags themselves are fine, so not 2).
TEST(Quantized, AModelTheComputeTypeCannotHoldIsRefusedNamingTheTensor) {
  const std::string weight = "model.decoder.layers.0.fc1.weight";
  // Weights of 1e6: an int4 scale of 1e6 / 7 is beyond F16's 65504.
  const fs::path dir = broken_int8_copy(temp_dir("cannot-convert") / "model", [&](auto& t) {
    EncodedTensor& w = tensor_named(t, weight);
    w.bytes = filled<float>(element_count(w.shape), 1e6f);
  }, "f32");
  struct Case {
    std::string flags;
    std::vector<std::string> says;
  };
  for (const Case& c : {Case{"--compute-type int4", {weight, "beyond F16's range"}},
                        Case{"--compute-type int8 --group-size 7", {"model.shared.weight", "groups of 7", "not a multiple"}}}) {
    SCOPED_TRACE(c.flags);
    const auto r = run_ordo("translate --model " + shell_quote(dir.string()) + " " + c.flags + " 'cats chase dogs'");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    for (const std::string& s : c.says) EXPECT_NE(r.err.find(s), std::string::npos) << "'" << s << "' in " << r.err;
  }
  // The same model runs as int8, whose scale (1e6 / 127) a float32 holds.
  EXPECT_EQ(run_ordo("translate --model " + shell_quote(dir.string()) + " --compute-type int8 'cats'").exit_code, 0);
  fs::remove_all(dir.parent_path());
}

// A weight within 1/128 of float32's largest value: its int8 scale would make q x scale
// infinite, so neither --compute-type int8 nor ordo quantize takes it (before, quantize
// wrote a scale its own loader then read as infinite weights).
TEST(Quantized, WeightsNearFloat32sLargestAreNotInt8) {
  const std::string weight = "model.decoder.layers.0.fc1.weight";
  const fs::path dir = broken_int8_copy(temp_dir("largest-float") / "model", [&](auto& t) {
    EncodedTensor& w = tensor_named(t, weight);
    w.bytes = filled<float>(element_count(w.shape), std::numeric_limits<float>::max());
  }, "f32");
  auto r = run_ordo("translate --model " + shell_quote(dir.string()) + " --compute-type int8 'cats'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  for (const char* s : {"model.decoder.layers.0.fc1.weight", "magnitude 3.4028235e+38", "beyond float32's range"})
    EXPECT_NE(r.err.find(s), std::string::npos) << "'" << s << "' in " << r.err;
  r = run_ordo("quantize --model " + shell_quote(dir.string()) + " --type int8 --out " +
               shell_quote((dir.parent_path() / "out").string()));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("beyond float32's range"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir.parent_path() / "out"));
  fs::remove_all(dir.parent_path());
}

// A float matrix in a quantized directory runs as stored (a writer may keep the
// embeddings in float), and inspect counts it beside the quantized ones.
TEST(Quantized, AFloatMatrixInAQuantizedDirectoryRunsAsStored) {
  const std::string embedding = "model.shared.weight";
  const fs::path dir = broken_int8_copy(temp_dir("float-inside") / "model", [&](std::vector<EncodedTensor>& t) {
    EncodedTensor& w = tensor_named(t, embedding);
    w.dtype = DType::F16;
    w.bytes = filled<std::uint16_t>(element_count(w.shape), 0x2e66);  // 0.1
    std::erase_if(t, [&](const EncodedTensor& e) { return e.name == embedding + "_scale"; });
  });
  const auto inspect = run_ordo("inspect --json --model " + shell_quote(dir.string()));
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_EQ(nlohmann::json::parse(inspect.out)["compute_type"], "f16: 1 matrix and int8 (a scale per row): 32 matrices");
  EXPECT_EQ(run_ordo("translate --model " + shell_quote(dir.string()) + " 'cats'").exit_code, 0);
  fs::remove_all(dir.parent_path());
}

TEST(Quantized, AConfigThatDisagreesWithTheWeightsIsRefused) {
  const fs::path dir = temp_dir("quantized-config") / "model";
  quantize_model(kWeights / "sinusoidal", dir, to(ComputeType::Int8));
  const auto config_with = [&](const nlohmann::json& quantization) {
    std::ifstream in(dir / "config.json");
    nlohmann::json config = nlohmann::json::parse(in);
    if (quantization.is_null())
      config.erase("quantization");
    else
      config["quantization"] = quantization;
    std::ofstream(dir / "config.json") << config.dump();
  };
  const auto fails_saying = [&](const std::vector<std::string>& says) {
    const auto r = run_ordo("translate --model " + shell_quote(dir.string()) + " 'cats'");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    for (const std::string& s : says) EXPECT_NE(r.err.find(s), std::string::npos) << "'" << s << "' in " << r.err;
  };
  config_with(nullptr);
  fails_saying({"I8", "quantization is not set"});
  config_with({{"type", "int4"}});  // int4 would hold every width: no I8 weight belongs in it
  fails_saying({"I8 (int8) in an int4 model", "group_size=32"});
  config_with({{"type", "int8"}, {"group_size", 5}});
  fails_saying({"group_size=5", "does not divide"});
  config_with({{"type", "int2"}});
  fails_saying({"quantization.type", "int2"});
  config_with({{"type", "int8"}, {"bits", 8}});
  fails_saying({"quantization.bits", "not a key"});
  config_with({{"type", "int4"}, {"group_size", 16}});
  fails_saying({"quantization.group_size", "multiple of 32"});
  config_with({{"type", "int4"}, {"group_size", std::numeric_limits<std::uint64_t>::max()}});  // said "got -1"
  fails_saying({"quantization.group_size", "got 18446744073709551615"});
  config_with({{"type", "int4"}, {"group_size", std::uint64_t{1} << 63}});
  fails_saying({"quantization.group_size", "got 9223372036854775808"});
  fs::remove_all(dir.parent_path());
}

// An int4 directory holds int8 exactly where int4 cannot pack a width, and nowhere else:
// each departure from the rule is refused with one line naming the tensor and the rule.
TEST(Quantized, AMixedInt4DirectoryIsHeldToItsRule) {
  const fs::path random = temp_dir("mixed-rule") / "random";
  testing_support::write_random_model(random, mixed_width_config());
  const std::string fallback = "model.encoder.layers.0.fc2.weight";  // [64, 40]: int8
  const std::string packed = "model.encoder.layers.0.fc1.weight";    // [40, 64]: int4
  struct Broken {
    std::string what;
    std::function<void(std::vector<EncodedTensor>&)> edit;
    nlohmann::json quantization;  // config.json's, when changed
    std::vector<std::string> says;
  };
  const nlohmann::json unchanged;
  const std::vector<Broken> cases = {
      {"an I8 weight where int4 would fit",
       [&](auto& t) {
         store_as_int8(t, packed, 40, 64);
       },
       unchanged, {packed, "I8 (int8) in an int4 model", "64 weights", "group_size=32"}},
      {"a U8 weight whose width the group does not divide",
       [&](auto& t) {
         EncodedTensor& w = tensor_named(t, fallback);
         w.dtype = DType::U8;
         w.shape = {64, 20};
         w.bytes = filled<std::uint8_t>(64 * 20, 0x88);
         EncodedTensor& s = tensor_named(t, fallback + "_scale");
         s.dtype = DType::F16;
         s.shape = {64, 1};
         s.bytes = filled<std::uint16_t>(64, 0x3c00);
       },
       unchanged, {fallback, "is int4", "40 weights", "group_size=32", "as int8 with a scale per row"}},
      {"an int8 fallback with a scale per group",
       [&](auto& t) {
         EncodedTensor& s = tensor_named(t, fallback + "_scale");
         s.shape = {64, 5};
         s.bytes = filled<float>(64 * 5, 0.01f);
       },
       unchanged, {fallback + "_scale", "[64, 5]", "expected [64] (one scale per row)"}},
      {"an int8 fallback with its scales as one group a row",  // [out] alone, as ordo quantize writes it
       [&](auto& t) { tensor_named(t, fallback + "_scale").shape = {64, 1}; },
       unchanged, {fallback + "_scale", "[64, 1]", "expected [64] (one scale per row)"}},
      {"a group size that no longer divides an int4 width", [](auto&) {},
       {{"type", "int4"}, {"group_size", 128}},
       {"is int4", "64 weights", "group_size=128"}},
  };
  for (const Broken& c : cases) {
    SCOPED_TRACE(c.what);
    const fs::path dir = temp_dir("mixed-broken") / "model";
    quantize_model(random, dir, to(ComputeType::Int4));
    ASSERT_EQ(Model::load(dir).info().compute_type,
              "int4 (groups of 32): 31 matrices and int8 (a scale per row): 2 matrices");  // before the edit
    rewrite_weights(dir, c.edit);
    if (!c.quantization.is_null()) {
      std::ifstream in(dir / "config.json");
      nlohmann::json config = nlohmann::json::parse(in);
      config["quantization"] = c.quantization;
      std::ofstream(dir / "config.json") << config.dump();
    }
    const auto r = run_ordo("score --model " + shell_quote(dir.string()) + " --source-ids 3,4,1 --target-ids 5,1");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    for (const std::string& says : c.says)
      EXPECT_NE(r.err.find(says), std::string::npos) << "'" << says << "' in " << r.err;
    fs::remove_all(dir.parent_path());
  }
  fs::remove_all(random.parent_path());
}

}  // namespace
}  // namespace ordo
