// The public results' checked accessors.
#include <algorithm>
#include <string>

#include "ordo/error.hpp"
#include "ordo/results.hpp"

namespace ordo {

namespace {

// row-major [rows, cols] element (row, col), or an Error naming `what` and the bounds.
float element(const std::vector<float>& values, int rows, int cols, int row, int col, const char* what) {
  if (row < 0 || row >= rows || col < 0 || col >= cols)
    throw Error(what, "(" + std::to_string(row) + ", " + std::to_string(col) + ") is outside its " +
                          std::to_string(rows) + " x " + std::to_string(cols) + " values");
  return values[static_cast<std::size_t>(row) * static_cast<std::size_t>(cols) + static_cast<std::size_t>(col)];
}

}  // namespace

const char* attention_kind_name(AttentionKind kind) noexcept {
  switch (kind) {
    case AttentionKind::Encoder: return "encoder";
    case AttentionKind::Decoder: return "decoder";
    case AttentionKind::Cross: return "cross";
  }
  return "unknown";
}

const Hypothesis& Translation::best() const {
  if (!ok()) throw Error(error);
  if (hypotheses.empty()) throw Error("translation", "has no hypothesis");
  return hypotheses.front();
}

const Hypothesis& Generation::best() const {
  if (!ok()) throw Error(error);
  if (hypotheses.empty()) throw Error("generation", "has no hypothesis");
  return hypotheses.front();
}

float EncoderOutput::at(int token, int dim) const { return element(values, rows, cols, token, dim, "encoder output"); }

float AttentionMatrix::at(int query, int key) const {
  return element(values, rows, cols, query, key, "attention matrix");
}

const AttentionMatrix& Attention::get(AttentionKind kind, int layer, int head) const {
  int layers = 0, heads = 0;
  for (const AttentionMatrix& m : matrices) {
    if (m.kind != kind) continue;
    if (m.layer == layer && m.head == head) return m;
    layers = std::max(layers, m.layer + 1);
    heads = std::max(heads, m.head + 1);
  }
  const std::string which = std::string(attention_kind_name(kind)) + " attention";
  if (layers == 0) throw Error(which, "was not recorded", "a decoder-only model has no encoder or cross-attention");
  throw Error(which, "has no layer " + std::to_string(layer) + " head " + std::to_string(head),
              "it has layers 0-" + std::to_string(layers - 1) + " and heads 0-" + std::to_string(heads - 1));
}

}  // namespace ordo
