// ordo viz attention: the attention weights of one layer, as a heatmap with tokens on
// both axes.
//
//   ordo viz attention "cats chase dogs" --layer 1 --head all --out attention.png
//   ordo viz attention "cats chase dogs" --kind cross --head 0 --out cross.csv
//
// Encoder self-attention reads the source's SentencePiece pieces. Decoder
// self-attention and cross-attention are those of the greedy translation: ordo
// translates the text greedily, then feeds the translation back teacher-forced in one
// pass (ordo::Translator::attention_ids), which gives exactly the probabilities the
// greedy search computed step by step. A decoder-only model has one kind: its prompt's
// self-attention, in one pass (ordo::Generator::attention).
#include <algorithm>
#include <charconv>
#include <iostream>

#include "tools/cli/common.h"
#include "tools/viz/viz_output.h"

namespace ordo::tools {

namespace {

struct AttentionOptions {
  CommonOptions common;
  std::string text;
  int layer = 0;
  std::string head = "0";
  std::string kind = "encoder";
  bool kind_given = false;
  std::string out;
  int max_length = 0;
  std::string source_lang, target_lang;  // a multilingual model's codes
};

AttentionKind kind_of(const std::string& name) {
  return name == "decoder" ? AttentionKind::Decoder : name == "cross" ? AttentionKind::Cross : AttentionKind::Encoder;
}

std::string title_of(AttentionKind kind) {
  switch (kind) {
    case AttentionKind::Encoder: return "encoder self-attention";
    case AttentionKind::Decoder: return "decoder self-attention";
    case AttentionKind::Cross: return "cross-attention";
  }
  return "";
}

// --head: a head number or "all"; -1 for all. Checked against the model's heads.
int parse_head(const std::string& text, int heads) {
  if (text == "all") return -1;
  int head = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), head);
  if (ec != std::errc() || end != text.data() + text.size())
    throw CLI::ValidationError("--head", "'" + text + "' is neither a head number nor 'all'");
  if (head < 0 || head >= heads)
    throw CLI::ValidationError("--head", "head " + text + " does not exist: this attention has " +
                                             std::to_string(heads) + " heads (0.." + std::to_string(heads - 1) +
                                             ", or all)");
  return head;
}

// What the recorded matrices' axes are: pieces, and what they stand for.
struct Axes {
  std::vector<std::string> rows, cols;
  std::string row_axis, col_axis;
  std::string translation;  // empty for the encoder
};

// A decoder-only model: the prompt (bos first, as generate reads it) in one pass.
Axes record_prompt(const Model& model, const std::string& text, Attention& attention) {
  GeneratorOptions options;
  options.add_bos = true;
  attention = Generator(model, options).attention(text);
  Axes axes;
  axes.rows = axes.cols = attention.target_tokens;
  axes.row_axis = "prompt token (query)";
  axes.col_axis = "prompt token (key)";
  return axes;
}

// An encoder-decoder model: the greedy translation of `text`, read back teacher-forced.
Axes record(const Model& model, AttentionKind kind, const std::string& text, const AttentionOptions& options,
            Attention& attention) {
  TranslatorOptions greedy;
  greedy.decoding.max_length = options.max_length;
  greedy.source_lang = options.source_lang;
  greedy.target_lang = options.target_lang;
  const Translator translator(model, greedy);
  // A multilingual model's source carries its code (a missing one is a usage error).
  const std::vector<int> source = model.language_codes().empty() && options.source_lang.empty()
                                      ? model.tokenize_source(text)
                                      : model.tokenize_source(text, options.source_lang);
  Axes axes;
  if (kind == AttentionKind::Encoder) {
    // The encoder's attention needs no translation: the decoder reads only its start
    // (a target's last id is never read; the source's eos stands in for it).
    attention = translator.attention_ids(source, std::span(&source.back(), 1));
    axes.rows = axes.cols = attention.source_tokens;
    axes.row_axis = "source token (query)";
    axes.col_axis = "source token (key)";
    return axes;
  }
  const std::vector<std::vector<int>> sources{source};
  const Translation translation = translator.translate_ids_batch(sources).front();
  if (!translation.ok()) throw Error("viz attention", translation.error);
  const std::vector<int>& output = translation.best().ids;  // eos included when produced
  if (output.empty()) throw Error("viz attention", "the translation is empty: no decoder step to show");
  attention = translator.attention_ids(source, output);
  axes.translation = translation.best().text;
  if (kind == AttentionKind::Decoder) {
    // Input i predicts output i; the first input is decoder_start.
    axes.rows = attention.target_tokens;
    axes.rows.front() = "<start>";
    axes.cols = axes.rows;
    axes.row_axis = "decoder input (query)";
    axes.col_axis = "decoder input (key)";
  } else {
    axes.rows = model.target_pieces(output);
    axes.cols = attention.source_tokens;
    axes.row_axis = "output token (query)";
    axes.col_axis = "source token (key)";
  }
  return axes;
}

// The layers and heads `attention` holds of `kind`.
void count(const Attention& attention, AttentionKind kind, int& layers, int& heads) {
  layers = heads = 0;
  for (const AttentionMatrix& m : attention.matrices)
    if (m.kind == kind) {
      layers = std::max(layers, m.layer + 1);
      heads = std::max(heads, m.head + 1);
    }
}

void run_attention(const AttentionOptions& options) {
  viz_format(options.out);
  const Model model = load_model(options.common);
  // A decoder-only model has one kind: its prompt's self-attention.
  const bool decoder_only = model.is_decoder_only();
  if (decoder_only && options.kind_given && options.kind != "decoder")
    throw CLI::ValidationError("--kind", options.kind + ": this model is decoder-only: its only attention is the "
                                                        "prompt's self-attention, --kind decoder");
  const AttentionKind kind = decoder_only ? AttentionKind::Decoder : kind_of(options.kind);
  const bool encoder = kind == AttentionKind::Encoder;
  if (decoder_only)  // a language model has no language codes: a given one is a usage error
    for (const auto& [field, code] : {std::pair{"source_lang", &options.source_lang},
                                      std::pair{"target_lang", &options.target_lang}})
      if (!code->empty()) (void)model.language_id(*code, field);

  Attention attention;
  const Axes axes = decoder_only ? record_prompt(model, options.text, attention)
                                 : record(model, kind, options.text, options, attention);
  int layers = 0, heads = 0;
  count(attention, kind, layers, heads);
  if (options.layer >= layers)
    throw CLI::ValidationError("--layer", "layer " + std::to_string(options.layer) + " does not exist: the " +
                                              (encoder ? "encoder" : "decoder") + " has " + std::to_string(layers) +
                                              " layers (0.." + std::to_string(layers - 1) + ")");
  const int head = parse_head(options.head, heads);

  std::vector<HeatmapPanel> panels;
  for (int h = head < 0 ? 0 : head; h < (head < 0 ? heads : head + 1); ++h) {
    const AttentionMatrix& m = attention.get(kind, options.layer, h);
    HeatmapPanel panel;
    panel.title = head < 0 ? "head " + std::to_string(h) : "";  // one head: the picture's title names it
    panel.values = Grid(m.rows, m.cols);
    std::copy(m.values.begin(), m.values.end(), panel.values.data());
    panel.row_labels = axes.rows;
    panel.col_labels = axes.cols;
    panel.row_axis = axes.row_axis;
    panel.col_axis = axes.col_axis;
    panels.push_back(std::move(panel));
  }
  const std::string what = (decoder_only ? std::string("prompt self-attention") : title_of(kind)) + ", layer " + std::to_string(options.layer) +
                           (head < 0 ? ", all heads" : ", head " + std::to_string(head));
  HeatmapOptions style;
  style.title = what + " (" + model.directory().filename().string() + ")";
  style.value_label = "attention probability";
  style.scale = ColourScale::Sequential;
  style.min = 0.0;  // probabilities: 0 is "not attended", whatever the smallest one is
  style.columns = heads <= 4 ? static_cast<int>(heads) : 4;
  style.cell_decimals = 2;
  write_picture(options.out, panels, style);

  if (options.common.json) {
    nlohmann::json line{{"out", options.out}, {"kind", decoder_only ? "decoder" : options.kind}, {"layer", options.layer},
                        {"heads", head < 0 ? heads : 1}, {"query_tokens", axes.rows}, {"key_tokens", axes.cols}};
    if (!encoder && !decoder_only) line["translation"] = axes.translation;
    print_json_line(line);
    return;
  }
  std::cout << "wrote " << options.out << ": " << what << ", " << axes.rows.size() << " x " << axes.cols.size()
            << " tokens";
  if (!encoder && !decoder_only) std::cout << " (greedy translation: " << axes.translation << ")";
  std::cout << '\n';
}

}  // namespace

void setup_viz_attention(CLI::App& viz) {
  auto options = std::make_shared<AttentionOptions>();
  CLI::App* command = viz.add_subcommand(
      "attention",
      "Draw the attention weights of one layer for TEXT: each row a query token, each column\n"
      "the tokens it attends to, the colour its probability (rows sum to 1). --kind encoder\n"
      "shows the source's self-attention; decoder and cross show the greedy translation's\n"
      "self-attention and its attention over the source. --out FILE.png draws a heatmap\n"
      "(--head all: a grid of every head); --out FILE.csv writes the numbers, a header line\n"
      "of key tokens, then a row per query token (with all heads, each line starts with\n"
      "its head). A decoder-only model (--model german-llama) shows TEXT as a prompt: its\n"
      "self-attention, bos first, as generate reads it.\n"
      "Example: ordo viz attention \"cats chase dogs\" --layer 1 --head all --out attention.png");
  command->add_option("text", options->text, "Source sentence (a decoder-only model: the prompt)")->required();
  command->add_option("--layer", options->layer, "Layer, from 0")->check(CLI::NonNegativeNumber)->capture_default_str();
  command->add_option("--head", options->head, "Head, from 0, or all (a grid)")->capture_default_str();
  command
      ->add_option("--kind", options->kind,
                   "Which attention: encoder, decoder (self) or cross; a decoder-only model has only\n"
                   "decoder, its prompt's self-attention")
      ->check(CLI::IsMember({"encoder", "decoder", "cross"}))
      ->capture_default_str();
  command->add_option("--max-length", options->max_length,
                      "Most output tokens of the greedy translation (0: the model's limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command->add_option("-o,--out", options->out, "Where to write: FILE.png (picture) or FILE.csv (numbers)")
      ->type_name("FILE")
      ->required();
  add_language_options(*command, options->source_lang, options->target_lang);
  add_common_options(*command, options->common);
  command->callback([options, command] {
    options->kind_given = given(*command, "--kind");
    run_attention(*options);
  });
}

}  // namespace ordo::tools
