// A loaded model directory, and where the default one is.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ordo/export.hpp"
#include "ordo/options.hpp"
#include "ordo/positions.hpp"

namespace ordo {

namespace detail {
struct ModelAccess;
}  // namespace detail

// What a model directory holds, as `ordo inspect` and `ordo models` show it.
struct ModelInfo {
  // One tensor of the weight files.
  struct Tensor {
    std::string name;                // as the file spells it (print it with printable())
    std::string dtype;               // "F32", "F16", "BF16"; "I8", "U8" (int4) quantized
    std::vector<std::int64_t> shape;
    std::string file;                // the weight file that holds it (its name)
    bool used = true;                // false: this config has no use for it (ignored)
  };
  std::string family;               // "ordo" or "llama"
  bool decoder_only = false;        // no encoder: a Generator's model
  std::string position_encoding;    // "sinusoidal", "learned", "rope", "alibi", "t5_relative" or "none"
  int attention_heads = 0;          // the decoder's query heads
  int key_value_heads = 0;          // its K/V heads (fewer: grouped-query attention)
  std::string config_json;          // config.json as read, defaults filled in, in the family's own keys
  std::int64_t parameters = 0;      // parameters the config uses
  std::uint64_t weight_bytes = 0;   // bytes of the weight files: on disk, and mapped in memory
  std::vector<std::string> weight_files;  // their names, in order
  std::vector<Tensor> tensors;            // every tensor of every file, in file order
  int tokenizer_vocab_size = 0;           // pieces of the (source) tokenizer; 0: no tokenizer
  std::string generation_config_json = "{}";  // the generation defaults applied, as the file spells them
  std::string generation_config_file;         // the file they came from; empty: none
  std::vector<std::string> language_codes;    // the model's language codes (NLLB's "eng_Latn", ...); empty: one pair
  // What the weight matrices run as ("f16", "int8 (a scale per row)"; with several
  // formats, how many of each: "int4 (groups of 32): 15 matrices and int8 (a scale per
  // row): 7 matrices", an int4 model's int8 fallbacks), and the bytes they hold so
  // (values and scales).
  std::string compute_type;
  std::uint64_t matrix_bytes = 0;
};

// A model directory, loaded: config.json, model.safetensors (or its shards) and the
// SentencePiece tokenizer.model. Immutable once loaded; copies share it, so one Model
// serves any number of Translators, Generators and threads.
class ORDO_API Model {
 public:
  // Receives each load-time warning (a tensor the config does not use, say).
  using WarningHandler = std::function<void(const std::string&)>;

  // Loads `directory`, or the shipped model of that name when it is not a directory
  // ("german-llama", see shipped_model_names()). Warnings go to `on_warning`, or to stderr
  // ("ordo: warning: ...") when it is empty. Throws ordo::Error naming the file at fault
  // and what is wrong (for a name that is neither, the shipped names).
  static Model load(const std::filesystem::path& directory, const WarningHandler& on_warning = {});
  // The same, with `options` (a RoPE scaling in place of the config's, a compute type).
  // Throws ordo::OptionError (field "rope_scaling") for a scaling the model cannot take (a
  // model without RoPE, a bad factor), (field "group_size") for a group size the compute
  // type cannot take, ordo::Error for a model that cannot run in the compute type (naming
  // the tensor), else as above.
  static Model load(const std::filesystem::path& directory, const LoadOptions& options,
                    const WarningHandler& on_warning = {});
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
  // The token a prompt starts with (LLaMA's <s>), when the config names one. Throws nothing.
  std::optional<int> bos_token_id() const noexcept;
  // The most tokens a source may have, eos included (decoder-only models: a prompt, bos
  // included). Throws nothing.
  int max_input_tokens() const noexcept;
  // The most tokens the decoder may read and write in one sequence (decoder-only models:
  // prompt and continuation together). Throws nothing.
  int max_output_tokens() const noexcept;
  // Token ids the stack's embedding reads (the decoder's: also the width of its logits);
  // 0 for the encoder of a decoder-only model. Throws nothing.
  int vocabulary_size(Stack stack = Stack::Decoder) const noexcept;

  // Text -> source token ids, eos appended. Throws ordo::Error for blank text, text that
  // is not printable UTF-8, text beyond max_input_tokens, or a model without a tokenizer.
  std::vector<int> tokenize_source(std::string_view text) const;
  // Text -> target token ids, eos appended. Throws ordo::Error as tokenize_source does.
  std::vector<int> tokenize_target(std::string_view text) const;

  // The language codes a multilingual model reads and writes (NLLB-200's "eng_Latn",
  // "deu_Latn", ...), each one token, in the order its tokenizer files list them; empty
  // for a model of one language pair. Such a model translates from a source language
  // into a target language: TranslatorOptions::source_lang and target_lang. Throws nothing.
  const std::vector<std::string>& language_codes() const noexcept;
  // The token of a language code. Throws ordo::OptionError for `field` ("source_lang",
  // "target_lang") when the model has no language codes or not this one; the message
  // lists the model's codes (the first and last few when there are many).
  int language_id(std::string_view code, const std::string& field) const;
  // With the text's language code, put where the model's tokenizer puts it (NLLB:
  // [code] + pieces + [eos]); a model with language codes needs one. Throws
  // ordo::OptionError as language_id() does, else ordo::Error as above.
  std::vector<int> tokenize_source(std::string_view text, std::string_view language) const;
  std::vector<int> tokenize_target(std::string_view text, std::string_view language) const;
  // Source ids -> text (eos and pad skipped). Throws ordo::Error for an id outside the
  // vocabulary or a model without a tokenizer.
  std::string detokenize_source(std::span<const int> ids) const;
  // Target ids -> text, up to the first eos. Throws ordo::Error as detokenize_source does.
  std::string detokenize_target(std::span<const int> ids) const;
  // A prompt for a Generator: text -> target ids without eos, after the model's bos when
  // `add_bos` (and the model has one). Throws ordo::Error as tokenize_source does; blank
  // text gives bos alone (generation from scratch), or an error without bos.
  std::vector<int> tokenize_prompt(std::string_view text, bool add_bos = true) const;
  // A multilingual encoder-decoder model's prompt, the forced start of a translation into
  // `language`: that code's token, then the text's ids without eos (what a Generator
  // with GeneratorOptions::target_lang feeds the decoder after decoder_start; blank text
  // gives the code alone). Throws ordo::OptionError ("target_lang") as language_id()
  // does, else ordo::Error as above.
  std::vector<int> tokenize_prompt(std::string_view text, bool add_bos, std::string_view language) const;
  // Ids -> the SentencePiece pieces the model reads ("▁cats"), one per id, for display.
  // Throws ordo::Error for an id outside the vocabulary or a model without a tokenizer.
  std::vector<std::string> source_pieces(std::span<const int> ids) const;
  std::vector<std::string> target_pieces(std::span<const int> ids) const;

  // What the directory holds: family, config, parameters, every tensor. Throws
  // ordo::Error when a weight file's size cannot be read.
  ModelInfo info() const;

  // The positions `stack` runs, as numbers (see ordo/positions.hpp): the vectors a
  // sinusoidal or learned scheme adds, RoPE's rotations, ALiBi's or T5's score biases,
  // over `steps` steps (0: every row of a learned table, up to kMaxSequenceLength). Throws ordo::Error for a model
  // without positions ("none"), a stack it lacks, or steps it cannot take.
  PositionTable position_table(Stack stack, int steps = 0) const;

  // What running it costs, counted from its own tensors (`ordo bench` reports them next
  // to the machine's rates). Throws nothing but std::bad_alloc.
  //
  // Bytes of weights one decoder step must read: every decoder weight a step touches
  // (self-attention, the cross-attention's query and output projections, feed-forward,
  // norms) and the output projection, in float32, as ordo holds them. Over the machine's
  // memory bandwidth, they bound a batch-1 step. The cross-attention's key and value
  // projections run once per source, not per step; the few embedding rows a step gathers
  // are left out.
  double decode_step_bytes() const;
  // FLOPs (2 per multiply-add) of encoding `batch` sources of `length` tokens (a
  // decoder-only model: prefilling prompts of that length, with each prompt's last-row
  // output projection): every linear of the stack, and attention's q k^T and p v over
  // the query-key pairs it needs. Norms, activations and softmax are not counted.
  double encode_flops(int batch, int length) const;

  // The decoding defaults the checkpoint ships with (generation_config.json: num_beams,
  // max_length, length_penalty, no_repeat_ngram_size, bad_words_ids,
  // forced_bos_token_id), over DecodingOptions' own; start options from them to decode
  // as transformers' generate() does: `options.decoding = model.generation_defaults();`,
  // or let with_generation_defaults() merge them with the fields you chose. Throws
  // nothing.
  const DecodingOptions& generation_defaults() const noexcept;
  // `decoding` with the checkpoint's generation default in every field DecodingChoices
  // lists and `chosen` does not mark (see DecodingChoices): what the command line decodes
  // with (a field whose flag was given is chosen) and the Python bindings (a keyword
  // passed is chosen). Every other field of `decoding` is kept as it is. Sampling
  // (decoding.sample) keeps decoding.beam_size: a drawn hypothesis is one, so a
  // checkpoint's num_beams does not apply to it. A model without generation defaults
  // (no generation_config.json, nor such keys in a Marian, T5 or M2M100 config.json) has
  // DecodingOptions' own, which the unchosen fields then take. Throws nothing but
  // std::bad_alloc.
  DecodingOptions with_generation_defaults(DecodingOptions decoding, const DecodingChoices& chosen) const;

  struct Impl;  // the loaded model; opaque to programs

 private:
  explicit Model(std::shared_ptr<const Impl> impl);
  friend struct detail::ModelAccess;  // ordo's own implementation and engine-level tools

  std::shared_ptr<const Impl> impl_;
};

// Where Model::load_default() looks: $ORDO_MODEL when set, else the shipped model next to
// the running code: <prefix>/share/ordo/sinusoidal for an installed libordo (or program),
// the source tree's weights/sinusoidal for a build-tree binary. Throws ordo::Error naming
// every place it looked, and what to do, when none has the model.
ORDO_API std::filesystem::path default_model_directory();

// The shipped models: translate's default (kDefaultModelName) and generate's
// (kDefaultLanguageModelName), with the others beside them.
inline constexpr const char* kDefaultModelName = "sinusoidal";
inline constexpr const char* kDefaultLanguageModelName = "german-llama";

// Where generate's default is: $ORDO_MODEL when set, else the shipped language model.
// Throws ordo::Error as default_model_directory() does.
ORDO_API std::filesystem::path default_language_model_directory();

// The directory the shipped models live in (<prefix>/share/ordo, or the source tree's
// weights/). Throws ordo::Error as default_model_directory() does.
ORDO_API std::filesystem::path shipped_models_directory();

// The shipped models' names (directories holding config.json there), sorted. Throws
// ordo::Error as shipped_models_directory() does.
ORDO_API std::vector<std::string> shipped_model_names();

// The shipped model called `name` ("german-llama", or "weights/german-llama" as the
// README spells it from the source root); nullopt when there is none by that name.
ORDO_API std::optional<std::filesystem::path> shipped_model(const std::string& name);

// A model as a user names it: `given` itself when it is a directory (or empty), else the
// shipped model of that name. Throws ordo::Error listing the shipped names when it is
// neither.
ORDO_API std::filesystem::path find_model_directory(const std::string& given);

// The model next to the running code, ignoring $ORDO_MODEL: what default_model_directory()
// falls back on. Throws ordo::Error naming every place it looked.
ORDO_API std::filesystem::path builtin_model_directory();

// Threads every computation may use from now on, process-wide; every core until set,
// and `threads` <= 0 keeps the current number. Throws ordo::Error when a thread cannot
// be started (a memory or process limit); the threads it did start are stopped again.
ORDO_API void set_threads(int threads);

// The instructions ordo's own kernels run on this machine: "amx", "avx512", "avx2" or
// "portable", the widest the CPU (and, for AMX, Linux) allows, capped by the environment
// variable ORDO_CPU. Throws ordo::Error naming ORDO_CPU when it holds an unknown value.
ORDO_API std::string cpu_kernels();

// c [m, n] = a [m, k] b^T, with b given as [n, k] (row-major, a weight's [out, in]): the
// product every linear layer runs, through BLAS split over ordo's threads. For programs
// that measure the rate ordo reaches on a machine (`ordo bench`'s sgemm probe). Throws
// ordo::Error for sizes below 1 or a span shorter than its shape.
ORDO_API void matmul_nt(std::span<const float> a, std::span<const float> b, std::span<float> c, int m, int n, int k);

}  // namespace ordo
