// ordo::Model (public): a shared handle on the engine's immutable model.
// The engine's headers before internal.h, which includes the public API (see there).
#include "engine/blas.h"
#include "models/default_model.h"
#include "models/api/internal.h"

namespace ordo::api {

Model::Model(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Model Model::load(const std::filesystem::path& directory, const WarningHandler& on_warning) {
  const ordo::Model::WarningHandler warn = on_warning ? on_warning : ordo::Model::WarningHandler(ordo::Model::print_warning);
  return Model(std::make_shared<const Impl>(Impl{ordo::Model::load(directory, warn)}));
}

Model Model::load_default(const WarningHandler& on_warning) { return load(default_model_directory(), on_warning); }

const std::filesystem::path& Model::directory() const noexcept { return impl_->model->directory(); }

const std::string& Model::model_type() const noexcept { return impl_->model->config().model_type; }

bool Model::is_decoder_only() const noexcept { return impl_->model->transformer().decoder_only(); }

bool Model::has_tokenizer() const noexcept { return impl_->model->has_tokenizer(); }

int Model::max_input_tokens() const noexcept {
  const ordo::Model& model = *impl_->model;
  return static_cast<int>(is_decoder_only() ? model.max_prompt_tokens() : model.max_source_tokens());
}

std::vector<int> Model::tokenize_source(std::string_view text) const { return impl_->model->tokenize_source(text); }

std::vector<int> Model::tokenize_target(std::string_view text) const { return impl_->model->tokenize_target(text); }

std::string Model::detokenize_source(std::span<const int> ids) const { return impl_->model->detokenize_source(ids); }

std::string Model::detokenize_target(std::span<const int> ids) const { return impl_->model->detokenize_target(ids); }

std::filesystem::path default_model_directory() { return ordo::default_model_directory(); }

void set_threads(int threads) { blas::set_num_threads(threads); }

}  // namespace ordo::api
