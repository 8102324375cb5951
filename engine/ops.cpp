#include "engine/ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "engine/blas.h"
#include "engine/error.h"

namespace ordo {

namespace {

using ordo::shape_of;  // of a matrix (engine/tensor.h); the other operands below
std::string shape_of(const TensorView& t) { return to_string(t.shape()); }
std::string shape_of(const WeightMatrix& w) {
  return w.is_float32() ? shape_of(w.float32_tensor()) : to_string(Shape{w.rows(), w.cols()});
}
std::string shape_of(std::span<const float> v) {
  return to_string(Shape{static_cast<Index>(v.size())});
}

// "<op>: x [2, 3] and y [2, 4] differ in shape", for the elementwise binary ops.
void check_same_shape(const char* op, const char* x_name, ConstMatrixRef x,
                      const char* y_name, ConstMatrixRef y) {
  if (x.rows() != y.rows() || x.cols() != y.cols())
    throw Error(op, std::string(x_name) + " " + shape_of(x) + " and " + y_name + " " +
                        shape_of(y) + " must have the same shape");
}

// A [cols] parameter vector (bias, LayerNorm weight); `context` is what it must fit (the
// input, or the weight a bias belongs to), for the message. Strings are built only on failure: ops run
// inside the allocation-free decoding step.
template <class Context>
void check_vector(const char* op, const char* name, const TensorView& v, Index cols,
                  const char* context_name, const Context& context) {
  if (v.rank() != 1 || v.dim(0) != cols)
    throw Error(op, std::string(name) + " " + shape_of(v) + " does not fit " + context_name +
                        " " + shape_of(context) + ": expected [" + std::to_string(cols) + "]");
}

constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();

float row_max(const float* row, Index n) {
  float m = kMinusInfinity;
  for (Index j = 0; j < n; ++j) m = std::max(m, row[j]);
  return m;
}

}  // namespace

namespace ops {

namespace {

// The checks of linear(): weight [out, in], x [T, in], y [T, out], bias [out] if any.
void check_linear(ConstMatrixRef x, const Linear& layer, MatrixRef y) {
  const WeightMatrix& w = layer.weight;
  if (w.empty() || (w.is_float32() && w.float32_tensor().rank() != 2))
    throw Error("linear", "weight " + shape_of(w) + " is not a matrix [out, in]");
  const Index in = w.cols();
  const Index out = w.rows();
  const auto shapes = [&] {
    return "input " + shape_of(x) + " x weight " + shape_of(w) + " -> output " + shape_of(y);
  };
  if (x.cols() != in)
    throw Error("linear", shapes() + ": input has " + std::to_string(x.cols()) +
                              " features, weight expects " + std::to_string(in));
  if (y.rows() != x.rows() || y.cols() != out)
    throw Error("linear", shapes() + ": output must be " + to_string(Shape{x.rows(), out}));
  if (!layer.bias.empty()) check_vector("linear", "bias", layer.bias, out, "weight", w);
}

// x [T,in] x W^T [in,out] -> y [T,out], then bias and activation: the product applies
// them to each block of y's columns where it wrote it (engine/epilogue.h).
void linear_then(ConstMatrixRef x, const Linear& layer, std::optional<Activation> activation, MatrixRef y) {
  check_linear(x, layer, y);
  const Epilogue epilogue{layer.bias.empty() ? std::span<const float>() : layer.bias.vector(), activation};
  blas::gemm_nt(x, layer.weight, y, epilogue);
}

}  // namespace

void linear(ConstMatrixRef x, const Linear& layer, MatrixRef y) { linear_then(x, layer, std::nullopt, y); }

void linear(ConstMatrixRef x, const Linear& layer, Activation activation, MatrixRef y) {
  linear_then(x, layer, activation, y);
}

void matmul_nt(ConstMatrixRef a, ConstMatrixRef b, MatrixRef c, float alpha, float beta) {
  if (a.cols() != b.cols() || c.rows() != a.rows() || c.cols() != b.rows())
    throw Error("matmul_nt", "a " + shape_of(a) + " x b^T with b " + shape_of(b) + " -> c " +
                                 shape_of(c) + ": expected a [m, k], b [n, k], c [m, n]");
  blas::gemm_nt(a, b, c, alpha, beta);
}

void matmul_nn(ConstMatrixRef a, ConstMatrixRef b, MatrixRef c, float alpha, float beta) {
  if (a.cols() != b.rows() || c.rows() != a.rows() || c.cols() != b.cols())
    throw Error("matmul_nn", "a " + shape_of(a) + " x b " + shape_of(b) + " -> c " + shape_of(c) +
                                 ": expected a [m, k], b [k, n], c [m, n]");
  blas::gemm_nn(a, b, c, alpha, beta);
}

void layer_norm(ConstMatrixRef x, const NormWeights& norm, float eps, MatrixRef y) {
  const Index d = x.cols();
  check_same_shape("layer_norm", "input", x, "output", y);
  if (norm.weight.empty())
    throw Error("layer_norm", "no weight bound for input " + shape_of(x));
  check_vector("layer_norm", "weight", norm.weight, d, "input", x);
  if (!norm.bias.empty()) check_vector("layer_norm", "bias", norm.bias, d, "input", x);
  if (d == 0) return;

  const float* gamma = norm.weight.data();
  const float* beta = norm.bias.empty() ? nullptr : norm.bias.data();
  // Mean and variance in double, two passes: rows like 1e4 + noise keep their noise
  // (a float E[x^2] - E[x]^2 would cancel it away). In place is safe: every read of
  // x[j] happens before the write to y[j].
  for (Index r = 0; r < x.rows(); ++r) {
    const float* in = x.data() + r * x.stride();
    float* out = y.data() + r * y.stride();
    double sum = 0.0;
    for (Index j = 0; j < d; ++j) sum += in[j];
    const double mean = sum / static_cast<double>(d);
    double squares = 0.0;
    for (Index j = 0; j < d; ++j) {
      const double centered = in[j] - mean;
      squares += centered * centered;
    }
    const double variance = squares / static_cast<double>(d);  // biased, as PyTorch
    const double inv_std = 1.0 / std::sqrt(variance + static_cast<double>(eps));
    if (beta != nullptr) {
      for (Index j = 0; j < d; ++j)
        out[j] = static_cast<float>((in[j] - mean) * inv_std * gamma[j] + beta[j]);
    } else {
      for (Index j = 0; j < d; ++j)
        out[j] = static_cast<float>((in[j] - mean) * inv_std * gamma[j]);
    }
  }
}

void rms_norm(ConstMatrixRef x, const NormWeights& norm, float eps, MatrixRef y) {
  const Index d = x.cols();
  check_same_shape("rms_norm", "input", x, "output", y);
  if (norm.weight.empty()) throw Error("rms_norm", "no weight bound for input " + shape_of(x));
  check_vector("rms_norm", "weight", norm.weight, d, "input", x);
  if (!norm.bias.empty()) throw Error("rms_norm", "was given a bias; RMSNorm has none");
  if (d == 0) return;
  const float* gamma = norm.weight.data();
  for (Index r = 0; r < x.rows(); ++r) {
    const float* in = x.data() + r * x.stride();
    float* out = y.data() + r * y.stride();
    double squares = 0.0;  // in double, like layer_norm's moments
    for (Index j = 0; j < d; ++j) squares += static_cast<double>(in[j]) * in[j];
    const double inv_rms = 1.0 / std::sqrt(squares / static_cast<double>(d) + static_cast<double>(eps));
    for (Index j = 0; j < d; ++j) out[j] = static_cast<float>(in[j] * inv_rms * gamma[j]);
  }
}

void normalize(ConstMatrixRef x, const NormWeights& norm, float eps, MatrixRef y) {
  switch (norm.kind) {
    case NormKind::LayerNorm: return layer_norm(x, norm, eps, y);
    case NormKind::RmsNorm: return rms_norm(x, norm, eps, y);
  }
}

void softmax_rows(MatrixRef x) {
  const Index n = x.cols();
  for (Index r = 0; r < x.rows(); ++r) {
    float* row = x.data() + r * x.stride();
    const float max = row_max(row, n);
    if (max == kMinusInfinity) {  // every key masked: no distribution, zeros
      for (Index j = 0; j < n; ++j) row[j] = 0.0f;
      continue;
    }
    double sum = 0.0;  // the sum in double: long rows (a vocabulary) lose nothing
    for (Index j = 0; j < n; ++j) {
      row[j] = std::exp(row[j] - max);
      sum += row[j];
    }
    const float inv_sum = static_cast<float>(1.0 / sum);
    for (Index j = 0; j < n; ++j) row[j] *= inv_sum;
  }
}

void log_softmax_rows(MatrixRef x) {
  const Index n = x.cols();
  for (Index r = 0; r < x.rows(); ++r) {
    float* row = x.data() + r * x.stride();
    const float max = row_max(row, n);
    // An all -inf row stays all -inf: log of the zeros softmax_rows gives it.
    if (max == kMinusInfinity) continue;
    double sum = 0.0;
    for (Index j = 0; j < n; ++j) sum += std::exp(row[j] - max);
    const float log_sum = static_cast<float>(std::log(sum));
    for (Index j = 0; j < n; ++j) row[j] = (row[j] - max) - log_sum;
  }
}

void activate(Activation activation, MatrixRef x) { apply_activation(activation, x); }

void add(MatrixRef y, ConstMatrixRef x) {
  check_same_shape("add", "y", y, "x", x);
  for (Index r = 0; r < y.rows(); ++r) {
    float* out = y.data() + r * y.stride();
    const float* in = x.data() + r * x.stride();
    for (Index j = 0; j < y.cols(); ++j) out[j] += in[j];
  }
}

void multiply(MatrixRef y, ConstMatrixRef x) {
  check_same_shape("multiply", "y", y, "x", x);
  for (Index r = 0; r < y.rows(); ++r) {
    float* out = y.data() + r * y.stride();
    const float* in = x.data() + r * x.stride();
    for (Index j = 0; j < y.cols(); ++j) out[j] *= in[j];
  }
}

void scale(MatrixRef y, float factor) {
  for (Index r = 0; r < y.rows(); ++r) {
    float* out = y.data() + r * y.stride();
    for (Index j = 0; j < y.cols(); ++j) out[j] *= factor;
  }
}

void gather_rows(const WeightMatrix& table, std::span<const int> ids, MatrixRef y) {
  const Index count = static_cast<Index>(ids.size());
  if (y.rows() != count || y.cols() != table.cols())
    throw Error("gather_rows", "table " + shape_of(table) + ", " + std::to_string(count) +
                                   " ids -> output " + shape_of(y) + ": output must be " +
                                   to_string(Shape{count, table.cols()}));
  const Index vocab = table.rows();
  for (Index r = 0; r < count; ++r) {
    const Index id = ids[static_cast<std::size_t>(r)];
    if (id < 0 || id >= vocab)
      throw Error("gather_rows",
                  "id " + std::to_string(id) + " at position " + std::to_string(r) +
                      " is outside the table's " + std::to_string(vocab) + " rows [0, " +
                      std::to_string(vocab) + ")",
                  "tokenizer and model vocabularies differ?");
  }
  for (Index r = 0; r < count; ++r) table.dequantize(ids[static_cast<std::size_t>(r)], 1, y.data() + r * y.stride(), y.cols());
}

void add_row_vector(MatrixRef y, std::span<const float> bias) {
  if (static_cast<Index>(bias.size()) != y.cols())
    throw Error("add_row_vector", "vector " + shape_of(bias) + " does not fit rows of " +
                                      shape_of(y) + ": expected [" +
                                      std::to_string(y.cols()) + "]");
  const float* b = bias.data();
  for (Index r = 0; r < y.rows(); ++r) {
    float* out = y.data() + r * y.stride();
    for (Index j = 0; j < y.cols(); ++j) out[j] += b[j];
  }
}

}  // namespace ops
}  // namespace ordo
