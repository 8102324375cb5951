// ordo serve's request bodies: JSON in, checked structs out. Every field is checked for
// type and range here, before a request reaches a model, and a bad one is a BadRequest
// naming the field as the client spelled it ("beam_size", "prompt[2]"). Unknown fields
// are ignored, as OpenAI's and LibreTranslate's servers do (clients send extras such as
// "user"), except those that ask for something ordo does not do ("n": 2, "echo": true).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <ordo/options.hpp>

namespace ordo::tools::serve {

// A request the server refuses before running it: HTTP 400, the field and what is wrong.
class BadRequest : public std::runtime_error {
 public:
  BadRequest(std::string field, const std::string& problem)
      : std::runtime_error(field.empty() ? problem : field + ": " + problem), field_(std::move(field)) {}
  const std::string& field() const noexcept { return field_; }

 private:
  std::string field_;
};

// The body as a JSON object. Throws BadRequest("body", ...) for malformed JSON or
// anything but an object.
nlohmann::json parse_object(const std::string& body);

// POST /v1/translate.
struct TranslateRequest {
  std::string model;               // "" : the server's default model
  std::vector<std::string> texts;  // "text": a string is one text
  DecodingOptions decoding;        // beam_size, num_hypotheses, max_length, sampling, temperature, top_k, top_p, seed
  DecodingChoices chosen;          // the fields the body gave; the model's generation defaults fill the others
  bool hypotheses = false;         // num_hypotheses > 1: every hypothesis is returned
  // A multilingual model's codes (NLLB's "eng_Latn"); ignored by a model that translates one pair.
  std::string source_lang, target_lang;
};
TranslateRequest parse_translate(const nlohmann::json& body);

// POST /v1/completions (OpenAI's completions API).
struct CompletionRequest {
  std::string model;
  std::vector<std::string> prompts;  // "prompt": a string is one prompt
  int max_tokens = 16;               // OpenAI's default; the server bounds it by the model
  DecodingOptions decoding;          // temperature 0: greedy; else sampling with temperature, top_p, seed
  std::vector<std::string> stop;     // up to 4 sequences that end a completion (not included)
  bool stream = false;
  bool include_usage = false;        // "stream_options": {"include_usage": true}: usage in a last event
  bool logprobs = false;             // "logprobs": 0 (the chosen tokens' log-probabilities)
};
CompletionRequest parse_completion(const nlohmann::json& body);

// POST /translate (LibreTranslate's API), from JSON or a form.
struct LibreTranslateRequest {
  std::vector<std::string> texts;  // "q"
  bool list = false;               // "q" was a list: so is "translatedText"
  std::string source, target, format = "text";
  std::string api_key;             // LibreTranslate's clients send their key here
};
LibreTranslateRequest parse_libretranslate(const nlohmann::json& body);

// The JSON name of a DecodingOptions field as /v1/translate spells it ("n_best" ->
// "num_hypotheses"), for OptionError messages.
std::string translate_field(const std::string& option_field);
// The same for /v1/completions ("max_length" -> "max_tokens").
std::string completion_field(const std::string& option_field);

}  // namespace ordo::tools::serve
