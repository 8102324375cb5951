// What the public classes' implementations share: what each one holds behind its
// opaque Impl, and the checks and helpers more than one of them needs. Not installed.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <span>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/search.h"
#include "engine/workspace_pool.h"
#include "models/loaded_model.h"
#include "models/quantization_config.h"
#include "ordo/ordo.hpp"

namespace ordo {

namespace detail {
// The format LoadOptions asks the weight matrices to run in; nullopt: as stored. Throws
// OptionError (field "group_size") for a group size the type cannot take.
std::optional<Quantization> compute_type_of(const LoadOptions& options);
}  // namespace detail

struct Model::Impl {
  std::shared_ptr<const LoadedModel> model;
};

struct Translator::Impl {
  Model model;
  TranslatorOptions options;  // decoding.forced_bos_token_id is target_lang's token when one is given
  // The tokens of options.source_lang and target_lang (a model with language codes).
  std::optional<int> source_language;
  std::optional<int> target_language;
  // Decoding buffers, borrowed by one call at a time; copies of a Translator share them.
  std::shared_ptr<WorkspacePool> workspaces = std::make_shared<WorkspacePool>();
};

struct Generator::Impl {
  Model model;
  GeneratorOptions options;  // decoding.forced_bos_token_id is -1 when target_lang is given
  // The tokens of options.source_lang and target_lang (a model with language codes).
  std::optional<int> source_language;
  std::optional<int> target_language;
  std::shared_ptr<WorkspacePool> workspaces = std::make_shared<WorkspacePool>();
};

namespace detail {

// The loaded model behind a public handle, and a handle on a loaded model: for the
// implementations here, and for the engine-level tools and tests that read its config,
// weights or transformer.
struct ModelAccess {
  static const std::shared_ptr<const LoadedModel>& loaded(const Model& model) { return model.impl_->model; }
  static Model wrap(std::shared_ptr<const LoadedModel> model) {
    return Model(std::make_shared<const Model::Impl>(Model::Impl{std::move(model)}));
  }
};
inline const LoadedModel& loaded(const Model& model) { return *ModelAccess::loaded(model); }
inline Model public_model(std::shared_ptr<const LoadedModel> model) { return ModelAccess::wrap(std::move(model)); }

// The token of a language code of `model`; throws OptionError(field) when the model
// has no language codes or not this one (listing them).
int language_id(const LoadedModel& model, std::string_view code, const std::string& field);

// A model with language codes reads a text only with its source's code and writes only
// into a target language: throws OptionError naming the option (`source`: "source_lang",
// `target`: "target_lang") whose token is missing. A model without codes needs none.
void require_languages(const LoadedModel& model, const std::optional<int>& source, const std::optional<int>& target,
                       bool needs_source, bool needs_target);

// Throws OptionError("max_input_tokens") unless the value is 0 or at least 2; the
// second form also when it is more than `model_limit`, the tokens the model reads per
// `what` ("source", "prompt").
void check_max_input_tokens(Index max_input_tokens);
void check_max_input_tokens(Index max_input_tokens, Index model_limit, const std::string& what);

// What decoding a request needs to know of its kind: the ids the decoder reads before it
// predicts (a generation's prompt; nothing for a translation, whose decoder_start the
// engine puts), and a hypothesis's text (a translation's target; the text a
// continuation adds to its prompt). Defined beside each class (translator.cpp,
// generator.cpp).
std::vector<int> forced_prefix(const Translation& request);
std::vector<int> forced_prefix(const Generation& request);
std::string hypothesis_text(const LoadedModel& model, const Translation& request, std::span<const int> ids);
std::string hypothesis_text(const LoadedModel& model, const Generation& request, std::span<const int> ids);

// Decodes every request still open (no error, no hypotheses yet: a failed or blank one is
// passed through), request i sampling from stream first_index + i, and fills in each
// hypothesis's text. An id the tokenizer cannot spell (a model vocabulary larger than
// its tokenizer's) fails that request alone. `Impl` is a Translator's or a Generator's.
template <class Impl, class Request>
std::vector<Request> decode_open(const Impl& impl, std::vector<Request> requests, std::uint64_t first_index) {
  const LoadedModel& model = loaded(impl.model);
  std::vector<std::size_t> open;
  std::vector<DecodeRequest> decode;
  std::vector<std::uint64_t> streams;
  for (std::size_t i = 0; i < requests.size(); ++i)
    if (requests[i].ok() && requests[i].hypotheses.empty()) {
      open.push_back(i);
      decode.push_back({requests[i].source_ids, forced_prefix(requests[i])});
      streams.push_back(first_index + i);
    }
  if (decode.empty()) return requests;
  WorkspacePool::Lease workspace = impl.workspaces->borrow();
  std::vector<DecodeResult> decoded = decode_many(model.transformer(), decode, impl.options.decoding,
                                                  impl.options.batch_size, streams, *workspace, impl.options.interrupt);
  for (std::size_t k = 0; k < open.size(); ++k) {
    Request& r = requests[open[k]];
    DecodeResult& d = decoded[k];
    if (!d.ok()) {
      r.error = std::move(d.error);
      continue;
    }
    try {
      for (Hypothesis& h : d.hypotheses)
        if (model.has_tokenizer()) h.text = hypothesis_text(model, r, h.ids);
      r.hypotheses = std::move(d.hypotheses);
    } catch (const Error& e) {
      r.hypotheses.clear();
      r.error = e.what();
    }
  }
  return requests;
}

// Every head's attention while the decoder reads `decoder_input` (after encoding
// `source`, unless the model is decoder-only), teacher-forced. Labels are the pieces.
Attention record_attention(const LoadedModel& model, const std::vector<int>& source,
                           const std::vector<int>& decoder_input);

}  // namespace detail

}  // namespace ordo
