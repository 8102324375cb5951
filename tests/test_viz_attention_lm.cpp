// viz attention on a decoder-only model (a prompt's self-attention), and token labels
// in pictures drawn without SentencePiece's word-start marker ▁ (the CSV keeps pieces).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli_runner.h"
#include "tests/model_factory.h"
#include "tools/viz/heatmap.h"
#include "tools/viz/png_image.h"

namespace ordo {
namespace {

using testing_support::run_ordo;
using testing_support::shell_quote;

std::vector<std::vector<std::string>> read_csv(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::stringstream fields(line);
    for (std::string cell; std::getline(fields, cell, ',');) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

TEST(VizAttentionLm, ADecoderOnlyModelShowsItsPromptsSelfAttention) {
  const auto dir = testing_support::temp_dir("viz-lm");
  const std::string csv = (dir / "lm.csv").string();
  const auto r = run_ordo("viz attention --model german-llama 'Die Katze' --layer 1 --json --out " + shell_quote(csv));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto summary = nlohmann::json::parse(r.out);
  EXPECT_EQ(summary["kind"], "decoder");
  // The prompt as generate reads it: bos first (german-llama's bos is id 1, piece </s>).
  const std::vector<std::string> tokens{"</s>", "▁D", "ie", "▁Katze"};
  EXPECT_EQ(summary["query_tokens"].get<std::vector<std::string>>(), tokens);
  EXPECT_EQ(summary["key_tokens"].get<std::vector<std::string>>(), tokens);
  const auto rows = read_csv(csv);
  ASSERT_EQ(rows.size(), tokens.size() + 1);  // a header of key tokens, then a row per query
  for (std::size_t q = 0; q < tokens.size(); ++q) {
    const auto& cells = rows[q + 1];
    ASSERT_EQ(cells.size(), tokens.size() + 1);
    EXPECT_EQ(cells[0], tokens[q]);
    double sum = 0;
    for (std::size_t k = 0; k < tokens.size(); ++k) {
      const double p = std::stod(cells[k + 1]);
      if (k > q) {
        EXPECT_EQ(p, 0.0) << "causal: query " << q << " sees key " << k;
      }
      sum += p;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << "query " << q;
  }
  // --kind decoder says the same; encoder and cross do not exist here.
  EXPECT_EQ(run_ordo("viz attention --model german-llama 'Die Katze' --kind decoder --out " + shell_quote(csv)).exit_code,
            0);
  const auto cross = run_ordo("viz attention --model german-llama 'Die Katze' --kind cross --out " + shell_quote(csv));
  EXPECT_EQ(cross.exit_code, 2);
  EXPECT_NE(cross.err.find("decoder-only"), std::string::npos) << cross.err;
  const auto png = run_ordo("viz attention --model german-llama 'Die Katze' --head all --out " +
                            shell_quote((dir / "lm.png").string()));
  EXPECT_EQ(png.exit_code, 0) << png.err;
  std::filesystem::remove_all(dir);
}

// Oracle: the same picture with the pieces' ▁ removed by hand: not one pixel differs.
TEST(VizAttentionLm, PictureLabelsDropTheWordStartMarker) {
  tools::HeatmapPanel marked;
  marked.values = tools::Grid(2, 2);
  marked.values.fill(0.5f);
  marked.row_labels = {"▁cats", "s"};
  marked.col_labels = {"▁dogs", "▁"};
  marked.row_axis = "query";
  marked.col_axis = "key";
  tools::HeatmapPanel plain = marked;
  plain.row_labels = {"cats", "s"};
  plain.col_labels = {"dogs", " "};
  const tools::HeatmapOptions options;
  const tools::Image a = tools::render_heatmaps(std::span(&marked, 1), options);
  const tools::Image b = tools::render_heatmaps(std::span(&plain, 1), options);
  ASSERT_EQ(a.width(), b.width());
  ASSERT_EQ(a.height(), b.height());
  int differing = 0;
  for (int y = 0; y < a.height(); ++y)
    for (int x = 0; x < a.width(); ++x) differing += !(a.at(x, y) == b.at(x, y));
  EXPECT_EQ(differing, 0);
  EXPECT_EQ(tools::label_text("▁New▁York"), "New York");
  EXPECT_EQ(tools::label_text("</s>"), "</s>");
}

}  // namespace
}  // namespace ordo
