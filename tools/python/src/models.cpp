// Models as Python names them: loading (a directory, a shipped model's name or None),
// the shipped models' list, and the tokenizer (ordo.tokenize, Translator.tokenizer).
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "options.h"
#include "results.h"

namespace ordo::python {

namespace {

// The kinds of text a model reads, as `ordo tokenize --as` names them.
enum class TextKind { Source, Target, Prompt };

TextKind text_kind(const Model& model, const std::optional<std::string>& kind) {
  if (!kind) return model.is_decoder_only() ? TextKind::Prompt : TextKind::Source;
  if (*kind == "source") return TextKind::Source;
  if (*kind == "target") return TextKind::Target;
  if (*kind == "prompt") return TextKind::Prompt;
  throw_option_error("kind", "must be 'source', 'target' or 'prompt', got '" + *kind + "'");
}

// A multilingual model's language codes for one call (None: not given).
struct Languages {
  std::optional<std::string> source, target;
};

// The tokenizer of a loaded model.
class Tokenizer {
 public:
  explicit Tokenizer(Model model) : model_(std::move(model)) {}

  // As `ordo tokenize` reads text, and the Translator and Generator feed it: a
  // multilingual model's source carries source_lang's code, its target and prompt
  // target_lang's (each needed on its side); a code given to a model without codes is
  // an OptionError naming it. bos goes before a decoder-only model's prompt only.
  std::vector<int> encode(const std::string& text, const std::optional<std::string>& kind, bool add_bos,
                          const Languages& languages) const {
    const bool multilingual = !model_.language_codes().empty();
    for (const auto& [field, code] : {std::pair{"source_lang", &languages.source},
                                      std::pair{"target_lang", &languages.target}})
      if (!multilingual && code->has_value()) (void)model_.language_id(**code, field);
    const std::string source = languages.source.value_or(""), target = languages.target.value_or("");
    switch (text_kind(model_, kind)) {
      case TextKind::Source: return multilingual ? model_.tokenize_source(text, source) : model_.tokenize_source(text);
      case TextKind::Target: return multilingual ? model_.tokenize_target(text, target) : model_.tokenize_target(text);
      case TextKind::Prompt:
        return multilingual ? model_.tokenize_prompt(text, false, target)
                            : model_.tokenize_prompt(text, add_bos && model_.is_decoder_only());
    }
    return {};
  }

  // Ids -> text; a prompt's ids read as a target's.
  std::string decode(const std::vector<int>& ids, const std::optional<std::string>& kind) const {
    if (text_kind(model_, kind.value_or("target")) == TextKind::Source) return model_.detokenize_source(ids);
    return model_.detokenize_target(ids);
  }

  std::vector<std::string> pieces(const std::vector<int>& ids, const std::optional<std::string>& kind) const {
    if (text_kind(model_, kind) == TextKind::Source) return model_.source_pieces(ids);
    return model_.target_pieces(ids);
  }

  Tokens tokenize(const std::string& text, const std::optional<std::string>& kind, bool add_bos,
                  const Languages& languages) const {
    Tokens tokens;
    tokens.ids = encode(text, kind, add_bos, languages);
    tokens.pieces = pieces(tokens.ids, kind);
    return tokens;
  }

 private:
  Model model_;
};

}  // namespace

Model load_model(const py::object& model_dir, bool language_model, const LoadOptions& options) {
  const Model::WarningHandler warn = [](const std::string& message) {
    if (PyErr_WarnEx(PyExc_UserWarning, message.c_str(), 2) != 0) throw py::error_already_set();
  };
  if (model_dir.is_none())
    return Model::load(language_model ? default_language_model_directory() : default_model_directory(), options, warn);
  // str or os.PathLike: a directory, or a shipped model's name.
  const std::string given = py::str(py::module_::import("os").attr("fspath")(model_dir));
  return Model::load(given, options, warn);
}

py::object tokenizer_of(const Model& model) { return py::cast(Tokenizer(model)); }

LoadOptions compute_keywords(const py::object& threads_keyword, const py::object& compute_type_keyword,
                             const py::object& group_size) {
  const std::string compute_type = as_text(compute_type_keyword, "compute_type");
  // As --threads: 0 (keep the current number) to 1024.
  const long long threads = as_integer(threads_keyword, "threads", 0, 1024);
  // CTranslate2's names for the types ordo has, so that code written for its
  // compute_type keeps working; its mixed types (int8_float16, ...) are not ordo's.
  constexpr std::pair<const char*, const char*> kCTranslate2Names[] = {
      {"default", "auto"}, {"float32", "f32"}, {"float16", "f16"}, {"bfloat16", "bf16"}};
  std::string name = compute_type;
  for (const auto& [theirs, ours] : kCTranslate2Names)
    if (compute_type == theirs) name = ours;
  LoadOptions options;
  try {
    options.compute_type = parse_compute_type(name);
  } catch (const OptionError&) {
    throw_option_error("compute_type", "'" + compute_type +
                                           "' is not a type ordo computes in: use 'auto' (as the files store the "
                                           "weights), 'f32', 'f16', 'bf16', 'int8' or 'int4' (or CTranslate2's "
                                           "'default', 'float32', 'float16', 'bfloat16')");
  }
  // An int as every int keyword is (not a bool), within --group-size's range.
  if (!group_size.is_none()) options.group_size = static_cast<int>(as_integer(group_size, "group_size", 0, 1 << 24));
  // None of CTranslate2's names takes a group size ('default' keeps the weights as stored,
  // the others have no scales); the library would name ordo's type ("is set for auto"),
  // not the one the caller wrote.
  if (name != compute_type && !group_size.is_none())
    throw_option_error("group_size", "is set for compute_type='" + compute_type + "'" +
                                         (name == "auto" ? " (the weights as stored)" : ", which has no scales") +
                                         ": a group size needs 'int8' or 'int4'");
  if (threads > 0) set_threads(static_cast<int>(threads));
  return options;
}

void bind_models(py::module_& m) {
  py::class_<Tokenizer>(m, "Tokenizer",
                        "A model's SentencePiece tokenizer, as the model reads text: Translator.tokenizer, "
                        "Generator.tokenizer.\n\nkind is 'source' (eos appended), 'target' (eos appended) or 'prompt' "
                        "(a decoder-only model's: bos first, unless add_bos=False; an encoder-decoder model's: the "
                        "forced start of a translation, no bos); None: 'prompt' for a decoder-only model, else "
                        "'source'.\n\nsource_lang, target_lang: a multilingual model's language codes (NLLB-200's "
                        "'eng_Latn'; Translator.language_codes lists them), put where its tokenizer puts them: a "
                        "source needs source_lang, a target and a prompt target_lang (a missing or unknown code "
                        "raises ordo.OptionError naming it and listing the codes); a model of one pair takes none.")
      .def(
          "encode",
          [](const Tokenizer& t, const std::string& text, const std::optional<std::string>& kind, bool add_bos,
             const std::optional<std::string>& source_lang, const std::optional<std::string>& target_lang) {
            return t.encode(text, kind, add_bos, {source_lang, target_lang});
          },
          py::arg("text"), py::arg("kind") = py::none(), py::arg("add_bos") = true,
          py::arg("source_lang") = py::none(), py::arg("target_lang") = py::none(),
          "The ids the model reads for `text`, as the Translator and Generator feed them. Raises ordo.Error for text "
          "it cannot read (blank, control characters, too long), ordo.OptionError for a missing or unknown language "
          "code.")
      .def("decode", &Tokenizer::decode, py::arg("ids"), py::arg("kind") = py::none(),
           "Ids -> text as ordo prints it: a target (the default) stops at its first "
           "eos and skips pad, bos and decoder_start; kind='source' reads source ids. Raises ordo.Error for an id "
           "outside the vocabulary.")
      .def("pieces", &Tokenizer::pieces, py::arg("ids"), py::arg("kind") = py::none(),
           "The piece of each id ('▁cats'), for display.")
      .def(
          "tokenize",
          [](const Tokenizer& t, const std::string& text, const std::optional<std::string>& kind, bool add_bos,
             const std::optional<std::string>& source_lang, const std::optional<std::string>& target_lang) {
            return t.tokenize(text, kind, add_bos, {source_lang, target_lang});
          },
          py::arg("text"), py::arg("kind") = py::none(), py::arg("add_bos") = true,
          py::arg("source_lang") = py::none(), py::arg("target_lang") = py::none(),
          "ids and pieces together, as `ordo tokenize` shows them.");

  m.def(
      "tokenize",
      [](const py::object& model_dir, const std::string& text, const std::optional<std::string>& kind, bool add_bos,
         const std::optional<std::string>& source_lang, const std::optional<std::string>& target_lang) {
        return Tokenizer(load_model(model_dir, false)).tokenize(text, kind, add_bos, {source_lang, target_lang});
      },
      py::arg("model_dir"), py::arg("text"), py::arg("kind") = py::none(), py::arg("add_bos") = true,
      py::arg("source_lang") = py::none(), py::arg("target_lang") = py::none(),
      "The ids and pieces a model reads for `text`, as "
      "`ordo tokenize` prints them. model_dir: a directory, a shipped model's name, or None for the default model. "
      "kind: 'source', 'target' or 'prompt' (None: 'prompt' for a decoder-only model, else 'source'). "
      "source_lang, target_lang: a multilingual model's language codes, as `ordo tokenize --source-lang "
      "--target-lang` takes them.");
  m.def(
      "models", [] { return shipped_model_names(); },
      "The shipped models' names, sorted, as Translator and Generator take them "
      "(`ordo models`).");
  m.def("cpu_kernels", &cpu_kernels,
        "The instructions ordo's own kernels run on this machine: 'amx', 'avx512', 'avx2' or 'portable', the "
        "widest the CPU allows, capped by the environment variable ORDO_CPU (as `ordo bench` reports them).");
}

}  // namespace ordo::python
