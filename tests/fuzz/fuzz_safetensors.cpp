// libFuzzer target: one safetensors file, validated from memory by
// SafetensorsFile::from_bytes exactly as open() validates a file on disk. What the
// validation accepts is then used as the weight binder uses it: every tensor's element
// count, and every float tensor read as float32 element by element, so that a view the
// validation let out of its bytes is caught by AddressSanitizer.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "models/safetensors.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto* first = reinterpret_cast<const std::byte*>(data);
  ordo::fuzz::refusal_is_fine([&] {
    const auto file = ordo::SafetensorsFile::from_bytes(std::vector<std::byte>(first, first + size), "fuzz.safetensors");
    std::vector<float> storage;
    for (const ordo::TensorInfo& info : file.tensors()) {
      if (file.find(info.name) == nullptr) __builtin_trap();  // listed, so findable
      const ordo::Index count = ordo::element_count(info.shape);
      if (info.dtype != ordo::DType::F32 && info.dtype != ordo::DType::F16 && info.dtype != ordo::DType::BF16) continue;
      const ordo::TensorView view = file.as_float32(info, storage);
      if (view.size() != count) __builtin_trap();
      volatile float sum = 0.0f;  // reads every element
      for (ordo::Index i = 0; i < view.size(); ++i) sum = sum + view.data()[i];
    }
  });
  return 0;
}
