// Model::decode_step_bytes and Model::encode_flops: what running the model costs, counted
// from its own tensors through the family's table (models/tensor_names.h), so that a
// family or scheme added later is counted without a list to edit here.
#include "models/api/internal.h"
#include "models/tensor_names.h"

namespace ordo {

namespace {

// A tensor's weights, and the bytes reading it takes in the format it runs in (a weight
// matrix may be half precision or quantized; everything else is float32).
struct TensorCost {
  Index elements = 0;
  double bytes = 0;
};

TensorCost tensor_cost(const LoadedModel& model, Stack stack, Role role, Part part, Index layer = 0) {
  const auto name = tensor_name(model.config(), stack, role, part, layer);
  if (!name) return {};
  if (is_matrix(role, part)) {
    const WeightMatrix m = model.weights().matrix(*name);
    return {m.rows() * m.cols(), static_cast<double>(m.bytes())};
  }
  const TensorView tensor = model.weights().get(*name);
  if (tensor.empty()) return {};  // an optional tensor the file lacks
  return {tensor.size(), static_cast<double>(tensor.size()) * sizeof(float)};
}

Index weight_elements(const LoadedModel& model, Stack stack, Role role, Part part, Index layer = 0) {
  return tensor_cost(model, stack, role, part, layer).elements;
}

// The decoder's logits projection: its own head, or the tied embedding table.
TensorCost output_head_cost(const LoadedModel& model) {
  const TensorCost head = tensor_cost(model, Stack::Decoder, Role::OutputHead, Part::Weight);
  return head.elements > 0 ? head : tensor_cost(model, Stack::Decoder, Role::TokenEmbedding, Part::Weight);
}
Index output_head_elements(const LoadedModel& model) { return output_head_cost(model).elements; }

}  // namespace

double Model::decode_step_bytes() const {
  static constexpr Role kPerLayer[] = {Role::SelfQuery,   Role::SelfKey,       Role::SelfValue,     Role::SelfOutput,
                                       Role::SelfNorm,    Role::CrossQuery,    Role::CrossOutput,   Role::CrossNorm,
                                       Role::FeedForwardIn, Role::FeedForwardUp, Role::FeedForwardOut, Role::FeedForwardNorm};
  static constexpr Role kOnce[] = {Role::EmbeddingNorm, Role::FinalNorm, Role::FinalLogitsBias};
  const LoadedModel& model = *impl_->model;
  double bytes = 0;
  for (Index layer = 0; layer < model.config().decoder_layers; ++layer)
    for (const Role role : kPerLayer)
      for (const Part part : {Part::Weight, Part::Bias}) bytes += tensor_cost(model, Stack::Decoder, role, part, layer).bytes;
  for (const Role role : kOnce)
    for (const Part part : {Part::Weight, Part::Bias}) bytes += tensor_cost(model, Stack::Decoder, role, part).bytes;
  return bytes + output_head_cost(model).bytes;
}

double Model::encode_flops(int batch, int length) const {
  static constexpr Role kLinears[] = {Role::SelfQuery,     Role::SelfKey,       Role::SelfValue,
                                      Role::SelfOutput,    Role::FeedForwardIn, Role::FeedForwardUp,
                                      Role::FeedForwardOut};
  const LoadedModel& model = *impl_->model;
  const bool prefill = !model.config().has_encoder();
  const Stack stack = prefill ? Stack::Decoder : Stack::Encoder;
  const Index layers = prefill ? model.config().decoder_layers : model.config().encoder_layers;
  const double rows = static_cast<double>(batch) * length;
  const double pairs = prefill ? batch * (length * (length + 1.0) / 2.0) : static_cast<double>(batch) * length * length;
  double flops = 0;
  for (Index layer = 0; layer < layers; ++layer) {
    for (const Role role : kLinears) flops += 2.0 * rows * static_cast<double>(weight_elements(model, stack, role, Part::Weight, layer));
    const Index query_width = weight_elements(model, stack, Role::SelfQuery, Part::Weight, layer) / model.config().d_model;
    flops += 4.0 * pairs * static_cast<double>(query_width);
  }
  if (prefill) flops += 2.0 * static_cast<double>(batch) * static_cast<double>(output_head_elements(model));
  return flops;
}

int Model::max_output_tokens() const noexcept { return static_cast<int>(impl_->model->max_target_tokens()); }

int Model::vocabulary_size(Stack stack) const noexcept {
  const Transformer& model = impl_->model->transformer();
  if (stack == Stack::Decoder) return static_cast<int>(model.decoder.vocab_size());
  return model.encoder ? static_cast<int>(model.encoder->embedding().vocab_size()) : 0;
}

}  // namespace ordo
