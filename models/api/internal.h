// What the public classes' implementations share: what each one holds behind its
// opaque Impl, and the checks and helpers more than one of them needs. Not installed.
#pragma once

#include <memory>
#include <string>
#include <vector>

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

// Every head's attention while the decoder reads `decoder_input` (after encoding
// `source`, unless the model is decoder-only), teacher-forced. Labels are the pieces.
Attention record_attention(const LoadedModel& model, const std::vector<int>& source,
                           const std::vector<int>& decoder_input);

}  // namespace detail

}  // namespace ordo
