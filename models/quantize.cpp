#include "models/quantize.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "engine/error.h"
#include "engine/half.h"
#include "engine/integer_product.h"
#include "engine/round_to_even.h"
#include "engine/thread_pool.h"

namespace ordo {

namespace {

// Checks that a matrix of width `cols` takes `stored` (already the format it is stored
// as: Quantization::stored_as), and returns the weights per scale.
Index checked_group(const Quantization& stored, Index cols, const std::string& name) {
  const Index group = stored.group_for(cols);
  if (stored.type == WeightFormat::Int4 && group % kInt4Run != 0)
    throw Error(name, "cannot be int4 in groups of " + std::to_string(group) + ": int4 packs runs of 32 weights",
                "choose a group size that is a multiple of 32");
  if (group <= 0 || cols % group != 0)
    throw Error(name, "cannot be " + std::string(weight_format_name(stored.type)) + " in groups of " +
                          std::to_string(group) + ": its rows have " + std::to_string(cols) +
                          " weights, not a multiple of it",
                "choose a group size that divides every width (0: one scale per row, int8 only)");
  if (group > kernels::kMaxIntegerGroup)
    throw Error(name, "cannot be " + std::string(weight_format_name(stored.type)) + " in groups of " +
                          std::to_string(group) + " weights: ordo sums integer products exactly up to " +
                          std::to_string(kernels::kMaxIntegerGroup) + " a group",
                "choose a group size of at most " + std::to_string(kernels::kMaxIntegerGroup));
  return group;
}

// The loops below are written for the compiler to vectorize (the library's baseline is
// SSE2, where std::nearbyint is a library call and a float max a branch): a model's
// quantization at load (--compute-type) and ordo quantize run at memory speed. They give
// the numbers of the scalar definition, bit for bit: the weights are finite (the loader
// refuses NaN and infinity, models/stored_matrix.cpp).

// The largest |w_k|: for finite floats the order of |w| is the order of their bits with
// the sign cleared, as integers.
float max_magnitude(const float* w, Index n) {
  std::int32_t m = 0;
  for (Index k = 0; k < n; ++k) m = std::max(m, std::bit_cast<std::int32_t>(w[k]) & 0x7fffffff);
  return std::bit_cast<float>(m);
}

// round(w / scale) clamped to [lo, hi], rounding halves to even as std::nearbyint does in
// the default rounding mode. |w / scale| is at most a few times hi (scale is max|w| / hi,
// or its F16 rounding), far below round_to_even's 2^22. The clamp is on integers: a
// float compare is a branch to GCC (it may trap), which would stop the vectorizer.
inline int quantized(float w, float scale, int lo, int hi) {
  const auto q = static_cast<int>(round_to_even(w / scale));
  return std::min(std::max(q, lo), hi);
}

void encode_int8_row(const float* w, Index cols, Index group, std::int8_t* q, float* scales, const std::string& name) {
  for (Index g = 0; g < cols / group; ++g) {
    const float* in = w + g * group;
    const float amax = max_magnitude(in, group);
    float scale = amax > 0.0f ? amax / 127.0f : 1.0f;
    if (scale > kMaxInt8Scale)
      throw Error(name, "holds a weight of magnitude " + shortest_text(amax) +
                            ", whose int8 scale would make weights beyond float32's range (the scale is at most " +
                            shortest_text(kMaxInt8Scale) + ", for weights up to about 3.4e38 x 127/128)",
                  "the checkpoint holds weights near float32's largest value: it is broken");
    // Weights so small (subnormal, max|w| <= 63 x 2^-149) that max|w| / 127 rounds to 0:
    // the smallest positive float, in whose steps they are exact (|q| <= 63). A scale of
    // 0 is no scale (the loader refuses it, and w / 0 is not a number).
    if (scale == 0.0f) scale = std::numeric_limits<float>::denorm_min();
    scales[g] = scale;
    std::int8_t* out = q + g * group;
    for (Index k = 0; k < group; ++k) out[k] = static_cast<std::int8_t>(quantized(in[k], scale, -127, 127));
  }
}

void encode_int4_row(const float* w, Index cols, Index group, std::uint8_t* packed, std::uint16_t* scales,
                     const std::string& name) {
  for (Index g = 0; g < cols / group; ++g) {
    const float* in = w + g * group;
    const float amax = max_magnitude(in, group);
    std::uint16_t half = float_to_half(amax > 0.0f ? amax / 7.0f : 1.0f);
    if (half == 0) half = 1;  // below the smallest half: the smallest positive one
    const float scale = half_to_float(half);
    if (!std::isfinite(scale))
      throw Error(name, "holds a weight of magnitude " + shortest_text(amax) +
                            ", whose int4 scale is beyond F16's range (65504)",
                  "use int8 for this model");
    scales[g] = half;
    // Each run of 32 packs into 16 bytes: byte j holds weight j's nibble low, j + 16's high.
    for (Index run = 0; run < group; run += kInt4Run) {
      std::uint8_t* out = packed + (g * group + run) / 2;
      for (Index j = 0; j < 16; ++j) {
        const auto low = static_cast<std::uint8_t>(quantized(in[run + j], scale, -8, 7) + 8);
        const auto high = static_cast<std::uint8_t>(quantized(in[run + j + 16], scale, -8, 7) + 8);
        out[j] = static_cast<std::uint8_t>(low | high << 4);
      }
    }
  }
}

}  // namespace

std::string scale_tensor_name(const std::string& weight_name) { return weight_name + "_scale"; }

std::string shortest_text(float value) {
  char text[32];
  const auto end = std::to_chars(text, text + sizeof text, value).ptr;
  return std::string(text, end);
}

WeightMatrix EncodedMatrix::view() const {
  switch (format) {
    case WeightFormat::F32:
      return TensorView(reinterpret_cast<const float*>(values.data()), {rows, cols});
    case WeightFormat::F16:
    case WeightFormat::BF16:
      return WeightMatrix::half(format, reinterpret_cast<const std::uint16_t*>(values.data()), rows, cols);
    case WeightFormat::Int8:
      return WeightMatrix::int8(reinterpret_cast<const std::int8_t*>(values.data()),
                                reinterpret_cast<const float*>(scales.data()), rows, cols, group);
    case WeightFormat::Int4:
      if (!panels)
        panels.emplace(reinterpret_cast<const std::uint8_t*>(values.data()),
                       reinterpret_cast<const std::uint16_t*>(scales.data()), rows, cols, group);
      return panels->view();
  }
  return {};
}

WeightMatrix EncodedMatrix::view_to_run(bool lookup_only) {
  if (format == WeightFormat::Int4 && lookup_only)
    return WeightMatrix::int4_rows(reinterpret_cast<const std::uint8_t*>(values.data()),
                                   reinterpret_cast<const std::uint16_t*>(scales.data()), rows, cols, group);
  const WeightMatrix matrix = view();
  if (panels) {  // swapped out: `values = {}` would keep the buffers
    std::vector<std::byte>().swap(values);
    std::vector<std::byte>().swap(scales);
  }
  return matrix;
}

DType EncodedMatrix::values_dtype() const {
  switch (format) {
    case WeightFormat::F32: return DType::F32;
    case WeightFormat::F16: return DType::F16;
    case WeightFormat::BF16: return DType::BF16;
    case WeightFormat::Int8: return DType::I8;
    case WeightFormat::Int4: return DType::U8;
  }
  return DType::F32;
}

Shape EncodedMatrix::values_shape() const { return {rows, format == WeightFormat::Int4 ? cols / 2 : cols}; }
DType EncodedMatrix::scales_dtype() const { return format == WeightFormat::Int4 ? DType::F16 : DType::F32; }
Shape EncodedMatrix::scales_shape() const {
  // int8 with a scale per row is [rows], as the format's contract has it.
  if (format == WeightFormat::Int8 && group == cols) return {rows};
  return {rows, group == 0 ? 0 : cols / group};
}

EncodedMatrix encode_matrix(const WeightMatrix& w, const Quantization& target, const std::string& name,
                            FunctionRef<void(Index first, Index end)> rows_done) {
  // int4 on a width its groups do not divide is int8 with a scale per row (stored_as).
  const Quantization stored = target.stored_as(w.cols());
  EncodedMatrix out;
  out.format = stored.type;
  out.rows = w.rows();
  out.cols = w.cols();
  const auto rows = static_cast<std::size_t>(w.rows());
  const auto cols = static_cast<std::size_t>(w.cols());
  // int4's fallback on a width its group does not divide is one int8 group a row: a row
  // too wide for that is the width's fault, which another int4 group size may divide.
  if (stored.type != target.type && w.cols() > kernels::kMaxIntegerGroup)
    throw Error(name, "cannot be int4 in groups of " + std::to_string(target.group_size) + ", which do not divide its rows of " +
                          std::to_string(w.cols()) + " weights, nor int8 with a scale per row (int4's fallback for such a width), "
                          "whose groups hold at most " + std::to_string(kernels::kMaxIntegerGroup) + " weights",
                "choose an int4 group size that divides " + std::to_string(w.cols()));
  if (stored.enabled()) out.group = checked_group(stored, w.cols(), name);
  // Rows are independent: they encode on every thread, each with its own row of floats,
  // saying when a stretch is done.
  constexpr Index kStretch = 1024;
  const auto each_row = [&](auto&& encode) {
    threads::parallel_for(w.rows(), w.cols(), [&](Index first, Index count, int) {
      std::vector<float> row(cols);
      for (Index stretch = first; stretch < first + count; stretch += kStretch) {
        const Index end = std::min(stretch + kStretch, first + count);
        for (Index r = stretch; r < end; ++r) {
          w.dequantize(r, 1, row.data(), w.cols());
          encode(r, row.data());
        }
        rows_done(stretch, end);
      }
    });
  };
  switch (stored.type) {
    case WeightFormat::F32:
      out.values.resize(rows * cols * 4);
      each_row([&](Index r, const float* in) {
        std::memcpy(out.values.data() + static_cast<std::size_t>(r) * cols * 4, in, cols * 4);
      });
      break;
    case WeightFormat::F16:
    case WeightFormat::BF16: {
      out.values.resize(rows * cols * 2);
      auto* values = reinterpret_cast<std::uint16_t*>(out.values.data());
      const bool f16 = stored.type == WeightFormat::F16;
      each_row([&](Index r, const float* in) {
        for (std::size_t k = 0; k < cols; ++k) {
          const std::uint16_t v = f16 ? float_to_half(in[k]) : float_to_bfloat16(in[k]);
          if (f16 && std::isfinite(in[k]) && std::isinf(half_to_float(v)))
            throw Error(name, "holds " + shortest_text(in[k]) + " at row " + std::to_string(r) +
                                  ", beyond F16's range (65504)",
                        "use bf16 (float32's range) or int8");
          values[static_cast<std::size_t>(r) * cols + k] = v;
        }
      });
      break;
    }
    case WeightFormat::Int8: {
      out.values.resize(rows * cols);
      out.scales.resize(rows * static_cast<std::size_t>(w.cols() / out.group) * sizeof(float));
      auto* q = reinterpret_cast<std::int8_t*>(out.values.data());
      auto* scales = reinterpret_cast<float*>(out.scales.data());
      const Index groups = w.cols() / out.group;
      each_row([&](Index r, const float* in) { encode_int8_row(in, w.cols(), out.group, q + r * w.cols(), scales + r * groups, name); });
      break;
    }
    case WeightFormat::Int4: {
      out.values.resize(rows * cols / 2);
      out.scales.resize(rows * static_cast<std::size_t>(w.cols() / out.group) * sizeof(std::uint16_t));
      auto* packed = reinterpret_cast<std::uint8_t*>(out.values.data());
      auto* scales = reinterpret_cast<std::uint16_t*>(out.scales.data());
      const Index groups = w.cols() / out.group;
      each_row([&](Index r, const float* in) {
        encode_int4_row(in, w.cols(), out.group, packed + r * w.cols() / 2, scales + r * groups, name);
      });
      break;
    }
  }
  return out;
}

}  // namespace ordo
