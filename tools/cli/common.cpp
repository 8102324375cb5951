#include "tools/cli/common.h"

#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <iomanip>

#include <cstdlib>
#include <map>
#include <iostream>
#include <sstream>


namespace ordo::tools {

namespace {

// The default for --model: $ORDO_MODEL, else the shipped model found from where ordo
// runs. Empty when there is none, so that --help and --model still work;
// load_model then reports where it looked.
std::string default_model_dir(bool& found) {
  try {
    found = true;
    return default_model_directory().string();
  } catch (const Error&) {
    found = false;
    return "";
  }
}

}  // namespace

CLI::Validator shipped_model_transform() {
  return CLI::Validator(
      [](std::string& given) {
        std::error_code error;
        if (!given.empty() && !std::filesystem::is_directory(given, error))
          if (std::optional<std::filesystem::path> shipped = shipped_model(given)) given = shipped->string();
        return std::string();
      },
      "DIR or NAME");
}

void add_common_options(CLI::App& command, CommonOptions& options) {
  options.model_dir = default_model_dir(options.default_found);
  command.add_option("-m,--model", options.model_dir,
                     "Model directory: config.json, model.safetensors, tokenizer.model; or a shipped "
                     "model's name (ordo models lists them) ($ORDO_MODEL overrides the default)")
      ->capture_default_str()
      ->transform(shipped_model_transform())
      ->type_name("DIR");
  // Not a number, or not a whole one, is caught for every flag by require_plain_numbers.
  command.add_option("-t,--threads", options.threads, "Threads ordo computes with (0: every core)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  command.add_flag("--json", options.json, "Machine-readable output: one JSON object per line");
  add_rope_scaling_option(command, options.rope_scaling);
  add_compute_type_options(command, options.compute_type, options.group_size);
}

namespace {

// Field name (as DecodingOptions/TranslatorOptions spell it) -> its flag, filled by
// add_translator_options as it adds each flag: the one place a flag is named.
std::map<std::string, std::string>& flag_of_field() {
  static std::map<std::string, std::string> flags;
  return flags;
}

}  // namespace

void add_rope_scaling_option(CLI::App& command, std::string& value) {
  flag_of_field()["rope_scaling"] = "--rope-scaling";
  command
      .add_option("--rope-scaling", value,
                  "Run a RoPE model with this scaling instead of its config's rope_scaling: TYPE:FACTOR, "
                  "TYPE linear, dynamic, yarn or llama3 (e.g. yarn:4), or none for plain RoPE")
      ->type_name("TYPE:FACTOR")
      ->check(CLI::Validator(
          [](std::string& text) {
            try {
              RopeScalingOverride::parse(text);
            } catch (const OptionError& e) {
              return e.problem();
            }
            return std::string();
          },
          "TYPE:FACTOR"));
}

void add_compute_type_options(CLI::App& command, std::string& compute_type, int& group_size) {
  flag_of_field()["compute_type"] = "--compute-type";
  flag_of_field()["group_size"] = "--group-size";
  command
      .add_option("--compute-type", compute_type,
                  "What the weight matrices run as: auto (as the files store them), f32, f16, bf16, int8 or int4 "
                  "(converted at load, exactly as ordo quantize --type writes them)")
      ->type_name("TYPE")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "f32", "f16", "bf16", "int8", "int4"}));
  // Checked against the type by Model::load, which names the flag (flag_of_field).
  command
      .add_option("--group-size", group_size,
                  "With --compute-type int8 or int4: weights per scale, as ordo quantize --group-size takes it "
                  "(int8: 0, a scale per row, the default, or a size dividing the rows; int4: a multiple of 32, "
                  "default 32)")
      ->type_name("G")
      ->check(CLI::Range(0, kMaxGroupSizeFlag));
}

LoadOptions load_options(const std::string& rope_scaling, const std::string& compute_type, int group_size) {
  LoadOptions options;
  if (!rope_scaling.empty()) options.rope_scaling = RopeScalingOverride::parse(rope_scaling);
  options.compute_type = parse_compute_type(compute_type);
  options.group_size = group_size;
  return options;
}

void add_decoding_options(CLI::App& command, DecodingOptions& d, int& batch_size, const std::string& unit) {
  const auto add = [&](const char* flag, const char* field, auto& value, const std::string& help, const char* group) {
    flag_of_field()[field] = flag;
    command.add_option(flag, value, help)->capture_default_str()->group(group);
  };
  const char* search = "Search";
  const char* sampling = "Sampling (--sample)";
  const char* output = "Output constraints";
  const std::string per_beam = "Beam size: hypotheses kept per " + unit + " (1: greedy)";
  const std::string together = "How many " + unit + "s are decoded together; stdin is read and answered a batch at a time";
  const std::string seeded = "Sampling seed: same seed, same output (" + unit + " i draws from (seed, i))";
  add("--beam", "beam_size", d.beam_size, per_beam, search);
  add("--n-best", "n_best", d.n_best, "Print the N best hypotheses, each with its score (N <= --beam)", search);
  add("--length-penalty", "length_penalty", d.length_penalty,
      "Rank hypotheses by score / length^A, length counting eos (0: plain sum)", search);
  add("--batch-size", "batch_size", batch_size, together, search);
  flag_of_field()["sample"] = "--sample";
  command.add_flag("--sample", d.sample, "Draw tokens from the model's distribution instead of searching")
      ->group(sampling);
  add("--temperature", "temperature", d.temperature, "Sample from softmax(logits / T), T > 0", sampling);
  add("--top-k", "top_k", d.top_k, "Sample among the K most likely tokens (0: all)", sampling);
  add("--top-p", "top_p", d.top_p, "Sample among the likeliest tokens holding P of the mass, 0 < P <= 1", sampling);
  add("--seed", "seed", d.seed, seeded, sampling);
  // Without --sample a search ignores these: say so rather than decode greedily anyway.
  // (--seed may stay: it names which draws, not how, and a script may pass it in any mode.)
  command.parse_complete_callback([&command] {
    if (given(command, "--sample")) return;
    for (const char* flag : {"--temperature", "--top-k", "--top-p"})
      if (given(command, flag))
        throw CLI::ValidationError(flag, "shapes only sampling, which is off: add --sample (or leave " +
                                             std::string(flag) + " out)");
  });
  add("--max-length", "max_length", d.max_length,
      "Most generated tokens, eos included, a prompt excluded (0: 2 x source length + 10 when translating, " +
          std::to_string(kAutomaticGenerationLength) + " when continuing a prompt)",
      output);
  add("--min-length", "min_length", d.min_length, "Fewest generated tokens, eos included (eos is banned before)",
      output);
  add("--no-repeat-ngram-size", "no_repeat_ngram_size", d.no_repeat_ngram_size,
      "Never repeat an n-gram of this size in the output (0: off)", output);
  add("--repetition-penalty", "repetition_penalty", d.repetition_penalty,
      "Penalize tokens already in the output: logit / R if positive, x R if negative (1: off)", output);
}

DecodingChoices given_decoding_flags(const CLI::App& command) {
  const auto has = [&](const char* flag) {
    const CLI::Option* option = command.get_option_no_throw(flag);
    return option != nullptr && option->count() > 0;
  };
  DecodingChoices given;
  given.beam_size = has("--beam");
  given.max_length = has("--max-length");
  given.length_penalty = has("--length-penalty");
  given.no_repeat_ngram_size = has("--no-repeat-ngram-size");
  return given;
}

void add_input_options(CLI::App& command, int& max_input_tokens, bool& truncate, const std::string& limited,
                       const std::string& cut) {
  flag_of_field()["max_input_tokens"] = "--max-input-tokens";
  flag_of_field()["truncate"] = "--truncate";
  command
      .add_option("--max-input-tokens", max_input_tokens,
                  "Most tokens of " + limited + "; a longer one is an error for its line (0: the model's limit: "
                  "a learned position table's size, else " + std::to_string(kMaxSequenceLength) + ")")
      ->capture_default_str()
      ->group("Input");
  command
      .add_flag("--truncate", truncate,
                "Beyond --max-input-tokens, keep " + cut + " instead of failing; each cut line is "
                "warned about on stderr and marked \"truncated\": true with --json")
      ->group("Input");
}

void add_language_options(CLI::App& command, std::string& source_lang, std::string& target_lang) {
  flag_of_field()["source_lang"] = "--source-lang";
  flag_of_field()["target_lang"] = "--target-lang";
  command
      .add_option("--source-lang", source_lang,
                  "Language code of the source, for a multilingual model (NLLB-200: eng_Latn, ...; "
                  "ordo inspect lists them); a model of one pair takes none")
      ->group("Languages");
  command
      .add_option("--target-lang", target_lang,
                  "Language code of the target, for a multilingual model (NLLB-200: deu_Latn, ...): "
                  "every translation starts with it")
      ->group("Languages");
}

std::string flag_of(const std::string& field) {
  const auto& flags = flag_of_field();
  const auto flag = flags.find(field);
  return flag != flags.end() ? flag->second : field;
}

void rethrow_as_usage_error(const OptionError& e) { throw CLI::ValidationError(flag_of(e.field()), e.problem()); }

namespace {

// A pipe whose reader has gone polls as an error on the writing end (Linux), however
// long ago the failed write was: errno from that write may be long overwritten.
bool reader_gone(int fd) {
  pollfd poll_fd{fd, POLLOUT, 0};
  return ::poll(&poll_fd, 1, 0) == 1 && (poll_fd.revents & POLLERR) != 0;
}

}  // namespace

void throw_write_failure(const std::string& name) {
  if (name == "stdout" && reader_gone(STDOUT_FILENO)) throw OutputClosed();
  throw Error(name, "writing the output failed", "is the disk full, or the pipe closed?");
}

void check_output_is_not_input(const std::string& input, const std::string& output) {
  struct stat in {}, out {};
  if (input.empty() || output.empty() || ::stat(input.c_str(), &in) != 0 || ::stat(output.c_str(), &out) != 0) return;
  if (in.st_dev == out.st_dev && in.st_ino == out.st_ino)
    throw CLI::ValidationError("--output", output + " is the --input file " + input +
                                               ": writing it would empty it before it is read; write to another file");
}

Output::Output(const std::string& path) : name_(path.empty() ? "stdout" : path), stream_(&std::cout) {
  if (path.empty()) return;
  file_ = std::make_unique<std::ofstream>(path);
  if (!*file_) throw Error(path, "cannot open for writing", "check the directory exists and is writable");
  stream_ = file_.get();
}

void Output::check_written() {
  stream_->flush();
  if (!*stream_) throw_write_failure(name_);
}

Model load_model(const CommonOptions& options, const Model::WarningHandler& warn) {
  set_threads(options.threads);
  // No --model and no default found: the lookup's own error says where it looked (an
  // explicit --model '' is Model::load's "the path is empty").
  if (options.model_dir.empty() && !options.default_found) default_model_directory();
  return Model::load(options.model_dir, load_options(options.rope_scaling, options.compute_type, options.group_size), warn);
}

Model load_model_to_tokenize(const CommonOptions& options, const Model::WarningHandler& warn) {
  load_options(options.rope_scaling, options.compute_type, options.group_size).validate();
  CommonOptions as_stored = options;
  as_stored.compute_type = "auto";
  as_stored.group_size = -1;
  return load_model(as_stored, warn);
}

void quiet(const std::string&) {}

bool uses_builtin_model(const CLI::App& command, const CommonOptions& options) {
  if (given(command, "--model")) return false;
  try {
    return !options.model_dir.empty() && std::filesystem::path(options.model_dir) == builtin_model_directory();
  } catch (const Error&) {
    return false;  // no built-in model: $ORDO_MODEL chose this one
  }
}

bool given(const CLI::App& command, const std::string& option) {
  return command.get_option(option)->count() > 0;
}

std::vector<int> parse_ids(const std::string& text, const std::string& flag) {
  std::string spaced = text;
  for (char& c : spaced)
    if (c == ',') c = ' ';
  std::istringstream stream(spaced);
  std::vector<int> ids;
  std::string word;
  while (stream >> word) {
    std::size_t used = 0;
    long value = -1;
    try {
      value = std::stol(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size() || value < 0 || value > 1'000'000'000)
      throw Error(flag, "'" + word + "' is not a token id", "give non-negative integers, e.g. \"5 8 2\"");
    ids.push_back(static_cast<int>(value));
  }
  if (ids.empty()) throw Error(flag, "no token ids given", "give ids, e.g. \"5 8 2\"");
  return ids;
}

std::string join_ids(const std::vector<int>& ids) {
  std::string text;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) text += ' ';
    text += std::to_string(ids[i]);
  }
  return text;
}

void print_json_line(const nlohmann::json& object, std::ostream& out) {
  // Invalid UTF-8 in user text is replaced rather than aborting the whole stream.
  out << object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
}

void add_hypotheses(nlohmann::json& object, const std::vector<Hypothesis>& hypotheses, int n_best,
                    const std::function<nlohmann::json(const Hypothesis&)>& keys) {
  if (n_best == 1) {
    object.update(keys(hypotheses.front()));
    return;
  }
  nlohmann::json list = nlohmann::json::array();
  for (const Hypothesis& h : hypotheses) {
    nlohmann::json one = keys(h);
    one["token_logprobs"] = h.token_logprobs;
    list.push_back(std::move(one));
  }
  object["hypotheses"] = std::move(list);
}

void print_n_best(std::ostream& out, std::size_t index, const std::vector<Hypothesis>& hypotheses,
                  const std::function<std::string(const Hypothesis&)>& shown,
                  const DecodingOptions& decoding) {
  for (const Hypothesis& h : hypotheses)
    out << index << " ||| " << shown(h) << " ||| " << std::fixed << std::setprecision(4)
        << (decoding.length_penalty != 0.0 ? h.normalized_score : h.score) << std::defaultfloat << '\n';
}

}  // namespace ordo::tools
