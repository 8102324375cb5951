#include "models/safetensors.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <unordered_set>
#include <string_view>
#include <tuple>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/half.h"
#include "engine/printable.h"
#include "engine/regular_file.h"
#include "models/json_message.h"

namespace ordo {

// safetensors stores little-endian values; ordo reads them in place.
static_assert(std::endian::native == std::endian::little, "ordo assumes a little-endian host");

namespace {

using nlohmann::json;

constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;  // as huggingface/safetensors

struct DTypeName {
  std::string_view name;
  DType dtype;
  std::size_t size;
};
constexpr DTypeName kDTypes[] = {
    {"F32", DType::F32, 4},  {"F16", DType::F16, 2}, {"BF16", DType::BF16, 2},
    {"F64", DType::F64, 8},  {"I64", DType::I64, 8}, {"I32", DType::I32, 4},
    {"I16", DType::I16, 2},  {"I8", DType::I8, 1},   {"U8", DType::U8, 1},
    {"BOOL", DType::Bool, 1},
};

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& entry : kDTypes)
    if (entry.name == name) return entry.dtype;
  return std::nullopt;
}

std::string supported_dtypes() {
  std::string text;
  for (const auto& entry : kDTypes) {
    if (!text.empty()) text += ", ";
    text += entry.name;
  }
  return text;
}

std::string system_error() { return std::strerror(errno); }

std::string tensor_where(const std::filesystem::path& path, const std::string& name) {
  return path.string() + ": tensor '" + printable(name) + "'";
}

// A JSON integer as uint64/int64, or nullopt when it is not an integer (or does not fit).
std::optional<std::int64_t> as_int64(const json& value) {
  if (value.is_number_unsigned()) {
    auto u = value.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      return std::nullopt;
    return static_cast<std::int64_t>(u);
  }
  if (value.is_number_integer()) return value.get<std::int64_t>();
  return std::nullopt;
}

// One header entry, checked on its own (the tiling is checked across entries later).
struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  std::uint64_t begin;
  std::uint64_t end;
};

Entry parse_entry(const std::filesystem::path& path, const std::string& name, const json& value) {
  const std::string where = tensor_where(path, name);
  if (!value.is_object())
    throw Error(where, "header entry is " + std::string(value.type_name()) + ", not an object",
                "each tensor needs {\"dtype\", \"shape\", \"data_offsets\"}");
  const auto field = [&](const char* key) -> const json& {
    auto it = value.find(key);
    if (it == value.end()) throw Error(where, std::string("missing '") + key + "'");
    return *it;
  };

  Entry entry{name, DType::F32, {}, 0, 0};
  const json& dtype = field("dtype");
  if (!dtype.is_string())
    throw Error(where, "'dtype' is " + std::string(dtype.type_name()) + ", expected a string");
  const auto parsed = parse_dtype(dtype.get<std::string>());
  if (!parsed)
    throw Error(where, "unknown dtype " + json_excerpt(dtype), "supported: " + supported_dtypes());
  entry.dtype = *parsed;

  const json& shape = field("shape");
  if (!shape.is_array()) throw Error(where, "'shape' is " + json_excerpt(shape) + ", expected an array");
  for (const json& dim : shape) {
    const auto d = as_int64(dim);
    if (!d) throw Error(where, "'shape' " + json_excerpt(shape) + " holds a non-integer dimension");
    if (*d < 0) throw Error(where, "'shape' " + json_excerpt(shape) + " has a negative dimension");
    entry.shape.push_back(*d);
  }

  const json& offsets = field("data_offsets");
  const bool pair = offsets.is_array() && offsets.size() == 2;
  const std::int64_t begin = pair ? as_int64(offsets[0]).value_or(-1) : -1;
  const std::int64_t end = pair ? as_int64(offsets[1]).value_or(-1) : -1;
  if (begin < 0 || end < 0)
    throw Error(where, "'data_offsets' is " + json_excerpt(offsets) +
                           ", expected [begin, end] of non-negative integers");
  entry.begin = static_cast<std::uint64_t>(begin);
  entry.end = static_cast<std::uint64_t>(end);

  // Both the byte count and the element count (a signed Index everywhere the tensor is
  // used) must fit: for 1-byte dtypes the elements can overflow an int64 where the
  // bytes still fit a uint64 ([2^62, 3, 0] of U8 once did, in element_count()).
  std::uint64_t bytes = dtype_size(entry.dtype);
  Index elements = 1;
  for (Index d : entry.shape) {
    if (__builtin_mul_overflow(bytes, static_cast<std::uint64_t>(d), &bytes) ||
        __builtin_mul_overflow(elements, d, &elements))
      throw Error(where, "shape " + to_string(entry.shape) + " of " +
                             std::string(dtype_name(entry.dtype)) + " overflows 64 bits",
                  "a corrupted header?");
  }
  if (entry.begin > entry.end)
    throw Error(where, "data_offsets " + json_excerpt(offsets) + " begin after they end");
  if (entry.end - entry.begin != bytes)
    throw Error(where, "data_offsets " + json_excerpt(offsets) + " span " +
                           std::to_string(entry.end - entry.begin) + " bytes, but shape " +
                           to_string(entry.shape) + " of " + std::string(dtype_name(entry.dtype)) +
                           " needs " + std::to_string(bytes));
  return entry;
}

// The header's top-level entries, in file order: the tensors' and __metadata__'s.
struct Header {
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;
};

void read_metadata(const std::filesystem::path& path, const json& value, Header& header) {
  const std::string file = path.string();
  if (!value.is_object())
    throw Error(file + ": '__metadata__'", "is " + std::string(value.type_name()) + ", expected an object of strings");
  for (const auto& [key, text] : value.items()) {
    if (!text.is_string())
      throw Error(file + ": '__metadata__' key '" + printable(key) + "'",
                  "value " + json_excerpt(text) + " is " + text.type_name() + ", expected a string");
    header.metadata[key] = text.get<std::string>();
  }
}

// Reads the header in one pass with nlohmann's SAX interface: each top-level value is
// built as a small JSON value, checked into an Entry as soon as it ends and dropped, so
// time and memory are linear in the header. (nlohmann's callback parser rescanned the
// parent object at the end of every child: 300,000 entries took over a minute.) Nesting
// deeper than kMaxJsonDepth and a key repeated within one object are refused as they
// are met.
class HeaderReader {
 public:
  explicit HeaderReader(const std::filesystem::path& path) : path_(path), source_(path.string() + ": header") {}

  Header read(std::string_view text) {
    json::sax_parse(text.begin(), text.end(), this);
    return std::move(header_);
  }

  // The SAX interface (nlohmann::json_sax): each returns true to go on.
  bool null() { return value(json(nullptr)); }
  bool boolean(bool b) { return value(json(b)); }
  bool number_integer(json::number_integer_t n) { return value(json(n)); }
  bool number_unsigned(json::number_unsigned_t n) { return value(json(n)); }
  bool number_float(json::number_float_t x, const json::string_t&) { return value(json(x)); }
  bool string(json::string_t& text) { return value(json(std::move(text))); }
  bool binary(json::binary_t& bytes) { return value(json(std::move(bytes))); }
  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(json::string_t& name) {
    Open& object = open_.back();
    // The top level is never built: its names are remembered apart. Inside an entry the
    // object under construction is the set of its keys.
    const bool repeated = open_.size() == 1 ? !top_level_names_.insert(name).second : object.value.contains(name);
    if (repeated) {
      if (open_.size() == 1) throw Error(tensor_where(path_, name), "appears twice in the header");
      throw Error(path_.string() + ": header entry '" + printable(open_[open_.size() - 2].key) + "'",
                  "key '" + printable(name) + "' appears twice");
    }
    object.key = std::move(name);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    // Syntax, or a number out of range (1e999).
    throw Error(path_.string(), "header is not valid JSON: " + json_message(e.what()),
                "not a safetensors file, or a corrupted one?");
  }

 private:
  struct Open {
    json value;       // the object or array being built (unused at the top level)
    std::string key;  // an object's current key
  };

  bool open(json container) {
    check_json_depth(static_cast<int>(open_.size()), source_);
    open_.push_back({std::move(container), {}});
    return true;
  }
  bool close() {
    json done = std::move(open_.back().value);
    open_.pop_back();
    if (!open_.empty()) return value(std::move(done));
    return true;  // the top level ends; a header that is not an object never gets here
  }
  bool value(json v) {
    if (open_.empty()) return true;  // a bare value: the '{' check comes first, so unreachable
    Open& parent = open_.back();
    if (open_.size() == 1) {  // a complete top-level entry
      if (!parent.value.is_object()) return true;  // a top-level array: refused before parsing
      if (parent.key == "__metadata__")
        read_metadata(path_, v, header_);
      else
        header_.entries.push_back(parse_entry(path_, parent.key, v));
    } else if (parent.value.is_object()) {
      parent.value.emplace(std::move(parent.key), std::move(v));
    } else {
      parent.value.push_back(std::move(v));
    }
    return true;
  }

  const std::filesystem::path& path_;
  const std::string source_;
  std::vector<Open> open_;
  std::unordered_set<std::string> top_level_names_;
  Header header_;
};

}  // namespace

std::string_view dtype_name(DType dtype) {
  for (const auto& entry : kDTypes)
    if (entry.dtype == dtype) return entry.name;
  return "?";
}

std::size_t dtype_size(DType dtype) {
  for (const auto& entry : kDTypes)
    if (entry.dtype == dtype) return entry.size;
  return 0;
}

// The whole file: mapped read-only by open(), or owned in memory by from_bytes(). If
// another process truncates a mapped file, reads past the new end raise SIGBUS:
// nothing a reader can check for.
struct SafetensorsFile::Mapping {
  int fd = -1;
  void* address = MAP_FAILED;
  std::size_t size = 0;
  std::vector<std::byte> owned;  // from_bytes(): the file's bytes, when not mapped

  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (address != MAP_FAILED) munmap(address, size);
    if (fd >= 0) close(fd);
  }
  const std::byte* bytes() const {
    return address != MAP_FAILED ? static_cast<const std::byte*>(address) : owned.data();
  }
};

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  const std::string file = path.string();
  auto mapping = std::make_shared<Mapping>();
  RegularFile regular = RegularFile::open(path);
  const std::uint64_t file_size = regular.size();
  mapping->fd = regular.release();
  if (file_size >= 8) {  // shorter files are refused by validate(), which says so
    mapping->size = static_cast<std::size_t>(file_size);
    mapping->address = mmap(nullptr, mapping->size, PROT_READ, MAP_PRIVATE, mapping->fd, 0);
    if (mapping->address == MAP_FAILED) throw Error(file, "cannot mmap: " + system_error());
  }
  const bool mapped = mapping->address != MAP_FAILED;
  SafetensorsFile opened = validate(path, std::move(mapping), file_size);
  opened.mapped_ = mapped;
  return opened;
}

void SafetensorsFile::release(const TensorInfo& info) const { release(info.bytes); }

void SafetensorsFile::release(std::span<const std::byte> bytes) const {
  if (!mapped_ || bytes.empty()) return;
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(bytes.data());
  // The pages wholly inside: dropping a page shared with a neighbour and reading it back
  // made the peak 1.7 MB larger (the kernel maps the file 64 KB at a time).
  const std::uintptr_t first = (begin + page - 1) / page * page, last = (begin + bytes.size()) / page * page;
  // Advice only: a failure leaves the pages where they were.
  if (first < last) (void)madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

namespace {

class TensorRows final : public RowReader {
 public:
  // fd < 0: the bytes are in memory, which `owner` keeps alive.
  TensorRows(std::shared_ptr<const void> owner, int fd, std::string where, std::span<const std::byte> bytes,
             std::uint64_t file_offset, std::size_t row_bytes)
      : owner_(std::move(owner)),
        fd_(fd),
        where_(std::move(where)),
        bytes_(bytes),
        file_offset_(file_offset),
        row_bytes_(row_bytes) {}

  void read_row(Index row, std::span<std::byte> out) const override {
    const auto at = static_cast<std::size_t>(row) * row_bytes_;
    if (row < 0 || out.size() != row_bytes_ || at + row_bytes_ > bytes_.size())
      throw Error(where_, "row " + std::to_string(row) + " (" + std::to_string(out.size()) + " bytes) is not one of its " +
                              std::to_string(bytes_.size() / std::max<std::size_t>(row_bytes_, 1)) + " rows of " +
                              std::to_string(row_bytes_) + " bytes",
                  "a bug in ordo's weight binding; please report it");
    if (fd_ < 0) {
      std::memcpy(out.data(), bytes_.data() + at, row_bytes_);
      return;
    }
    std::size_t done = 0;
    while (done < row_bytes_) {
      const ssize_t n = pread(fd_, out.data() + done, row_bytes_ - done, static_cast<off_t>(file_offset_ + at + done));
      if (n > 0) {
        done += static_cast<std::size_t>(n);
      } else if (n == 0) {
        throw Error(where_, "row " + std::to_string(row) + " lies past the end of the file: it is shorter than when it was loaded",
                    "the file was truncated or rewritten while ordo ran; load the model again");
      } else if (errno != EINTR) {
        throw Error(where_, "cannot read row " + std::to_string(row) + ": " + system_error(),
                    "the file became unreadable while ordo ran (a removed disk, a network file system?)");
      }
    }
  }

 private:
  std::shared_ptr<const void> owner_;  // keeps fd_ open, or bytes_ alive
  int fd_;
  std::string where_;
  std::span<const std::byte> bytes_;
  std::uint64_t file_offset_;
  std::size_t row_bytes_;
};

}  // namespace

std::unique_ptr<RowReader> SafetensorsFile::row_reader(const TensorInfo& info, Index rows) const {
  const std::size_t row_bytes = rows > 0 ? info.bytes.size() / static_cast<std::size_t>(rows) : 0;
  std::string where = path_.string() + ": tensor '" + printable(info.name) + "'";
  if (!mapped_) return std::make_unique<TensorRows>(owner_, -1, std::move(where), info.bytes, 0, row_bytes);
  const auto& mapping = *static_cast<const Mapping*>(owner_.get());
  const auto offset = static_cast<std::uint64_t>(info.bytes.data() - mapping.bytes());
  return std::make_unique<TensorRows>(owner_, mapping.fd, std::move(where), info.bytes, offset, row_bytes);
}

SafetensorsFile SafetensorsFile::from_bytes(std::vector<std::byte> bytes, const std::filesystem::path& name) {
  auto mapping = std::make_shared<Mapping>();
  const auto size = static_cast<std::uint64_t>(bytes.size());
  mapping->owned = std::move(bytes);
  return validate(name, std::move(mapping), size);
}

SafetensorsFile SafetensorsFile::validate(const std::filesystem::path& path, std::shared_ptr<const Mapping> mapping,
                                          std::uint64_t file_size) {
  const std::string file = path.string();
  if (file_size < 8)
    throw Error(file,
                "file is " + std::to_string(file_size) +
                    " bytes, shorter than the 8-byte header length",
                "not a safetensors file, or a truncated one?");
  const std::byte* base = mapping->bytes();

  std::uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i)
    header_size = (header_size << 8) | static_cast<std::uint64_t>(base[i]);
  if (header_size > kMaxHeaderBytes)
    throw Error(file,
                "header length " + std::to_string(header_size) + " exceeds the limit of " +
                    std::to_string(kMaxHeaderBytes) + " bytes",
                "not a safetensors file?");
  if (8 + header_size > file_size)
    throw Error(file,
                "header length " + std::to_string(header_size) + " runs past the end of the " +
                    std::to_string(file_size) + "-byte file",
                "truncated file?");
  const std::string_view header_text(reinterpret_cast<const char*>(base + 8),
                                     static_cast<std::size_t>(header_size));
  if (header_text.empty() || header_text.front() != '{')
    throw Error(file, "header does not start with '{'", "not a safetensors file?");
  Header header = HeaderReader(path).read(header_text);
  std::vector<Entry>& entries = header.entries;
  SafetensorsFile result;
  result.path_ = path;
  result.metadata_ = std::move(header.metadata);

  // Sorted by offset, the entries must tile [0, data_size) exactly.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  const std::uint64_t data_start = 8 + header_size;
  const std::uint64_t data_size = file_size - data_start;
  std::uint64_t covered = 0;  // end of the previous tensor
  const Entry* previous = nullptr;
  for (const Entry& entry : entries) {
    // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "[" + to_string(...).
    std::string range = "[";
    range += std::to_string(entry.begin);
    range += ", ";
    range += std::to_string(entry.end);
    range += ")";
    if (entry.begin < covered)
      throw Error(tensor_where(path, entry.name),
                  "data " + range + " overlaps tensor '" + printable(previous->name) + "', which ends at " +
                      std::to_string(covered));
    if (entry.begin > covered)
      throw Error(tensor_where(path, entry.name),
                  "gap of " + std::to_string(entry.begin - covered) + " bytes before its data " +
                      range +
                      (previous ? ", after tensor '" + printable(previous->name) + "' ending at " +
                                      std::to_string(covered)
                                : std::string(", at the start of the data")));
    if (entry.end > data_size)
      throw Error(tensor_where(path, entry.name),
                  "data " + range + " runs past the " + std::to_string(data_size) +
                      " data bytes (file is " + std::to_string(file_size) + " bytes, needs " +
                      std::to_string(data_start + entry.end) + ")",
                  "truncated file?");
    covered = entry.end;
    previous = &entry;
  }
  if (covered != data_size)
    throw Error(file,
                std::to_string(data_size - covered) + " bytes of data after " +
                    (previous ? "the last tensor '" + printable(previous->name) + "'" : "an empty header") +
                    " (file is " + std::to_string(file_size) + " bytes, tensors end at " +
                    std::to_string(data_start + covered) + ")",
                "trailing bytes: corrupted or wrongly concatenated file?");

  const std::byte* data = base + data_start;
  result.tensors_.reserve(entries.size());
  for (Entry& entry : entries)
    result.tensors_.push_back(
        {std::move(entry.name), entry.dtype, std::move(entry.shape),
         {data + entry.begin, static_cast<std::size_t>(entry.end - entry.begin)}});
  result.index_.reserve(result.tensors_.size());
  for (std::size_t i = 0; i < result.tensors_.size(); ++i) result.index_.emplace(result.tensors_[i].name, i);
  result.owner_ = std::move(mapping);
  return result;
}

SafetensorsFile SafetensorsFile::from_checked_tensors(const std::filesystem::path& path, std::shared_ptr<const void> owner,
                                                      std::vector<TensorInfo> tensors) {
  SafetensorsFile result;
  result.path_ = path;
  result.owner_ = std::move(owner);
  result.tensors_ = std::move(tensors);
  result.index_.reserve(result.tensors_.size());
  for (std::size_t i = 0; i < result.tensors_.size(); ++i)
    if (!result.index_.emplace(result.tensors_[i].name, i).second)
      throw Error(tensor_where(path, result.tensors_[i].name), "appears twice");
  return result;
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  const auto found = index_.find(name);
  return found == index_.end() ? nullptr : &tensors_[found->second];
}

TensorView SafetensorsFile::as_float32(const TensorInfo& info, std::vector<float>& storage) const {
  const std::size_t count = static_cast<std::size_t>(element_count(info.shape));
  const std::byte* bytes = info.bytes.data();
  switch (info.dtype) {
    case DType::F32: {
      if (reinterpret_cast<std::uintptr_t>(bytes) % alignof(float) == 0)
        return TensorView(reinterpret_cast<const float*>(bytes), info.shape);
      storage.resize(count);  // misaligned: the header length is not a multiple of 4
      if (count > 0) std::memcpy(storage.data(), bytes, count * sizeof(float));
      return TensorView(storage.data(), info.shape);
    }
    case DType::F16:
    case DType::BF16: {
      storage.resize(count);
      for (std::size_t i = 0; i < count; ++i) {
        std::uint16_t value;
        std::memcpy(&value, bytes + 2 * i, sizeof value);
        storage[i] = info.dtype == DType::F16 ? half_to_float(value) : bfloat16_to_float(value);
      }
      return TensorView(storage.data(), info.shape);
    }
    default:
      throw Error(tensor_where(path_, info.name),
                  "dtype " + std::string(dtype_name(info.dtype)) + " cannot be read as float32",
                  "ordo reads F32, F16 and BF16 weights");
  }
}

void write_generated_safetensors_f32(const std::filesystem::path& path,
                                     const std::vector<GeneratedTensor>& tensors) {
  const std::string file = path.string();
  json header = json::object();
  std::uint64_t offset = 0;
  for (const GeneratedTensor& tensor : tensors) {
    const std::string where = file + ": tensor '" + tensor.name + "'";
    if (tensor.name == "__metadata__") throw Error(where, "the name is reserved");
    if (header.contains(tensor.name)) throw Error(where, "written twice");
    for (Index d : tensor.shape)
      if (d < 0) throw Error(where, "shape " + to_string(tensor.shape) + " has a negative dimension");
    const std::uint64_t bytes = static_cast<std::uint64_t>(element_count(tensor.shape)) * sizeof(float);
    header[tensor.name] = {{"dtype", "F32"}, {"shape", tensor.shape},
                           {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // 8 + N multiple of 8: F32 data aligned

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(file, "cannot open for writing: " + system_error());
  char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  out.write(length, sizeof length);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  std::vector<float> chunk;  // one buffer for every tensor: the writer holds 4 MB at most
  for (const GeneratedTensor& tensor : tensors) {
    const auto count = static_cast<std::uint64_t>(element_count(tensor.shape));
    for (std::uint64_t first = 0; first < count; first += chunk.size()) {
      chunk.resize(static_cast<std::size_t>(std::min<std::uint64_t>(count - first, std::uint64_t{1} << 20)));
      tensor.fill(first, chunk);
      out.write(reinterpret_cast<const char*>(chunk.data()), static_cast<std::streamsize>(chunk.size() * sizeof(float)));
    }
  }
  out.close();
  if (!out) throw Error(file, "write failed: " + system_error(), "disk full?");
}

void write_encoded_safetensors(const std::filesystem::path& path, const std::vector<EncodedTensor>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  const std::string file = path.string();
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  std::vector<std::uint64_t> sizes;
  for (const EncodedTensor& tensor : tensors) {
    const std::string where = file + ": tensor '" + tensor.name + "'";
    if (tensor.name == "__metadata__") throw Error(where, "the name is reserved");
    if (header.contains(tensor.name)) throw Error(where, "written twice");
    for (Index d : tensor.shape)
      if (d < 0) throw Error(where, "shape " + to_string(tensor.shape) + " has a negative dimension");
    sizes.push_back(static_cast<std::uint64_t>(element_count(tensor.shape)) * dtype_size(tensor.dtype));
    header[tensor.name] = {{"dtype", std::string(dtype_name(tensor.dtype))}, {"shape", tensor.shape},
                           {"data_offsets", {offset, offset + sizes.back()}}};
    offset += sizes.back();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // 8 + N a multiple of 8: the data starts aligned
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(file, "cannot open for writing: " + system_error());
  char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  out.write(length, sizeof length);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::vector<std::byte> bytes = tensors[i].bytes();
    if (bytes.size() != sizes[i])
      throw Error(file + ": tensor '" + tensors[i].name + "'",
                  "made " + std::to_string(bytes.size()) + " bytes, its header says " + std::to_string(sizes[i]),
                  "a bug in the writer's caller; please report it");
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) break;
  }
  out.close();
  if (!out) throw Error(file, "write failed: " + system_error(), "disk full?");
}

void write_safetensors_f32(const std::filesystem::path& path,
                           const std::vector<NamedTensor>& tensors) {
  std::vector<GeneratedTensor> generated;
  generated.reserve(tensors.size());
  for (const NamedTensor& tensor : tensors) {
    // A negative dimension is the writer's to name; any other shape must match the values.
    const bool negative = std::ranges::any_of(tensor.shape, [](Index d) { return d < 0; });
    if (!negative && static_cast<std::size_t>(element_count(tensor.shape)) != tensor.values.size())
      throw Error(path.string() + ": tensor '" + tensor.name + "'",
                  "shape " + to_string(tensor.shape) + " needs " + std::to_string(element_count(tensor.shape)) +
                      " values, got " + std::to_string(tensor.values.size()));
    generated.push_back({tensor.name, tensor.shape, [&tensor](std::uint64_t first, std::span<float> out) {
                           std::copy_n(tensor.values.begin() + static_cast<std::ptrdiff_t>(first), out.size(), out.begin());
                         }});
  }
  write_generated_safetensors_f32(path, generated);
}

}  // namespace ordo
