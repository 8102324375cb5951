#include "models/torch_bin.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <span>
#include <string>

#include "engine/error.h"
#include "engine/printable.h"
#include "engine/regular_file.h"
#include "models/pickle_reader.h"
#include "models/torch_zip.h"

namespace ordo {

namespace {

// The storages' bytes, which the tensors' views point into.
struct Storages {
  std::vector<std::vector<std::byte>> buffers;
};

std::string first_bytes(std::span<const std::byte> bytes) {
  std::string text;
  for (std::size_t i = 0; i < std::min<std::size_t>(bytes.size(), 4); ++i) {
    constexpr char kDigits[] = "0123456789abcdef";
    const auto b = std::to_integer<unsigned>(bytes[i]);
    text += std::string(text.empty() ? "" : " ") + "0x" + kDigits[b >> 4] + kDigits[b & 0xf];
  }
  return text.empty() ? "nothing: the file is empty" : text;
}

// torch.save's zip begins with a local file header, "PK\3\4". Before PyTorch 1.6 it
// wrote a bare pickle (protocol 2, so 0x80 0x02 first), with the storages appended.
void check_signature(std::span<const std::byte> bytes, const std::string& file) {
  const auto at = [&](std::size_t i) { return i < bytes.size() ? std::to_integer<int>(bytes[i]) : -1; };
  if (at(0) == 'P' && at(1) == 'K' && at(2) == 3 && at(3) == 4) return;
  if (at(0) == 0x80)
    throw Error(file, "is in the format torch.save wrote before PyTorch 1.6 (a bare pickle, not a zip), which ordo does not read",
                "load it in a PyTorch you trust and save it again with torch.save, or as model.safetensors");
  throw Error(file, "is not the zip archive torch.save writes (it starts with " + first_bytes(bytes) + ", not 'PK')",
              "another format under this name?");
}

std::string storage_description(const PickledStorage& storage) {
  return "storage '" + printable(storage.key) + "' (" + std::string(dtype_name(storage.dtype)) + ", " +
         std::to_string(storage.numel) + " elements)";
}

SafetensorsFile read_torch_bin(std::span<const std::byte> bytes, const std::filesystem::path& path) {
  const std::string file = path.string();
  check_signature(bytes, file);
  const TorchZip zip(bytes, file);

  if (zip.contains("byteorder")) {
    const std::uint64_t size = zip.size("byteorder");
    const std::vector<std::byte> order = zip.read("byteorder", size > 16 ? 16 : size, "the byte order");
    const std::string text(reinterpret_cast<const char*>(order.data()), order.size());
    if (text != "little")
      throw Error(file + ": zip entry '" + printable(zip.entry_name("byteorder")) + "'",
                  "says '" + printable(text) + "', and ordo reads only little-endian files", "saved on a big-endian machine?");
  }

  const std::uint64_t pickle_size = zip.size("data.pkl");
  if (pickle_size > kMaxPickleBytes)
    throw Error(file + ": zip entry '" + printable(zip.entry_name("data.pkl")) + "'",
                "is " + std::to_string(pickle_size) + " bytes, more than ordo's limit of " +
                    std::to_string(kMaxPickleBytes) + " for a state dict's pickle",
                "a state dict of 300,000 tensors takes about 30 MB");
  const std::vector<std::byte> pickle = zip.read("data.pkl", pickle_size, "the pickle");
  const PickledStateDict state = read_state_dict_pickle(pickle, file + ": " + printable(zip.entry_name("data.pkl")));

  auto storages = std::make_shared<Storages>();
  storages->buffers.reserve(state.storages.size());
  for (const PickledStorage& storage : state.storages)  // sizes cannot overflow: the pickle reader checked them
    storages->buffers.push_back(zip.read("data/" + storage.key,
                                         static_cast<std::uint64_t>(storage.numel) * dtype_size(storage.dtype),
                                         storage_description(storage)));

  std::vector<TensorInfo> tensors;
  tensors.reserve(state.tensors.size());
  for (const PickledTensor& tensor : state.tensors) {
    const PickledStorage& storage = state.storages[tensor.storage];
    const std::size_t size = dtype_size(storage.dtype);
    const std::vector<std::byte>& buffer = storages->buffers[tensor.storage];
    // The pickle reader checked offset + elements within the storage's elements.
    const std::span<const std::byte> data(buffer.data() + static_cast<std::size_t>(tensor.offset) * size,
                                          static_cast<std::size_t>(element_count(tensor.shape)) * size);
    tensors.push_back({tensor.name, storage.dtype, tensor.shape, data});
  }
  return SafetensorsFile::from_checked_tensors(path, std::move(storages), std::move(tensors));
}

// The file mapped read-only while it is read: libzip reads it from memory and the
// storages are copied out, so the mapping ends with the load.
class Mapped {
 public:
  explicit Mapped(const std::filesystem::path& path) : file_(RegularFile::open(path)) {
    size_ = static_cast<std::size_t>(file_.size());
    if (size_ == 0) return;
    address_ = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, file_.fd(), 0);
    if (address_ == MAP_FAILED) throw Error(path.string(), std::string("cannot mmap: ") + std::strerror(errno));
  }
  ~Mapped() {
    if (address_ != MAP_FAILED) munmap(address_, size_);
  }
  Mapped(const Mapped&) = delete;
  Mapped& operator=(const Mapped&) = delete;
  std::span<const std::byte> bytes() const {
    if (address_ == MAP_FAILED) return {};
    return {static_cast<const std::byte*>(address_), size_};
  }

 private:
  RegularFile file_;
  void* address_ = MAP_FAILED;
  std::size_t size_ = 0;
};

}  // namespace

SafetensorsFile open_torch_bin(const std::filesystem::path& path) {
  const Mapped mapped(path);
  return read_torch_bin(mapped.bytes(), path);
}

SafetensorsFile torch_bin_from_bytes(std::vector<std::byte> bytes, const std::filesystem::path& name) {
  return read_torch_bin(bytes, name);
}

}  // namespace ordo
