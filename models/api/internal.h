// What the public classes' implementations share: what each one holds behind its
// opaque Impl, and the checks and helpers more than one of them needs. Not installed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/search.h"
#include "engine/workspace_pool.h"
#include "models/loaded_model.h"
#include "ordo/ordo.hpp"

namespace ordo {

struct Model::Impl {
  std::shared_ptr<const LoadedModel> model;
};

struct Translator::Impl {
  Model model;
  TranslatorOptions options;
  // Decoding buffers, borrowed by one call at a time; copies of a Translator share them.
  std::shared_ptr<WorkspacePool> workspaces = std::make_shared<WorkspacePool>();
};

struct Generator::Impl {
  Model model;
  GeneratorOptions options;
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

// Throws OptionError("max_input_tokens") unless the value is 0 or at least 2; the
// second form also when it is more than `model_limit`, the tokens the model reads per
// `what` ("source", "prompt").
void check_max_input_tokens(Index max_input_tokens);
void check_max_input_tokens(Index max_input_tokens, Index model_limit, const std::string& what);

// Decodes every request still open (no error, no hypotheses yet: a failed or blank one is
// passed through), request i sampling from stream first_index + i, and fills in each
// hypothesis's text. The decoder reads request.source_ids, then prefix(request);
// text(request, ids) spells a hypothesis. An id the tokenizer cannot spell (a model
// vocabulary larger than its tokenizer's) fails that request alone.
template <class Request, class Prefix, class Text>
std::vector<Request> decode_open(const LoadedModel& model, const DecodingOptions& options, int batch_size,
                                 WorkspacePool& workspaces, std::vector<Request> requests, std::uint64_t first_index,
                                 const Prefix& prefix, const Text& text) {
  std::vector<std::size_t> open;
  std::vector<DecodeRequest> decode;
  std::vector<std::uint64_t> streams;
  for (std::size_t i = 0; i < requests.size(); ++i)
    if (requests[i].ok() && requests[i].hypotheses.empty()) {
      open.push_back(i);
      decode.push_back({requests[i].source_ids, prefix(requests[i])});
      streams.push_back(first_index + i);
    }
  if (decode.empty()) return requests;
  WorkspacePool::Lease workspace = workspaces.borrow();
  std::vector<DecodeResult> decoded = decode_many(model.transformer(), decode, options, batch_size, streams, *workspace);
  for (std::size_t k = 0; k < open.size(); ++k) {
    Request& r = requests[open[k]];
    DecodeResult& d = decoded[k];
    if (!d.ok()) {
      r.error = std::move(d.error);
      continue;
    }
    try {
      for (Hypothesis& h : d.hypotheses)
        if (model.has_tokenizer()) h.text = text(r, h.ids);
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
