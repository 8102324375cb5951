#include "tests/reference.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>

#include "engine/error.h"

namespace ordo::reference {

// ---------------------------------------------------------------------------------------
// Matrix64

Matrix64::Matrix64(Index rows, Index cols, double value)
    : rows_(rows), cols_(cols), values_(size(rows * cols), value) {
  assert(rows >= 0 && cols >= 0);
}

Matrix64::Matrix64(Index rows, Index cols, std::vector<double> values)
    : rows_(rows), cols_(cols), values_(std::move(values)) {
  assert(rows >= 0 && cols >= 0 && values_.size() == size(rows * cols));
}

Matrix64::Matrix64(ConstMatrixRef m) : Matrix64(m.rows(), m.cols()) {
  for (Index r = 0; r < rows_; ++r)
    for (Index c = 0; c < cols_; ++c) (*this)(r, c) = m(r, c);
}

std::size_t Matrix64::index(Index r, Index c) const {
  assert(r >= 0 && r < rows_ && c >= 0 && c < cols_);
  return size(r * cols_ + c);
}

std::vector<double> to_double(std::span<const float> v) { return {v.begin(), v.end()}; }

// ---------------------------------------------------------------------------------------
// Oracles

Matrix64 matmul(const Matrix64& a, const Matrix64& b) {
  assert(a.cols() == b.rows());
  Matrix64 c(a.rows(), b.cols());
  for (Index i = 0; i < a.rows(); ++i)
    for (Index j = 0; j < b.cols(); ++j) {
      double sum = 0.0;
      for (Index k = 0; k < a.cols(); ++k) sum += a(i, k) * b(k, j);
      c(i, j) = sum;
    }
  return c;
}

Matrix64 matmul_nt(const Matrix64& a, const Matrix64& b) {
  assert(a.cols() == b.cols());
  Matrix64 c(a.rows(), b.rows());
  for (Index i = 0; i < a.rows(); ++i)
    for (Index j = 0; j < b.rows(); ++j) {
      double sum = 0.0;
      for (Index k = 0; k < a.cols(); ++k) sum += a(i, k) * b(j, k);
      c(i, j) = sum;
    }
  return c;
}

Matrix64 linear(const Matrix64& x, const Matrix64& weight, std::span<const double> bias) {
  assert(bias.empty() || static_cast<Index>(bias.size()) == weight.rows());
  Matrix64 y = matmul_nt(x, weight);
  if (!bias.empty())
    for (Index t = 0; t < y.rows(); ++t)
      for (Index o = 0; o < y.cols(); ++o) y(t, o) += bias[static_cast<std::size_t>(o)];
  return y;
}

Matrix64 layer_norm(const Matrix64& x, std::span<const double> weight,
                    std::span<const double> bias, double eps) {
  const Index d = x.cols();
  assert(static_cast<Index>(weight.size()) == d);
  assert(bias.empty() || static_cast<Index>(bias.size()) == d);
  Matrix64 y(x.rows(), d);
  for (Index r = 0; r < x.rows(); ++r) {
    double mean = 0.0;
    for (Index j = 0; j < d; ++j) mean += x(r, j);
    mean /= static_cast<double>(d);
    double variance = 0.0;
    for (Index j = 0; j < d; ++j) variance += (x(r, j) - mean) * (x(r, j) - mean);
    variance /= static_cast<double>(d);
    for (Index j = 0; j < d; ++j) {
      const auto k = static_cast<std::size_t>(j);
      y(r, j) = (x(r, j) - mean) / std::sqrt(variance + eps) * weight[k] +
                (bias.empty() ? 0.0 : bias[k]);
    }
  }
  return y;
}

namespace {
constexpr double kMinusInfinity = -std::numeric_limits<double>::infinity();

double row_max(const Matrix64& x, Index r) {
  double m = kMinusInfinity;
  for (Index j = 0; j < x.cols(); ++j) m = std::max(m, x(r, j));
  return m;
}
}  // namespace

Matrix64 softmax_rows(const Matrix64& x) {
  Matrix64 y(x.rows(), x.cols());
  for (Index r = 0; r < x.rows(); ++r) {
    const double m = row_max(x, r);
    if (m == kMinusInfinity) continue;  // all masked: zeros
    double sum = 0.0;
    for (Index j = 0; j < x.cols(); ++j) sum += std::exp(x(r, j) - m);
    for (Index j = 0; j < x.cols(); ++j) y(r, j) = std::exp(x(r, j) - m) / sum;
  }
  return y;
}

Matrix64 log_softmax_rows(const Matrix64& x) {
  Matrix64 y(x.rows(), x.cols(), kMinusInfinity);
  for (Index r = 0; r < x.rows(); ++r) {
    const double m = row_max(x, r);
    if (m == kMinusInfinity) continue;  // all masked: stays -inf
    double sum = 0.0;
    for (Index j = 0; j < x.cols(); ++j) sum += std::exp(x(r, j) - m);
    for (Index j = 0; j < x.cols(); ++j) y(r, j) = x(r, j) - m - std::log(sum);
  }
  return y;
}

double relu(double x) { return x > 0.0 ? x : 0.0; }
double gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double silu(double x) { return x / (1.0 + std::exp(-x)); }

Matrix64 map(const Matrix64& x, const std::function<double(double)>& f) {
  Matrix64 y(x.rows(), x.cols());
  for (Index r = 0; r < x.rows(); ++r)
    for (Index c = 0; c < x.cols(); ++c) y(r, c) = f(x(r, c));
  return y;
}

std::vector<double> sinusoidal_frequencies(Index dim, SinusoidalFrequencies kind) {
  assert(dim % 2 == 0);
  const Index half = dim / 2;
  std::vector<double> w(static_cast<std::size_t>(half));
  for (Index i = 0; i < half; ++i) {
    const auto di = static_cast<double>(i);
    w[static_cast<std::size_t>(i)] =
        kind == SinusoidalFrequencies::Vaswani
            ? 1.0 / std::pow(10000.0, 2.0 * di / static_cast<double>(dim))
            : std::exp(-di * std::log(10000.0) / static_cast<double>(half - 1));
  }
  return w;
}

Matrix64 sinusoidal_table(Index first_position, Index count, Index dim, SinusoidalLayout layout,
                          SinusoidalFrequencies kind) {
  const std::vector<double> w = sinusoidal_frequencies(dim, kind);
  const Index half = dim / 2;
  Matrix64 pe(count, dim);
  for (Index t = 0; t < count; ++t) {
    const auto p = static_cast<double>(first_position + t);
    for (Index i = 0; i < half; ++i) {
      const double angle = p * w[static_cast<std::size_t>(i)];
      if (layout == SinusoidalLayout::Interleaved) {
        pe(t, 2 * i) = std::sin(angle);
        pe(t, 2 * i + 1) = std::cos(angle);
      } else {
        pe(t, i) = std::sin(angle);
        pe(t, half + i) = std::cos(angle);
      }
    }
  }
  return pe;
}

Matrix64 rope(const Matrix64& x, Index head_dim, double theta, RopeLayout layout,
              Index first_position) {
  assert(head_dim % 2 == 0 && x.cols() % head_dim == 0);
  const Index half = head_dim / 2;
  const Index heads = x.cols() / head_dim;
  Matrix64 y(x.rows(), x.cols());
  std::vector<double> cos(static_cast<std::size_t>(head_dim));
  std::vector<double> sin(static_cast<std::size_t>(head_dim));
  std::vector<double> rotated(static_cast<std::size_t>(head_dim));
  for (Index t = 0; t < x.rows(); ++t) {
    const auto p = static_cast<double>(first_position + t);
    // The per-dimension cos/sin vectors: [f0..f_{h-1}, f0..f_{h-1}] for Half
    // (torch.cat((freqs, freqs))), [f0, f0, f1, f1, ...] for Interleaved (repeat).
    for (Index j = 0; j < head_dim; ++j) {
      const Index i = layout == RopeLayout::Half ? j % half : j / 2;
      const double angle =
          p / std::pow(theta, 2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
      cos[static_cast<std::size_t>(j)] = std::cos(angle);
      sin[static_cast<std::size_t>(j)] = std::sin(angle);
    }
    for (Index h = 0; h < heads; ++h) {
      const Index base = h * head_dim;
      for (Index j = 0; j < head_dim; ++j) {
        double r = 0.0;
        if (layout == RopeLayout::Half)
          r = j < half ? -x(t, base + j + half) : x(t, base + j - half);
        else
          r = j % 2 == 0 ? -x(t, base + j + 1) : x(t, base + j - 1);
        rotated[static_cast<std::size_t>(j)] = r;
      }
      for (Index j = 0; j < head_dim; ++j) {
        const auto k = static_cast<std::size_t>(j);
        y(t, base + j) = x(t, base + j) * cos[k] + rotated[k] * sin[k];
      }
    }
  }
  return y;
}

// ---------------------------------------------------------------------------------------
// Comparison

namespace {

std::string unravel(std::size_t flat, const Shape& shape) {
  Shape index(shape.size(), 0);
  auto rest = static_cast<Index>(flat);
  for (std::size_t d = shape.size(); d-- > 0;) {
    const Index extent = std::max<Index>(shape[d], 1);
    index[d] = rest % extent;
    rest /= extent;
  }
  return to_string(index);
}

bool close(double got, double want, double atol, double rtol) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (std::isinf(want) || std::isinf(got)) return got == want;
  return std::abs(got - want) <= atol + rtol * std::abs(want);
}

}  // namespace

::testing::AssertionResult all_close(std::span<const double> got, std::span<const double> want,
                                     const Shape& shape, double atol, double rtol) {
  if (got.size() != want.size() || static_cast<Index>(want.size()) != element_count(shape))
    return ::testing::AssertionFailure()
           << "size mismatch: got " << got.size() << " elements, want " << want.size()
           << ", shape " << to_string(shape) << " holds " << element_count(shape);
  std::size_t bad = 0;
  std::size_t first_bad = 0;
  std::size_t worst = 0;
  double worst_diff = -1.0;
  for (std::size_t k = 0; k < want.size(); ++k) {
    const double diff = std::abs(got[k] - want[k]);
    if (!std::isnan(diff) && diff > worst_diff) {
      worst_diff = diff;
      worst = k;
    }
    if (!close(got[k], want[k], atol, rtol) && bad++ == 0) first_bad = k;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  std::ostringstream message;
  message << std::setprecision(9) << bad << " of " << want.size() << " elements of "
          << to_string(shape) << " are not within " << atol << " + " << rtol
          << "*|want|; first at " << unravel(first_bad, shape) << ": got " << got[first_bad]
          << ", want " << std::setprecision(17) << want[first_bad] << std::setprecision(3)
          << " (|diff| " << std::abs(got[first_bad] - want[first_bad]) << ")";
  if (worst_diff >= 0.0)
    message << "; largest finite |diff| " << worst_diff << " at " << unravel(worst, shape);
  return ::testing::AssertionFailure() << message.str();
}

::testing::AssertionResult all_close(const Matrix64& got, const Matrix64& want, double atol,
                                     double rtol) {
  if (got.rows() != want.rows() || got.cols() != want.cols())
    return ::testing::AssertionFailure()
           << "shape mismatch: got " << to_string({got.rows(), got.cols()}) << ", want "
           << to_string({want.rows(), want.cols()});
  return all_close(got.values(), want.values(), {want.rows(), want.cols()}, atol, rtol);
}

::testing::AssertionResult all_close(std::span<const float> got, std::span<const double> want,
                                     double atol, double rtol) {
  const std::vector<double> got64 = to_double(got);
  return all_close(got64, want, {static_cast<Index>(got.size())}, atol, rtol);
}

void expect_close(const Matrix64& got, const Matrix64& want, double atol, double rtol,
                  CallSite where) {
  if (auto result = all_close(got, want, atol, rtol); !result)
    ADD_FAILURE_AT(where.file, where.line) << result.message();
}

void expect_close(std::span<const float> got, std::span<const double> want, double atol,
                  double rtol, CallSite where) {
  if (auto result = all_close(got, want, atol, rtol); !result)
    ADD_FAILURE_AT(where.file, where.line) << result.message();
}

std::string error_message(const std::function<void()>& f, CallSite where) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE_AT(where.file, where.line)
      << "expected an ordo::Error, but nothing was thrown";
  return "";
}

// ---------------------------------------------------------------------------------------
// Random inputs

Matrix random_matrix(Index rows, Index cols, std::mt19937& rng, float lo, float hi) {
  Matrix m(rows, cols);
  std::uniform_real_distribution<float> uniform(lo, hi);
  for (Index r = 0; r < rows; ++r)
    for (float& x : m.row(r)) x = uniform(rng);
  return m;
}

std::vector<float> random_vector(Index n, std::mt19937& rng, float lo, float hi) {
  std::vector<float> v(static_cast<std::size_t>(n));
  std::uniform_real_distribution<float> uniform(lo, hi);
  for (float& x : v) x = uniform(rng);
  return v;
}

void expect_mentions(const std::string& text, std::initializer_list<const char*> parts) {
  for (const char* part : parts)
    EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' missing from: " << text;
}

void expect_outside_unchanged(const Matrix& wide, const Matrix& before, Index first,
                              Index count) {
  for (Index r = 0; r < wide.rows(); ++r)
    for (Index c = 0; c < wide.cols(); ++c)
      if (c < first || c >= first + count) {
        ASSERT_EQ(wide(r, c), before(r, c)) << "element [" << r << ", " << c
                                             << "] outside the view changed";
      }
}

}  // namespace ordo::reference
