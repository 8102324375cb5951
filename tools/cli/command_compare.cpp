// ordo compare: does the model see word order? The showcase.
//
//   ordo compare "cats chase dogs" "dogs chase cats"
//
// For each shipped model (or the one --model or $ORDO_MODEL names): the tokens of both inputs, both
// translations, the cosine similarity of their mean-pooled encoder outputs, and whether
// the translations differ. Without positional information (`none`) the encoder sees a
// bag of tokens: two orderings of the same words pool to the same vector (similarity 1
// up to float rounding) and get the same translation.
//
// --plot FILE.png draws, per model, the cosine similarity of every token's encoder output
// in A with every token's in B: without positions a token's output depends only on the
// bag of tokens, so each word of A matches itself in B with similarity 1, wherever it
// stands; with positions the same word in another place is another vector.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>

#include "tools/cli/commands.h"
#include "tools/cli/common.h"
#include "tools/viz/viz_output.h"

namespace ordo::tools {

namespace {

struct CompareOptions {
  CommonOptions common;
  std::string text_a;
  std::string text_b;
  TranslatorOptions translator;
  std::string plot;  // empty: no picture
  DecodingChoices given;  // over each model's generation defaults
};

// One model's outcome: its row of the table and its token-by-token similarity.
struct Compared {
  nlohmann::json row;
  HeatmapPanel similarity;
};

// Row r of the encoder output [S, d], in double.
std::vector<double> row(const EncoderOutput& memory, int r) {
  const auto first = memory.values.begin() + static_cast<std::ptrdiff_t>(r) * memory.cols;
  return std::vector<double>(first, first + memory.cols);
}

// The mean over rows of the encoder output [S, d], in double.
std::vector<double> mean_pool(const EncoderOutput& memory) {
  std::vector<double> mean(static_cast<std::size_t>(memory.cols), 0.0);
  for (int r = 0; r < memory.rows; ++r)
    for (int c = 0; c < memory.cols; ++c) mean[static_cast<std::size_t>(c)] += memory.at(r, c);
  for (double& x : mean) x /= static_cast<double>(memory.rows);
  return mean;
}

double cosine_similarity(const std::vector<double>& a, const std::vector<double>& b) {
  double dot = 0, norm_a = 0, norm_b = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    dot += a[i] * b[i];
    norm_a += a[i] * a[i];
    norm_b += b[i] * b[i];
  }
  return dot / std::sqrt(norm_a * norm_b);
}

// cos(a_i, b_j) for every row i of a [Sa, d] and j of b [Sb, d] -> [Sa, Sb], in double.
Grid token_similarity(const EncoderOutput& a, const EncoderOutput& b) {
  Grid similarity(a.rows, b.rows);
  for (int i = 0; i < a.rows; ++i)
    for (int j = 0; j < b.rows; ++j)
      similarity(i, j) = static_cast<float>(cosine_similarity(row(a, i), row(b, j)));
  return similarity;
}

// The model of `dir`, with --rope-scaling when it has RoPE positions: when every shipped
// model is compared, the scaling applies to those it can (a chosen model without RoPE
// is refused, as by every command).
Model load_compared(const std::filesystem::path& dir, const CompareOptions& options, bool all_shipped) {
  const CommonOptions& common = options.common;
  const bool scaled = !common.rope_scaling.empty() &&
                      (!all_shipped || Model::load(dir, quiet).info().position_encoding == "rope");
  return Model::load(dir, load_options(scaled ? common.rope_scaling : "", common.compute_type, common.group_size));
}

Compared compare(const std::filesystem::path& dir, const CompareOptions& options, bool all_shipped) {
  const auto model = load_compared(dir, options, all_shipped);
  TranslatorOptions translator_options = options.translator;
  translator_options.decoding = model.with_generation_defaults(translator_options.decoding, options.given);
  const Translator translator(model, translator_options);
  // Both sentences through the batched path, as translate runs them.
  const std::vector<std::string> texts{options.text_a, options.text_b};
  const std::vector<Translation> translations = translator.translate_batch(texts);
  std::vector<EncoderOutput> encoded;
  std::vector<std::vector<double>> pooled;
  nlohmann::json sides = nlohmann::json::array();
  for (const Translation& t : translations) {
    encoded.push_back(translator.encode(t.source));
    pooled.push_back(mean_pool(encoded.back()));
    sides.push_back({{"text", t.source},
                     {"tokens", model.source_pieces(t.source_ids)},
                     {"translation", t.best().text}});
  }
  const bool differ = sides[0]["translation"] != sides[1]["translation"];
  const std::string plain_encoding = model.info().position_encoding;
  const bool scaled = !options.common.rope_scaling.empty() && plain_encoding == "rope";
  const std::string encoding = plain_encoding + (scaled ? " " + options.common.rope_scaling : "");
  Compared out;
  out.similarity.title = dir.filename().string() + (dir.filename() == encoding ? "" : " (" + encoding + ")");
  out.similarity.values = token_similarity(encoded[0], encoded[1]);
  out.similarity.row_labels = sides[0]["tokens"].get<std::vector<std::string>>();
  out.similarity.col_labels = sides[1]["tokens"].get<std::vector<std::string>>();
  out.similarity.row_axis = "A: " + options.text_a;
  out.similarity.col_axis = "B: " + options.text_b;
  out.row = {{"model", dir.filename().string()},
             {"directory", dir.string()},
             {"position_encoding", encoding},
             {"a", std::move(sides[0])},
             {"b", std::move(sides[1])},
             {"cosine_similarity", cosine_similarity(pooled[0], pooled[1])},
             {"translations_differ", differ}};
  return out;
}

// Every model's similarity side by side, on one scale from -1 to 1.
void plot(const std::string& path, std::vector<HeatmapPanel> panels) {
  HeatmapOptions style;
  style.title = "cosine similarity of encoder outputs, token by token (A's rows, B's columns)";
  style.value_label = "cosine similarity";
  style.scale = ColourScale::Diverging;
  style.min = -1.0;
  style.max = 1.0;
  style.cell_decimals = 3;  // none's exact 1.000 against the others' 0.9xx
  const int count = static_cast<int>(panels.size());
  style.columns = count <= 4 ? count : (count + 1) / 2;
  write_picture(path, panels, style);
}

// A sibling that translates: an encoder-decoder model. A config that does not parse
// counts, so that loading it reports what is wrong.
bool is_translator(const std::filesystem::path& directory) {
  try {
    return !Model::load(directory, quiet).is_decoder_only();
  } catch (const Error&) {
    return true;
  }
}

// The shipped translators: the default model's directory and its sibling
// encoder-decoder model directories (a shipped language model has nothing to compare).
std::vector<std::filesystem::path> shipped_models(const std::filesystem::path& default_model) {
  std::vector<std::filesystem::path> models;
  const auto parent = default_model.parent_path();
  if (std::filesystem::is_directory(parent))
    for (const auto& entry : std::filesystem::directory_iterator(parent))
      if (std::filesystem::exists(entry.path() / "config.json") && is_translator(entry.path()))
        models.push_back(entry.path());
  std::sort(models.begin(), models.end());
  // The default model first, the order-blind ablation last: the story reads top-down.
  std::stable_partition(models.begin(), models.end(),
                        [&](const auto& p) { return p == default_model; });
  std::stable_partition(models.begin(), models.end(),
                        [](const auto& p) { return p.filename() != "none"; });
  if (models.empty()) models.push_back(default_model);
  return models;
}

std::string join(const nlohmann::json& tokens) {
  std::string text;
  for (const auto& t : tokens) text += (text.empty() ? "" : " ") + t.get<std::string>();
  return text;
}

// A translation as a table cell: a generated control character escaped, so the row stays one line.
std::string shown(const nlohmann::json& translation) { return escape_control_characters(translation.get<std::string>()); }

void print_comparison_table(const std::vector<nlohmann::json>& rows) {
  std::size_t name_w = 5, a_w = 13, b_w = 13;
  for (const auto& r : rows) {
    name_w = std::max(name_w, r["model"].get<std::string>().size());
    a_w = std::max(a_w, shown(r["a"]["translation"]).size());
    b_w = std::max(b_w, shown(r["b"]["translation"]).size());
  }
  std::string shown_tokens;
  for (const auto& r : rows) {
    const std::string tokens = join(r["a"]["tokens"]) + "\n" + join(r["b"]["tokens"]);
    if (tokens == shown_tokens) continue;  // models that share a tokenizer show its tokens once
    shown_tokens = tokens;
    std::cout << "A: " << r["a"]["text"].get<std::string>() << "\n   tokens: " << join(r["a"]["tokens"])
              << "\nB: " << r["b"]["text"].get<std::string>() << "\n   tokens: " << join(r["b"]["tokens"])
              << "\n\n";
  }
  // Column widths count bytes; German umlauts are two, so pad by hand per cell.
  const auto cell = [](const std::string& s, std::size_t w) {
    std::size_t glyphs = 0;
    for (unsigned char c : s) glyphs += (c & 0xC0) != 0x80;
    return s + std::string(w > glyphs ? w - glyphs : 0, ' ');
  };
  std::cout << cell("model", name_w) << "  " << cell("translation of A", a_w) << "  "
            << cell("translation of B", b_w) << "  cosine(A,B)  differ\n";
  for (const auto& r : rows) {
    std::cout << cell(r["model"], name_w) << "  " << cell(shown(r["a"]["translation"]), a_w)
              << "  " << cell(shown(r["b"]["translation"]), b_w) << "  " << std::fixed << std::setprecision(6)
              << std::setw(11) << r["cosine_similarity"].get<double>() << "  "
              << (r["translations_differ"].get<bool>() ? "yes" : "no") << '\n';
  }
}

void run_compare(const CompareOptions& options, bool all_shipped) {
  if (!options.plot.empty()) viz_format(options.plot, "--plot");  // before any work
  set_threads(options.common.threads);
  const std::vector<std::filesystem::path> dirs =
      all_shipped ? shipped_models(options.common.model_dir)
                  : std::vector<std::filesystem::path>{options.common.model_dir};
  std::vector<nlohmann::json> rows;
  std::vector<HeatmapPanel> panels;
  for (const auto& dir : dirs) {
    Compared compared = compare(dir, options, all_shipped);
    rows.push_back(std::move(compared.row));
    panels.push_back(std::move(compared.similarity));
    if (options.common.json) print_json_line(rows.back());
  }
  if (!options.plot.empty()) plot(options.plot, std::move(panels));
  if (!options.common.json) {
    print_comparison_table(rows);
    if (!options.plot.empty()) std::cout << "\nwrote " << options.plot << ": each model's token-by-token similarity\n";
  }
}

}  // namespace

void setup_compare(CLI::App& app) {
  auto options = std::make_shared<CompareOptions>();
  CLI::App* command = app.add_subcommand(
      "compare",
      "Show whether models see word order: translate TEXT_A and TEXT_B (e.g. the same\n"
      "words in another order) with every shipped model (or only the one --model or\n"
      "$ORDO_MODEL names), and report the cosine similarity of their mean-pooled encoder\n"
      "outputs. A model without positions (none) cannot tell the two apart: similarity 1,\n"
      "same translation.");
  command->add_option("text_a", options->text_a, "First sentence")->required();
  command->add_option("text_b", options->text_b, "Second sentence")->required();
  add_decoding_options(*command, options->translator.decoding, options->translator.batch_size);
  add_language_options(*command, options->translator.source_lang, options->translator.target_lang);
  command->remove_option(command->get_option("--n-best"));  // compare shows the best translation alone
  add_input_options(*command, options->translator.max_input_tokens, options->translator.truncate,
                    "a source, eos included", "its first tokens");
  command->add_option("--plot", options->plot,
                      "Also draw each model's token-by-token cosine similarity of the encoder outputs,\n"
                      "A's tokens against B's, side by side: FILE.png (or FILE.csv for the numbers)")
      ->type_name("FILE");
  add_common_options(*command, options->common);
  command->callback([options, command] {
    validate_flags(options->translator);
    options->given = given_decoding_flags(*command);
    run_compare(*options, uses_builtin_model(*command, options->common));
  });
}

}  // namespace ordo::tools
