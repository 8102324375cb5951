// ordo viz pe / viz attention end to end: the numbers in the CSVs against closed forms
// and the model's own tables, the PNGs read back with libpng, and the errors a user
// meets. Runs the real binary on the shipped models.
//
// Oracles: the sinusoidal table of Vaswani et al. as the classic PyTorch
// PositionalEncoding computes it (div_term = exp(arange(0, d, 2) * -(ln 10000 / d)),
// pe[:, 0::2] = sin(pos * div_term), pe[:, 1::2] = cos(pos * div_term)), here in double;
// tolerance 1e-6. The RoPE cos/sin table cos/sin(pos * theta^(-2i/d)), same tolerance.
// The learned table: the safetensors rows, exactly. tools/oracle/test_viz_pe.py runs the
// PyTorch code itself.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "models/loaded_model.h"
#include "tests/cli_runner.h"
#include "tests/model_factory.h"
#include "tools/viz/heatmap.h"
#include "tools/viz/png_image.h"

namespace ordo {
namespace {

namespace fs = std::filesystem;
using testing_support::run_ordo;
using testing_support::shell_quote;

std::string weights(const std::string& name) { return shell_quote((fs::path(ORDO_SOURCE_DIR) / "weights" / name).string()); }

struct Csv {
  std::vector<std::vector<std::string>> cells;
  double number(std::size_t r, std::size_t c) const { return std::stod(cells.at(r).at(c)); }
};

// Plain CSV as viz writes it (quoted fields only where a token needs them).
Csv read_csv(const fs::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  Csv csv;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> row;
    std::string field;
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') field += '"', ++i;
      else if (c == '"') quoted = !quoted;
      else if (c == ',' && !quoted) row.push_back(field), field.clear();
      else field += c;
    }
    row.push_back(field);
    csv.cells.push_back(row);
  }
  return csv;
}

class Viz : public ::testing::Test {
 protected:
  fs::path dir = testing_support::temp_dir("viz");
  std::string out(const std::string& name) const { return shell_quote((dir / name).string()); }
};

TEST_F(Viz, SinusoidalCsvIsTheClassicPyTorchTable) {
  for (const auto& [length, dim] : {std::pair{50, 64}, std::pair{7, 6}, std::pair{200, 512}}) {
    SCOPED_TRACE(std::to_string(length) + " x " + std::to_string(dim));
    const auto r = run_ordo("viz pe --scheme sinusoidal --length " + std::to_string(length) + " --dim " +
                            std::to_string(dim) + " --out " + out("pe.csv"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const Csv csv = read_csv(dir / "pe.csv");
    ASSERT_EQ(csv.cells.size(), static_cast<std::size_t>(length));
    double worst = 0;
    for (int pos = 0; pos < length; ++pos) {
      ASSERT_EQ(csv.cells[pos].size(), static_cast<std::size_t>(dim)) << "row " << pos;
      for (int i = 0; 2 * i < dim; ++i) {
        const double div_term = std::exp(2 * i * -(std::log(10000.0) / dim));
        const double want_sin = std::sin(pos * div_term), want_cos = std::cos(pos * div_term);
        EXPECT_NEAR(csv.number(pos, 2 * i), want_sin, 1e-6) << "pe[" << pos << ", " << 2 * i << "]";
        EXPECT_NEAR(csv.number(pos, 2 * i + 1), want_cos, 1e-6) << "pe[" << pos << ", " << 2 * i + 1 << "]";
        worst = std::max({worst, std::abs(csv.number(pos, 2 * i) - want_sin), std::abs(csv.number(pos, 2 * i + 1) - want_cos)});
      }
    }
    EXPECT_LT(worst, 1e-7);  // ordo computes in double and rounds once to float
  }
}

TEST_F(Viz, RopeCsvIsTheCosSinTable) {
  const int length = 40, dim = 32;
  const auto r = run_ordo("viz pe --scheme rope --length 40 --dim 32 --out " + out("rope.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Csv csv = read_csv(dir / "rope.csv");
  ASSERT_EQ(csv.cells.size(), static_cast<std::size_t>(length));
  for (int pos = 0; pos < length; ++pos)
    for (int i = 0; i < dim / 2; ++i) {
      const double angle = pos * std::pow(10000.0, -2.0 * i / dim);
      // Hugging Face's rotate_half layout: cos in the first half, sin in the second.
      EXPECT_NEAR(csv.number(pos, i), std::cos(angle), 1e-6) << pos << "," << i;
      EXPECT_NEAR(csv.number(pos, dim / 2 + i), std::sin(angle), 1e-6) << pos << "," << i;
    }
}

TEST_F(Viz, LearnedCsvIsTheModelsTable) {
  const auto r = run_ordo("viz pe --scheme learned --model " + weights("learned") + " --out " + out("learned.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto model = LoadedModel::load(fs::path(ORDO_SOURCE_DIR) / "weights" / "learned");
  const TensorView table = model->weights().get("model.encoder.embed_positions.weight");
  const Csv csv = read_csv(dir / "learned.csv");
  ASSERT_EQ(static_cast<Index>(csv.cells.size()), table.dim(0));  // the whole table (offset 0)
  for (Index p = 0; p < table.dim(0); ++p)
    for (Index c = 0; c < table.dim(1); ++c)
      ASSERT_EQ(static_cast<float>(csv.number(p, c)), table.data()[p * table.dim(1) + c]) << p << "," << c;
}

void expect_real_picture(const fs::path& path, int min_width, int min_height);

// Score-bias schemes: a row per head, a column per relative position key - query.
// Oracle: ALiBi's slopes for 8 heads are 2^-1 .. 2^-8 (Press et al.); bias -m_h |d|.
TEST_F(Viz, AlibiCsvIsMinusSlopeTimesDistance) {
  const auto r = run_ordo("viz pe --scheme alibi --heads 8 --length 10 --out " + out("alibi.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Csv csv = read_csv(dir / "alibi.csv");
  ASSERT_EQ(csv.cells.size(), 8u);
  for (int h = 0; h < 8; ++h) {
    ASSERT_EQ(csv.cells[h].size(), 19u);
    for (int c = 0; c < 19; ++c) EXPECT_NEAR(csv.number(h, c), -std::ldexp(1.0, -(h + 1)) * std::abs(c - 9), 1e-6);
  }
  const auto causal = run_ordo("viz pe --scheme alibi --heads 4 --length 10 --stack decoder --out " + out("c.csv"));
  ASSERT_EQ(causal.exit_code, 0) << causal.err;
  EXPECT_EQ(read_csv(dir / "c.csv").cells.at(0).size(), 10u);  // keys up to the query only
  const auto png = run_ordo("viz pe --scheme alibi --model " + weights("alibi") + " --out " + out("alibi.png"));
  ASSERT_EQ(png.exit_code, 0) << png.err;
  expect_real_picture(dir / "alibi.png", 600, 150);
  const auto t5 = run_ordo("viz pe --scheme t5_relative --model " + weights("t5_relative") + " --json --out " +
                           out("t5.png"));
  ASSERT_EQ(t5.exit_code, 0) << t5.err;
  EXPECT_EQ(nlohmann::json::parse(t5.out)["rows"], 4);       // heads
  EXPECT_EQ(nlohmann::json::parse(t5.out)["columns"], 127);  // -63 .. 63
  expect_real_picture(dir / "t5.png", 600, 150);
}

// A picture: it decodes, is bigger than its plot, and shows many colours (a constant or
// blank picture would not).
void expect_real_picture(const fs::path& path, int min_width, int min_height) {
  const tools::Image image = tools::read_png(path);
  EXPECT_GE(image.width(), min_width) << path;
  EXPECT_GE(image.height(), min_height) << path;
  std::set<std::tuple<int, int, int>> colours;
  for (int y = 0; y < image.height(); y += 2)
    for (int x = 0; x < image.width(); x += 2) {
      const tools::Rgb c = image.at(x, y);
      colours.insert({c.r, c.g, c.b});
    }
  EXPECT_GT(colours.size(), 50u) << path;
}

TEST_F(Viz, PositionPngsDecode) {
  ASSERT_EQ(run_ordo("viz pe --scheme sinusoidal --length 64 --dim 128 --out " + out("s.png")).exit_code, 0);
  expect_real_picture(dir / "s.png", 640, 640);
  ASSERT_EQ(run_ordo("viz pe --scheme rope --out " + out("r.png")).exit_code, 0);
  expect_real_picture(dir / "r.png", 600, 600);
  const auto r = run_ordo("viz pe --scheme learned --model " + weights("learned") + " --stack decoder --out " +
                          out("l.png") + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["rows"], 45);
  expect_real_picture(dir / "l.png", 600, 600);
}

TEST_F(Viz, PeTakesTheModelsSettings) {
  // The split layout: sin in the first half, cos in the second; position 0 is sin 0 = 0, cos 0 = 1.
  const auto r = run_ordo("viz pe --model " + weights("sinusoidal-split") + " --length 3 --out " + out("split.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Csv csv = read_csv(dir / "split.csv");
  ASSERT_EQ(csv.cells.at(0).size(), 128u);
  EXPECT_EQ(csv.number(0, 63), 0.0);
  EXPECT_EQ(csv.number(0, 64), 1.0);
  const auto wrong = run_ordo("viz pe --scheme rope --model " + weights("sinusoidal") + " --out " + out("x.png"));
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_NE(wrong.err.find("uses sinusoidal positions, not rope"), std::string::npos) << wrong.err;
  // "none" is not a --scheme to suggest: the model has nothing to draw.
  const auto none = run_ordo("viz pe --scheme sinusoidal --model " + weights("none") + " --out " + out("x.png"));
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("uses no positions"), std::string::npos) << none.err;
  EXPECT_EQ(none.err.find("--scheme none"), std::string::npos) << none.err;
}

// Rows of attention probabilities sum to 1; the axes are the source's pieces (encoder,
// cross columns) and the greedy translation's tokens (decoder, cross rows).
TEST_F(Viz, AttentionCsvRowsSumToOne) {
  for (const std::string kind : {"encoder", "decoder", "cross"}) {
    SCOPED_TRACE(kind);
    const auto r = run_ordo("viz attention 'cats chase dogs' --kind " + kind + " --layer 1 --head all --json --out " +
                            out(kind + ".csv"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto summary = nlohmann::json::parse(r.out);
    const auto keys = summary["key_tokens"].get<std::vector<std::string>>();
    const auto queries = summary["query_tokens"].get<std::vector<std::string>>();
    if (kind != "decoder") {
      EXPECT_EQ(keys, (std::vector<std::string>{"▁cats", "▁chase", "▁dogs", "</s>"}));
    }
    if (kind != "encoder") {
      EXPECT_EQ(summary["translation"], "Katzen jagen Hunde");
    }
    const Csv csv = read_csv(dir / (kind + ".csv"));
    // 4 heads, each a header line and a row per query token: head, query, probabilities.
    ASSERT_EQ(csv.cells.size(), 4 * (queries.size() + 1));
    for (std::size_t line = 0; line < csv.cells.size(); ++line) {
      const auto& cells = csv.cells[line];
      ASSERT_EQ(cells.size(), keys.size() + 2) << "line " << line;
      EXPECT_EQ(cells[0], "head " + std::to_string(line / (queries.size() + 1)));
      if (line % (queries.size() + 1) == 0) {
        EXPECT_EQ(std::vector<std::string>(cells.begin() + 2, cells.end()), keys);
        continue;
      }
      EXPECT_EQ(cells[1], queries[line % (queries.size() + 1) - 1]);
      double sum = 0;
      for (std::size_t c = 2; c < cells.size(); ++c) {
        const double p = std::stod(cells[c]);
        EXPECT_GE(p, 0.0);
        // Causal: a decoder input sees only itself and what came before.
        if (kind == "decoder" && c - 2 > line % (queries.size() + 1) - 1) {
          EXPECT_EQ(p, 0.0) << "line " << line;
        }
        sum += p;
      }
      EXPECT_NEAR(sum, 1.0, 1e-5) << "line " << line;
    }
  }
}

TEST_F(Viz, AttentionPngsDecode) {
  const auto one = run_ordo("viz attention 'cats chase dogs' --head 2 --out " + out("one.png"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  expect_real_picture(dir / "one.png", 200, 200);
  const auto grid = run_ordo("viz attention 'the small cat sees the big dog' --kind cross --head all --out " +
                             out("grid.png"));
  ASSERT_EQ(grid.exit_code, 0) << grid.err;
  expect_real_picture(dir / "grid.png", 800, 200);
}

// Each bad request: its exit code (2 usage, 1 other), one line, and the words that
// tell what to do.
TEST_F(Viz, BadRequestsAreClearErrors) {
  const std::string png = " --out " + out("x.png");
  const struct {
    std::string arguments;
    int exit_code;
    std::vector<std::string> mentions;
  } cases[] = {
      {"viz pe --scheme cosine" + png, 2, {"--scheme", "sinusoidal", "learned", "rope", "alibi", "t5_relative"}},
      {"viz pe --scheme t5_relative" + png, 2, {"--model", "trained table"}},
      {"viz pe --scheme alibi --model " + weights("alibi") + " --heads 3" + png, 2, {"--heads", "4 heads"}},
      {"viz pe --scheme learned" + png, 2, {"--model", "trained table"}},
      {"viz pe --dim 7" + png, 1, {"even"}},
      {"viz pe --scheme learned --model " + weights("learned") + " --length 46" + png, 1, {"45"}},
      {"viz pe --scheme learned --model " + weights("learned") + " --dim 64" + png, 2, {"--dim", "128"}},
      {"viz pe --out " + out("x.jpg"), 2, {"--out", ".jpg", ".png", ".csv"}},
      {"viz pe --out /nonexistent-dir/x.png", 1, {"/nonexistent-dir/x.png", "directory"}},
      {"viz pe --out /nonexistent-dir/x.csv", 1, {"/nonexistent-dir/x.csv", "directory"}},
      {"viz attention 'cats chase dogs' --layer 2" + png, 2, {"--layer", "2 layers"}},
      {"viz attention 'cats chase dogs' --kind cross --head 4" + png, 2, {"--head", "4 heads"}},
      {"viz attention 'cats chase dogs' --head first" + png, 2, {"--head", "all"}},
      {"viz attention 'cats chase dogs' --kind self" + png, 2, {"--kind", "encoder", "cross"}},
      {"viz attention 'cats chase dogs' --kind cross --model " + weights("german-llama") + png, 2, {"decoder-only", "--kind decoder"}},
      {"viz attention ''" + png, 1, {}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.arguments);
    const auto r = run_ordo(c.arguments);
    EXPECT_EQ(r.exit_code, c.exit_code) << r.err;
    EXPECT_EQ(r.err.rfind("ordo: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    for (const std::string& word : c.mentions) EXPECT_NE(r.err.find(word), std::string::npos) << r.err;
  }
}

TEST_F(Viz, AMissingFontIsOneLineSayingWhatToInstall) {
  const auto r = run_ordo("viz pe --out " + out("x.png"), "");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ::setenv("ORDO_FONT", "/nonexistent/font.ttf", 1);  // the child inherits it
  const auto bad = run_ordo("viz pe --out " + out("y.png"));
  ::unsetenv("ORDO_FONT");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("ORDO_FONT"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(dir / "y.png"));
}

// compare --plot: a panel per model compare covers; without positions each word of A
// is the very same vector as that word in B (cosine 1 wherever it stands), with
// positions the moved words differ.
TEST_F(Viz, ComparePlotShowsNoneAsABagOfWords) {
  const auto r = run_ordo("compare 'cats chase dogs' 'dogs chase cats' --json --plot " + out("compare.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> models;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) models.push_back(nlohmann::json::parse(line)["model"]);
  ASSERT_GE(models.size(), 4u);
  const Csv csv = read_csv(dir / "compare.csv");
  // Per model: a header of B's tokens, then A's tokens each with its similarities.
  ASSERT_EQ(csv.cells.size(), models.size() * 5);
  std::map<std::string, std::map<std::pair<std::string, std::string>, double>> similarity;
  for (std::size_t line = 0; line < csv.cells.size(); line += 5) {
    const auto& header = csv.cells[line];
    ASSERT_EQ(header.size(), 6u);
    for (std::size_t row = 1; row <= 4; ++row) {
      // The panel's title is the model's name, then its scheme where that differs.
      const std::string title = csv.cells[line + row][0];
      const std::string model = title.substr(0, title.find(" ("));
      for (std::size_t col = 2; col < 6; ++col)
        similarity[model][{csv.cells[line + row][1], header[col]}] = csv.number(line + row, col);
    }
  }
  for (const std::string& model : models) EXPECT_EQ(similarity[model].size(), 16u) << model;
  for (const std::string word : {"▁cats", "▁dogs"}) {
    EXPECT_NEAR((similarity["none"][{word, word}]), 1.0, 1e-5) << word;
    EXPECT_LT((similarity["sinusoidal"][{word, word}]), 0.95) << word;
  }
  const auto png = run_ordo("compare 'cats chase dogs' 'dogs chase cats' --plot " + out("compare.png"));
  ASSERT_EQ(png.exit_code, 0) << png.err;
  EXPECT_NE(png.out.find("wrote "), std::string::npos) << png.out;
  expect_real_picture(dir / "compare.png", 1000, 500);
  const auto bad = run_ordo("compare a b --plot " + out("compare.svg"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--plot"), std::string::npos) << bad.err;
}

TEST(Heatmap, ColourMapsRunDarkToLightAndBlueWhiteRed) {
  EXPECT_EQ(tools::colour_of(0.0, false), (tools::Rgb{68, 1, 84}));     // viridis' dark purple
  EXPECT_EQ(tools::colour_of(1.0, false), (tools::Rgb{253, 231, 37}));  // to yellow
  EXPECT_EQ(tools::colour_of(0.5, true), (tools::Rgb{247, 247, 247}));  // 0 is white
  const tools::Rgb low = tools::colour_of(0.0, true), high = tools::colour_of(1.0, true);
  EXPECT_GT(low.b, low.r);
  EXPECT_GT(high.r, high.b);
}

}  // namespace
}  // namespace ordo
