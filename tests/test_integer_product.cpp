// Int8 and int4 weights times activations quantized to int8 (engine/integer_product.h):
// every path (portable, AVX2, AVX-512 VNNI) gives the definition's numbers bit for bit,
// whatever the batch, the split of the weight rows or the tile a row lands in; the
// result is within the quantization's error of the float product; empty, tiny and
// non-finite rows do what the header says.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/half.h"
#include "engine/integer_product.h"
#include "engine/kernel_path.h"
#include "models/quantize.h"
#include "tests/reference.h"

namespace ordo {
namespace {

using kernels::KernelPath;
using kernels::QuantizedActivations;

std::vector<float> random_values(Index count, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  return reference::random_vector(count, rng, -scale, scale);
}

struct Case {
  WeightFormat format;
  Index group;  // as `ordo quantize --group-size`: int8 0 is a scale a row
  Index cols;
};

std::string name_of(const Case& c) {
  return std::string(weight_format_name(c.format)) + " group " + std::to_string(c.group) + " cols " +
         std::to_string(c.cols);
}

// One scale a row with widths around the vector sizes (32, 64) and a model's odd one
// (344); groups the AVX-512 kernels take (multiples of 64) and ones they leave to AVX2
// (32, 3); int8 groups of four runs and more, which AVX2's 4 x 2 tiles take (2600: more
// than the 64 runs AVX2 sums in 16 bits before widening N); int4 in groups of one run to
// sixteen (AVX2's int4 tiles add each run's pairs in 16 bits, then widen), odd numbers
// of runs (3, 9) and of groups, one group a row and many; more groups than eight (int8's
// float steps' lanes) and fewer.
const Case kCases[] = {
    {WeightFormat::Int8, 0, 37},     {WeightFormat::Int8, 0, 64},     {WeightFormat::Int8, 0, 344},
    {WeightFormat::Int8, 0, 1000},   {WeightFormat::Int8, 32, 96},    {WeightFormat::Int8, 64, 768},
    {WeightFormat::Int8, 3, 12},     {WeightFormat::Int8, 128, 384},  {WeightFormat::Int8, 0, 2600},
    {WeightFormat::Int4, 32, 64},    {WeightFormat::Int4, 32, 768},   {WeightFormat::Int4, 32, 320},
    {WeightFormat::Int4, 64, 192},   {WeightFormat::Int4, 128, 1024}, {WeightFormat::Int4, 64, 1088},
    {WeightFormat::Int4, 32, 384},   {WeightFormat::Int4, 32, 448},   {WeightFormat::Int4, 256, 768},
    {WeightFormat::Int4, 320, 640},  {WeightFormat::Int4, 512, 1024},  {WeightFormat::Int4, 128, 384},
    {WeightFormat::Int4, 192, 1920}, {WeightFormat::Int4, 384, 1152},  {WeightFormat::Int4, 96, 288},
    {WeightFormat::Int4, 288, 576},
};

EncodedMatrix encoded(const Case& c, Index rows, unsigned seed) {
  const std::vector<float> w = random_values(rows * c.cols, seed);
  return encode_matrix(TensorView(w.data(), {rows, c.cols}), Quantization{c.format, c.group}, "test matrix");
}

// The definition of engine/integer_product.h, written again from its text: nearbyint for
// the rounding, 64-bit integer sums, int8's float steps one lane at a time, int4's one a
// group.
std::vector<float> by_definition(const std::vector<float>& x, Index m, const WeightMatrix& w) {
  const Index cols = w.cols(), group = w.group(), groups = cols / group;
  std::vector<float> dequantized(static_cast<std::size_t>(w.rows() * cols));
  w.dequantize(0, w.rows(), dequantized.data(), cols);
  std::vector<float> y(static_cast<std::size_t>(m * w.rows()));
  for (Index i = 0; i < m; ++i) {
    std::vector<long> q(static_cast<std::size_t>(cols));
    std::vector<float> s(static_cast<std::size_t>(groups));
    for (Index g = 0; g < groups; ++g) {
      float amax = 0.0f;
      bool finite = true;
      for (Index k = g * group; k < (g + 1) * group; ++k) {
        finite = finite && std::isfinite(x[i * cols + k]);
        amax = std::max(amax, std::fabs(x[i * cols + k]));
      }
      const bool zero = !finite || amax < std::ldexp(1.0f, -120);
      s[g] = !finite ? std::numeric_limits<float>::quiet_NaN() : zero ? 0.0f : amax / 127.0f;
      for (Index k = g * group; k < (g + 1) * group; ++k)
        q[k] = zero ? 0 : std::lround(std::nearbyint(x[i * cols + k] * (127.0f / amax)));
    }
    for (Index r = 0; r < w.rows(); ++r) {
      float t[2][8] = {};
      float int4_total = 0.0f;
      for (Index g = 0; g < groups; ++g) {
        const float weight_scale = w.format() == WeightFormat::Int8 ? w.row_scales<float>(r)[g]
                                                                    : half_to_float(w.int4_panels().scale(r, g));
        // The weight's integer is its dequantized value over its stored scale, exactly.
        long lanes[8] = {};
        for (Index k = g * group; k < (g + 1) * group; ++k)
          lanes[(k - g * group) % 32 / 4] +=
              q[k] * std::lround(dequantized[static_cast<std::size_t>(r * cols + k)] / weight_scale);
        if (w.format() == WeightFormat::Int4) {
          long sum = 0;
          for (const long lane : lanes) sum += lane;
          int4_total = std::fma(static_cast<float>(sum), s[g] * weight_scale, int4_total);
          continue;
        }
        for (int l = 0; l < 8; ++l)
          t[g % 2][l] = std::fma(static_cast<float>(lanes[l]), s[g] * weight_scale, t[g % 2][l]);
      }
      if (w.format() == WeightFormat::Int4) {
        y[static_cast<std::size_t>(i * w.rows() + r)] = int4_total;
        continue;
      }
      float u[8];
      for (int l = 0; l < 8; ++l) u[l] = t[0][l] + t[1][l];
      y[static_cast<std::size_t>(i * w.rows() + r)] = ((u[0] + u[4]) + (u[2] + u[6])) + ((u[1] + u[5]) + (u[3] + u[7]));
    }
  }
  return y;
}

std::vector<KernelPath> paths() {
  std::vector<KernelPath> all = {KernelPath::Portable};
  if (kernels::widest_kernel_path() >= KernelPath::Avx2) all.push_back(KernelPath::Avx2);
  if (kernels::widest_kernel_path() >= KernelPath::Avx512) all.push_back(KernelPath::Avx512);
  if (kernels::widest_kernel_path() >= KernelPath::Amx) all.push_back(KernelPath::Amx);
  return all;
}

std::vector<float> product(KernelPath path, const std::vector<float>& x, Index m, const WeightMatrix& w) {
  QuantizedActivations a;
  a.quantize_on(path, ConstMatrixRef(x.data(), m, w.cols()), w.group());
  std::vector<float> y(static_cast<std::size_t>(m * w.rows()));
  kernels::integer_product_on(path, a, w, 0, w.rows(), y.data(), w.rows());
  return y;
}

void expect_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t j = 0; j < got.size(); ++j)
    ASSERT_EQ(float_to_bits(got[j]), float_to_bits(want[j])) << what << ", element " << j << ": " << got[j] << " vs " << want[j];
}

TEST(IntegerProduct, EveryPathGivesTheDefinitionsNumbers) {
  for (const Case& c : kCases)
    for (const Index rows : {Index{1}, Index{7}, Index{70}}) {
      SCOPED_TRACE(name_of(c) + ", weight rows " + std::to_string(rows));
      const EncodedMatrix w = encoded(c, rows, 3);
      for (const Index m : {1, 3, 4, 5, 17}) {
        std::vector<float> x = random_values(m * c.cols, 4, 3.0f);
        x[0] = 0.0f;  // zeros, a negative zero, and a value exactly at a half step
        if (c.cols > 2) x[1] = -0.0f;
        const std::vector<float> want = by_definition(x, m, w.view());
        for (const KernelPath path : paths())
          expect_bits(product(path, x, m, w.view()), want,
                      std::string(kernels::kernel_path_name(path)) + ", rows of x " + std::to_string(m));
      }
    }
}

// Activations quantized for another path than the product's may lack buffers that only
// some kernels read (AVX2 alone splits signs): the product then takes kernels that do
// not need them, with the same numbers. (AVX-512's int4 tiles once read a buffer only
// the x86 paths arranged, and crashed here on the portable path's.)
TEST(IntegerProduct, ActivationsQuantizedForAnotherPathGiveTheSameNumbers) {
  const Case cases[] = {{WeightFormat::Int4, 32, 256},
                        {WeightFormat::Int4, 32, 1088},
                        {WeightFormat::Int8, 128, 256},
                        {WeightFormat::Int4, 64, 640}};
  for (const Case& c : cases) {
    const EncodedMatrix w = encoded(c, 9, 31);
    for (const Index m : {1, 4, 6}) {
      const std::vector<float> x = random_values(m * c.cols, 32, 3.0f);
      const std::vector<float> want = by_definition(x, m, w.view());
      for (const KernelPath quantized_on : paths())
        for (const KernelPath path : paths()) {
          QuantizedActivations a;
          a.quantize_on(quantized_on, ConstMatrixRef(x.data(), m, c.cols), c.group);
          std::vector<float> y(static_cast<std::size_t>(m * w.view().rows()));
          kernels::integer_product_on(path, a, w.view(), 0, w.view().rows(), y.data(), w.view().rows());
          expect_bits(y, want,
                      name_of(c) + ", quantized on " + std::string(kernels::kernel_path_name(quantized_on)) +
                          ", product on " + std::string(kernels::kernel_path_name(path)) + ", rows of x " +
                          std::to_string(m));
        }
    }
  }
}

// Products of many rows (from 17), where AMX's tiles take int8 in groups of a multiple of 256:
// lanes of one tile row (256) and of two with padding (768 columns: 96 bytes a lane),
// several groups of both parities (4 of 256, 3 of 512), several groups of lanes of two
// tile rows (2 of 768, padded; 2 of 1024, whole), activation rows and weight rows that
// fill 32-row blocks and ones that do not, more rows than the tiles copy at once (300:
// 256, then 44), rows of zeros, tiny values and a NaN, and splits of the weight rows as
// the threads make them and as they do not.
TEST(IntegerProduct, ProductsOfManyRowsGiveTheDefinitionsNumbers) {
  const Case cases[] = {{WeightFormat::Int8, 0, 256},    {WeightFormat::Int8, 0, 768},
                        {WeightFormat::Int8, 256, 1024}, {WeightFormat::Int8, 512, 1536},
                        {WeightFormat::Int8, 768, 1536}, {WeightFormat::Int8, 1024, 2048}};
  for (const Case& c : cases)
    for (const Index rows : {Index{16}, Index{45}, Index{70}}) {
      SCOPED_TRACE(name_of(c) + ", weight rows " + std::to_string(rows));
      const EncodedMatrix w = encoded(c, rows, 13);
      for (const Index m : {17, 32, 33, 71, 300}) {
        if (m == 300 && rows != 45) continue;  // once a case: the definition is slow
        std::vector<float> x = random_values(m * c.cols, 14, 3.0f);
        std::fill(x.begin() + c.cols, x.begin() + 2 * c.cols, 0.0f);
        std::fill(x.begin() + 2 * c.cols, x.begin() + 3 * c.cols, 1e-37f);
        x[static_cast<std::size_t>((m - 1) * c.cols + 5)] = std::numeric_limits<float>::quiet_NaN();
        const std::vector<float> want = by_definition(x, m, w.view());
        for (const KernelPath path : paths()) {
          const std::string where = std::string(kernels::kernel_path_name(path)) + ", rows of x " + std::to_string(m);
          expect_bits(product(path, x, m, w.view()), want, where);
          QuantizedActivations a;
          a.quantize_on(path, ConstMatrixRef(x.data(), m, c.cols), w.group);
          std::vector<float> split(static_cast<std::size_t>(m * rows));
          for (const auto& [first, count] : {std::pair<Index, Index>{0, 5}, {5, rows - 5 - 3}, {rows - 3, 3}})
            kernels::integer_product_on(path, a, w.view(), first, count, split.data() + first, rows);
          expect_bits(split, want, where + ", split 5 + " + std::to_string(rows - 8) + " + 3");
        }
      }
    }
}

// A row's numbers are the same alone, in a batch, and in any split of the weight rows
// across threads (first, count), which is what lets a sequence decode the same tokens
// whatever else is in its batch.
TEST(IntegerProduct, ARowsNumbersDoNotDependOnItsBatchOrSplit) {
  const Case c{WeightFormat::Int8, 0, 344};
  const Case d{WeightFormat::Int4, 32, 768};
  const Case wide{WeightFormat::Int4, 64, 768};  // two runs a group: AVX2 widens 16-bit sums twice
  for (const Case& e : {c, d, wide}) {
    SCOPED_TRACE(name_of(e));
    const EncodedMatrix w = encoded(e, 100, 5);
    constexpr Index m = 9;
    const std::vector<float> x = random_values(m * e.cols, 6, 2.0f);
    for (const KernelPath path : paths()) {
      SCOPED_TRACE(kernels::kernel_path_name(path));
      const std::vector<float> together = product(path, x, m, w.view());
      for (Index i = 0; i < m; ++i) {
        const std::vector<float> row(x.begin() + i * e.cols, x.begin() + (i + 1) * e.cols);
        const std::vector<float> alone = product(path, row, 1, w.view());
        expect_bits(alone, std::vector<float>(together.begin() + i * 100, together.begin() + (i + 1) * 100),
                    "row " + std::to_string(i));
      }
      QuantizedActivations a;
      a.quantize_on(path, ConstMatrixRef(x.data(), m, e.cols), w.group);
      std::vector<float> split(static_cast<std::size_t>(m * 100));
      for (const auto& [first, count] : {std::pair<Index, Index>{0, 33}, {33, 1}, {34, 66}})
        kernels::integer_product_on(path, a, w.view(), first, count, split.data() + first, 100);
      expect_bits(split, together, "split 33 + 1 + 66");
    }
  }
}

// The integer sums at their limits: weights of -128 (a stored file may hold them though
// ordo quantize writes [-127, 127]), -127, 127 and 0 against q of 127, -127 and 0, in
// pairs of equal ones, so that a vpmaddubsw pair reaches its extremes (-32768 where w
// is -128 and q 127 on AVX2's 4 x 2 tiles) on every tile shape: still the definition's
// numbers on every path.
TEST(IntegerProduct, IntegerSumsAtTheirLimitsAreExact) {
  const std::int8_t weights[] = {-128, -127, 127, 0};
  const float activations[] = {1.0f, -1.0f, 0.0f};  // q = 127, -127, 0 (the largest |x| is 1)
  for (const Case& c : {Case{WeightFormat::Int8, 0, 256}, Case{WeightFormat::Int8, 128, 384}}) {
    SCOPED_TRACE(name_of(c));
    constexpr Index rows = 9, m = 40;  // 40: AMX's tiles take the groups of 256
    EncodedMatrix w = encoded(c, rows, 12);
    auto* values = reinterpret_cast<std::int8_t*>(w.values.data());
    std::vector<float> x(static_cast<std::size_t>(m * c.cols));
    // Rows 0-3 all one weight (row 0 all -128), then mixtures, always in equal pairs.
    for (Index r = 0; r < rows; ++r)
      for (Index k = 0; k < c.cols; ++k)
        values[r * c.cols + k] = weights[(r < 4 ? r : (k / 2) * (r - 3) + r) % 4];
    for (Index i = 0; i < m; ++i)
      for (Index k = 0; k < c.cols; ++k)
        x[static_cast<std::size_t>(i * c.cols + k)] = activations[(i < 3 ? i : (k / 2) * (i - 2) + i) % 3];
    for (Index i = 0; i < m; ++i) x[static_cast<std::size_t>(i * c.cols)] = 1.0f;  // each row's largest |x| is 1
    const std::vector<float> want = by_definition(x, m, w.view());
    for (const KernelPath path : paths())
      expect_bits(product(path, x, m, w.view()), want, std::string(kernels::kernel_path_name(path)));
  }
}

// int4's largest products, nibbles of 15 (weights of +7) against q of +-127, summed over
// whole groups: AVX2's kernels add the vpmaddubsw pairs of 32 weights (8 steps of 4) in
// 16 bits, 8 x 2 x 15 x 127 = 30480, which still fits, then widen; VNNI's lanes start at
// minus 8 x the group's sum of q and wrap on the way. Rows of nibbles 15, 1 and a mixture
// against rows of +1, -1 and a mixture, one row at a time (the decode step) and four.
TEST(IntegerProduct, Int4SumsOfWholeGroupsAtTheirLimitsAreExact) {
  for (const Index group : {Index{32}, Index{64}, Index{128}, Index{256}, Index{320}, Index{512}}) {
    const Case c{WeightFormat::Int4, group, 2 * group};
    SCOPED_TRACE(name_of(c));
    constexpr Index rows = 3;
    std::vector<float> weights(static_cast<std::size_t>(rows * c.cols));
    for (Index k = 0; k < c.cols; ++k) {
      weights[static_cast<std::size_t>(k)] = 1.0f;                   // every n 15
      weights[static_cast<std::size_t>(c.cols + k)] = k == 0 ? 1.0f : -1.0f;  // n 1 but the first
      weights[static_cast<std::size_t>(2 * c.cols + k)] = k % 3 == 0 ? -1.0f : 1.0f;
    }
    const EncodedMatrix w =
        encode_matrix(TensorView(weights.data(), {rows, c.cols}), Quantization{c.format, c.group}, "test matrix");
    constexpr Index m = 4;
    std::vector<float> x(static_cast<std::size_t>(m * c.cols));
    for (Index k = 0; k < c.cols; ++k) {
      x[static_cast<std::size_t>(k)] = 1.0f;  // q 127
      x[static_cast<std::size_t>(c.cols + k)] = -1.0f;
      x[static_cast<std::size_t>(2 * c.cols + k)] = k % 2 == 0 ? 1.0f : -1.0f;
      x[static_cast<std::size_t>(3 * c.cols + k)] = k % 5 == 0 ? -1.0f : 1.0f;
    }
    const std::vector<float> want = by_definition(x, m, w.view());
    const auto* packed = reinterpret_cast<const std::uint8_t*>(w.values.data());
    ASSERT_TRUE(std::all_of(packed, packed + c.cols / 2, [](std::uint8_t b) { return b == 0xff; }));  // nibbles 15
    for (const KernelPath path : paths()) {
      expect_bits(product(path, x, m, w.view()), want, std::string(kernels::kernel_path_name(path)) + ", 4 rows");
      for (Index i = 0; i < m; ++i) {
        const std::vector<float> row(x.begin() + i * c.cols, x.begin() + (i + 1) * c.cols);
        expect_bits(product(path, row, 1, w.view()), std::vector<float>(want.begin() + i * rows, want.begin() + (i + 1) * rows),
                    std::string(kernels::kernel_path_name(path)) + ", row " + std::to_string(i) + " alone");
      }
    }
  }
}

// Each activation moves by at most half its group's step s, so a product is within
// sum |w_k| s / 2 of the float product with the dequantized weights (plus float32's
// rounding of sums of a few hundred terms).
TEST(IntegerProduct, IsWithinTheQuantizationStepOfTheFloatProduct) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(name_of(c));
    constexpr Index rows = 20, m = 3;
    const EncodedMatrix w = encoded(c, rows, 8);
    const Index group = w.group;
    std::vector<float> dequantized(static_cast<std::size_t>(rows * c.cols));
    w.view().dequantize(0, rows, dequantized.data(), c.cols);
    const std::vector<float> x = random_values(m * c.cols, 9, 4.0f);
    const std::vector<float> y = product(kernels::kernel_path(), x, m, w.view());
    for (Index i = 0; i < m; ++i)
      for (Index r = 0; r < rows; ++r) {
        double exact = 0.0, bound = 0.0;
        for (Index g = 0; g < c.cols / group; ++g) {
          double amax = 0.0, weights = 0.0;
          for (Index k = g * group; k < (g + 1) * group; ++k) {
            amax = std::max(amax, std::fabs(double{x[i * c.cols + k]}));
            weights += std::fabs(double{dequantized[r * c.cols + k]});
            exact += double{x[i * c.cols + k]} * dequantized[r * c.cols + k];
          }
          bound += weights * amax / 127.0 / 2.0;
        }
        EXPECT_NEAR(y[i * rows + r], exact, bound * 1.001 + 1e-5 * (1.0 + std::fabs(exact))) << "x row " << i << ", w row " << r;
      }
  }
}

// An all-zero row gives 0; a row of values too small to scale (below 2^-120) gives 0; a
// row with a NaN or an infinity gives NaN, and only that row does.
TEST(IntegerProduct, ZeroTinyAndNonFiniteRows) {
  for (const Case& c : {Case{WeightFormat::Int8, 0, 64}, Case{WeightFormat::Int4, 32, 128},
                        Case{WeightFormat::Int4, 128, 256}}) {
    SCOPED_TRACE(name_of(c));
    const EncodedMatrix w = encoded(c, 5, 10);
    std::vector<float> x = random_values(5 * c.cols, 11);
    std::fill(x.begin(), x.begin() + c.cols, 0.0f);
    std::fill(x.begin() + c.cols, x.begin() + 2 * c.cols, 1e-37f);
    x[2 * c.cols + 3] = std::numeric_limits<float>::quiet_NaN();
    x[3 * c.cols + 5] = -std::numeric_limits<float>::infinity();
    for (const KernelPath path : paths()) {
      SCOPED_TRACE(kernels::kernel_path_name(path));
      const std::vector<float> y = product(path, x, 5, w.view());
      for (Index r = 0; r < 5; ++r) {
        EXPECT_EQ(y[0 * 5 + r], 0.0f);
        EXPECT_EQ(y[1 * 5 + r], 0.0f);
        EXPECT_TRUE(std::isnan(y[2 * 5 + r]));
        EXPECT_TRUE(std::isnan(y[3 * 5 + r]));
        EXPECT_TRUE(std::isfinite(y[4 * 5 + r]));
      }
      for (Index i = 0; i < 5; ++i) {  // each row alone (a decode step's kernels): the same
        const std::vector<float> row(x.begin() + i * c.cols, x.begin() + (i + 1) * c.cols);
        const std::vector<float> alone = product(path, row, 1, w.view());
        for (Index r = 0; r < 5; ++r)
          EXPECT_EQ(float_to_bits(alone[static_cast<std::size_t>(r)]), float_to_bits(y[static_cast<std::size_t>(i * 5 + r)]))
              << "row " << i << ", w row " << r;
      }
    }
  }
}

// The row's largest magnitude becomes +-127, every q is in [-127, 127], halves round to
// even, and the padding is zeros. With max |x| = 127 the step is exactly 1. Eight values
// repeated eight times: the vector paths take 32 at a time and finish a group's rest as
// the portable path does, so this row goes through both on every path.
TEST(IntegerProduct, ActivationsQuantizeAsTheDefinitionSays) {
  const std::vector<float> pattern = {2.5f, -127.0f, 3.5f, -0.5f, 0.0f, 126.6f, 1.49f, 100.0f};
  const std::vector<int> want = {2, -127, 4, 0, 0, 127, 1, 100};
  for (const Index cols : {Index{8}, Index{64}, Index{72}}) {
    std::vector<float> x;
    for (Index k = 0; k < cols; ++k) x.push_back(pattern[static_cast<std::size_t>(k % 8)]);
    for (const KernelPath path : paths()) {
      SCOPED_TRACE(std::string(kernels::kernel_path_name(path)) + ", " + std::to_string(cols) + " columns");
      QuantizedActivations a;
      a.quantize_on(path, ConstMatrixRef(x.data(), 1, cols), cols);
      EXPECT_EQ(a.scales(0)[0], 1.0f);
      for (Index k = 0; k < cols; ++k) EXPECT_EQ(a.q(0)[k], want[static_cast<std::size_t>(k % 8)]) << k;
      for (Index k = cols; k < (cols + 63) / 64 * 64; ++k) EXPECT_EQ(a.q(0)[k], 0) << "padding " << k;
      // the group's sum: 2 - 127 + 4 + 0 + 0 + 127 + 1 + 100 = 107 for each eight
      EXPECT_EQ(a.sums(0)[0], static_cast<int>(cols / 8) * 107);
      EXPECT_EQ(a.q_unsigned(0)[1], 1);
    }
  }
}

// Every buffer the kernels read is the same bit for bit on every path: q, q + 128, the
// scales and the group sums, for groups of whole vectors, with a rest, shorter than a
// vector and starting mid-vector (two groups of 37), and rows of ties, zeros, tiny
// values, a NaN among the vector part, an infinity and a NaN in the rest, and a largest
// value in the rest.
TEST(IntegerProduct, EveryPathQuantizesAlike) {
  const Index shapes[][2] = {{37, 37}, {74, 37},  {344, 344}, {1000, 1000}, {96, 32},
                             {768, 64}, {12, 3}, {1088, 64}, {128, 32},    {704, 32}};
  for (const auto& shape : shapes) {
    const Index cols = shape[0], group = shape[1], rows = 8;
    std::vector<float> x = random_values(rows * cols, 21, 3.0f);
    for (Index k = 0; k < cols; ++k) x[static_cast<std::size_t>(k)] = static_cast<float>(k % 255) - 127.0f + 0.5f * (k % 2);
    std::fill(x.begin() + cols, x.begin() + 2 * cols, 0.0f);
    std::fill(x.begin() + 2 * cols, x.begin() + 3 * cols, 1e-37f);
    x[static_cast<std::size_t>(3 * cols + 1)] = std::numeric_limits<float>::quiet_NaN();
    x[static_cast<std::size_t>(4 * cols + cols - 1)] = std::numeric_limits<float>::infinity();
    x[static_cast<std::size_t>(5 * cols + cols - 1)] = 200.0f;  // the largest in the rest, after the vectors
    x[static_cast<std::size_t>(6 * cols + cols - 2)] = std::numeric_limits<float>::quiet_NaN();
    QuantizedActivations want;
    want.quantize_on(KernelPath::Portable, ConstMatrixRef(x.data(), rows, cols), group);
    for (const KernelPath path : paths()) {
      SCOPED_TRACE(std::string(kernels::kernel_path_name(path)) + ", " + std::to_string(cols) + " columns in groups of " +
                   std::to_string(group));
      QuantizedActivations got;
      got.quantize_on(path, ConstMatrixRef(x.data(), rows, cols), group);
      const Index stride = (cols + 63) / 64 * 64, groups = cols / group;
      for (Index i = 0; i < rows; ++i) {
        for (Index k = 0; k < stride; ++k) {
          ASSERT_EQ(got.q(i)[k], want.q(i)[k]) << "row " << i << ", q " << k;
          ASSERT_EQ(got.q_unsigned(i)[k], want.q_unsigned(i)[k]) << "row " << i << ", q + 128 " << k;
        }
        for (Index g = 0; g < groups; ++g) {
          ASSERT_EQ(float_to_bits(got.scales(i)[g]), float_to_bits(want.scales(i)[g])) << "row " << i << ", group " << g;
          ASSERT_EQ(got.sums(i)[g], want.sums(i)[g]) << "row " << i << ", group " << g;
        }
        // The sums are of q, from the portable q.
        for (Index g = 0; g < groups; ++g) {
          int sum = 0;
          for (Index k = g * group; k < (g + 1) * group; ++k) sum += want.q(i)[k];
          ASSERT_EQ(want.sums(i)[g], sum) << "row " << i << ", group " << g;
        }
      }
    }
  }
}

// Rows quantized in ranges, in any order and on several threads at once (as the pool
// runs them for large products), give the buffers of one pass over every row, on
// AVX2's batch shapes (the sign split, groups of 128) and int4's groups of 32 alike.
TEST(IntegerProduct, RowsQuantizeAlikeHoweverTheyAreSplit) {
  const Index shapes[][3] = {{40, 512, 128}, {1, 768, 32}, {9, 344, 344}, {9, 256, 32}};
  for (const auto& shape : shapes) {
    const Index rows = shape[0], cols = shape[1], group = shape[2];
    SCOPED_TRACE(std::to_string(rows) + " rows of " + std::to_string(cols) + " in groups of " + std::to_string(group));
    const std::vector<float> x = random_values(rows * cols, 31, 2.0f);
    const ConstMatrixRef matrix(x.data(), rows, cols);
    // Every path: each fills the buffers its kernels read (AVX2's sign split, say).
    for (const KernelPath path : paths()) {
      SCOPED_TRACE(kernel_path_name(path));
      QuantizedActivations want, got;
      want.quantize_on(path, matrix, group);
      got.quantize_on(path, matrix, group, [](Index count, FunctionRef<void(Index, Index)> quantize_rows) {
        // the last third first, then the first two on two threads at once
        const Index third = count / 3;
        quantize_rows(2 * third, count);
        std::thread other([&] { quantize_rows(third, 2 * third); });
        quantize_rows(0, third);
        other.join();
      });
      ASSERT_EQ(got.sign_split(), want.sign_split());
      if (path == KernelPath::Avx2 && rows >= 4 && group >= 128) {
        ASSERT_TRUE(want.sign_split());
      }
      const Index stride = (cols + 63) / 64 * 64, groups = cols / group;
      for (Index i = 0; i < rows; ++i) {
        for (Index k = 0; k < stride; ++k) {
          ASSERT_EQ(got.q(i)[k], want.q(i)[k]) << "row " << i << ", q " << k;
          ASSERT_EQ(got.q_unsigned(i)[k], want.q_unsigned(i)[k]) << "row " << i << ", q + 128 " << k;
          if (want.sign_split()) {
            ASSERT_EQ(got.magnitudes(i)[k], want.magnitudes(i)[k]) << "row " << i << ", |q| " << k;
            ASSERT_EQ(got.signs(i)[k], want.signs(i)[k]) << "row " << i << ", sign " << k;
          }
        }
        for (Index g = 0; g < groups; ++g) {
          ASSERT_EQ(float_to_bits(got.scales(i)[g]), float_to_bits(want.scales(i)[g])) << "row " << i << ", group " << g;
          ASSERT_EQ(got.sums(i)[g], want.sums(i)[g]);
          for (Index l = 0; l < 8; ++l) {
            if (want.sign_split()) {
              ASSERT_EQ(got.negative_sums(i)[g * 8 + l], want.negative_sums(i)[g * 8 + l]);
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace ordo
