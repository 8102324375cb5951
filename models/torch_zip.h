// The zip archive torch.save writes (its default since PyTorch 1.6), read with libzip:
//
//   <folder>/data.pkl      the pickle (models/pickle_reader.h)
//   <folder>/data/<key>    each storage's bytes, little-endian
//   <folder>/byteorder     "little" (torch 2.x; absent before, when it was always little)
//   <folder>/version, <folder>/.data/...   format versions, unused
//
// <folder> is the file's stem when torch wrote it ("pytorch_model"), "archive" in older
// versions: whatever it is, every entry shares it. torch stores entries uncompressed;
// deflated entries (a file re-zipped by another tool) are read too.
//
// The whole directory is checked before any entry is read, and each failure names the
// entry: at most kMaxZipEntries entries; a name that is a relative path inside the
// folder (no '/' first, no '..', '.' or empty component, no backslash, no control
// byte); no name twice; no encryption; stored or deflated only; sizes that fit the
// archive (a stored entry's size is its compressed size; a deflated one expands at most
// 1032-fold, deflate's limit); local headers that agree with the central directory
// (libzip's ZIP_CHECKCONS; when it refuses, the archive is opened once more without it
// so that the checks above can name the entry at fault, and its refusal stands when
// they find none). read() then checks the size it was promised and libzip checks the
// CRC.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace ordo {

inline constexpr std::size_t kMaxZipEntries = 1u << 20;  // one per storage, and a few more

class TorchZip {
 public:
  // The archive in `bytes`, which must outlive this object. `where` names it in errors
  // ("dir/pytorch_model.bin"). Throws Error for any of the faults above.
  TorchZip(std::span<const std::byte> bytes, std::string where);
  ~TorchZip();
  TorchZip(const TorchZip&) = delete;
  TorchZip& operator=(const TorchZip&) = delete;

  // The entry "<folder>/<name>", e.g. "data.pkl", "data/0". size() is as the central
  // directory says.
  bool contains(const std::string& name) const;
  std::uint64_t size(const std::string& name) const;
  // Its bytes; throws Error when it is not `expected_size` bytes long (`needed_by` says
  // who expects them: "storage '0' (torch.FloatStorage of 6 elements)"), or when libzip
  // fails to read it (a CRC or compression error).
  std::vector<std::byte> read(const std::string& name, std::uint64_t expected_size, const std::string& needed_by) const;

  const std::string& where() const { return where_; }
  // "pytorch_model/data.pkl": where + ": " + entry names an entry in messages.
  std::string entry_name(const std::string& name) const { return folder_ + "/" + name; }

 private:
  struct Archive;
  std::string where_;
  std::unique_ptr<Archive> archive_;
  std::string folder_;
  std::unordered_map<std::string, std::uint64_t> index_;  // name within the folder -> libzip index
  std::unordered_map<std::string, std::uint64_t> sizes_;  // name within the folder -> uncompressed size
};

}  // namespace ordo
