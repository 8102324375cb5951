// A memory-mapped, fully validated safetensors file.
//
// Layout: u64 little-endian header length N, N bytes of JSON header
// {"name": {"dtype": "F32"|"F16"|"BF16"|..., "shape": [...], "data_offsets": [b, e]},
//  "__metadata__": {str: str}?}, then the data. Offsets are relative to the first byte
// after the header.
//
// open() checks the whole file before anything trusts a byte: N <= 100 MB and within
// the file; the header is a JSON object; each entry has a known dtype, a non-negative
// shape and offsets with e - b == numel * dtype size (overflow-checked); entries, sorted
// by offset, tile the data exactly (no gap, no overlap) and end at the end of the file.
// Every failure throws ordo::Error naming the file, the tensor and the numbers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/tensor.h"
#include "engine/weight_matrix.h"

namespace ordo {

enum class DType { F32, F16, BF16, F64, I64, I32, I16, I8, U8, Bool };

std::string_view dtype_name(DType dtype);
std::size_t dtype_size(DType dtype);

struct TensorInfo {
  std::string name;
  DType dtype;
  Shape shape;
  std::span<const std::byte> bytes;  // into the mapping
};

class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::filesystem::path& path);
  // A file already in memory (received, embedded, or a fuzzer's input), validated
  // exactly as open() validates one on disk; `name` stands for its path in messages.
  static SafetensorsFile from_bytes(std::vector<std::byte> bytes, const std::filesystem::path& name);
  // Tensors another reader has read and checked (a pytorch_model.bin: models/torch_bin.h),
  // served as a safetensors file's are: each TensorInfo's bytes lie in memory that
  // `owner` keeps alive, and their names are unique. Tensors may share bytes (a tied
  // weight saved once and named twice).
  static SafetensorsFile from_checked_tensors(const std::filesystem::path& path, std::shared_ptr<const void> owner,
                                              std::vector<TensorInfo> tensors);

  const std::filesystem::path& path() const { return path_; }
  // In file order (by offset).
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(const std::string& name) const;  // nullptr when absent; O(1)
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // The tensor as float32: a view into the mapping for F32 (no copy; the mapping is
  // 8-byte-aligned only when the header length allows it, so unaligned F32 data is
  // copied too), otherwise converted (F16, BF16) into `storage`, which must outlive the
  // view. Other dtypes throw Error naming the tensor.
  TensorView as_float32(const TensorInfo& info, std::vector<float>& storage) const;

  // Lets the process's memory drop the pages wholly inside the tensor's bytes, for a
  // tensor read once into another layout (an int4 matrix arranged into panels): they
  // stay in the page cache, and a later read maps them back. Only for a file open()
  // mapped; otherwise nothing. The span form: part of one of this file's tensors.
  void release(const TensorInfo& info) const;
  void release(std::span<const std::byte> bytes) const;

  // The tensor's rows (its leading dimension: `rows` of them, a whole number of bytes
  // each), read on request: with pread for a file open() mapped, so that reading a row
  // never maps the file's pages (a matrix only looked up: a token embedding); from
  // memory otherwise. The reader keeps the file open; a file truncated meanwhile is
  // reported as Error naming it, where a read through the mapping would raise SIGBUS.
  std::unique_ptr<RowReader> row_reader(const TensorInfo& info, Index rows) const;

 private:
  struct Mapping;
  // Everything open() promises, checked on the bytes of `mapping` (file_size of them).
  static SafetensorsFile validate(const std::filesystem::path& path, std::shared_ptr<const Mapping> mapping,
                                  std::uint64_t file_size);
  std::filesystem::path path_;
  std::shared_ptr<const void> owner_;  // the Mapping, or what from_checked_tensors() was given
  bool mapped_ = false;                // open(): owner_ is a Mapping of the file
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, std::size_t> index_;  // name -> position in tensors_
  std::map<std::string, std::string> metadata_;
};

// Writing is for tests and tools (ordo itself only reads): a valid file of F32 tensors,
// in the order given, the data 8-byte aligned. Throws Error naming the file and the
// tensor (a reserved or repeated name, a negative dimension, too few or many values).
struct NamedTensor {
  std::string name;
  Shape shape;
  std::vector<float> values;
};
void write_safetensors_f32(const std::filesystem::path& path,
                           const std::vector<NamedTensor>& tensors);

// The same file, its values made while it is written instead of held: fill(first, out)
// puts values [first, first + out.size()) of the tensor into `out`, a chunk of at most
// 2^20 values at a time, in order. For files larger than their writer should hold in
// memory (ordo bench's random models: 400 MB, which would count in the peak RSS it
// reports).
struct GeneratedTensor {
  std::string name;
  Shape shape;
  std::function<void(std::uint64_t first, std::span<float> out)> fill;
};
void write_generated_safetensors_f32(const std::filesystem::path& path,
                                     const std::vector<GeneratedTensor>& tensors);

// A file of tensors of any dtype, each made when it is written (one tensor's bytes in
// memory at a time: ordo quantize): bytes() must return exactly numel x dtype size
// bytes, else Error names the tensor. `metadata` becomes "__metadata__" when not empty.
struct EncodedTensor {
  std::string name;
  DType dtype;
  Shape shape;
  std::function<std::vector<std::byte>()> bytes;
};
void write_encoded_safetensors(const std::filesystem::path& path, const std::vector<EncodedTensor>& tensors,
                               const std::map<std::string, std::string>& metadata = {});

}  // namespace ordo
