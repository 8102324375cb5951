// Findings of the fuzz targets (tests/fuzz, tools/scripts/fuzz.sh) and of the sanitizer builds
// (tools/scripts/sanitize.sh), each fixed in the library and kept here with the message it now
// gets. The inputs themselves are also in tests/fuzz/corpus/<target>/finding-*, which
// the fuzz_corpus.* tests replay.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "engine/error.h"
#include "models/safetensors.h"
#include "tests/reference.h"

namespace ordo {
namespace {

using ::testing::HasSubstr;
using reference::error_message;

// The bytes of a safetensors file with this header and no data.
std::vector<std::byte> header_only(const std::string& header) {
  std::vector<std::byte> bytes(8 + header.size());
  for (int i = 0; i < 8; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<std::byte>((header.size() >> (8 * i)) & 0xff);
  for (std::size_t i = 0; i < header.size(); ++i) bytes[8 + i] = static_cast<std::byte>(header[i]);
  return bytes;
}

// A U8 tensor of shape [2^62, 3, 0]: 0 bytes, and its byte count never overflowed a
// uint64, but its element count 2^62 x 3 overflows the int64 that element_count()
// returns (UBSan: signed integer overflow in engine/tensor.cpp). Found by inspection
// while writing fuzz_safetensors, which reproduced it. Now the header is refused.
TEST(FuzzRegressions, OneByteDtypeWhoseElementCountOverflowsAnIndexIsRefused) {
  const std::string header =
      R"({"x":{"dtype":"U8","shape":[4611686018427387904,3,0],"data_offsets":[0,0]}})";
  EXPECT_THAT(error_message([&] { SafetensorsFile::from_bytes(header_only(header), "f.safetensors"); }),
              HasSubstr("f.safetensors: tensor 'x': shape [4611686018427387904, 3, 0] of U8 overflows 64 bits"));
}

}  // namespace
}  // namespace ordo
