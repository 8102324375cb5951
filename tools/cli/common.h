// What every ordo command shares: the --model/--threads/--json options, loading the
// model they name, parsing id lists, and printing one JSON object per line. The commands
// are written against the public API (<ordo/ordo.hpp>), as any program using ordo is.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <ordo/ordo.hpp>
#include <ordo/text.hpp>

namespace ordo::tools {

struct CommonOptions {
  std::string model_dir;  // set by add_common_options to the default model
  bool default_found = true;  // false: no default model was found (model_dir then empty)
  int threads = 0;        // 0: OpenBLAS decides
  bool json = false;
  std::string rope_scaling;  // --rope-scaling TYPE:FACTOR; empty: the config's
  std::string compute_type = "auto";  // --compute-type
  int group_size = -1;                 // --group-size; -1: the compute type's default
};

// --model's lookup: a value that is not a directory but names a shipped model
// ("german-llama", "weights/german-llama") becomes that model's directory; anything
// else is left for load_model to report (find_model_directory lists the names).
CLI::Validator shipped_model_transform();

// Adds --model, --threads, --json, --rope-scaling, --compute-type and --group-size to a command.
void add_common_options(CLI::App& command, CommonOptions& options);

// Adds --rope-scaling TYPE:FACTOR, bound to `value` (checked as it is parsed: a bad one is
// a usage error naming the flag).
void add_rope_scaling_option(CLI::App& command, std::string& value);

// The largest value --group-size parses (ordo quantize's and the run commands'): a bound
// on the number only; Model::load and quantize_model refuse what no model can take.
inline constexpr int kMaxGroupSizeFlag = 1 << 24;

// Adds --compute-type auto|f32|f16|bf16|int8|int4 and --group-size G, bound to
// `compute_type` and `group_size`.
void add_compute_type_options(CLI::App& command, std::string& compute_type, int& group_size);

// LoadOptions with --rope-scaling's value (none when it is empty), --compute-type's and
// --group-size's (-1: the type's default).
LoadOptions load_options(const std::string& rope_scaling, const std::string& compute_type, int group_size);

// Adds the decoding flags (--beam, --n-best, --length-penalty, --max-length,
// --min-length, --no-repeat-ngram-size, --repetition-penalty, --sample, --temperature,
// --top-k, --top-p, --seed) and --batch-size, each bound to its field. `unit` names
// what is decoded in the help ("sentence", "prompt").
void add_decoding_options(CLI::App& command, DecodingOptions& decoding, int& batch_size,
                          const std::string& unit = "sentence");

// The decoding flags given on the command line, recorded when a command's callback
// runs: each field whose flag was not given takes the model's generation default
// (Model::with_generation_defaults); bad_words_ids and forced_bos_token_id, which have
// no flag, always do.
DecodingChoices given_decoding_flags(const CLI::App& command);

// Adds --max-input-tokens and --truncate (group "Input"), bound to an options struct's
// max_input_tokens and truncate. `limited` says what the limit counts ("a source, eos
// included"); `cut` what --truncate keeps ("its first tokens").
void add_input_options(CLI::App& command, int& max_input_tokens, bool& truncate, const std::string& limited,
                       const std::string& cut);

// Adds --source-lang CODE and --target-lang CODE (group "Languages"), bound to a
// TranslatorOptions' source_lang and target_lang: the language codes of a multilingual
// model (NLLB-200's eng_Latn, ...). Checked against the model once it is loaded: a
// missing or unknown code (or one given to a model without codes) is a usage error
// listing the model's codes.
void add_language_options(CLI::App& command, std::string& source_lang, std::string& target_lang);

// The flag of an options field ("beam_size" -> "--beam"), or the field itself when no
// command registered one.
std::string flag_of(const std::string& field);

// Runs an options struct's validate(), with a bad field reported as a usage error
// (exit 2) that names its flag: "--beam: must be at least 1 (1: greedy), got 0".
template <class Options>
void validate_flags(const Options& options);
void rethrow_as_usage_error(const OptionError& error);

template <class Options>
void validate_flags(const Options& options) {
  try {
    options.validate();
  } catch (const OptionError& e) {
    rethrow_as_usage_error(e);
  }
}

// Thrown when the reader of stdout went away (`ordo translate < big | head -1`). A Unix
// tool is then killed by SIGPIPE without a word; when SIGPIPE is ignored (some parents
// do that) ordo ends the same way: exit 1, no message (main() catches it).
class OutputClosed : public Error {
 public:
  OutputClosed() : Error("stdout", "the reader closed the pipe") {}
};

// Throws OutputClosed when `name` is stdout and its reader is gone, else Error: "writing
// the output failed".
[[noreturn]] void throw_write_failure(const std::string& name);

// A usage error when --output `output` is the --input file `input` (the same file by
// any path: same device and inode), which opening the output would empty before a line
// of it is read. Call before opening either.
void check_output_is_not_input(const std::string& input, const std::string& output);

// Opens --output FILE, or stdout when `path` is empty; throws Error naming the file.
// `check_written` throws (throw_write_failure) when an earlier write to it failed: a
// full disk, a closed pipe.
class Output {
 public:
  explicit Output(const std::string& path);
  std::ostream& stream() { return *stream_; }
  void check_written();

 private:
  std::string name_;
  std::unique_ptr<std::ofstream> file_;
  std::ostream* stream_;
};

// Loads the model of --model and applies --threads and --rope-scaling (a model it does
// not fit is a usage error naming the flag). `warn` receives load-time warnings
// (tensors the config does not use); empty, they go to stderr; `quiet` silences them.
Model load_model(const CommonOptions& options, const Model::WarningHandler& warn = {});
// The model as stored, for tokenize and detokenize, which read no weights: --compute-type
// and --group-size are checked as every command checks them, then not applied (the
// conversion would cost a load's time and could fail, for output it cannot change).
Model load_model_to_tokenize(const CommonOptions& options, const Model::WarningHandler& warn = {});
void quiet(const std::string& warning);

// True when neither --model nor $ORDO_MODEL chose the model: the built-in default,
// whose sibling directories are the shipped models.
bool uses_builtin_model(const CLI::App& command, const CommonOptions& options);

// A value given on the command line, even an empty one ("--source-ids ''" is an
// empty list, not "read stdin").
bool given(const CLI::App& command, const std::string& option);

// "5 8 2" or "5,8,2" -> {5, 8, 2}. `flag` names the option in errors.
std::vector<int> parse_ids(const std::string& text, const std::string& flag);

std::string join_ids(const std::vector<int>& ids);

// The hypotheses of one result in JSON: with n_best 1 the best one's keys are merged
// into `object`; with more, object["hypotheses"] lists each one's keys with its
// token_logprobs, best first. `keys` gives a hypothesis's own keys.
void add_hypotheses(nlohmann::json& object, const std::vector<Hypothesis>& hypotheses, int n_best,
                    const std::function<nlohmann::json(const Hypothesis&)>& keys);

// Marian's n-best text form, one line per hypothesis: "index ||| text ||| score", the
// score normalized when a length penalty applies.
void print_n_best(std::ostream& out, std::size_t index, const std::vector<Hypothesis>& hypotheses,
                  const std::function<std::string(const Hypothesis&)>& shown,
                  const DecodingOptions& decoding);

// One JSON object, one line, flushed: safe to stream into another program.
void print_json_line(const nlohmann::json& object, std::ostream& out = std::cout);

}  // namespace ordo::tools
