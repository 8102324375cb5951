// libFuzzer target: ordo serve's request bodies (tools/cli/serve/requests.h). One input
// is the body of a POST, read as each endpoint reads it: /v1/translate, /v1/completions
// and LibreTranslate's /translate (its JSON form; the form encoding is cpp-httplib's).
// A body is accepted or refused with BadRequest, which the server answers 400 naming the
// field; any other exception would be a 500 "internal error" and is a finding, as is a
// request accepted with what the routes rely on broken: at least one text, options that
// validate, at most 4 non-empty stop sequences, "text" as the only LibreTranslate format.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>
#include <ordo/error.hpp>

#include "tests/fuzz/fuzz_support.h"
#include "tools/cli/serve/requests.h"

namespace {

namespace serve = ordo::tools::serve;

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "accepted request breaks a rule: %s\n", what);
  __builtin_trap();
}

// Runs `parse`; a BadRequest is a normal refusal, but it must say what is wrong.
template <class Parse>
void accepted_or_refused(Parse&& parse) {
  try {
    parse();
  } catch (const serve::BadRequest& e) {
    if (std::string(e.what()).empty()) finding("a refusal without a message");
  }
}

void check_decoding(const ordo::DecodingOptions& decoding) {
  try {
    decoding.validate();
  } catch (const ordo::OptionError&) {
    finding("decoding options that do not validate");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  nlohmann::json body;
  try {
    body = serve::parse_object(std::string(ordo::fuzz::as_text(data, size)));
  } catch (const serve::BadRequest&) {
    return 0;
  }
  accepted_or_refused([&] {
    const serve::TranslateRequest r = serve::parse_translate(body);
    if (r.texts.empty()) finding("/v1/translate without a text");
    check_decoding(r.decoding);
    if (r.hypotheses != (r.decoding.n_best > 1)) finding("/v1/translate hypotheses flag");
  });
  accepted_or_refused([&] {
    const serve::CompletionRequest r = serve::parse_completion(body);
    if (r.prompts.empty()) finding("/v1/completions without a prompt");
    check_decoding(r.decoding);
    if (r.max_tokens < 1 || r.decoding.max_length != r.max_tokens) finding("/v1/completions max_tokens");
    if (r.stop.size() > 4) finding("/v1/completions with more than 4 stop sequences");
    for (const std::string& stop : r.stop)
      if (stop.empty()) finding("/v1/completions with an empty stop sequence");
  });
  accepted_or_refused([&] {
    const serve::LibreTranslateRequest r = serve::parse_libretranslate(body);
    if (r.texts.empty()) finding("/translate without a text");
    if (r.format != "text") finding("/translate format other than text");
  });
  return 0;
}
