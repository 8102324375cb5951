#include "tools/cli/serve/requests.h"

#include <cstdint>
#include <limits>

#include <ordo/error.hpp>

namespace ordo::tools::serve {

namespace {

using nlohmann::json;

// A field that is present and not null (OpenAI's clients send null for "not given").
const json* field(const json& body, const std::string& name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::string type_name(const json& value) { return value.type_name(); }

int integer(const json& value, const std::string& name, std::int64_t low, std::int64_t high) {
  if (!value.is_number_integer())
    throw BadRequest(name, "must be a whole number, got " + type_name(value) + " " + value.dump());
  const bool huge = value.is_number_unsigned() &&
                    value.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max());
  const std::int64_t n = huge ? std::numeric_limits<std::int64_t>::max() : value.get<std::int64_t>();
  if (n < low || n > high)
    throw BadRequest(name, "must be in [" + std::to_string(low) + ", " + std::to_string(high) + "], got " + value.dump());
  return static_cast<int>(n);
}

double number(const json& value, const std::string& name) {
  if (!value.is_number()) throw BadRequest(name, "must be a number, got " + type_name(value) + " " + value.dump());
  return value.get<double>();
}

bool boolean(const json& value, const std::string& name) {
  if (!value.is_boolean()) throw BadRequest(name, "must be true or false, got " + type_name(value) + " " + value.dump());
  return value.get<bool>();
}

std::string string(const json& value, const std::string& name) {
  if (!value.is_string()) throw BadRequest(name, "must be a string, got " + type_name(value));
  return value.get<std::string>();
}

// A string or a non-empty list of strings; `list` says which it was.
std::vector<std::string> texts(const json& body, const std::string& name, bool& list) {
  const json* value = field(body, name);
  if (!value) throw BadRequest(name, "is required (a string or a list of strings)");
  list = value->is_array();
  if (value->is_string()) return {value->get<std::string>()};
  if (!list) throw BadRequest(name, "must be a string or a list of strings, got " + type_name(*value));
  if (value->empty()) throw BadRequest(name, "is an empty list: give at least one string");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < value->size(); ++i)
    out.push_back(string((*value)[i], name + "[" + std::to_string(i) + "]"));
  return out;
}

std::string optional_string(const json& body, const std::string& name) {
  const json* value = field(body, name);
  return value ? string(*value, name) : std::string();
}

std::uint64_t seed(const json& value) {
  if (!value.is_number_integer() || (!value.is_number_unsigned() && value.get<std::int64_t>() < 0))
    throw BadRequest("seed", "must be a whole number >= 0, got " + value.dump());
  return value.get<std::uint64_t>();
}

// Runs DecodingOptions::validate with the field named as the request spells it.
void validate(const DecodingOptions& decoding, std::string (*name)(const std::string&)) {
  try {
    decoding.validate();
  } catch (const OptionError& e) {
    throw BadRequest(name(e.field()), e.problem());
  }
}

}  // namespace

json parse_object(const std::string& body) {
  json parsed;
  try {
    parsed = json::parse(body);
  } catch (const json::parse_error& e) {
    throw BadRequest("body", std::string("is not valid JSON (") + e.what() + ")");
  } catch (const json::exception& e) {
    // Valid JSON that no value here can hold: a number beyond a double (1e400) is
    // out_of_range, not a parse_error (found writing the requests fuzz target).
    throw BadRequest("body", std::string("holds a value out of range (") + e.what() + ")");
  }
  if (!parsed.is_object()) throw BadRequest("body", "must be a JSON object, got " + type_name(parsed));
  return parsed;
}

std::string translate_field(const std::string& option_field) {
  if (option_field == "n_best") return "num_hypotheses";
  if (option_field == "sample") return "sampling";
  return option_field;
}

std::string completion_field(const std::string& option_field) {
  if (option_field == "max_length") return "max_tokens";
  return option_field;
}

TranslateRequest parse_translate(const json& body) {
  TranslateRequest request;
  bool list = false;
  request.texts = texts(body, "text", list);
  request.model = optional_string(body, "model");
  request.source_lang = optional_string(body, "source_lang");
  request.target_lang = optional_string(body, "target_lang");
  DecodingOptions& d = request.decoding;
  constexpr std::int64_t kInt = std::numeric_limits<int>::max();
  if (const json* v = field(body, "beam_size")) d.beam_size = integer(*v, "beam_size", 1, kInt);
  request.chosen.beam_size = field(body, "beam_size") != nullptr;
  request.chosen.max_length = field(body, "max_length") != nullptr;
  if (const json* v = field(body, "num_hypotheses")) d.n_best = integer(*v, "num_hypotheses", 1, kInt);
  if (const json* v = field(body, "max_length")) d.max_length = integer(*v, "max_length", 0, kInt);
  if (const json* v = field(body, "sampling")) d.sample = boolean(*v, "sampling");
  if (const json* v = field(body, "temperature")) d.temperature = number(*v, "temperature");
  if (const json* v = field(body, "top_k")) d.top_k = integer(*v, "top_k", 0, kInt);
  if (const json* v = field(body, "top_p")) d.top_p = number(*v, "top_p");
  if (const json* v = field(body, "seed")) d.seed = seed(*v);
  request.hypotheses = d.n_best > 1;
  validate(d, translate_field);
  return request;
}

CompletionRequest parse_completion(const json& body) {
  CompletionRequest request;
  bool list = false;
  request.prompts = texts(body, "prompt", list);
  request.model = optional_string(body, "model");
  constexpr std::int64_t kInt = std::numeric_limits<int>::max();
  if (const json* v = field(body, "max_tokens")) request.max_tokens = integer(*v, "max_tokens", 1, kInt);
  DecodingOptions& d = request.decoding;
  // OpenAI samples at temperature 1 unless told otherwise; temperature 0 is greedy.
  double temperature = 1.0;
  if (const json* v = field(body, "temperature")) temperature = number(*v, "temperature");
  if (temperature < 0 || temperature > 2)
    throw BadRequest("temperature", "must be in [0, 2] (0: greedy), got " + std::to_string(temperature));
  d.sample = temperature > 0;
  if (d.sample) d.temperature = temperature;
  if (const json* v = field(body, "top_p")) d.top_p = number(*v, "top_p");
  if (const json* v = field(body, "seed")) d.seed = seed(*v);
  if (const json* v = field(body, "stop")) {
    if (v->is_string()) {
      request.stop = {v->get<std::string>()};
    } else if (v->is_array()) {
      if (v->size() > 4) throw BadRequest("stop", "at most 4 sequences, got " + std::to_string(v->size()));
      for (std::size_t i = 0; i < v->size(); ++i)
        request.stop.push_back(string((*v)[i], "stop[" + std::to_string(i) + "]"));
    } else {
      throw BadRequest("stop", "must be a string or a list of strings, got " + type_name(*v));
    }
    for (std::size_t i = 0; i < request.stop.size(); ++i)
      if (request.stop[i].empty()) throw BadRequest("stop[" + std::to_string(i) + "]", "is empty: a stop sequence needs text");
  }
  if (const json* v = field(body, "stream")) request.stream = boolean(*v, "stream");
  // OpenAI's clients send it to have usage counted when streaming (the last event, its
  // choices empty); OpenAI refuses it without "stream": true, and so does ordo.
  if (const json* v = field(body, "stream_options")) {
    if (!v->is_object()) throw BadRequest("stream_options", "must be an object, got " + type_name(*v));
    if (!request.stream) throw BadRequest("stream_options", "is only allowed with \"stream\": true");
    if (const json* usage = field(*v, "include_usage"))
      request.include_usage = boolean(*usage, "stream_options.include_usage");
  }
  if (const json* v = field(body, "logprobs")) {
    if (integer(*v, "logprobs", 0, 5) > 0)
      throw BadRequest("logprobs", "ordo returns the chosen tokens' log-probabilities, not the top alternatives: give 0");
    request.logprobs = true;
  }
  if (const json* v = field(body, "n"); v && integer(*v, "n", 1, 1) != 1) throw BadRequest("n", "must be 1");
  if (const json* v = field(body, "best_of"); v && integer(*v, "best_of", 1, 1) != 1)
    throw BadRequest("best_of", "must be 1");
  if (const json* v = field(body, "echo"); v && boolean(*v, "echo"))
    throw BadRequest("echo", "is not supported: the completion never repeats the prompt");
  if (const json* v = field(body, "suffix"); v && !string(*v, "suffix").empty())
    throw BadRequest("suffix", "is not supported (no insertion): leave it out");
  d.max_length = request.max_tokens;
  validate(d, completion_field);
  return request;
}

LibreTranslateRequest parse_libretranslate(const json& body) {
  LibreTranslateRequest request;
  request.texts = texts(body, "q", request.list);
  request.source = optional_string(body, "source");
  request.target = optional_string(body, "target");
  if (const json* v = field(body, "format")) request.format = string(*v, "format");
  if (request.format != "text")
    throw BadRequest("format", "only \"text\" is supported, got \"" + request.format + "\"");
  request.api_key = optional_string(body, "api_key");
  return request;
}

}  // namespace ordo::tools::serve
