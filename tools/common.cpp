#include "tools/common.h"

#include <cstdlib>
#include <iostream>
#include <sstream>

#include "engine/blas.h"
#include "engine/error.h"
#include "engine/transformer.h"

namespace ordo::tools {

namespace {

std::string default_model_dir() {
  if (const char* from_env = std::getenv("ORDO_MODEL"); from_env != nullptr && *from_env != '\0')
    return from_env;
  return ORDO_DEFAULT_MODEL;
}

}  // namespace

void add_common_options(CLI::App& command, CommonOptions& options) {
  options.model_dir = default_model_dir();
  command.add_option("-m,--model", options.model_dir,
                     "Model directory: config.json, model.safetensors, tokenizer.model "
                     "($ORDO_MODEL overrides the default)")
      ->capture_default_str();
  command.add_option("-t,--threads", options.threads, "BLAS threads (0: OpenBLAS's default)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  command.add_flag("--json", options.json, "Machine-readable output: one JSON object per line");
}

void add_max_length_option(CLI::App& command, Index& max_length) {
  command.add_option("--max-length", max_length,
                     "Most target tokens, eos included (0: 2 x source length + 10)")
      ->check(CLI::Range(Index{0}, kMaxSequenceLength))
      ->capture_default_str();
}

std::shared_ptr<const Model> load_model(const CommonOptions& options,
                                        const Model::WarningHandler& warn) {
  blas::set_num_threads(options.threads);
  return Model::load(options.model_dir, warn);
}

bool uses_builtin_model(const CLI::App& command, const CommonOptions& options) {
  return !given(command, "--model") && options.model_dir == ORDO_DEFAULT_MODEL;
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

void print_json_line(const nlohmann::json& object) {
  // Invalid UTF-8 in user text is replaced rather than aborting the whole stream.
  std::cout << object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
}

}  // namespace ordo::tools
