// Int4 matrices arranged into panels (engine/int4_panels.h): every stored weight and
// scale lands where the header's layout says, padding rows are zero weights with scale
// 0, and rows convert back to the stored values. The products are checked against the
// definition in test_integer_product.cpp; this holds the arrangement to the file.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/half.h"
#include "engine/int4_panels.h"
#include "engine/weight_matrix.h"
#include "models/config.h"
#include "models/weights.h"
#include "ordo/ordo.hpp"
#include "tests/model_factory.h"

namespace ordo {
namespace {

// The stored layout (README, "Quantized weights"), written from its text: a run of 32
// weights is 16 bytes, byte j holding weight j in its low nibble and j + 16 in its high one.
int stored_nibble(const std::vector<std::uint8_t>& runs, Index cols, Index r, Index k) {
  const std::uint8_t byte = runs[static_cast<std::size_t>(r * cols / 2 + k / 32 * 16 + k % 16)];
  return k % 32 < 16 ? byte & 0x0f : byte >> 4;
}

TEST(Int4Panels, EveryWeightAndScaleLandsWhereTheLayoutSays) {
  // Rows: fewer than a panel, one short, exactly one, one over, several with a rest.
  // Widths of one run and more; groups of one run, several, and a whole row.
  for (const Index rows : {Index{1}, Index{15}, Index{16}, Index{17}, Index{40}})
    for (const auto& [cols, group] : {std::pair<Index, Index>{32, 32}, {96, 32}, {256, 64}, {256, 256}}) {
      SCOPED_TRACE(std::to_string(rows) + " rows of " + std::to_string(cols) + " in groups of " + std::to_string(group));
      std::mt19937 rng(static_cast<unsigned>(rows * 1000 + cols + group));
      std::vector<std::uint8_t> runs(static_cast<std::size_t>(rows * cols / 2));
      for (auto& byte : runs) byte = static_cast<std::uint8_t>(rng());
      const Index groups = cols / group;
      std::vector<std::uint16_t> scales(static_cast<std::size_t>(rows * groups));
      for (auto& s : scales) s = float_to_half(std::uniform_real_distribution<float>(0.001f, 2.0f)(rng));

      const Int4Panels panels(runs.data(), scales.data(), rows, cols, group);
      const WeightMatrix w = panels.view();
      ASSERT_EQ(w.format(), WeightFormat::Int4);
      ASSERT_EQ(w.rows(), rows);
      ASSERT_EQ(w.cols(), cols);
      ASSERT_EQ(w.group(), group);
      const Int4PanelLayout layout = w.int4_panels();
      const Index panel_count = (rows + 15) / 16;
      ASSERT_EQ(layout.panels(), panel_count);
      ASSERT_EQ(reinterpret_cast<std::uintptr_t>(layout.start) % 64, 0u) << "a block is a cache line";
      ASSERT_EQ(w.bytes(), static_cast<std::size_t>(panel_count * 16 * (cols / 2 + groups * 2)));
      ASSERT_LE(w.bytes(), panels.bytes());

      for (Index p = 0; p < panel_count; ++p)
        for (Index o = 0; o < 16; ++o) {
          const Index r = p * 16 + o;
          // The raw bytes, as the header lays them out.
          for (Index b = 0; b < cols / 8; ++b)
            for (Index j = 0; j < 4; ++j) {
              const std::uint8_t byte = layout.blocks(p)[b * 64 + 4 * o + j];
              const int low = r < rows ? stored_nibble(runs, cols, r, 8 * b + j) : 8;
              const int high = r < rows ? stored_nibble(runs, cols, r, 8 * b + 4 + j) : 8;
              ASSERT_EQ(byte & 0x0f, low) << "row " << r << ", block " << b << ", byte " << j;
              ASSERT_EQ(byte >> 4, high) << "row " << r << ", block " << b << ", byte " << j;
            }
          for (Index g = 0; g < groups; ++g)
            ASSERT_EQ(layout.scales(p, g)[o], r < rows ? scales[static_cast<std::size_t>(r * groups + g)] : 0)
                << "row " << r << ", group " << g;
        }

      // Rows convert back to (n - 8) x scale, from the stored bytes.
      std::vector<float> row(static_cast<std::size_t>(cols));
      for (Index r = 0; r < rows; ++r) {
        w.dequantize(r, 1, row.data(), cols);
        for (Index k = 0; k < cols; ++k)
          ASSERT_EQ(row[static_cast<std::size_t>(k)],
                    static_cast<float>(stored_nibble(runs, cols, r, k) - 8) *
                        half_to_float(scales[static_cast<std::size_t>(r * groups + k / group)]))
              << "row " << r << ", weight " << k;
      }
    }
}

// Moving the panels (a model's list of them grows) keeps their bytes where views point.
TEST(Int4Panels, AViewOutlivesAMoveOfItsPanels) {
  std::vector<std::uint8_t> runs(16 * 32 / 2, 0x9a);
  std::vector<std::uint16_t> scales(16, float_to_half(0.5f));
  Int4Panels panels(runs.data(), scales.data(), 16, 32, 32);
  const WeightMatrix before = panels.view();
  const Int4Panels moved = std::move(panels);
  EXPECT_EQ(moved.view().data(), before.data());
  float row[32];
  before.dequantize(3, 1, row, 32);
  EXPECT_EQ(row[0], (0xa - 8) * 0.5f);
  EXPECT_EQ(row[16], (0x9 - 8) * 0.5f);
}

// A token embedding that is not also the output head is only read a row at a time: int4
// keeps it in the file's layout (a step reads the file's pages of the rows it looks up,
// where panels would hold the whole table in memory), and arranges every matrix that
// multiplies. The shipped t5 has its own head; german-llama's head is its embedding. The
// same holds for a directory ordo quantize wrote and for --compute-type int4 at load, and
// the rows read alike.
TEST(Int4Panels, OnlyMatricesThatMultiplyAreArranged) {
  const std::filesystem::path weights = std::filesystem::path(ORDO_SOURCE_DIR) / "weights";
  struct Case {
    const char* model;
    const char* embedding;
    const char* multiplies;
    bool tied;
  };
  for (const Case& c : {Case{"t5", "shared.weight", "lm_head.weight", false},
                        Case{"german-llama", "model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", true}}) {
    SCOPED_TRACE(c.model);
    const std::filesystem::path dir = testing_support::temp_dir("int4-lookup") / c.model;
    QuantizeOptions options;
    options.type = ComputeType::Int4;
    quantize_model(weights / c.model, dir, options);
    const WeightStore stored = WeightStore::load(dir, ModelConfig::load(dir / "config.json"));
    ModelConfig converting = ModelConfig::load(weights / c.model / "config.json");
    converting.compute_type = Quantization{WeightFormat::Int4, 32};
    const WeightStore converted = WeightStore::load(weights / c.model, converting);
    for (const WeightStore* store : {&stored, &converted}) {
      const WeightMatrix embedding = store->matrix(c.embedding), product = store->matrix(c.multiplies);
      ASSERT_EQ(embedding.format(), WeightFormat::Int4);
      EXPECT_EQ(embedding.int4_in_panels(), c.tied);
      EXPECT_TRUE(product.int4_in_panels());
    }
    const WeightMatrix a = stored.matrix(c.embedding), b = converted.matrix(c.embedding);
    std::vector<float> row_a(static_cast<std::size_t>(a.cols())), row_b(row_a.size());
    for (const Index r : {Index{0}, Index{1}, a.rows() - 1}) {
      a.dequantize(r, 1, row_a.data(), a.cols());
      b.dequantize(r, 1, row_b.data(), b.cols());
      EXPECT_EQ(row_a, row_b) << "row " << r;
    }
    std::filesystem::remove_all(dir.parent_path());
  }
}

}  // namespace
}  // namespace ordo
