// safetensors: valid files read back exactly; one malformed file per validation rule,
// each rejected with an ordo::Error naming the file, the tensor and the numbers.
// Oracles: the bytes we wrote (exact equality); for F16/BF16, the IEEE values worked out
// by hand (ldexp), compared exactly, bit for bit where the sign of zero or NaN matters.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>

#include "engine/error.h"
#include "models/safetensors.h"
#include "tests/model_factory.h"
#include "tests/reference.h"

namespace ordo {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using reference::error_message;
using testing_support::temp_dir;

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = temp_dir("safetensors"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A file of: u64 LE header length, `header` verbatim, then `data`.
  std::filesystem::path write_raw(const std::string& header, const std::string& data,
                                  const std::string& name = "raw.safetensors") {
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i)
      bytes[static_cast<std::size_t>(i)] =
          static_cast<char>((static_cast<std::uint64_t>(header.size()) >> (8 * i)) & 0xff);
    return write_bytes(bytes + header + data, name);
  }
  std::filesystem::path write_bytes(const std::string& bytes,
                                    const std::string& name = "raw.safetensors") {
    const auto path = dir_ / name;
    std::ofstream(path, std::ios::binary).write(bytes.data(),
                                                static_cast<std::streamsize>(bytes.size()));
    return path;
  }
  // Message of the Error that opening `path` throws.
  static std::string open_error(const std::filesystem::path& path) {
    return error_message([&] { SafetensorsFile::open(path); });
  }

  std::filesystem::path dir_;
};

std::string zeros(std::size_t n) { return std::string(n, '\0'); }

template <class T>
std::string raw_bytes(const std::vector<T>& values) {
  std::string bytes(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// ---------------------------------------------------------------------------------------
// Valid files

TEST_F(Safetensors, WrittenF32FileReadsBackWithoutCopying) {
  const std::vector<NamedTensor> written = {
      {"a.weight", {2, 3}, {1, 2, 3, 4, 5, -6.5f}},
      {"b", {4}, {0.25f, -0.0f, 1e-30f, 3e38f}},
      {"empty", {0, 5}, {}},
      {"scalar", {}, {42}},
  };
  const auto path = dir_ / "model.safetensors";
  write_safetensors_f32(path, written);

  // The header is padded so that the data, at 8 + N, is 8-byte aligned.
  std::ifstream in(path, std::ios::binary);
  unsigned char length[8];
  in.read(reinterpret_cast<char*>(length), 8);
  std::uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = header_size << 8 | length[i];
  EXPECT_EQ(header_size % 8, 0u);

  const SafetensorsFile file = SafetensorsFile::open(path);
  ASSERT_EQ(file.tensors().size(), written.size());
  EXPECT_TRUE(file.metadata().empty());
  EXPECT_EQ(file.find("missing"), nullptr);
  for (const NamedTensor& want : written) {
    const TensorInfo* info = file.find(want.name);
    ASSERT_NE(info, nullptr) << want.name;
    EXPECT_EQ(info->dtype, DType::F32);
    EXPECT_EQ(info->shape, want.shape) << want.name;
    EXPECT_EQ(info->bytes.size(), want.values.size() * 4) << want.name;
    std::vector<float> storage;
    const TensorView view = file.as_float32(*info, storage);
    EXPECT_TRUE(storage.empty()) << want.name << ": F32 data was copied";
    EXPECT_EQ(static_cast<const void*>(view.data()), static_cast<const void*>(info->bytes.data()))
        << want.name << ": not a view into the mapping";
    EXPECT_EQ(view.shape(), want.shape);
    for (std::size_t i = 0; i < want.values.size(); ++i)
      EXPECT_EQ(std::bit_cast<std::uint32_t>(view.data()[i]),
                std::bit_cast<std::uint32_t>(want.values[i]))
          << want.name << " at index " << i;
  }
  // File order: by offset, which is the order written.
  EXPECT_EQ(file.tensors()[0].name, "a.weight");
  EXPECT_EQ(file.tensors()[1].name, "b");
}

TEST_F(Safetensors, ViewsOutliveTheFileObjectThroughCopies) {
  const auto path = dir_ / "m.safetensors";
  write_safetensors_f32(path, {{"x", {3}, {7, 8, 9}}});
  std::vector<float> storage;
  TensorView view;
  SafetensorsFile copy;
  {
    const SafetensorsFile file = SafetensorsFile::open(path);
    copy = file;
    view = copy.as_float32(*copy.find("x"), storage);
  }
  EXPECT_EQ(view.data()[2], 9.0f);
}

TEST_F(Safetensors, EmptyHeaderIsAValidFile) {
  const SafetensorsFile file = SafetensorsFile::open(write_raw("{}      ", ""));
  EXPECT_TRUE(file.tensors().empty());
}

TEST_F(Safetensors, MetadataIsRead) {
  const auto path = write_raw(
      R"({"__metadata__":{"format":"pt","note":"x"},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
      raw_bytes(std::vector<float>{1.5f}));
  const SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.metadata().at("note"), "x");
  ASSERT_EQ(file.tensors().size(), 1u);
}

TEST_F(Safetensors, MisalignedF32IsCopied) {
  // Header of 4k+1 bytes puts the data at an odd address.
  std::string header = R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
  while (header.size() % 4 != 1) header += ' ';
  const std::vector<float> values = {1.0f, -2.0f, 0.1f, std::numeric_limits<float>::infinity()};
  const SafetensorsFile file = SafetensorsFile::open(write_raw(header, raw_bytes(values)));
  const TensorInfo& info = file.tensors().at(0);
  ASSERT_NE(reinterpret_cast<std::uintptr_t>(info.bytes.data()) % alignof(float), 0u);
  std::vector<float> storage;
  const TensorView view = file.as_float32(info, storage);
  ASSERT_EQ(storage.size(), 4u);
  EXPECT_EQ(view.data(), storage.data());
  EXPECT_EQ(view.shape(), (Shape{2, 2}));
  for (std::size_t i = 0; i < values.size(); ++i)
    EXPECT_EQ(view.data()[i], values[i]) << "at index " << i;
}

struct Conversion {
  std::uint16_t bits;
  float want;
  const char* what;
};

std::vector<std::uint16_t> bits_of(const std::vector<Conversion>& table) {
  std::vector<std::uint16_t> bits;
  for (const Conversion& c : table) bits.push_back(c.bits);
  return bits;
}

// Opens the one-tensor file at `path`, written from `table`'s bits, and checks its
// dtype and as_float32 bit for bit (where NaN is wanted, any NaN).
void expect_converted(const std::filesystem::path& path, DType dtype, const std::vector<Conversion>& table) {
  const SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_EQ(file.tensors().at(0).dtype, dtype);
  std::vector<float> storage;
  const TensorView view = file.as_float32(file.tensors().at(0), storage);
  ASSERT_EQ(view.size(), static_cast<Index>(table.size()));
  for (std::size_t i = 0; i < table.size(); ++i) {
    const float got = view.data()[i];
    const Conversion& c = table[i];
    if (std::isnan(c.want)) {
      EXPECT_TRUE(std::isnan(got)) << "at index " << i << " (" << c.what << "): got " << got;
    } else {
      EXPECT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(c.want))
          << "at index " << i << " (" << c.what << "): got " << got << ", want " << c.want;
    }
  }
}

std::string tensor_header(const std::string& dtype, std::size_t count) {
  std::string header = R"({"t":{"dtype":")" + dtype + R"(","shape":[)" + std::to_string(count) +
                       R"(],"data_offsets":[0,)" + std::to_string(2 * count) + "]}}";
  while (header.size() % 8 != 0) header += ' ';
  return header;
}

TEST_F(Safetensors, F16ConvertsExactly) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<Conversion> table = {
      {0x0000, 0.0f, "+0"},
      {0x8000, -0.0f, "-0"},
      {0x3c00, 1.0f, "1"},
      {0xc100, -2.5f, "-2.5"},
      {0x7bff, 65504.0f, "largest normal"},
      {0x0400, std::ldexp(1.0f, -14), "smallest normal 2^-14"},
      {0x0001, std::ldexp(1.0f, -24), "smallest subnormal 2^-24"},
      {0x8001, -std::ldexp(1.0f, -24), "-2^-24"},
      {0x03ff, std::ldexp(1023.0f, -24), "largest subnormal 1023 * 2^-24"},
      {0x0200, std::ldexp(1.0f, -15), "subnormal 2^-15"},
      {0x3555, std::ldexp(1365.0f, -12), "0.333251953125 = 0x555 * 2^-12"},
      {0x7c00, inf, "+inf"},
      {0xfc00, -inf, "-inf"},
      {0x7e00, std::numeric_limits<float>::quiet_NaN(), "NaN"},
      {0x7c01, std::numeric_limits<float>::quiet_NaN(), "signalling NaN stays NaN"},
  };
  expect_converted(write_raw(tensor_header("F16", table.size()), raw_bytes(bits_of(table))), DType::F16,
                   table);
}

TEST_F(Safetensors, BF16ConvertsExactly) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<Conversion> table = {
      {0x0000, 0.0f, "+0"},
      {0x8000, -0.0f, "-0"},
      {0x3f80, 1.0f, "1"},
      {0xc020, -2.5f, "-2.5"},
      {0x4049, 3.140625f, "3.140625 = 0x4049"},
      {0x0001, std::ldexp(1.0f, -133), "smallest subnormal 2^-133"},
      {0x7f7f, std::ldexp(255.0f, 120), "largest finite 255 * 2^120"},
      {0x7f80, inf, "+inf"},
      {0xff80, -inf, "-inf"},
      {0x7fc0, std::numeric_limits<float>::quiet_NaN(), "NaN"},
  };
  expect_converted(write_raw(tensor_header("BF16", table.size()), raw_bytes(bits_of(table))), DType::BF16,
                   table);
}

TEST_F(Safetensors, NonFloatDtypeIsNotReadAsFloat) {
  const auto path = write_raw(R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})",
                              zeros(16));
  const SafetensorsFile file = SafetensorsFile::open(path);
  std::vector<float> storage;
  EXPECT_THAT(error_message([&] { file.as_float32(file.tensors().at(0), storage); }),
              AllOf(HasSubstr("tensor 'ids'"), HasSubstr("dtype I64 cannot be read as float32")));
}

TEST_F(Safetensors, ZeroSizeTensorsMayShareAnOffset) {
  const auto path = write_raw(
      R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
      R"("b":{"dtype":"F16","shape":[3,0],"data_offsets":[0,0]},)"
      R"("c":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
      zeros(4));
  const SafetensorsFile file = SafetensorsFile::open(path);
  ASSERT_EQ(file.tensors().size(), 3u);
  EXPECT_EQ(file.tensors()[2].name, "c");
}

// ---------------------------------------------------------------------------------------
// One malformed file per rule

TEST_F(Safetensors, FileShorterThan8Bytes) {
  const auto path = write_bytes(std::string("\x05\0\0\0\0", 5), "short.safetensors");
  EXPECT_THAT(open_error(path), AllOf(HasSubstr(path.string()), HasSubstr("file is 5 bytes")));
}

TEST_F(Safetensors, MissingFile) {
  EXPECT_THAT(open_error(dir_ / "absent.safetensors"),
              AllOf(HasSubstr("absent.safetensors"), HasSubstr("cannot open")));
}

TEST_F(Safetensors, HeaderLengthBeyondTheFile) {
  std::string bytes = zeros(8) + "{}";
  bytes[0] = static_cast<char>(0xe8);  // 1000
  bytes[1] = 0x03;
  const auto path = write_bytes(bytes);
  EXPECT_THAT(open_error(path),
              AllOf(HasSubstr(path.string()),
                    HasSubstr("header length 1000 runs past the end of the 10-byte file"),
                    HasSubstr("truncated file?")));
}

TEST_F(Safetensors, HeaderLengthOverTheLimit) {
  std::string bytes = zeros(8) + "{}";
  bytes[4] = 0x01;  // 2^32
  EXPECT_THAT(open_error(write_bytes(bytes)),
              HasSubstr("header length 4294967296 exceeds the limit of 100000000 bytes"));
}

TEST_F(Safetensors, HeaderNotJson) {
  EXPECT_THAT(open_error(write_raw("{\"w\": nope}", "")), HasSubstr("header is not valid JSON"));
  EXPECT_THAT(open_error(write_raw("GGUF....", "")), HasSubstr("header does not start with '{'"));
  EXPECT_THAT(open_error(write_raw("[1, 2]", "")), HasSubstr("header does not start with '{'"));
  EXPECT_THAT(open_error(write_raw("{} trailing", "")), HasSubstr("header is not valid JSON"));
}

TEST_F(Safetensors, DuplicateKeys) {
  EXPECT_THAT(open_error(write_raw(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                   R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                   zeros(8))),
              HasSubstr("tensor 'w': appears twice in the header"));
  EXPECT_THAT(
      open_error(write_raw(
          R"({"w":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}})", zeros(4))),
      HasSubstr("header entry 'w': key 'dtype' appears twice"));
}

// A header of 300,000 tensors (22 MB, under the 100 MB limit): every entry read, each
// found by name, duplicates still refused. nlohmann's callback parser rescanned each
// parent object at the end of every child, so this took over 60 s (40,000 entries:
// 27 s); the parse is linear now (about 0.5 s). Not a wall-clock assertion: the parse
// runs in a child process limited to 20 CPU seconds (RLIMIT_CPU, which kills it with
// SIGXCPU), a bound forty times what the linear parse needs and a third of what the
// quadratic one took, so only the quadratic parse trips it.
std::string many_tensors_file(int count, bool duplicate_last) {
  std::string header = "{";
  for (int i = 0; i < count; ++i) {
    const int name = duplicate_last && i == count - 1 ? 0 : i;
    header += i > 0 ? ",\"t" : "\"t";
    header += std::to_string(name);
    header += "\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[";
    header += std::to_string(i);
    header += ",";
    header += std::to_string(i + 1);
    header += "]}";
  }
  header += "}";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[static_cast<std::size_t>(i)] = static_cast<char>((static_cast<std::uint64_t>(header.size()) >> (8 * i)) & 0xff);
  return bytes + header + std::string(static_cast<std::size_t>(count), '\x2a');
}

TEST_F(Safetensors, AHeaderOf300000TensorsParsesInLinearTime) {
  constexpr int kCount = 300'000;
  const std::string text = many_tensors_file(kCount, false);
  ASSERT_LT(text.size(), 100'000'000u);
  const auto* first = reinterpret_cast<const std::byte*>(text.data());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const rlimit cpu{20, 20};
    setrlimit(RLIMIT_CPU, &cpu);
    bool ok = false;
    try {
      const SafetensorsFile file = SafetensorsFile::from_bytes({first, first + text.size()}, "mem");
      ok = file.tensors().size() == static_cast<std::size_t>(kCount);
      for (int i = 0; ok && i < kCount; ++i) {
        std::string name = "t";  // appended: GCC 12 warns falsely (-Wrestrict) on "t" + to_string(i)
        name += std::to_string(i);
        const TensorInfo* info = file.find(name);
        ok = info != nullptr && info->bytes.size() == 1 &&
             info->bytes.data() == file.tensors()[static_cast<std::size_t>(i)].bytes.data();
      }
    } catch (...) {
    }
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_FALSE(WIFSIGNALED(status) && WTERMSIG(status) == SIGXCPU) << "more than 20 CPU seconds: a quadratic parse";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;

  // The last of 300,000 entries repeating the first is still found.
  const std::string repeated = many_tensors_file(kCount, true);
  const auto* begin = reinterpret_cast<const std::byte*>(repeated.data());
  EXPECT_THAT(error_message([&] { SafetensorsFile::from_bytes({begin, begin + repeated.size()}, "mem"); }),
              HasSubstr("mem: tensor 't0': appears twice in the header"));
}

TEST_F(Safetensors, EntryNotAnObject) {
  EXPECT_THAT(open_error(write_raw(R"({"w": [0, 4]})", "")),
              AllOf(HasSubstr("tensor 'w'"), HasSubstr("not an object")));
}

TEST_F(Safetensors, MissingOrIllTypedFields) {
  EXPECT_THAT(open_error(write_raw(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", zeros(4))),
              HasSubstr("tensor 'w': missing 'dtype'"));
  EXPECT_THAT(open_error(write_raw(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", zeros(4))),
              HasSubstr("tensor 'w': missing 'shape'"));
  EXPECT_THAT(open_error(write_raw(R"({"w":{"dtype":"F32","shape":[1]}})", zeros(4))),
              HasSubstr("tensor 'w': missing 'data_offsets'"));
  EXPECT_THAT(
      open_error(write_raw(R"({"w":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", zeros(4))),
      HasSubstr("tensor 'w': 'dtype' is number"));
  EXPECT_THAT(
      open_error(write_raw(R"({"w":{"dtype":"F32","shape":"1","data_offsets":[0,4]}})", zeros(4))),
      HasSubstr("tensor 'w': 'shape' is \"1\""));
  EXPECT_THAT(
      open_error(write_raw(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", zeros(4))),
      HasSubstr("tensor 'w': 'shape' [1.5] holds a non-integer dimension"));
  EXPECT_THAT(
      open_error(write_raw(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", zeros(4))),
      HasSubstr("tensor 'w': 'data_offsets' is [0]"));
  EXPECT_THAT(
      open_error(write_raw(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", zeros(4))),
      HasSubstr("tensor 'w': 'data_offsets' is [-4,0]"));
}

TEST_F(Safetensors, UnknownDtype) {
  EXPECT_THAT(
      open_error(write_raw(R"({"w":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})", zeros(1))),
      AllOf(HasSubstr("tensor 'w': unknown dtype \"F8_E4M3\""),
            HasSubstr("supported: F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL")));
}

TEST_F(Safetensors, NegativeShape) {
  EXPECT_THAT(
      open_error(write_raw(R"({"w":{"dtype":"F32","shape":[2,-1],"data_offsets":[0,0]}})", "")),
      HasSubstr("tensor 'w': 'shape' [2,-1] has a negative dimension"));
}

TEST_F(Safetensors, ByteCountOverflow) {
  EXPECT_THAT(open_error(write_raw(
                  R"({"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})",
                  "")),
              HasSubstr("tensor 'w': shape [4611686018427387904, 4] of F32 overflows 64 bits"));
}

TEST_F(Safetensors, OffsetsNotMatchingTheShape) {
  EXPECT_THAT(
      open_error(write_raw(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})", zeros(12))),
      HasSubstr("tensor 'w': data_offsets [0,12] span 12 bytes, but shape [2, 2] of F32 needs 16"));
  EXPECT_THAT(
      open_error(write_raw(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", zeros(8))),
      HasSubstr("tensor 'w': data_offsets [8,4] begin after they end"));
}

TEST_F(Safetensors, OffsetsOutOfRange) {
  const auto path = write_raw(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
      zeros(12));
  EXPECT_THAT(open_error(path),
              AllOf(HasSubstr("tensor 'b': data [8, 24) runs past the 12 data bytes"),
                    HasSubstr("truncated file?")));
}

TEST_F(Safetensors, TruncatedFile) {
  const auto path = dir_ / "cut.safetensors";
  write_safetensors_f32(path, {{"first", {4}, {1, 2, 3, 4}}, {"last", {2, 2}, {5, 6, 7, 8}}});
  const auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size - 3);
  EXPECT_THAT(open_error(path),
              AllOf(HasSubstr(path.string() + ": tensor 'last': data [16, 32) runs past the 29 "
                              "data bytes"),
                    HasSubstr("file is " + std::to_string(size - 3) + " bytes, needs " +
                              std::to_string(size)),
                    HasSubstr("truncated file?")));
}

TEST_F(Safetensors, TrailingBytes) {
  const auto path = dir_ / "long.safetensors";
  write_safetensors_f32(path, {{"only", {2}, {1, 2}}});
  std::ofstream(path, std::ios::binary | std::ios::app) << "junk";
  EXPECT_THAT(open_error(path),
              HasSubstr("4 bytes of data after the last tensor 'only'"));
}

TEST_F(Safetensors, OverlappingTensors) {
  const auto path = write_raw(
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
      R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
      zeros(24));
  EXPECT_THAT(open_error(path),
              HasSubstr("tensor 'b': data [8, 24) overlaps tensor 'a', which ends at 16"));
}

TEST_F(Safetensors, GapBetweenTensors) {
  const auto path = write_raw(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
      zeros(20));
  EXPECT_THAT(open_error(path),
              HasSubstr("tensor 'b': gap of 4 bytes before its data [12, 20), after tensor 'a' "
                        "ending at 8"));
  EXPECT_THAT(open_error(write_raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                   zeros(12), "start.safetensors")),
              HasSubstr("tensor 'a': gap of 4 bytes before its data [4, 12), at the start"));
}

TEST_F(Safetensors, MetadataNotStrings) {
  EXPECT_THAT(open_error(write_raw(R"({"__metadata__":{"epochs":3}})", "")),
              HasSubstr("'__metadata__' key 'epochs': value 3 is number, expected a string"));
  EXPECT_THAT(open_error(write_raw(R"({"__metadata__":["pt"]})", "")),
              HasSubstr("'__metadata__': is array, expected an object of strings"));
}

TEST_F(Safetensors, WriterRejectsInconsistentTensors) {
  const auto path = dir_ / "w.safetensors";
  EXPECT_THAT(error_message([&] { write_safetensors_f32(path, {{"x", {2, 2}, {1, 2, 3}}}); }),
              HasSubstr("tensor 'x': shape [2, 2] needs 4 values, got 3"));
  EXPECT_THAT(error_message([&] {
                write_safetensors_f32(path, {{"x", {1}, {1}}, {"x", {1}, {2}}});
              }),
              HasSubstr("tensor 'x': written twice"));
}

// from_bytes() validates bytes in memory exactly as open() validates a file: the same
// tensors from a valid file, the same message (but the name) from a broken one.
TEST_F(Safetensors, FromBytesAgreesWithOpen) {
  const std::vector<float> values{1.5f, -2.0f, 3.25f};
  write_safetensors_f32(dir_ / "ok.safetensors", {{"w", {3}, values}});
  std::ifstream in(dir_ / "ok.safetensors", std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto* first = reinterpret_cast<const std::byte*>(text.data());
  const SafetensorsFile file = SafetensorsFile::from_bytes({first, first + text.size()}, "mem");
  ASSERT_EQ(file.tensors().size(), 1u);
  std::vector<float> storage;
  const TensorView view = file.as_float32(file.tensors().front(), storage);
  EXPECT_EQ(std::vector<float>(view.data(), view.data() + view.size()), values);

  const std::string broken = text.substr(0, text.size() - 1);  // one data byte short
  const auto* begin = reinterpret_cast<const std::byte*>(broken.data());
  const std::string from_memory =
      error_message([&] { SafetensorsFile::from_bytes({begin, begin + broken.size()}, "mem"); });
  EXPECT_THAT(from_memory, HasSubstr("mem: tensor 'w': data [0, 12) runs past the 11 data bytes"));
  std::string from_disk = open_error(write_bytes(broken));
  from_disk.replace(0, (dir_ / "raw.safetensors").string().size(), "mem");
  EXPECT_EQ(from_memory, from_disk);
  EXPECT_THAT(error_message([] { SafetensorsFile::from_bytes({}, "mem"); }),
              HasSubstr("mem: file is 0 bytes, shorter than the 8-byte header length"));
}

}  // namespace
}  // namespace ordo
