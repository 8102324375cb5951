#include "models/stored_matrix.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "engine/error.h"
#include "engine/half.h"
#include "engine/integer_product.h"
#include "engine/printable.h"
#include "models/quantize.h"

namespace ordo {

namespace {

std::string where(const StoredTensor& t) { return t.file->path().string() + ": tensor '" + printable(t.info->name) + "'"; }

// The tensor's bytes as T, copied when the mapping places them at an address T cannot
// be read from (safetensors aligns data only to the header's length).
template <class T>
const T* aligned(const StoredTensor& t, MatrixCopies& copies) {
  const std::byte* bytes = t.info->bytes.data();
  if (reinterpret_cast<std::uintptr_t>(bytes) % alignof(T) == 0) return reinterpret_cast<const T*>(bytes);
  copies.bytes.emplace_back(t.info->bytes.begin(), t.info->bytes.end());
  return reinterpret_cast<const T*>(copies.bytes.back().data());
}

// A 16-bit float's exponent bits all set: infinity or NaN.
template <std::uint16_t ExponentMask>
void check_finite_16(const StoredTensor& t, const std::uint16_t* data, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i)
    if ((data[i] & ExponentMask) == ExponentMask)
      throw Error(where(t), "holds a NaN or infinity at element " + std::to_string(i),
                  "the checkpoint is broken (a diverged training run, or a bad conversion)");
}

void check_shape(const StoredTensor& t, const Shape& want, const std::string& meaning) {
  if (t.info->shape != want)
    throw Error(where(t), "has shape " + to_string(t.info->shape) + ", expected " + meaning,
                "is config.json from another checkpoint?");
}

// The scales of a quantized matrix: present, of `dtype`, shaped [rows, cols / group] or,
// for int8 with a scale a row, [rows] (the contract's two spellings of one group a row:
// both are read; an int4 model's int8 fallback is [rows] alone, as ordo quantize writes
// it), every one finite and > 0.
template <class T>
const T* checked_scales(const StoredTensor& values, const StoredTensor& scales, DType dtype, const TensorSpec& spec,
                        Index group, bool int4_fallback, MatrixCopies& copies) {
  const Index rows = spec.shape[0], cols = spec.shape[1];
  const std::string name = scale_tensor_name(values.info->name);
  const char* format = dtype == DType::F32 ? "int8" : "int4";
  if (scales.info == nullptr)
    throw Error(where(values), std::string("is ") + format + " but the file has no '" + printable(name) + "'",
                "a quantized weight needs its scales; was the file written by ordo quantize?");
  if (scales.info->dtype != dtype)
    throw Error(where(scales), "has dtype " + std::string(dtype_name(scales.info->dtype)) + ", expected " +
                                   std::string(dtype_name(dtype)) + " (" + format + " scales)");
  const bool per_row = dtype == DType::F32 && group == cols;
  const Shape want = per_row ? Shape{rows} : Shape{rows, cols / group};
  const bool as_groups = per_row && !int4_fallback && scales.info->shape == Shape{rows, 1};
  if (!as_groups)
    check_shape(scales, want,
                per_row ? to_string(want) + " (one scale per row)" + (int4_fallback ? "" : " or " + to_string(Shape{rows, 1}))
                        : to_string(want) + " (rows x cols/group_size=" + std::to_string(group) + ")");
  const T* data = aligned<T>(scales, copies);
  const auto count = static_cast<std::size_t>(rows * (cols / group));
  for (std::size_t i = 0; i < count; ++i) {
    const float scale = dtype == DType::F32 ? static_cast<float>(data[i]) : half_to_float(static_cast<std::uint16_t>(data[i]));
    if (!(scale > 0.0f) || !std::isfinite(scale))
      throw Error(where(scales), "scale " + std::to_string(i) + " is " + shortest_text(scale) + ", and every scale must be finite and > 0",
                  "the file is broken: ordo quantize never writes such a scale");
    // An int8 weight is q x scale with |q| <= 128: a larger scale makes weights infinite.
    // (An int4 one is at most 8 x 65504, F16's largest.)
    if (dtype == DType::F32 && scale > kMaxInt8Scale)
      throw Error(where(scales), "scale " + std::to_string(i) + " is " + shortest_text(scale) +
                                     ", so that its weights (up to 128 x it) are beyond float32's range; an int8 scale is at most " +
                                     shortest_text(kMaxInt8Scale),
                  "the file is broken: ordo quantize never writes such a scale");
  }
  return data;
}

// The group size of config.json, checked against this matrix's width.
Index checked_group(const StoredTensor& values, const Quantization& q, Index cols) {
  const Index group = q.group_for(cols);
  if (cols % group != 0)
    throw Error(where(values), "has rows of " + std::to_string(cols) + " weights, which quantization.group_size=" +
                                   std::to_string(q.group_size) + " does not divide",
                "config.json does not belong to these weights");
  if (group > kernels::kMaxIntegerGroup)
    throw Error(where(values), "has groups of " + std::to_string(group) + " weights, more than the " +
                                   std::to_string(kernels::kMaxIntegerGroup) +
                                   " whose integer products ordo sums exactly (engine/integer_product.h)",
                "quantize it with a smaller quantization.group_size");
  return group;
}

// An I8 weight needs an int8 model, or an int4 one whose groups do not divide its width
// (Quantization::stored_as): int4 then cannot pack it and ordo quantize writes int8. An
// I8 weight that int4 could hold is refused, so that an int4 directory is exactly what
// ordo quantize --type int4 writes (and --compute-type int4 converts to), and a config
// from another checkpoint is caught rather than run.
void require_int8_allowed(const StoredTensor& values, const Quantization& q, Index cols) {
  if (q.type != WeightFormat::Int4 || q.stored_as(cols).type == WeightFormat::Int8) return;
  throw Error(where(values), "is I8 (int8) in an int4 model, but its rows of " + std::to_string(cols) +
                                 " weights are a multiple of quantization.group_size=" + std::to_string(q.group_size) +
                                 ", so int4 holds them; an int4 model stores a matrix as int8 only when group_size "
                                 "does not divide its width",
              "config.json and the weights must agree; ordo quantize writes both");
}

// A U8 (int4) weight needs whole groups: a width that group_size does not divide is
// int8 with a scale per row in an int4 model.
void require_int4_width(const StoredTensor& values, const Quantization& q, Index cols) {
  if (q.stored_as(cols).type == WeightFormat::Int4) return;
  throw Error(where(values), "is int4, but its rows have " + std::to_string(cols) +
                                 " weights, not a multiple of quantization.group_size=" + std::to_string(q.group_size) +
                                 " (int4 groups are whole runs of 32); an int4 model stores such a matrix as int8 "
                                 "with a scale per row",
              "config.json does not belong to these weights, or the file was not written by ordo quantize");
}

void require_quantization(const StoredTensor& values, const Quantization& q, WeightFormat format) {
  if (q.type != format)
    throw Error(where(values), "has dtype " + std::string(dtype_name(values.info->dtype)) + " (" +
                                   std::string(weight_format_name(format)) + " weights), but config.json's quantization is " +
                                   (q.enabled() ? std::string(weight_format_name(q.type)) : std::string("not set")),
                "config.json and the weights must agree; ordo quantize writes both");
}

// A matrix only looked up, checked, then read a row at a time from its file: a step
// needs a few rows, and reading them through the mapping would map whole page cache
// folios (engine/weight_matrix.h, RowReader). Copies the checks made to read unaligned
// data are dropped (`copies_before`): nothing reads them.
WeightMatrix read_by_row(const TensorSpec& spec, WeightFormat format, const StoredTensor& values, const StoredTensor& scales,
                         Index group, MatrixCopies& copies, std::size_t copies_before) {
  const Index rows = spec.shape[0];
  copies.bytes.resize(copies_before);
  const RowReader& value_rows = *copies.readers.emplace_back(values.file->row_reader(*values.info, rows));
  const RowReader* scale_rows =
      scales.info == nullptr ? nullptr : copies.readers.emplace_back(scales.file->row_reader(*scales.info, rows)).get();
  release_stored_rows(values, rows, 0, rows);
  release_stored_rows(scales, rows, 0, rows);
  return WeightMatrix::read_by_row(format, value_rows, scale_rows, rows, spec.shape[1], group);
}

}  // namespace

WeightMatrix bind_stored_matrix(const TensorSpec& spec, StoredTensor values, StoredTensor scales,
                                const Quantization& quantization, MatrixCopies& copies) {
  const Index rows = spec.shape[0], cols = spec.shape[1];
  const DType dtype = values.info->dtype;
  // A float weight with a scale: the scale is what is wrong. (A weight of a dtype no
  // matrix has, scale or not, is refused below naming the weight.)
  const bool is_float = dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16;
  if (is_float && scales.info != nullptr)
    throw Error(where(scales), "is a scale of '" + printable(values.info->name) + "', which is " +
                                   std::string(dtype_name(dtype)) + ", not quantized",
                "the file is inconsistent: remove the scale, or quantize the weight");
  const std::size_t copies_before = copies.bytes.size();
  switch (dtype) {
    case DType::F16:
    case DType::BF16: {
      check_shape(values, spec.shape, spec.shape_meaning);
      const std::uint16_t* data = aligned<std::uint16_t>(values, copies);
      const auto count = static_cast<std::size_t>(rows * cols);
      if (dtype == DType::F16)
        check_finite_16<0x7c00>(values, data, count);
      else
        check_finite_16<0x7f80>(values, data, count);
      const WeightFormat format = dtype == DType::F16 ? WeightFormat::F16 : WeightFormat::BF16;
      if (spec.lookup_only) return read_by_row(spec, format, values, {}, 0, copies, copies_before);
      return WeightMatrix::half(format, data, rows, cols);
    }
    case DType::I8: {
      require_int8_allowed(values, quantization, cols);
      const Quantization stored = quantization.stored_as(cols);  // int4's fallback: int8, a scale per row
      require_quantization(values, stored, WeightFormat::Int8);
      check_shape(values, spec.shape, spec.shape_meaning + " (int8)");
      const Index group = checked_group(values, stored, cols);
      const float* s = checked_scales<float>(values, scales, DType::F32, spec, group,
                                            quantization.type == WeightFormat::Int4, copies);
      if (spec.lookup_only) return read_by_row(spec, WeightFormat::Int8, values, scales, group, copies, copies_before);
      return WeightMatrix::int8(reinterpret_cast<const std::int8_t*>(values.info->bytes.data()), s, rows, cols, group);
    }
    case DType::U8: {
      require_quantization(values, quantization, WeightFormat::Int4);
      require_int4_width(values, quantization, cols);
      // Built with append: g++ 12's -Wrestrict misfires on "[" + std::string (GCC bug 105329).
      std::string meaning = to_string(Shape{rows, cols / 2});
      meaning.append(" (int4: two weights a byte of ").append(spec.shape_meaning).append(")");
      check_shape(values, Shape{rows, cols / 2}, meaning);
      const Index group = checked_group(values, quantization, cols);
      const std::uint16_t* s = checked_scales<std::uint16_t>(values, scales, DType::F16, spec, group, false, copies);
      if (spec.lookup_only) return read_by_row(spec, WeightFormat::Int4, values, scales, group, copies, copies_before);
      // The file's layout: arrange_int4 makes what products read, unless it converts.
      return WeightMatrix::int4_rows(reinterpret_cast<const std::uint8_t*>(values.info->bytes.data()), s, rows, cols, group);
    }
    default:
      throw Error(where(values), "has dtype " + std::string(dtype_name(dtype)) + ", which a weight matrix cannot have",
                  "ordo reads F32, F16, BF16, and I8 / U8 (int4) with quantization in config.json");
  }
}

void release_stored_rows(const StoredTensor& tensor, Index rows, Index first, Index end) {
  if (tensor.info == nullptr || rows <= 0) return;
  const std::size_t row_bytes = tensor.info->bytes.size() / static_cast<std::size_t>(rows);
  tensor.file->release(tensor.info->bytes.subspan(static_cast<std::size_t>(first) * row_bytes,
                                                  static_cast<std::size_t>(end - first) * row_bytes));
}

WeightMatrix arrange_int4(const WeightMatrix& stored, const StoredTensor& values, const StoredTensor& scales,
                          MatrixCopies& copies) {
  const Int4Panels& panels = copies.int4.emplace_back(
      static_cast<const std::uint8_t*>(stored.data()), static_cast<const std::uint16_t*>(stored.scales()), stored.rows(),
      stored.cols(), stored.group(), [&](Index first, Index end) {
        // Read once, into the panels: the process need not keep the file's pages.
        release_stored_rows(values, stored.rows(), first, end);
      });
  release_stored_rows(scales, stored.rows(), 0, stored.rows());
  return panels.view();
}

}  // namespace ordo
