// libFuzzer target: one pytorch_model.bin, read from memory by torch_bin_from_bytes
// exactly as open_torch_bin reads a file: the zip (libzip and ordo's checks of it), its
// pickle (the allowlist of models/pickle_reader.h) and its storages. What is accepted
// is then used as the weight binder uses it: every tensor's element count, and every
// float tensor read as float32 element by element, so that a view the checks let out of
// its storage is caught by AddressSanitizer.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "models/torch_bin.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto* first = reinterpret_cast<const std::byte*>(data);
  ordo::fuzz::refusal_is_fine([&] {
    const auto file = ordo::torch_bin_from_bytes(std::vector<std::byte>(first, first + size), "fuzz/pytorch_model.bin");
    std::vector<float> storage;
    for (const ordo::TensorInfo& info : file.tensors()) {
      if (file.find(info.name) != &info) __builtin_trap();  // names are unique
      const ordo::Index count = ordo::element_count(info.shape);
      if (info.bytes.size() != static_cast<std::size_t>(count) * ordo::dtype_size(info.dtype)) __builtin_trap();
      if (info.dtype != ordo::DType::F32 && info.dtype != ordo::DType::F16 && info.dtype != ordo::DType::BF16) continue;
      const ordo::TensorView view = file.as_float32(info, storage);
      if (view.size() != count) __builtin_trap();
      volatile float sum = 0.0f;  // reads every element
      for (ordo::Index i = 0; i < view.size(); ++i) sum = sum + view.data()[i];
    }
  });
  return 0;
}
