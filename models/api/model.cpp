// ordo::Model: a shared handle on an immutable LoadedModel.
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/blas.h"
#include "engine/kernel_path.h"
#include "engine/thread_pool.h"
#include "models/api/internal.h"
#include "models/rope_scaling_config.h"
#include "models/safetensors.h"

namespace ordo {

Model::Model(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Model Model::load(const std::filesystem::path& directory, const WarningHandler& on_warning) {
  const WarningHandler warn = on_warning ? on_warning : WarningHandler(LoadedModel::print_warning);
  return detail::ModelAccess::wrap(LoadedModel::load(find_model_directory(directory.string()), warn));
}

std::optional<Quantization> detail::compute_type_of(const LoadOptions& options) {
  WeightFormat format = WeightFormat::F32;
  switch (options.compute_type) {
    case ComputeType::Auto:
      if (options.group_size != -1)
        throw OptionError("group_size", "is set for auto (the weights as stored): a group size needs int8 or int4");
      return std::nullopt;
    case ComputeType::F32: format = WeightFormat::F32; break;
    case ComputeType::F16: format = WeightFormat::F16; break;
    case ComputeType::BF16: format = WeightFormat::BF16; break;
    case ComputeType::Int8: format = WeightFormat::Int8; break;
    case ComputeType::Int4: format = WeightFormat::Int4; break;
  }
  Quantization q{format, default_group_size(format)};
  if (options.group_size != -1) {
    if (!q.enabled())
      throw OptionError("group_size", "is set for " + std::string(compute_type_name(options.compute_type)) +
                                          ", which has no scales: a group size needs int8 or int4");
    if (options.group_size < 0 || (format == WeightFormat::Int4 && (options.group_size == 0 || options.group_size % kInt4Run != 0)))
      throw OptionError("group_size", std::to_string(options.group_size) + " is not a group size for " +
                                          std::string(weight_format_name(format)) +
                                          (format == WeightFormat::Int4 ? " (a positive multiple of 32)" : " (0: one scale per row, or > 0)"));
    q.group_size = options.group_size;
  }
  return q;
}

void LoadOptions::validate() const {
  detail::compute_type_of(*this);
  if (rope_scaling) rope_scaling->validate();
}

Model Model::load(const std::filesystem::path& directory, const LoadOptions& options,
                  const WarningHandler& on_warning) {
  const WarningHandler warn = on_warning ? on_warning : WarningHandler(LoadedModel::print_warning);
  const std::optional<Quantization> compute = detail::compute_type_of(options);
  if (!options.rope_scaling && !compute) return load(directory, warn);
  std::optional<std::pair<RopeScalingType, double>> scaling;
  if (options.rope_scaling) {
    options.rope_scaling->validate();
    bool known = false;
    scaling.emplace(rope_scaling_type_of(options.rope_scaling->type, known), options.rope_scaling->factor);
  }
  return detail::ModelAccess::wrap(
      LoadedModel::load(find_model_directory(directory.string()), warn, [scaling, compute](ModelConfig& config) {
        if (scaling) override_rope_scaling(config, scaling->first, scaling->second);
        config.compute_type = compute;
      }));
}

Model Model::load_default(const WarningHandler& on_warning) { return load(default_model_directory(), on_warning); }

const std::filesystem::path& Model::directory() const noexcept { return impl_->model->directory(); }
const std::string& Model::model_type() const noexcept { return impl_->model->config().model_type; }
bool Model::is_decoder_only() const noexcept { return impl_->model->transformer().decoder_only(); }
bool Model::has_tokenizer() const noexcept { return impl_->model->has_tokenizer(); }
std::optional<int> Model::bos_token_id() const noexcept { return impl_->model->config().bos_token_id; }

int Model::max_input_tokens() const noexcept {
  const LoadedModel& model = *impl_->model;
  return static_cast<int>(is_decoder_only() ? model.max_prompt_tokens() : model.max_source_tokens());
}

std::vector<int> Model::tokenize_source(std::string_view text) const { return impl_->model->tokenize_source(text); }
std::vector<int> Model::tokenize_target(std::string_view text) const { return impl_->model->tokenize_target(text); }
std::vector<int> Model::tokenize_prompt(std::string_view text, bool add_bos) const {
  return impl_->model->tokenize_prompt(text, add_bos);
}
const std::vector<std::string>& Model::language_codes() const noexcept {
  return impl_->model->languages().codes;
}
int Model::language_id(std::string_view code, const std::string& field) const {
  return detail::language_id(*impl_->model, code, field);
}
std::vector<int> Model::tokenize_source(std::string_view text, std::string_view language) const {
  return impl_->model->tokenize_source(text, language_id(language, "source_lang"));
}
std::vector<int> Model::tokenize_target(std::string_view text, std::string_view language) const {
  return impl_->model->tokenize_target(text, 0, language_id(language, "target_lang"));
}
std::vector<int> Model::tokenize_prompt(std::string_view text, bool add_bos, std::string_view language) const {
  const int code = language_id(language, "target_lang");
  return impl_->model->tokenize_prompt(text, add_bos, LoadedModel::InputLimit{}, code).ids;
}
std::string Model::detokenize_source(std::span<const int> ids) const { return impl_->model->detokenize_source(ids); }
std::string Model::detokenize_target(std::span<const int> ids) const { return impl_->model->detokenize_target(ids); }
std::vector<std::string> Model::source_pieces(std::span<const int> ids) const {
  return impl_->model->source_pieces(ids);
}
std::vector<std::string> Model::target_pieces(std::span<const int> ids) const {
  return impl_->model->target_pieces(ids);
}


ModelInfo Model::info() const {
  const LoadedModel& model = *impl_->model;
  const ModelConfig& config = model.config();
  const WeightStore& weights = model.weights();
  ModelInfo info;
  info.family = std::string(family_name(config.family));
  info.decoder_only = !config.has_encoder();
  info.position_encoding = std::string(position_encoding_name(config.position_encoding));
  info.attention_heads = static_cast<int>(config.decoder_attention_heads);
  info.key_value_heads = static_cast<int>(config.num_key_value_heads);
  info.config_json = config.to_json().dump();
  info.parameters = weights.parameter_count();
  const std::set<std::string> unused(weights.unused().begin(), weights.unused().end());
  for (const SafetensorsFile& file : weights.files()) {
    const std::string name = file.path().filename().string();
    std::error_code error;
    const std::uintmax_t bytes = std::filesystem::file_size(file.path(), error);
    if (error) throw Error(file.path().string(), "cannot read its size: " + error.message());
    info.weight_bytes += bytes;
    info.weight_files.push_back(name);
    for (const TensorInfo& tensor : file.tensors())
      info.tensors.push_back({tensor.name, std::string(dtype_name(tensor.dtype)), tensor.shape, name,
                              !unused.contains(tensor.name)});
  }
  if (model.has_tokenizer()) info.tokenizer_vocab_size = static_cast<int>(model.tokenizer_vocab_size());
  info.generation_config_json = model.generation().applied.dump();
  info.generation_config_file = model.generation().source;
  info.compute_type = weights.matrix_formats();
  info.matrix_bytes = weights.matrix_bytes();
  info.language_codes = model.languages().codes;
  return info;
}

const DecodingOptions& Model::generation_defaults() const noexcept { return impl_->model->generation().decoding; }

DecodingOptions Model::with_generation_defaults(DecodingOptions decoding, const DecodingChoices& chosen) const {
  const DecodingOptions& defaults = generation_defaults();
  if (!chosen.beam_size && !decoding.sample) decoding.beam_size = defaults.beam_size;
  if (!chosen.max_length) {
    decoding.max_length = defaults.max_length;
    decoding.max_length_is_ceiling = defaults.max_length_is_ceiling;
  } else {
    decoding.max_length_is_ceiling = false;  // the program's own: held to it
  }
  if (!chosen.length_penalty) decoding.length_penalty = defaults.length_penalty;
  if (!chosen.no_repeat_ngram_size) decoding.no_repeat_ngram_size = defaults.no_repeat_ngram_size;
  if (!chosen.bad_words_ids) decoding.bad_words_ids = defaults.bad_words_ids;
  if (!chosen.forced_bos_token_id) decoding.forced_bos_token_id = defaults.forced_bos_token_id;
  return decoding;
}

void set_threads(int threads) { threads::set_count(threads); }

std::string cpu_kernels() {
  kernels::check_kernel_setting();
  return std::string(kernels::kernel_path_name(kernels::kernel_path()));
}

void matmul_nt(std::span<const float> a, std::span<const float> b, std::span<float> c, int m, int n, int k) {
  const auto holds = [](std::span<const float> values, int rows, int cols) {
    return values.size() >= static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  };
  if (m < 1 || n < 1 || k < 1 || !holds(a, m, k) || !holds(b, n, k) || !holds(c, m, n))
    throw Error("matmul_nt", "sizes m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                                 " do not fit spans of " + std::to_string(a.size()) + ", " + std::to_string(b.size()) +
                                 " and " + std::to_string(c.size()) + " values",
                 "give a [m, k], b [n, k], c [m, n], each size at least 1");
  blas::gemm_nt(ConstMatrixRef(a.data(), m, k), ConstMatrixRef(b.data(), n, k), MatrixRef(c.data(), m, n));
}

}  // namespace ordo
