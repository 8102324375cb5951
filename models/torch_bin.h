// pytorch_model.bin: a state dict saved by torch.save (PyTorch 1.6 or later), read
// without running any of it.
//
// The zip (models/torch_zip.h) is checked whole, then its pickle is read by the
// allowlist of models/pickle_reader.h, then each storage the tensors use is read from
// <folder>/data/<key> with exactly the bytes its element count needs, and every tensor
// becomes a view into its storage. The result is served as a SafetensorsFile, so the
// weight binder, `ordo inspect` and the shard index treat both formats alike; tensors
// that share a storage (a tied embedding saved under several names) share bytes.
//
// Refused by name: the format torch.save wrote before 1.6 (a bare pickle, not a zip),
// a big-endian file (byteorder "big"), and whatever the zip and pickle readers refuse.
#pragma once

#include <cstddef>
#include <filesystem>
#include <vector>

#include "models/safetensors.h"

namespace ordo {

SafetensorsFile open_torch_bin(const std::filesystem::path& path);

// The same from memory (a fuzzer's input); `name` stands for its path in messages.
SafetensorsFile torch_bin_from_bytes(std::vector<std::byte> bytes, const std::filesystem::path& name);

}  // namespace ordo
