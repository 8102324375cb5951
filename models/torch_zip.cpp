#include "models/torch_zip.h"

#include <zip.h>

#include <string_view>
#include <unordered_set>

#include "engine/error.h"
#include "engine/printable.h"

namespace ordo {

namespace {

// Deflate expands at most about 1032-fold (a run of one byte): an entry that claims more
// is lying, and its claim would size an allocation.
constexpr std::uint64_t kMaxDeflateRatio = 1032;

std::string libzip_message(zip_error_t& error) { return zip_error_strerror(&error); }

// Why `name` is not a plain relative path, or "" when it is one. Nothing is ever
// written to disk, but a name that escapes is not what torch.save writes, and such a
// file was made to fool some other reader.
std::string unsafe_name(std::string_view name) {
  if (name.empty()) return "is empty";
  if (name.find('\\') != std::string_view::npos) return "holds a backslash";
  if (printable(std::string(name)) != name) return "holds control characters or bytes that are not UTF-8";
  if (name.front() == '/') return "is an absolute path";
  std::size_t begin = 0;
  while (true) {
    const std::size_t end = std::min(name.find('/', begin), name.size());
    const std::string_view part = name.substr(begin, end - begin);
    if (part == "..") return "climbs out of the archive with '..'";
    if (part == ".") return "has a '.' component";
    if (part.empty()) return "has an empty component";
    if (end == name.size()) return "";
    begin = end + 1;
  }
}

const char* method_name(zip_uint16_t method) {
  switch (method) {
    case ZIP_CM_STORE: return "stored";
    case ZIP_CM_DEFLATE: return "deflate";
    case 12: return "bzip2";
    case 14: return "LZMA";
    case 93: return "zstd";
    case 95: return "xz";
    default: return "an unknown method";
  }
}

}  // namespace

struct TorchZip::Archive {
  zip_t* zip = nullptr;
  ~Archive() {
    if (zip != nullptr) zip_discard(zip);  // read-only: nothing to write back
  }
};

TorchZip::TorchZip(std::span<const std::byte> bytes, std::string where)
    : where_(std::move(where)), archive_(std::make_unique<Archive>()) {
  // ZIP_CHECKCONS compares each local header with the central directory and refuses a
  // repeated name or an entry that runs past the file, none of which it names. So a
  // refusal is retried without it: when that opens, the checks below name the entry at
  // fault, and libzip's own refusal stands only when they find nothing.
  int refused_code = ZIP_ER_OK;
  std::string refused_message;
  for (const int flags : {ZIP_RDONLY | ZIP_CHECKCONS, ZIP_RDONLY}) {
    zip_error_t error;
    zip_error_init(&error);
    zip_source_t* source = zip_source_buffer_create(bytes.empty() ? nullptr : bytes.data(), bytes.size(), 0, &error);
    if (source != nullptr) {
      archive_->zip = zip_open_from_source(source, flags, &error);
      if (archive_->zip == nullptr) zip_source_free(source);  // on success the archive owns it
    }
    if (archive_->zip == nullptr && refused_code == ZIP_ER_OK) {
      refused_code = zip_error_code_zip(&error);
      refused_message = libzip_message(error);
    }
    zip_error_fini(&error);
    if (archive_->zip != nullptr) break;
  }
  const auto refuse = [&] {
    if (refused_code == ZIP_ER_NOZIP)
      throw Error(where_, "is not a zip archive (libzip: " + refused_message + ")",
                  "a truncated or corrupted file, or sizes that lie?");
    if (refused_code == ZIP_ER_INCONS)
      throw Error(where_, "is an inconsistent zip archive (libzip: " + refused_message + ")",
                  "its local headers disagree with its central directory, or sizes lie: a corrupted or forged file");
    throw Error(where_, "cannot be read as a zip archive (libzip: " + refused_message + ")", "a corrupted file?");
  };
  if (archive_->zip == nullptr) refuse();

  zip_t* zip = archive_->zip;
  const zip_int64_t entries = zip_get_num_entries(zip, 0);
  if (entries < 0 || static_cast<std::uint64_t>(entries) > kMaxZipEntries)
    throw Error(where_, "the zip archive holds " + std::to_string(entries) + " entries, more than ordo's limit of " +
                            std::to_string(kMaxZipEntries),
                "torch.save writes one per storage");
  std::unordered_set<std::string> seen;
  for (zip_uint64_t i = 0; i < static_cast<zip_uint64_t>(entries); ++i) {
    const char* raw = zip_get_name(zip, i, ZIP_FL_ENC_RAW);
    if (raw == nullptr) throw Error(where_, "zip entry " + std::to_string(i) + " has no name (libzip: " + zip_strerror(zip) + ")");
    const std::string name = raw;
    const std::string entry = where_ + ": zip entry '" + printable(name) + "'";
    if (const std::string why = unsafe_name(name); !why.empty())
      throw Error(entry, why + ": ordo refuses paths outside the archive", "not a file torch.save wrote");
    if (!seen.insert(name).second)
      throw Error(entry, "appears twice in the zip archive", "a forged or corrupted file: which one would be read?");
    const std::size_t slash = name.find('/');
    if (slash == std::string::npos || slash + 1 == name.size())
      throw Error(entry, "is not inside a folder, as torch.save puts every entry (<folder>/data.pkl, <folder>/data/0, ...)",
                  "not a file torch.save wrote");
    const std::string folder = name.substr(0, slash);
    if (folder_.empty()) folder_ = folder;
    if (folder != folder_)
      throw Error(entry, "is outside the folder '" + printable(folder_) + "' that holds the archive's other entries",
                  "not a file torch.save wrote");

    zip_stat_t stat;
    zip_stat_init(&stat);
    constexpr zip_uint64_t kNeeded =
        ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD | ZIP_STAT_ENCRYPTION_METHOD;
    if (zip_stat_index(zip, i, 0, &stat) != 0 || (stat.valid & kNeeded) != kNeeded)
      throw Error(entry, std::string("cannot be examined (libzip: ") + zip_strerror(zip) + ")", "a corrupted file?");
    if (stat.encryption_method != ZIP_EM_NONE)
      throw Error(entry, "is encrypted, which torch.save never does", "ordo reads only plain archives");
    if (stat.comp_method != ZIP_CM_STORE && stat.comp_method != ZIP_CM_DEFLATE)
      throw Error(entry, std::string("is compressed with ") + method_name(stat.comp_method) + " (method " +
                             std::to_string(stat.comp_method) + ")",
                  "ordo reads stored entries, as torch.save writes them, and deflated ones");
    if (stat.comp_size > bytes.size())
      throw Error(entry, "claims " + std::to_string(stat.comp_size) + " compressed bytes, more than the " +
                             std::to_string(bytes.size()) + " bytes of the whole file",
                  "its sizes lie: a truncated or forged file");
    if (stat.comp_method == ZIP_CM_STORE && stat.size != stat.comp_size)
      throw Error(entry, "is stored uncompressed but claims " + std::to_string(stat.size) + " bytes in " +
                             std::to_string(stat.comp_size),
                  "its sizes lie: a corrupted or forged file");
    if (stat.comp_method == ZIP_CM_DEFLATE && stat.size / kMaxDeflateRatio > stat.comp_size)
      throw Error(entry, "claims " + std::to_string(stat.size) + " bytes deflated into " + std::to_string(stat.comp_size) +
                             ", more than deflate can expand",
                  "its sizes lie: a corrupted or forged file");
    const std::string inside = name.substr(slash + 1);
    index_.emplace(inside, i);
    sizes_.emplace(inside, stat.size);
  }
  if (refused_code != ZIP_ER_OK) refuse();  // opened only without the consistency checks
  if (!contains("data.pkl"))
    throw Error(where_, folder_.empty() ? "is an empty zip archive" : "has no entry '" + printable(entry_name("data.pkl")) + "'",
                "torch.save writes the state dict's pickle there: not a file torch.save wrote");
}

TorchZip::~TorchZip() = default;

bool TorchZip::contains(const std::string& name) const { return index_.contains(name); }

std::uint64_t TorchZip::size(const std::string& name) const {
  const auto found = sizes_.find(name);
  return found == sizes_.end() ? 0 : found->second;
}

std::vector<std::byte> TorchZip::read(const std::string& name, std::uint64_t expected_size,
                                      const std::string& needed_by) const {
  const std::string entry = where_ + ": zip entry '" + printable(entry_name(name)) + "'";
  const auto found = index_.find(name);
  if (found == index_.end())
    throw Error(where_, "has no entry '" + printable(entry_name(name)) + "', where " + needed_by + " should be",
                "a truncated or corrupted file?");
  const std::uint64_t size = sizes_.at(name);
  if (size != expected_size)
    throw Error(entry, "holds " + std::to_string(size) + " bytes, but " + needed_by + " needs " +
                           std::to_string(expected_size),
                "a truncated or corrupted file?");

  zip_file_t* file = zip_fopen_index(archive_->zip, found->second, 0);
  if (file == nullptr) throw Error(entry, std::string("cannot be opened (libzip: ") + zip_strerror(archive_->zip) + ")");
  struct Closer {
    zip_file_t* file;
    ~Closer() { zip_fclose(file); }
  } closer{file};
  const auto failed = [&](const std::string& what) {
    return Error(entry, what + " (libzip: " + zip_file_strerror(file) + ")", "a corrupted file?");
  };
  std::vector<std::byte> bytes(static_cast<std::size_t>(expected_size));
  std::uint64_t done = 0;
  while (done < expected_size) {
    const zip_int64_t got = zip_fread(file, bytes.data() + done, expected_size - done);
    if (got < 0) throw failed("cannot be read");
    if (got == 0)
      throw Error(entry, "ends after " + std::to_string(done) + " of the " + std::to_string(expected_size) +
                             " bytes its header claims",
                  "a truncated or corrupted file?");
    done += static_cast<std::uint64_t>(got);
  }
  // Reading past the end makes libzip compare the CRC, and shows a size that lies.
  std::byte extra{};
  const zip_int64_t more = zip_fread(file, &extra, 1);
  if (more < 0) throw failed("cannot be read");
  if (more > 0)
    throw Error(entry, "holds more than the " + std::to_string(expected_size) + " bytes its header claims",
                "its sizes lie: a corrupted or forged file");
  return bytes;
}

}  // namespace ordo
