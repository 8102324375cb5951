#include "models/weights.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>

#include "engine/error.h"
#include "models/shard_index.h"
#include "models/stored_matrix.h"

namespace ordo {

namespace {

constexpr std::size_t kAllFinite = static_cast<std::size_t>(-1);

// The first NaN or infinity, by its exponent bits (all ones), in one pass the compiler
// vectorizes: the whole Marian-base model is scanned in a few milliseconds at load.
std::size_t first_non_finite(const TensorView& view) {
  const float* data = view.data();
  const auto size = static_cast<std::size_t>(view.size());
  constexpr std::size_t kChunk = 4096;
  for (std::size_t begin = 0; begin < size; begin += kChunk) {
    const std::size_t end = std::min(size, begin + kChunk);
    std::uint32_t bad = 0;
    for (std::size_t i = begin; i < end; ++i) {
      std::uint32_t bits;
      std::memcpy(&bits, data + i, sizeof bits);
      bad |= static_cast<std::uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
    }
    if (bad != 0)
      for (std::size_t i = begin; i < end; ++i)
        if (!std::isfinite(data[i])) return i;
  }
  return kAllFinite;
}

std::string describe(float value) { return std::isnan(value) ? "NaN" : value > 0 ? "+infinity" : "-infinity"; }

}  // namespace

WeightStore WeightStore::load(const std::filesystem::path& directory, const ModelConfig& config) {
  WeightStore store;
  store.files_ = open_weight_files(directory);
  const auto find = [&](const std::string& name) -> std::pair<const SafetensorsFile*, const TensorInfo*> {
    for (const SafetensorsFile& file : store.files_)
      if (const TensorInfo* info = file.find(name)) return {&file, info};
    return {nullptr, nullptr};
  };
  store.source_ = store.files_.size() == 1 ? store.files_.front().path().string()
                                           : weights_entry_file(directory).string();

  // Every layer has tensors of its own, so the files bound the layer count. Checked
  // before the name table is expanded: a config claiming a million layers fails here
  // in microseconds instead of building millions of names first.
  std::size_t tensors = 0;
  for (const SafetensorsFile& file : store.files_) tensors += file.tensors().size();
  const auto bounded = [&](const char* key, const char* hf_key, Index layers) {
    if (layers > static_cast<Index>(tensors))
      throw Error((directory / "config.json").string(),
                  "key '" + std::string(config.family == Family::Llama ? hf_key : key) + "' asks for " +
                      std::to_string(layers) + " layers, but the weights hold only " + std::to_string(tensors) +
                      " tensors",
                  "config.json does not belong to these weights");
  };
  bounded("encoder_layers", "num_hidden_layers", config.encoder_layers);
  bounded("decoder_layers", "num_hidden_layers", config.decoder_layers);

  std::set<std::string> expected;
  // A pytorch_model.bin names a tied weight once per module that holds it (lm_head.weight
  // and model.shared.weight, one storage): such a name is the tie itself, not an unused tensor.
  std::set<std::pair<const std::byte*, std::size_t>> bound_bytes;
  for (const TensorSpec& spec : expected_tensors(config)) {
    expected.insert(spec.name);
    const auto [file, info] = find(spec.name);
    const std::string where = file != nullptr ? file->path().string() : store.source_;
    if (info == nullptr) {
      if (spec.required)
        throw Error(where, "missing tensor '" + spec.name + "' of shape " + spec.shape_meaning,
                    "the file does not match config.json, or was written by another tool");
      if (spec.matrix)
        store.matrices_[spec.name] = WeightMatrix();
      else
        store.bound_[spec.name] = TensorView();
      continue;
    }
    if (!info->bytes.empty()) bound_bytes.emplace(info->bytes.data(), info->bytes.size());
    if (spec.matrix && info->dtype != DType::F32) {
      const auto [scale_file, scale_info] = find(scale_tensor_name(spec.name));
      if (scale_info != nullptr) expected.insert(scale_info->name);
      const StoredTensor values{file, info}, scales{scale_file, scale_info};
      WeightMatrix matrix = bind_stored_matrix(spec, values, scales, config.quantization, store.copies_);
      store.parameter_count_ += matrix.rows() * matrix.cols();
      store.matrices_[spec.name] = store.run_as(std::move(matrix), config, spec, values, scales);
      continue;
    }
    if (info->shape != spec.shape)
      throw Error(where, "tensor '" + spec.name + "' has shape " + to_string(info->shape) +
                             ", expected " + spec.shape_meaning,
                  "is config.json from another checkpoint?");
    if (spec.matrix) {
      if (const auto [_, scale] = find(scale_tensor_name(spec.name)); scale != nullptr)
        throw Error(where, "tensor '" + scale->name + "' is a scale of '" + spec.name + "', which is F32, not quantized",
                    "the file is inconsistent: remove the scale, or quantize the weight");
    }
    store.converted_.emplace_back();
    TensorView view = file->as_float32(*info, store.converted_.back());
    if (store.converted_.back().empty()) store.converted_.pop_back();
    if (const std::size_t at = first_non_finite(view); at != kAllFinite)
      throw Error(where, "tensor '" + spec.name + "' holds " + describe(view.data()[at]) + " at element " +
                             std::to_string(at),
                  "the checkpoint is broken (a diverged training run, or a bad conversion)");
    store.parameter_count_ += view.size();
    if (spec.matrix)
      store.matrices_[spec.name] = store.run_as(WeightMatrix(std::move(view)), config, spec, {file, info}, {});
    else
      store.bound_[spec.name] = std::move(view);
  }
  for (const SafetensorsFile& file : store.files_)
    for (const TensorInfo& info : file.tensors())
      if (!expected.contains(info.name) && !bound_bytes.contains({info.bytes.data(), info.bytes.size()}))
        store.unused_.push_back(info.name);
  return store;
}

WeightMatrix WeightStore::run_as(WeightMatrix matrix, const ModelConfig& config, const TensorSpec& spec,
                                 const StoredTensor& values, const StoredTensor& scales) {
  if (matrix.empty()) return matrix;
  // As stored when the compute type is what encode_matrix would make of it (int4's int8
  // fallback included); int4 then runs from panels, unless it is only looked up.
  const auto as_stored = [&] {
    return matrix.format() == WeightFormat::Int4 && !matrix.int4_in_panels() && !matrix.is_read_by_row()
               ? arrange_int4(matrix, values, scales, copies_)
               : matrix;
  };
  if (!config.compute_type) return as_stored();
  const Quantization& target = *config.compute_type;
  const Quantization stored = target.stored_as(matrix.cols());
  const Index group = stored.enabled() ? stored.group_for(matrix.cols()) : 0;
  if (matrix.format() == stored.type && (!stored.enabled() || matrix.group() == group)) return as_stored();
  // Converted: the stored rows are read once, so their file pages go as they are (a
  // float32 file's would otherwise stay beside the new copy, 5x an int8 model's size).
  encoded_.push_back(encode_matrix(matrix, target, source_ + ": tensor '" + spec.name + "'", [&](Index first, Index end) {
    release_stored_rows(values, matrix.rows(), first, end);
    release_stored_rows(scales, matrix.rows(), first, end);
  }));
  return encoded_.back().view_to_run(spec.lookup_only);
}

WeightMatrix WeightStore::matrix(const std::string& name) const {
  const auto found = matrices_.find(name);
  if (found == matrices_.end())
    throw Error("weights", "no weight matrix '" + name + "' in the name table for this config",
                "a bug in ordo's weight binding; please report it");
  return found->second;
}

std::string WeightStore::matrix_formats() const {
  std::map<std::string, Index> formats;
  for (const auto& [name, m] : matrices_)
    if (!m.empty()) {
      std::string text(weight_format_name(m.format()));
      if (m.format() == WeightFormat::Int8 || m.format() == WeightFormat::Int4)
        // int4 says its groups even when one spans a row: its rows differ in width, its groups do not.
        text += m.format() == WeightFormat::Int8 && m.group() == m.cols()
                    ? " (a scale per row)"
                    : " (groups of " + std::to_string(m.group()) + ")";
      ++formats[text];
    }
  // One format: its name. Several (an int4 model's int8 fallbacks, say): how many of each.
  std::string all;
  for (const auto& [text, count] : formats) {
    all += (all.empty() ? "" : " and ") + text;
    if (formats.size() > 1) all += ": " + std::to_string(count) + (count == 1 ? " matrix" : " matrices");
  }
  return all;
}

std::size_t WeightStore::matrix_bytes() const {
  std::size_t bytes = 0;
  for (const auto& [name, m] : matrices_) bytes += m.empty() ? 0 : m.bytes();
  return bytes;
}

TensorView WeightStore::get(const std::string& name) const {
  const auto found = bound_.find(name);
  if (found == bound_.end())
    throw Error("weights", "no tensor '" + name + "' in the name table for this config",
                "a bug in ordo's weight binding; please report it");
  return found->second;
}

}  // namespace ordo
