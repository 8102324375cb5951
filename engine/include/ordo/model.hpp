// A loaded model directory, and where the default one is.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ordo/export.hpp"

namespace ordo::api {

// A model directory, loaded: config.json, model.safetensors (or its shards) and the
// SentencePiece tokenizer.model. Immutable once loaded; copies share it, so one Model
// serves any number of Translators, Generators and threads.
class ORDO_API Model {
 public:
  // Receives each load-time warning (a tensor the config does not use, say).
  using WarningHandler = std::function<void(const std::string&)>;

  // Loads `directory`. Warnings go to `on_warning`, or to stderr ("ordo: warning: ...")
  // when it is empty. Throws ordo::Error naming the file at fault and what is wrong.
  static Model load(const std::filesystem::path& directory, const WarningHandler& on_warning = {});
  // Loads default_model_directory(). Throws ordo::Error when no default model is found
  // (naming where it looked) or when it does not load.
  static Model load_default(const WarningHandler& on_warning = {});

  // The directory it was loaded from. Throws nothing.
  const std::filesystem::path& directory() const noexcept;
  // "ordo" (encoder-decoder, a Translator's) or "llama" (decoder-only, a Generator's). Throws nothing.
  const std::string& model_type() const noexcept;
  // True for a decoder-only model: use a Generator; else a Translator. Throws nothing.
  bool is_decoder_only() const noexcept;
  // True when text can be used (tokenizer.model was there); else only ids. Throws nothing.
  bool has_tokenizer() const noexcept;
  // The most tokens a source may have, eos included (decoder-only models: a prompt, bos
  // included). Throws nothing.
  int max_input_tokens() const noexcept;

  // Text -> source token ids, eos appended. Throws ordo::Error for blank text, text that
  // is not printable UTF-8, text beyond max_input_tokens, or a model without a tokenizer.
  std::vector<int> tokenize_source(std::string_view text) const;
  // Text -> target token ids, eos appended. Throws ordo::Error as tokenize_source does.
  std::vector<int> tokenize_target(std::string_view text) const;
  // Source ids -> text (eos and pad skipped). Throws ordo::Error for an id outside the
  // vocabulary or a model without a tokenizer.
  std::string detokenize_source(std::span<const int> ids) const;
  // Target ids -> text, up to the first eos. Throws ordo::Error as detokenize_source does.
  std::string detokenize_target(std::span<const int> ids) const;

  struct Impl;  // the engine's model; opaque to programs

 private:
  explicit Model(std::shared_ptr<const Impl> impl);
  friend class Translator;
  friend class Generator;

  std::shared_ptr<const Impl> impl_;
};

// Where Model::load_default() looks: $ORDO_MODEL when set, else the shipped model next to
// the running code: <prefix>/share/ordo/sinusoidal for an installed libordo (or program),
// the source tree's weights/sinusoidal for a build-tree binary. Throws ordo::Error naming
// every place it looked, and what to do, when none has the model.
ORDO_API std::filesystem::path default_model_directory();

// Threads every computation may use from now on, process-wide; every core until set,
// and `threads` <= 0 keeps the current number. Throws ordo::Error when a thread cannot
// be started (a memory or process limit); the threads it did start are stopped again.
ORDO_API void set_threads(int threads);

}  // namespace ordo::api

namespace ordo {
using namespace api;  // programs spell these ordo::X (see ordo/options.hpp)
}  // namespace ordo
