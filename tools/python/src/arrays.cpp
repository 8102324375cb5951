#include "arrays.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "bindings.h"

namespace ordo::python {

py::array_t<float> encoder_array(EncoderOutput&& output) {
  auto values = std::make_unique<std::vector<float>>(std::move(output.values));
  const float* data = values->data();
  // The capsule owns the vector from here on and frees it with the array.
  py::capsule owner(values.get(), [](void* p) { delete static_cast<std::vector<float>*>(p); });
  values.release();
  return py::array_t<float>({static_cast<py::ssize_t>(output.rows), static_cast<py::ssize_t>(output.cols)}, data,
                            owner);
}

AttentionResult attention_layer(const Attention& attention, const std::string& kind, int layer) {
  AttentionKind wanted{};
  if (kind == "encoder") wanted = AttentionKind::Encoder;
  else if (kind == "decoder") wanted = AttentionKind::Decoder;
  else if (kind == "cross") wanted = AttentionKind::Cross;
  else throw_option_error("kind", "must be 'encoder', 'decoder' or 'cross', got '" + kind + "'");

  std::vector<const AttentionMatrix*> heads;
  int layers = 0;
  for (const AttentionMatrix& m : attention.matrices) {
    if (m.kind != wanted) continue;
    layers = std::max(layers, m.layer + 1);
    if (m.layer == layer) heads.push_back(&m);
  }
  if (layers == 0) throw_option_error("kind", "this model has no " + kind + " attention");
  if (heads.empty())
    throw_option_error("layer", "must be in [0, " + std::to_string(layers - 1) + "] (the " + kind +
                                    " attention's layers), got " + std::to_string(layer));
  std::sort(heads.begin(), heads.end(), [](const auto* a, const auto* b) { return a->head < b->head; });

  AttentionResult result;
  result.kind = kind;
  result.layer = layer;
  const py::ssize_t rows = heads.front()->rows, cols = heads.front()->cols;
  result.weights = py::array_t<float>({static_cast<py::ssize_t>(heads.size()), rows, cols});
  float* out = result.weights.mutable_data();
  for (const AttentionMatrix* head : heads) out = std::copy(head->values.begin(), head->values.end(), out);
  const bool source_keys = wanted != AttentionKind::Decoder;
  result.rows = wanted == AttentionKind::Encoder ? attention.source_tokens : attention.target_tokens;
  result.columns = source_keys ? attention.source_tokens : attention.target_tokens;
  return result;
}

}  // namespace ordo::python
