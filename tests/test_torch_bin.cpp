// pytorch_model.bin (models/torch_bin.h, torch_zip.h, pickle_reader.h): the zip
// torch.save writes and its pickle, read by an allowlist that runs nothing.
//
// TorchBin.* builds files by hand, byte by byte (a zip writer and a pickle writer
// below, written from the ZIP application note and pickletools' opcode list): the
// layout torch.save uses, and every hostile variant the reader must refuse with one
// line naming the cause. TorchBinParity.* needs the oracle: its Marian models saved by
// a real torch.save (tools/oracle/make_parity_models.py, "torch_bin_models") must give
// bit-identical outputs to the same models saved as safetensors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zip.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/decode_inputs.h"
#include "engine/error.h"
#include "engine/printable.h"
#include "engine/score.h"
#include "engine/search.h"
#include "engine/weight_matrix.h"
#include "models/loaded_model.h"
#include "models/pickle_reader.h"
#include "models/safetensors.h"
#include "models/tensor_names.h"
#include "models/torch_bin.h"
#include "tests/cli_runner.h"
#include "tests/greedy.h"
#include "tests/model_factory.h"
#include "tests/parity_support.h"

namespace ordo {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::HasSubstr;
using testing::Not;
using testing_support::temp_dir;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// ---------------------------------------------------------------------------------------
// A zip writer: stored entries, and the lies a forged archive tells.

std::uint32_t crc32(const std::string& data) {
  std::uint32_t crc = 0xffffffffu;
  for (const unsigned char c : data) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

struct ZipEntry {
  std::string name;
  std::string data;
  std::optional<std::uint32_t> declared_size = std::nullopt;  // both sizes in both headers, instead of the truth
  bool encrypted = false;                      // general purpose flag bit 0
};

void put16(std::string& out, std::uint32_t v) {
  out += static_cast<char>(v & 0xff);
  out += static_cast<char>((v >> 8) & 0xff);
}
void put32(std::string& out, std::uint32_t v) {
  put16(out, v & 0xffff);
  put16(out, v >> 16);
}

std::string make_zip(const std::vector<ZipEntry>& entries) {
  std::string out;
  std::string central;
  for (const ZipEntry& e : entries) {
    const std::uint32_t offset = static_cast<std::uint32_t>(out.size());
    const std::uint32_t size = e.declared_size.value_or(static_cast<std::uint32_t>(e.data.size()));
    const std::uint32_t flags = e.encrypted ? 1u : 0u;
    const auto header = [&](std::string& to, bool is_central) {
      put32(to, is_central ? 0x02014b50u : 0x04034b50u);
      if (is_central) put16(to, 20);  // version made by
      put16(to, 20);                  // version needed
      put16(to, flags);
      put16(to, 0);       // stored
      put16(to, 0);       // time
      put16(to, 0x21);    // date: 1980-01-01
      put32(to, crc32(e.data));
      put32(to, size);    // compressed
      put32(to, size);    // uncompressed
      put16(to, static_cast<std::uint32_t>(e.name.size()));
      put16(to, 0);       // extra
      if (is_central) {
        put16(to, 0);  // comment
        put16(to, 0);  // disk
        put16(to, 0);  // internal attributes
        put32(to, 0);  // external attributes
        put32(to, offset);
      }
      to += e.name;
    };
    header(out, false);
    out += e.data;
    header(central, true);
  }
  const std::uint32_t central_offset = static_cast<std::uint32_t>(out.size());
  out += central;
  put32(out, 0x06054b50u);
  put16(out, 0);
  put16(out, 0);
  put16(out, static_cast<std::uint32_t>(entries.size()));
  put16(out, static_cast<std::uint32_t>(entries.size()));
  put32(out, static_cast<std::uint32_t>(central.size()));
  put32(out, central_offset);
  put16(out, 0);
  return out;
}

// ---------------------------------------------------------------------------------------
// A pickle writer, and the state dict torch.save pickles (protocol 2).

class Pickle {
 public:
  Pickle& op(std::uint8_t code) { return byte(code); }
  Pickle& byte(std::uint32_t v) {
    bytes += static_cast<char>(v & 0xff);
    return *this;
  }
  Pickle& u32(std::uint32_t v) {
    put32(bytes, v);
    return *this;
  }
  Pickle& proto(int n) { return op(0x80).byte(static_cast<std::uint32_t>(n)); }
  Pickle& global(const std::string& module, const std::string& name) {
    op('c');
    bytes += module + "\n" + name + "\n";
    return *this;
  }
  Pickle& unicode(const std::string& s) {
    op('X').u32(static_cast<std::uint32_t>(s.size()));
    bytes += s;
    return *this;
  }
  Pickle& integer(std::int64_t v) {
    if (v >= 0 && v < 256) return op('K').byte(static_cast<std::uint32_t>(v));
    if (v >= INT32_MIN && v <= INT32_MAX) return op('J').u32(static_cast<std::uint32_t>(v));
    op(0x8a).byte(8);
    for (int i = 0; i < 8; ++i) byte(static_cast<std::uint32_t>(static_cast<std::uint64_t>(v) >> (8 * i)));
    return *this;
  }
  Pickle& mark() { return op('('); }
  Pickle& tuple() { return op('t'); }
  Pickle& empty_tuple() { return op(')'); }
  Pickle& empty_dict() { return op('}'); }
  Pickle& newfalse() { return op(0x89); }
  Pickle& reduce() { return op('R'); }
  Pickle& binpersid() { return op('Q'); }
  Pickle& setitems() { return op('u'); }
  Pickle& stop() { return op('.'); }
  Pickle& binput(std::uint32_t slot) { return op('q').byte(slot); }
  Pickle& binget(std::uint32_t slot) { return op('h').byte(slot); }
  Pickle& ints(const std::vector<std::int64_t>& values) {
    mark();
    for (const std::int64_t v : values) integer(v);
    return tuple();
  }
  std::span<const std::byte> span() const { return std::as_bytes(std::span(bytes.data(), bytes.size())); }
  std::string bytes;
};

struct FakeTensor {
  std::string name;
  std::string storage_type;
  std::string key;
  std::int64_t storage_numel;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> stride;
  std::int64_t offset = 0;
};

// `tensor` as torch.save pickles it: _rebuild_tensor_v2((persistent id), offset, size,
// stride, False, OrderedDict()); memo slot 0 holds collections.OrderedDict.
void pickle_tensor(Pickle& p, const FakeTensor& t) {
  p.global("torch._utils", "_rebuild_tensor_v2").mark();
  p.mark().unicode("storage").global("torch", t.storage_type).unicode(t.key).unicode("cpu").integer(t.storage_numel);
  p.tuple().binpersid().integer(t.offset).ints(t.shape).ints(t.stride).newfalse();
  p.binget(0).empty_tuple().reduce();
  p.tuple().reduce();
}

// The pickle of an OrderedDict of `tensors`, as torch.save writes a state dict.
Pickle state_dict_pickle(const std::vector<FakeTensor>& tensors) {
  Pickle p;
  p.proto(2).global("collections", "OrderedDict").binput(0).empty_tuple().reduce().binput(1).mark();
  for (const FakeTensor& t : tensors) {
    p.unicode(t.name);
    pickle_tensor(p, t);
  }
  p.setitems().stop();
  return p;
}

std::vector<ZipEntry> torch_entries(const std::string& pickle, const std::vector<std::pair<std::string, std::string>>& storages,
                                    const std::string& folder = "archive") {
  std::vector<ZipEntry> entries{{folder + "/data.pkl", pickle}};
  for (const auto& [key, data] : storages) entries.push_back({folder + "/data/" + key, data});
  entries.push_back({folder + "/byteorder", "little"});
  entries.push_back({folder + "/version", "3\n"});
  return entries;
}

std::string f32_bytes(const std::vector<float>& values) {
  std::string out(values.size() * 4, '\0');
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}
std::string u16_bytes(const std::vector<std::uint16_t>& values) {
  std::string out;
  for (const std::uint16_t v : values) put16(out, v);
  return out;
}

SafetensorsFile read_bytes(const std::string& file) {
  return torch_bin_from_bytes(std::vector<std::byte>(reinterpret_cast<const std::byte*>(file.data()),
                                                     reinterpret_cast<const std::byte*>(file.data()) + file.size()),
                              "dir/pytorch_model.bin");
}
std::string read_error(const std::string& file) { return error_of([&] { read_bytes(file); }); }
std::string pickle_error(const Pickle& p) { return error_of([&] { read_state_dict_pickle(p.span(), "data.pkl"); }); }

// One F32 tensor "w" [2, 3] in storage "0" of 6 elements: the file most tests break.
FakeTensor plain_w() { return {"w", "FloatStorage", "0", 6, {2, 3}, {3, 1}}; }
std::string plain_file(const FakeTensor& w = plain_w(), const std::string& data = f32_bytes({1, 2, 3, 4, 5, 6})) {
  return make_zip(torch_entries(state_dict_pickle({w}).bytes, {{"0", data}}));
}

std::vector<float> floats_of(const SafetensorsFile& file, const std::string& name) {
  const TensorInfo* info = file.find(name);
  if (info == nullptr) throw std::runtime_error("no tensor " + name);
  std::vector<float> storage;
  const TensorView view = file.as_float32(*info, storage);
  return {view.data(), view.data() + view.size()};
}

// ---------------------------------------------------------------------------------------
// What torch.save writes.

TEST(TorchBin, ReadsWhatTorchSaveWritesF32F16Bf16ViewsAndTies) {
  const std::vector<FakeTensor> tensors = {
      {"a.weight", "FloatStorage", "0", 6, {2, 3}, {3, 1}},
      {"b", "HalfStorage", "1", 3, {3}, {1}},
      {"c", "BFloat16Storage", "2", 3, {3}, {1}},
      {"tied", "FloatStorage", "0", 6, {2, 3}, {3, 1}},     // a second name of a.weight's storage
      {"row", "FloatStorage", "0", 6, {3}, {1}, 3},          // a view at offset 3
      {"column", "FloatStorage", "0", 6, {2, 1}, {1, 1}, 4},  // size-1 dimensions take any stride
      {"scalar", "FloatStorage", "3", 1, {}, {}},
      {"empty", "FloatStorage", "4", 0, {0, 5}, {5, 1}},
  };
  const std::string file = make_zip(torch_entries(
      state_dict_pickle(tensors).bytes,
      {{"0", f32_bytes({1, 2, 3, 4, 5, 6})}, {"1", u16_bytes({0x3c00, 0xc000, 0x3800})},
       {"2", u16_bytes({0x3f80, 0xc000, 0x3f00})}, {"3", f32_bytes({7})}, {"4", ""}},
      "pytorch_model"));
  const SafetensorsFile bin = read_bytes(file);
  ASSERT_EQ(bin.tensors().size(), tensors.size());
  EXPECT_EQ(bin.tensors()[0].name, "a.weight");  // in the dict's order
  EXPECT_EQ(bin.find("a.weight")->dtype, DType::F32);
  EXPECT_EQ(bin.find("a.weight")->shape, (Shape{2, 3}));
  EXPECT_EQ(floats_of(bin, "a.weight"), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(bin.find("b")->dtype, DType::F16);
  EXPECT_EQ(floats_of(bin, "b"), (std::vector<float>{1, -2, 0.5}));
  EXPECT_EQ(bin.find("c")->dtype, DType::BF16);
  EXPECT_EQ(floats_of(bin, "c"), (std::vector<float>{1, -2, 0.5}));
  EXPECT_EQ(bin.find("tied")->bytes.data(), bin.find("a.weight")->bytes.data());  // one storage, not a copy
  EXPECT_EQ(floats_of(bin, "row"), (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(floats_of(bin, "column"), (std::vector<float>{5, 6}));
  EXPECT_EQ(floats_of(bin, "scalar"), (std::vector<float>{7}));
  EXPECT_TRUE(floats_of(bin, "empty").empty());
  EXPECT_TRUE(bin.metadata().empty());
}

TEST(TorchBin, ReadsAStateDictsMetadataAndProtocol4AndDeflatedEntries) {
  // nn.Module.state_dict() hangs _metadata on the OrderedDict, which pickle restores by
  // BUILD with {'_metadata': OrderedDict([('', {'version': 1})])}.
  Pickle p;
  p.proto(2).global("collections", "OrderedDict").binput(0).empty_tuple().reduce().binput(1).mark().unicode("w");
  pickle_tensor(p, plain_w());
  p.setitems().empty_dict().unicode("_metadata").binget(0).empty_tuple().reduce();
  p.mark().unicode("").empty_dict().unicode("version").integer(1).op('s').setitems();
  p.op('s').op('b').stop();
  EXPECT_EQ(floats_of(read_bytes(make_zip(torch_entries(p.bytes, {{"0", f32_bytes({1, 2, 3, 4, 5, 6})}}))), "w"),
            (std::vector<float>{1, 2, 3, 4, 5, 6}));

  // Protocol 4: FRAME, SHORT_BINUNICODE, MEMOIZE, STACK_GLOBAL, a plain dict, LONG1.
  Pickle q;
  q.proto(4).op(0x95).u32(0).u32(0).op('}').op(0x94).op(0x8c).byte(1);
  q.bytes += "w";
  q.op(0x8c).byte(12);
  q.bytes += "torch._utils";
  q.op(0x8c).byte(18);
  q.bytes += "_rebuild_tensor_v2";
  q.op(0x93).mark().mark().unicode("storage").op(0x8c).byte(5);
  q.bytes += "torch";
  q.op(0x8c).byte(12);
  q.bytes += "FloatStorage";
  q.op(0x93).unicode("0").unicode("cpu").op(0x8a).byte(1).byte(6).tuple().binpersid();
  q.integer(0).integer(2).integer(3).op(0x86).integer(3).integer(1).op(0x86).op(0x89);
  q.global("collections", "OrderedDict").empty_tuple().reduce().tuple().reduce().op('s').stop();
  EXPECT_EQ(floats_of(read_bytes(make_zip(torch_entries(q.bytes, {{"0", f32_bytes({1, 2, 3, 4, 5, 6})}}))), "w"),
            (std::vector<float>{1, 2, 3, 4, 5, 6}));

  // Deflated entries, written by libzip itself.
  const fs::path dir = temp_dir("torch-bin-deflate");
  const fs::path path = dir / "pytorch_model.bin";
  {
    int error = 0;
    zip_t* zip = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &error);
    ASSERT_NE(zip, nullptr);
    const std::string pickle = state_dict_pickle({plain_w()}).bytes;
    const std::string data = f32_bytes({1, 2, 3, 4, 5, 6});
    for (const auto& [name, bytes] : {std::pair{"pytorch_model/data.pkl", &pickle}, std::pair{"pytorch_model/data/0", &data}}) {
      zip_source_t* source = zip_source_buffer(zip, bytes->data(), bytes->size(), 0);
      const zip_int64_t index = zip_file_add(zip, name, source, 0);
      ASSERT_GE(index, 0);
      ASSERT_EQ(zip_set_file_compression(zip, static_cast<zip_uint64_t>(index), ZIP_CM_DEFLATE, 9), 0);
    }
    ASSERT_EQ(zip_close(zip), 0);
  }
  EXPECT_EQ(floats_of(open_torch_bin(path), "w"), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  fs::remove_all(dir);
}

// ---------------------------------------------------------------------------------------
// Hostile pickles: each refused in one line that names the cause.

TEST(TorchBin, APickleThatCallsOsSystemIsRefusedByName) {
  Pickle p;
  p.proto(2).global("os", "system").unicode("touch /tmp/ordo-pwned").op(0x85).reduce().stop();
  const std::string message = read_error(make_zip(torch_entries(p.bytes, {})));
  EXPECT_THAT(message, HasSubstr("dir/pytorch_model.bin: archive/data.pkl, byte 2: the pickle calls 'os.system', which "
                                 "a state dict never does: ordo refuses it"));
  EXPECT_EQ(message.find('\n'), std::string::npos);
  EXPECT_FALSE(fs::exists("/tmp/ordo-pwned"));
  // STACK_GLOBAL names it the same way; builtins.eval and torch's own non-tensor callables too.
  Pickle s;
  s.proto(4).op(0x8c).byte(8);
  s.bytes += "builtins";
  s.op(0x8c).byte(4);
  s.bytes += "eval";
  s.op(0x93);
  EXPECT_THAT(pickle_error(s), HasSubstr("the pickle calls 'builtins.eval'"));
  Pickle t;
  t.proto(2).global("torch", "load");
  EXPECT_THAT(pickle_error(t), HasSubstr("the pickle calls 'torch.load'"));
}

TEST(TorchBin, AReduceOnAnythingButTheTensorRebuildersIsRefused) {
  Pickle storage;
  storage.proto(2).global("torch", "FloatStorage").empty_tuple().reduce().stop();
  EXPECT_THAT(pickle_error(storage), HasSubstr("REDUCE calls torch.FloatStorage, which a state dict never does"));
  Pickle string;
  string.proto(2).unicode("os.system").empty_tuple().reduce().stop();
  EXPECT_THAT(pickle_error(string), HasSubstr("REDUCE calls the string 'os.system', which a state dict never does"));
  Pickle args;
  args.proto(2).global("collections", "OrderedDict").mark().integer(1).tuple().reduce().stop();
  EXPECT_THAT(pickle_error(args), HasSubstr("collections.OrderedDict is called with 1 arguments"));
  Pickle build;  // BUILD on a tensor: what a tensor subclass's state would do
  build.proto(2).global("collections", "OrderedDict").binput(0).empty_tuple().reduce().mark().unicode("w");
  pickle_tensor(build, plain_w());
  build.empty_dict().op('b');
  EXPECT_THAT(pickle_error(build), HasSubstr("BUILD sets the state of a tensor to a dict of 0 entries, which a state dict never does"));
  Pickle hooks;  // backward hooks that are not empty
  hooks.proto(2).global("collections", "OrderedDict").binput(0).empty_tuple().reduce().mark().unicode("w");
  hooks.global("torch._utils", "_rebuild_tensor_v2").mark().mark().unicode("storage").global("torch", "FloatStorage");
  hooks.unicode("0").unicode("cpu").integer(6).tuple().binpersid().integer(0).ints({6}).ints({1}).newfalse();
  hooks.binget(0).empty_tuple().reduce().mark().integer(1).integer(2).setitems().tuple().reduce();
  EXPECT_THAT(pickle_error(hooks), HasSubstr("argument backward_hooks is a dict of 1 entries, expected an empty OrderedDict"));
}

TEST(TorchBin, AnOpcodeAStateDictNeverUsesIsRefusedByName) {
  Pickle inst;
  inst.proto(2).op('i');
  inst.bytes += "os\nsystem\n";
  EXPECT_THAT(pickle_error(inst), HasSubstr("data.pkl, byte 2: the pickle holds the opcode INST (0x69), which a state "
                                            "dict never uses: ordo refuses it"));
  Pickle floats;
  floats.proto(2).op('G');
  EXPECT_THAT(pickle_error(floats), HasSubstr("the opcode BINFLOAT (0x47)"));
  Pickle junk;
  junk.proto(2).op(0xff);
  EXPECT_THAT(pickle_error(junk), HasSubstr("byte 2: the byte 0xff is not a pickle opcode"));
  Pickle protocol;
  protocol.proto(6);
  EXPECT_THAT(pickle_error(protocol), HasSubstr("pickle protocol 6, newer than any Python writes"));
}

TEST(TorchBin, ATruncatedPickleIsRefused) {
  const std::string whole = state_dict_pickle({plain_w()}).bytes;
  Pickle cut;
  cut.bytes = whole.substr(0, 36);  // inside BINUNICODE 'w''s length... or its text
  EXPECT_THAT(pickle_error(cut), HasSubstr("the pickle ends inside"));
  cut.bytes = whole.substr(0, whole.size() - 1);  // all but STOP
  EXPECT_THAT(pickle_error(cut), HasSubstr("the pickle ends without its STOP opcode (a truncated file?)"));
  cut.bytes = whole.substr(0, 20);  // inside GLOBAL's name
  EXPECT_THAT(pickle_error(cut), HasSubstr("the pickle ends inside GLOBAL's name"));
  // Every cut is refused, never read past (ASan would say).
  for (std::size_t n = 0; n < whole.size(); ++n) {
    cut.bytes = whole.substr(0, n);
    EXPECT_THAT(pickle_error(cut), HasSubstr("data.pkl")) << n;
  }
}

TEST(TorchBin, AMemoIndexOutOfRangeIsRefused) {
  Pickle p;
  p.proto(2).global("collections", "OrderedDict").binput(0).binget(9);
  EXPECT_THAT(pickle_error(p), HasSubstr("byte 29: BINGET reads memo slot 9, which no earlier BINPUT wrote"));
  Pickle q;
  q.proto(2).empty_dict().op('r').u32(0xffffffffu);
  EXPECT_THAT(pickle_error(q), HasSubstr("LONG_BINPUT writes memo slot 4294967295, beyond ordo's limit of 8388608 slots"));
  Pickle r;
  r.proto(2).op('j').u32(70000);
  EXPECT_THAT(pickle_error(r), HasSubstr("LONG_BINGET reads memo slot 70000"));
}

TEST(TorchBin, StackAndNestingLimitsHold) {
  Pickle deep;
  deep.proto(2);
  for (std::size_t i = 0; i <= kMaxMarkDepth; ++i) deep.mark();
  EXPECT_THAT(pickle_error(deep), HasSubstr("nests MARKs more than 256 deep, ordo's limit"));
  Pickle tall;
  tall.proto(2);
  for (std::size_t i = 0; i <= kMaxStackDepth; ++i) tall.op('N');
  EXPECT_THAT(pickle_error(tall), HasSubstr("the pickle's stack grows past 65536 values, ordo's limit"));
  Pickle empty;
  empty.proto(2).op('R');
  EXPECT_THAT(pickle_error(empty), HasSubstr("REDUCE takes a value from an empty stack"));
  Pickle lone;
  lone.proto(2).op('t');
  EXPECT_THAT(pickle_error(lone), HasSubstr("TUPLE without a MARK before it"));
  // A list that holds itself is no cycle of owners (ASan's leak check would say).
  Pickle cycle;
  cycle.proto(2).op(']').binput(0).binget(0).op('a').op('.');
  EXPECT_THAT(pickle_error(cycle), HasSubstr("the pickle holds a list of 1, not a state dict"));
}

TEST(TorchBin, TensorsThatAreNotContiguousOrTooLargeAreRefusedByName) {
  FakeTensor transposed = plain_w();
  transposed.stride = {1, 2};
  EXPECT_THAT(read_error(plain_file(transposed)),
              HasSubstr("dir/pytorch_model.bin: archive/data.pkl: tensor 'w': strides [1, 2] of shape [2, 3] are not "
                        "contiguous row-major (a transposed or sliced view?), which ordo does not read"));
  FakeTensor huge = plain_w();
  huge.shape = {std::int64_t{1} << 40, std::int64_t{1} << 40};
  huge.stride = {std::int64_t{1} << 40, 1};
  EXPECT_THAT(read_error(plain_file(huge)), HasSubstr("tensor 'w': shape [1099511627776, 1099511627776] of "
                                                      "torch.FloatStorage overflows 64 bits"));
  FakeTensor beyond = plain_w();
  beyond.shape = {3, 3};
  EXPECT_THAT(read_error(plain_file(beyond)), HasSubstr("tensor 'w': elements [0, 0 + 9) run past its storage '0' of 6 elements"));
  FakeTensor shifted = plain_w();
  shifted.offset = 1;
  EXPECT_THAT(read_error(plain_file(shifted)), HasSubstr("elements [1, 1 + 6) run past its storage '0' of 6 elements"));
  FakeTensor negative = plain_w();
  negative.shape = {-2, -3};
  EXPECT_THAT(read_error(plain_file(negative)), HasSubstr("tensor 'w': shape [-2, -3] has a negative dimension"));
  FakeTensor strides = plain_w();
  strides.stride = {3};
  EXPECT_THAT(read_error(plain_file(strides)), HasSubstr("has 1 strides for the 2 dimensions of shape [2, 3]"));
  FakeTensor huge_storage = plain_w();
  huge_storage.storage_numel = std::int64_t{1} << 62;
  EXPECT_THAT(read_error(plain_file(huge_storage)), HasSubstr("storage '0' of 4611686018427387904 elements overflows 64 bits"));
  FakeTensor unknown = plain_w();
  unknown.storage_type = "ComplexFloatStorage";
  EXPECT_THAT(read_error(plain_file(unknown)), HasSubstr("the pickle calls 'torch.ComplexFloatStorage'"));
}

TEST(TorchBin, APickleThatIsNotAStateDictOfTensorsIsRefused) {
  Pickle list;
  list.proto(2).op(']').stop();
  EXPECT_THAT(pickle_error(list), HasSubstr("data.pkl: the pickle holds a list of 0, not a state dict (a dict of tensors)"));
  Pickle nested;  // {"model": {}}: a checkpoint that wraps its state dict
  nested.proto(2).empty_dict().unicode("model").empty_dict().op('s').stop();
  EXPECT_THAT(pickle_error(nested), HasSubstr("'model': holds a dict of 0 entries, not a tensor"));
  Pickle key;
  key.proto(2).empty_dict().integer(5).empty_dict().op('s').stop();
  EXPECT_THAT(pickle_error(key), HasSubstr("the state dict has a key that is the integer 5, not a tensor name"));
  Pickle twice = state_dict_pickle({plain_w(), plain_w()});
  EXPECT_THAT(pickle_error(twice), HasSubstr("tensor 'w': appears twice in the state dict"));
  Pickle retyped = state_dict_pickle({plain_w(), {"v", "HalfStorage", "0", 6, {6}, {1}}});
  EXPECT_THAT(pickle_error(retyped), HasSubstr("storage '0' is loaded as torch.FloatStorage of 6 elements and again as "
                                               "torch.HalfStorage of 6"));
  Pickle pid;
  pid.proto(2).unicode("not a storage").binpersid();
  EXPECT_THAT(pickle_error(pid), HasSubstr("BINPERSID loads the string 'not a storage', not a storage"));
  // A tensor name that would forge a second line is escaped.
  FakeTensor forged = plain_w();
  forged.name = "w\nordo: fake\x1b[2K";
  forged.stride = {1, 2};
  const std::string message = read_error(plain_file(forged));
  EXPECT_THAT(message, HasSubstr("tensor 'w\\nordo: fake\\x1b[2K'"));
  EXPECT_EQ(message.find('\n'), std::string::npos);
}

// ---------------------------------------------------------------------------------------
// Hostile archives.

TEST(TorchBin, AZipEntryOutsideTheArchiveIsRefused) {
  const std::string pickle = state_dict_pickle({plain_w()}).bytes;
  const std::string data = f32_bytes({1, 2, 3, 4, 5, 6});
  std::vector<ZipEntry> entries = torch_entries(pickle, {{"0", data}});
  entries.push_back({"../x", "boom"});
  EXPECT_THAT(read_error(make_zip(entries)),
              HasSubstr("dir/pytorch_model.bin: zip entry '../x': climbs out of the archive with '..': ordo refuses "
                        "paths outside the archive"));
  for (const auto& [name, why] : std::vector<std::pair<std::string, std::string>>{
           {"archive/../../etc/passwd", "climbs out of the archive with '..'"},
           {"/etc/passwd", "is an absolute path"},
           {"archive\\..\\x", "holds a backslash"},
           {"archive//x", "has an empty component"},
           {"archive/./x", "has a '.' component"},
           {"archive/x\x1b[2K", "holds control characters"},
           {"other/data/0", "is outside the folder 'archive' that holds the archive's other entries"},
           {"loose", "is not inside a folder"}}) {
    std::vector<ZipEntry> bad = torch_entries(pickle, {{"0", data}});
    bad.push_back({name, "x"});
    EXPECT_THAT(read_error(make_zip(bad)), HasSubstr(why)) << printable(name);
  }
}

TEST(TorchBin, DuplicateEncryptedOrLyingEntriesAreRefusedByName) {
  const std::string pickle = state_dict_pickle({plain_w()}).bytes;
  const std::string data = f32_bytes({1, 2, 3, 4, 5, 6});
  std::vector<ZipEntry> twice = torch_entries(pickle, {{"0", data}, {"0", data}});
  EXPECT_THAT(read_error(make_zip(twice)), HasSubstr("zip entry 'archive/data/0': appears twice in the zip archive"));

  std::vector<ZipEntry> encrypted = torch_entries(pickle, {{"0", data}});
  encrypted[1].encrypted = true;
  EXPECT_THAT(read_error(make_zip(encrypted)), HasSubstr("zip entry 'archive/data/0': is encrypted, which torch.save never does"));

  std::vector<ZipEntry> lying = torch_entries(pickle, {{"0", data}});
  lying[1].declared_size = 1u << 30;  // 1 GB claimed in a file of a few hundred bytes
  EXPECT_THAT(read_error(make_zip(lying)),
              HasSubstr("dir/pytorch_model.bin: zip entry 'archive/data/0': claims 1073741824 compressed bytes, more "
                        "than the "));
  lying[1].declared_size = 16;  // fewer bytes than there are: the next entry's header is found anyway
  EXPECT_THAT(read_error(make_zip(lying)), HasSubstr("zip entry 'archive/data/0': holds 16 bytes, but storage '0' (F32, 6 "
                                                     "elements) needs 24"));

  // A CRC that does not match the data.
  std::string corrupt = make_zip(torch_entries(pickle, {{"0", data}}));
  corrupt[corrupt.find(data)] ^= 0x40;
  EXPECT_THAT(read_error(corrupt), HasSubstr("zip entry 'archive/data/0': cannot be read (libzip: CRC error)"));
}

TEST(TorchBin, ADataEntryShorterThanItsStorageIsRefused) {
  const std::string short_data = f32_bytes({1, 2, 3, 4});  // 16 bytes for a storage of 6 floats
  EXPECT_THAT(read_error(plain_file(plain_w(), short_data)),
              HasSubstr("dir/pytorch_model.bin: zip entry 'archive/data/0': holds 16 bytes, but storage '0' (F32, 6 "
                        "elements) needs 24"));
  const std::string missing = make_zip(torch_entries(state_dict_pickle({plain_w()}).bytes, {}));
  EXPECT_THAT(read_error(missing), HasSubstr("has no entry 'archive/data/0', where storage '0' (F32, 6 elements) should be"));
}

TEST(TorchBin, FilesThatAreNotTorchZipsAreRefusedByName) {
  EXPECT_THAT(read_error(""), HasSubstr("dir/pytorch_model.bin: is not the zip archive torch.save writes (it starts "
                                        "with nothing: the file is empty, not 'PK')"));
  EXPECT_THAT(read_error(std::string("\x80\x02\x8a\x0a", 4) + "legacy"),
              HasSubstr("is in the format torch.save wrote before PyTorch 1.6 (a bare pickle, not a zip)"));
  EXPECT_THAT(read_error("PK\x03\x04 and then nothing"), HasSubstr("is not a zip archive (libzip:"));
  const std::string no_pickle = make_zip({{"archive/data/0", "xxxx"}});
  EXPECT_THAT(read_error(no_pickle), HasSubstr("has no entry 'archive/data.pkl'"));
  std::vector<ZipEntry> big_endian = torch_entries(state_dict_pickle({plain_w()}).bytes, {{"0", f32_bytes({1, 2, 3, 4, 5, 6})}});
  big_endian[2].data = "big";
  EXPECT_THAT(read_error(make_zip(big_endian)), HasSubstr("zip entry 'archive/byteorder': says 'big', and ordo reads "
                                                          "only little-endian files"));
}

// ---------------------------------------------------------------------------------------
// A model directory holding only pytorch_model.bin.

// `safetensors`'s tensors re-written as a torch.save-like pytorch_model.bin, each
// tensor its own storage, plus `aliases` (name -> the tensor whose storage it shares)
// and, with `extra`, a tensor "extra" [2] of its own storage.
void write_bin_of(const fs::path& safetensors, const fs::path& bin,
                  const std::vector<std::pair<std::string, std::string>>& aliases, bool extra = false) {
  const SafetensorsFile file = SafetensorsFile::open(safetensors);
  std::vector<FakeTensor> tensors;
  std::vector<std::pair<std::string, std::string>> storages;
  for (const TensorInfo& info : file.tensors()) {
    ASSERT_EQ(info.dtype, DType::F32);
    FakeTensor t{info.name, "FloatStorage", std::to_string(storages.size()), element_count(info.shape), {}, {}};
    std::int64_t stride = 1;
    for (std::size_t i = info.shape.size(); i-- > 0;) {
      t.shape.insert(t.shape.begin(), info.shape[i]);
      t.stride.insert(t.stride.begin(), stride);
      stride *= info.shape[i];
    }
    storages.push_back({t.key, std::string(reinterpret_cast<const char*>(info.bytes.data()), info.bytes.size())});
    tensors.push_back(t);
  }
  for (const auto& [alias, target] : aliases)
    for (const FakeTensor& t : std::vector<FakeTensor>(tensors))
      if (t.name == target) {
        FakeTensor copy = t;
        copy.name = alias;
        tensors.push_back(copy);
      }
  if (extra) {
    tensors.push_back({"extra", "FloatStorage", "extra", 2, {2}, {1}});
    storages.push_back({"extra", f32_bytes({1, 2})});
  }
  std::ofstream(bin, std::ios::binary) << make_zip(torch_entries(state_dict_pickle(tensors).bytes, storages, "pytorch_model"));
}

void expect_same_outputs(const LoadedModel& a, const LoadedModel& b) {
  const Transformer& x = a.transformer();
  const Transformer& y = b.transformer();
  const std::vector<int> source = {5, 7, 9, 3, 1};
  const std::vector<int> target = {4, 6, 8, 1};
  EXPECT_EQ(score_target(x, source, target), score_target(y, source, target));  // bit for bit
  const Matrix ex = encode(x, source);
  const Matrix ey = encode(y, source);
  ASSERT_EQ(ex.rows(), ey.rows());
  for (Index r = 0; r < ex.rows(); ++r) {
    const auto rx = ex.row(r);
    const auto ry = ey.row(r);
    EXPECT_TRUE(std::equal(rx.begin(), rx.end(), ry.begin())) << "encoder row " << r;
  }
  EXPECT_EQ(testing_support::greedy(x, source, 8).ids, testing_support::greedy(y, source, 8).ids);
}

json llama_config() {
  return {{"model_type", "llama"},       {"vocab_size", 30},          {"hidden_size", 16},
          {"intermediate_size", 24},     {"num_hidden_layers", 2},    {"num_attention_heads", 4},
          {"num_key_value_heads", 2},    {"max_position_embeddings", 64}, {"rms_norm_eps", 1e-6},
          {"bos_token_id", 2},           {"eos_token_id", 1},         {"hidden_act", "silu"}};
}

TEST(TorchBin, EveryFamilyLoadsADirectoryWithOnlyPytorchModelBin) {
  // ordo's own format and LLaMA here; Marian with real torch.save files in TorchBinParity.
  for (const json& config : {testing_support::tiny_config(), llama_config()}) {
    SCOPED_TRACE(config.value("model_type", "ordo"));
    const fs::path dir = temp_dir("torch-bin-family");
    testing_support::write_random_model(dir, config, 4);
    const fs::path twin = temp_dir("torch-bin-family-twin");
    fs::copy_file(dir / "config.json", twin / "config.json");
    write_bin_of(dir / "model.safetensors", twin / "pytorch_model.bin", {});
    const auto safetensors = LoadedModel::load(dir);
    const auto bin = LoadedModel::load(twin);
    EXPECT_EQ(bin->config().family, safetensors->config().family);
    EXPECT_EQ(bin->weights().parameter_count(), safetensors->weights().parameter_count());
    if (safetensors->config().has_encoder()) {
      expect_same_outputs(*safetensors, *bin);
    } else {
      const std::vector<int> text = {2, 5, 7, 9, 11, 1};  // bit for bit
      EXPECT_EQ(score_target(safetensors->transformer(), {}, text), score_target(bin->transformer(), {}, text));
    }
    fs::remove_all(dir);
    fs::remove_all(twin);
  }
}

// The other families of Hugging Face checkpoints: a T5 or NLLB state_dict saved by
// torch.save names every tied weight (T5: shared, {encoder,decoder}.embed_tokens and a
// tied lm_head; M2M100: model.shared, model.{encoder,decoder}.embed_tokens, lm_head), all
// on one storage: read as the tie, without a warning, and bit for bit the safetensors
// twin's outputs.
TEST(TorchBin, T5AndM2M100DirectoriesWithOnlyPytorchModelBinLoadAsTheirSafetensorsTwins) {
  const json t5 = {{"model_type", "t5"}, {"vocab_size", 30}, {"d_model", 16}, {"d_kv", 4}, {"d_ff", 24},
                   {"num_layers", 2},    {"num_heads", 4},   {"feed_forward_proj", "gated-gelu"},
                   {"tie_word_embeddings", true}};
  const json m2m100 = {{"model_type", "m2m_100"}, {"vocab_size", 30},           {"d_model", 16},
                       {"encoder_layers", 2},     {"decoder_layers", 2},        {"encoder_attention_heads", 2},
                       {"decoder_attention_heads", 4}, {"encoder_ffn_dim", 32}, {"decoder_ffn_dim", 24},
                       {"max_position_embeddings", 20}};
  const std::vector<std::pair<json, std::string>> families{{t5, "shared.weight"}, {m2m100, "model.shared.weight"}};
  for (const auto& [config, shared] : families) {
    SCOPED_TRACE(config.at("model_type").get<std::string>());
    const std::string prefix = shared == "shared.weight" ? "" : "model.";
    const std::vector<std::string> aliases{prefix + "encoder.embed_tokens.weight",
                                           prefix + "decoder.embed_tokens.weight", "lm_head.weight"};
    // The safetensors twin as save_pretrained writes it: the tied copies left out (the
    // factory writes T5's optional copies with values of their own).
    const fs::path dir = temp_dir("torch-bin-hf");
    testing_support::write_random_model(dir, config, 4, [&](std::vector<NamedTensor>& tensors) {
      std::erase_if(tensors, [&](const NamedTensor& t) {
        return std::find(aliases.begin(), aliases.end(), t.name) != aliases.end();
      });
    });
    std::vector<std::pair<std::string, std::string>> ties;
    for (const std::string& alias : aliases) ties.emplace_back(alias, shared);
    const fs::path twin = temp_dir("torch-bin-hf-twin");
    fs::copy_file(dir / "config.json", twin / "config.json");
    write_bin_of(dir / "model.safetensors", twin / "pytorch_model.bin", ties);
    std::vector<std::string> warnings;
    const auto safetensors = LoadedModel::load(dir, [](const std::string&) {});
    const auto bin = LoadedModel::load(twin, [&](const std::string& w) { warnings.push_back(w); });
    EXPECT_TRUE(warnings.empty()) << warnings.front();
    EXPECT_EQ(bin->config().family, safetensors->config().family);
    expect_same_outputs(*safetensors, *bin);
    fs::remove_all(dir);
    fs::remove_all(twin);
  }
}

TEST(TorchBin, ADirectoryWithOnlyPytorchModelBinLoadsAsItsSafetensorsTwin) {
  const fs::path dir = temp_dir("torch-bin-model");
  testing_support::write_random_model(dir, testing_support::tiny_config(), 3);
  const fs::path twin = temp_dir("torch-bin-model-twin");
  fs::copy_file(dir / "config.json", twin / "config.json");
  // The tied names a torch.save(model.state_dict()) of a BART-style model holds.
  write_bin_of(dir / "model.safetensors", twin / "pytorch_model.bin",
               {{"model.encoder.embed_tokens.weight", "model.shared.weight"}, {"lm_head.weight", "model.shared.weight"}});
  const auto safetensors = LoadedModel::load(dir);
  std::vector<std::string> warnings;
  const auto bin = LoadedModel::load(twin, [&](const std::string& w) { warnings.push_back(w); });
  EXPECT_TRUE(warnings.empty()) << warnings.front();  // tied names are the tie, not unused tensors
  EXPECT_EQ(bin->weights().source(), (twin / "pytorch_model.bin").string());
  EXPECT_EQ(bin->weights().parameter_count(), safetensors->weights().parameter_count());
  expect_same_outputs(*safetensors, *bin);

  // model.safetensors wins when both are there: a broken pytorch_model.bin is not read.
  std::ofstream(dir / "pytorch_model.bin") << "not a zip";
  EXPECT_EQ(LoadedModel::load(dir)->weights().source(), (dir / "model.safetensors").string());
  // A tensor of its own bytes that the config does not use is still reported.
  write_bin_of(dir / "model.safetensors", twin / "pytorch_model.bin", {{"lm_head.weight", "model.shared.weight"}}, true);
  warnings.clear();
  LoadedModel::load(twin, [&](const std::string& w) { warnings.push_back(w); });
  EXPECT_EQ(warnings, std::vector<std::string>{(twin / "pytorch_model.bin").string() +
                                               ": tensor 'extra' is not used by this config (ignored)"});
  fs::remove_all(dir);
  fs::remove_all(twin);
}

TEST(TorchBin, EveryHostileFileIsOneLineAndExit1OnTheCommandLine) {
  const fs::path dir = temp_dir("torch-bin-hostile-cli");
  testing_support::write_random_model(dir, testing_support::tiny_config(), 3);
  fs::remove(dir / "model.safetensors");
  const std::string data = f32_bytes({1, 2, 3, 4, 5, 6});
  const std::string pickle = state_dict_pickle({plain_w()}).bytes;
  Pickle system;
  system.proto(2).global("os", "system").unicode("echo pwned").op(0x85).reduce().stop();
  Pickle inst;
  inst.proto(2).op('i');
  Pickle memo;
  memo.proto(2).binget(9);
  std::vector<ZipEntry> escaping = torch_entries(pickle, {{"0", data}});
  escaping.push_back({"../x", "boom"});
  FakeTensor transposed = plain_w();
  transposed.stride = {1, 2};
  FakeTensor huge = plain_w();
  huge.shape = {std::int64_t{1} << 40, std::int64_t{1} << 40};
  const std::vector<std::pair<std::string, std::string>> cases = {
      {make_zip(torch_entries(system.bytes, {})), "the pickle calls 'os.system', which a state dict never does"},
      {make_zip(torch_entries(inst.bytes, {})), "the opcode INST (0x69), which a state dict never uses"},
      {make_zip(escaping), "zip entry '../x': climbs out of the archive with '..'"},
      {plain_file(plain_w(), f32_bytes({1, 2, 3, 4})), "holds 16 bytes, but storage '0' (F32, 6 elements) needs 24"},
      {plain_file(transposed), "strides [1, 2] of shape [2, 3] are not contiguous row-major"},
      {plain_file(huge), "overflows 64 bits"},
      {make_zip(torch_entries(pickle.substr(0, pickle.size() / 2), {{"0", data}})), "the pickle ends without its STOP opcode"},
      {make_zip(torch_entries(memo.bytes, {})), "BINGET reads memo slot 9, which no earlier BINPUT wrote"},
  };
  for (const auto& [file, cause] : cases) {
    SCOPED_TRACE(cause);
    std::ofstream(dir / "pytorch_model.bin", std::ios::binary | std::ios::trunc) << file;
    const auto result = testing_support::run_ordo("inspect --model " + dir.string());
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_THAT(result.err, HasSubstr(cause));
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
    EXPECT_EQ(result.err.rfind("ordo: " + (dir / "pytorch_model.bin").string() + ": ", 0), 0u) << result.err;
  }
  fs::remove_all(dir);
}

TEST(TorchBin, TheCommandLineSaysWhatIsWrongInOneLineAndExits1) {
  const fs::path dir = temp_dir("torch-bin-cli");
  testing_support::write_random_model(dir, testing_support::tiny_config(), 3);
  fs::remove(dir / "model.safetensors");
  Pickle p;
  p.proto(2).global("os", "system").unicode("echo pwned").op(0x85).reduce().stop();
  std::ofstream(dir / "pytorch_model.bin", std::ios::binary) << make_zip(torch_entries(p.bytes, {}, "pytorch_model"));
  const auto result = testing_support::run_ordo("translate --model " + dir.string() + " --source-ids '5 7 1'");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.err, "ordo: " + (dir / "pytorch_model.bin").string() +
                            ": pytorch_model/data.pkl, byte 2: the pickle calls 'os.system', which a state dict never "
                            "does: ordo refuses it (a state dict names only collections.OrderedDict, "
                            "torch._utils._rebuild_tensor_v2 and torch's storage types; this file is not one, or was "
                            "made to run code)\n");
  EXPECT_THAT(result.out, Not(HasSubstr("pwned")));
  fs::remove_all(dir);
}

// ---------------------------------------------------------------------------------------
// Files written by a real torch.save (the oracle's twins of its Marian models).

TEST(TorchBinParity, RealTorchSaveFilesGiveBitIdenticalOutputsToTheirSafetensorsTwins) {
  using testing_support::parity_dir;
  const json index = testing_support::read_oracle_json(parity_dir() / "index.json");
  const json twins = index.at("torch_bin_models");
  ASSERT_FALSE(twins.empty());
  std::set<std::string> kinds;
  for (const auto& [bin_name, safetensors_name] : twins.items()) {
    SCOPED_TRACE(bin_name);
    const auto safetensors = LoadedModel::load(parity_dir() / safetensors_name.get<std::string>());
    std::vector<std::string> warnings;
    const auto bin = LoadedModel::load(parity_dir() / bin_name, [&](const std::string& w) { warnings.push_back(w); });
    EXPECT_TRUE(warnings.empty()) << warnings.front();
    const json reference = testing_support::read_oracle_json(parity_dir() / safetensors_name.get<std::string>() / "reference.json");
    kinds.insert(reference.at("dtype").get<std::string>());
    kinds.insert(bin->weights().files().size() > 1 ? "sharded" : "single file");
    EXPECT_THAT(bin->weights().source(), HasSubstr("pytorch_model.bin"));

    // Every weight, bit for bit: matrices as they run (F16 and BF16 stay resident), the
    // other tensors as float32.
    for (const TensorSpec& spec : expected_tensors(bin->config())) {
      if (spec.matrix) {
        const WeightMatrix a = safetensors->weights().matrix(spec.name);
        const WeightMatrix b = bin->weights().matrix(spec.name);
        ASSERT_EQ(a.empty(), b.empty()) << spec.name;
        if (a.empty()) continue;
        ASSERT_EQ(a.format(), b.format()) << spec.name;
        ASSERT_EQ(a.rows(), b.rows()) << spec.name;
        ASSERT_EQ(a.cols(), b.cols()) << spec.name;
        ASSERT_EQ(a.bytes(), b.bytes()) << spec.name;
        ASSERT_EQ(a.is_read_by_row(), b.is_read_by_row()) << spec.name;
        if (!a.is_read_by_row()) {
          EXPECT_EQ(std::memcmp(a.data(), b.data(), a.bytes()), 0) << spec.name;
          continue;
        }
        // An embedding only looked up is read from its file a row at a time: row by row.
        std::vector<float> row_a(static_cast<std::size_t>(a.cols())), row_b(row_a.size());
        for (Index r = 0; r < a.rows(); ++r) {
          a.dequantize(r, 1, row_a.data(), a.cols());
          b.dequantize(r, 1, row_b.data(), b.cols());
          ASSERT_EQ(std::memcmp(row_a.data(), row_b.data(), row_a.size() * sizeof(float)), 0) << spec.name << " row " << r;
        }
        continue;
      }
      const TensorView a = safetensors->weights().get(spec.name);
      const TensorView b = bin->weights().get(spec.name);
      ASSERT_EQ(a.empty(), b.empty()) << spec.name;  // an optional tensor both lack
      if (a.empty()) continue;
      ASSERT_EQ(a.shape(), b.shape()) << spec.name;
      EXPECT_EQ(std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.size()) * sizeof(float)), 0) << spec.name;
    }
    // And so every output: scores, encoder outputs, greedy and beam search.
    const Transformer& x = safetensors->transformer();
    const Transformer& y = bin->transformer();
    for (const json& c : reference.at("cases")) {
      const auto source = c.at("source_ids").get<std::vector<int>>();
      const auto target = c.at("target_ids").get<std::vector<int>>();
      EXPECT_EQ(score_target(x, source, target), score_target(y, source, target));
      const Matrix ex = encode(x, source);
      const Matrix ey = encode(y, source);
      ASSERT_EQ(ex.rows(), ey.rows());
      EXPECT_EQ(std::memcmp(ex.data(), ey.data(), static_cast<std::size_t>(ex.rows() * ex.cols()) * sizeof(float)), 0);
      EXPECT_EQ(testing_support::greedy(y, source, c.at("greedy_max_length").get<Index>()).ids,
                c.at("greedy_ids").get<std::vector<int>>());
    }
    for (const json& c : reference.at("beam")) {
      const auto source = c.at("source_ids").get<std::vector<int>>();
      const auto a = decode(x, source, testing_support::beam_case_options(c));
      const auto b = decode(y, source, testing_support::beam_case_options(c));
      ASSERT_EQ(a.size(), b.size());
      for (std::size_t k = 0; k < a.size(); ++k) {
        EXPECT_EQ(a[k].ids, b[k].ids);
        EXPECT_EQ(a[k].score, b[k].score);
      }
    }
    // The tokenizer files are the same, and the CLI reads the directory as it is.
    const auto cli = testing_support::run_ordo("translate --model " + (parity_dir() / bin_name).string() + " --json \"the man feeds a horse\"");
    const auto want = testing_support::run_ordo("translate --model " + (parity_dir() / safetensors_name.get<std::string>()).string() +
                                                " --json \"the man feeds a horse\"");
    EXPECT_EQ(cli.exit_code, 0) << cli.err;
    EXPECT_EQ(cli.out, want.out);
  }
  for (const char* want : {"F32", "F16", "BF16", "sharded", "single file"})
    EXPECT_TRUE(kinds.contains(want)) << "no torch.save twin covers " << want;
}

}  // namespace
}  // namespace ordo
