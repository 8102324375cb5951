// What a loaded model keeps of its file's pages.
//
// Matrices only looked up (a token embedding not tied to the output head) are read from
// their file a row at a time (WeightMatrix::read_by_row, SafetensorsFile::row_reader):
// the rows are the stored ones, products refuse such a matrix, and a file cut short
// after loading is an Error naming it. Read through the mapping, that last case was a
// SIGBUS; and one touch of a row mapped a whole page cache folio (Linux 6.18), which
// put all of int8's embedding into the peak RSS.
//
// Matrices converted at load (--compute-type) let the file's pages go as their rows are
// converted: a float32 model run as int8 kept all of its file mapped beside the int8
// copy (495.0 MiB peak for the bench llama model run as int8; 160.0 MiB now).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/blas.h"
#include "engine/error.h"
#include "engine/weight_matrix.h"
#include "models/config.h"
#include "models/safetensors.h"
#include "models/tensor_names.h"
#include "models/weights.h"
#include "ordo/ordo.hpp"
#include "tests/model_factory.h"

namespace ordo {
namespace {

namespace fs = std::filesystem;

const fs::path kT5 = fs::path(ORDO_SOURCE_DIR) / "weights" / "t5";  // untied: shared.weight is only looked up

std::vector<float> row_of(const WeightMatrix& w, Index r) {
  std::vector<float> row(static_cast<std::size_t>(w.cols()));
  w.dequantize(r, 1, row.data(), w.cols());
  return row;
}

TEST(LookupRows, AnEmbeddingOnlyLookedUpIsReadFromItsFileInEveryStoredFormat) {
  const fs::path root = testing_support::temp_dir("lookup-rows");
  for (const ComputeType type : {ComputeType::F16, ComputeType::Int8, ComputeType::Int4}) {
    const fs::path dir = root / std::to_string(static_cast<int>(type));
    QuantizeOptions options;
    options.type = type;
    quantize_model(kT5, dir, options);
    const WeightStore stored = WeightStore::load(dir, ModelConfig::load(dir / "config.json"));
    // The same weights converted at load, into memory: the rows to agree with (F16 as
    // float32, exactly; kT5 is F16 already).
    ModelConfig converting = ModelConfig::load(kT5 / "config.json");
    const Quantization stored_as = ModelConfig::load(dir / "config.json").quantization;
    converting.compute_type = stored_as.enabled() ? stored_as : Quantization{WeightFormat::F32, 0};
    const WeightStore converted = WeightStore::load(kT5, converting);
    ASSERT_FALSE(converted.matrix("shared.weight").is_read_by_row());

    const WeightMatrix embedding = stored.matrix("shared.weight");
    EXPECT_TRUE(embedding.is_read_by_row());
    EXPECT_FALSE(stored.matrix("lm_head.weight").is_read_by_row()) << "the head multiplies";
    for (const Index r : {Index{0}, Index{1}, embedding.rows() / 2, embedding.rows() - 1})
      EXPECT_EQ(row_of(embedding, r), row_of(converted.matrix("shared.weight"), r)) << "row " << r;

    const Matrix x(1, embedding.cols());
    Matrix y(1, embedding.rows());
    EXPECT_THROW(blas::gemm_nt(x, embedding, y, Epilogue{}), Error);
  }
  fs::remove_all(root);
}

TEST(LookupRows, AFileCutShortAfterLoadingIsAnErrorAtTheLookupNotACrash) {
  const fs::path dir = testing_support::temp_dir("lookup-rows-cut") / "int4";
  QuantizeOptions options;
  options.type = ComputeType::Int4;
  quantize_model(kT5, dir, options);
  const WeightStore stored = WeightStore::load(dir, ModelConfig::load(dir / "config.json"));
  const WeightMatrix embedding = stored.matrix("shared.weight");
  EXPECT_NO_THROW(row_of(embedding, embedding.rows() - 1));
  fs::resize_file(dir / "model.safetensors", 64);
  try {
    row_of(embedding, embedding.rows() - 1);
    FAIL() << "a row past the file's new end was read";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("model.safetensors: tensor 'shared.weight"), std::string::npos) << message;
    EXPECT_NE(message.find("shorter than when it was loaded"), std::string::npos) << message;
  }
  fs::remove_all(dir.parent_path());
}

TEST(LookupRows, AReaderReadsEachRowOfAFileInMemoryOrOnDiskAndRefusesOthers) {
  const fs::path dir = testing_support::temp_dir("lookup-rows-file");
  const fs::path path = dir / "t.safetensors";
  write_safetensors_f32(path, {{"pad", {3}, {1, 2, 3}}, {"t", {4, 2}, {0, 1, 10, 11, 20, 21, 30, 31}}});
  const SafetensorsFile on_disk = SafetensorsFile::open(path);
  std::vector<std::byte> bytes(fs::file_size(path));
  {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fread(bytes.data(), 1, bytes.size(), f), bytes.size());
    std::fclose(f);
  }
  const SafetensorsFile in_memory = SafetensorsFile::from_bytes(std::move(bytes), path);
  for (const SafetensorsFile* file : {&on_disk, &in_memory}) {
    const std::unique_ptr<RowReader> rows = file->row_reader(*file->find("t"), 4);
    float row[2];
    for (Index r = 0; r < 4; ++r) {
      rows->read_row(r, std::as_writable_bytes(std::span<float>(row)));
      EXPECT_EQ(row[0], static_cast<float>(10 * r));
      EXPECT_EQ(row[1], static_cast<float>(10 * r + 1));
    }
    EXPECT_THROW(rows->read_row(4, std::as_writable_bytes(std::span<float>(row))), Error);
    EXPECT_THROW(rows->read_row(-1, std::as_writable_bytes(std::span<float>(row))), Error);
  }
  fs::remove_all(dir);
}

// The share of the pages wholly inside `bytes` that the process maps now: the present
// bit of /proc/self/pagemap (readable without privileges; only the frame numbers are not).
double mapped_share(std::span<const std::byte> bytes) {
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(bytes.data());
  const std::uintptr_t first = (begin + page - 1) / page, last = (begin + bytes.size()) / page;
  if (first >= last) return 0;
  const int pagemap = ::open("/proc/self/pagemap", O_RDONLY);
  EXPECT_GE(pagemap, 0) << "cannot open /proc/self/pagemap";
  std::vector<std::uint64_t> entries(last - first);
  const auto wanted = static_cast<ssize_t>(entries.size() * sizeof(std::uint64_t));
  EXPECT_EQ(::pread(pagemap, entries.data(), static_cast<std::size_t>(wanted), static_cast<off_t>(first * sizeof(std::uint64_t))),
            wanted);
  ::close(pagemap);
  std::size_t present = 0;
  for (const std::uint64_t entry : entries) present += entry >> 63;
  return static_cast<double>(present) / static_cast<double>(entries.size());
}

TEST(ConvertedAtLoad, AMatrixConvertedToTheComputeTypeLetsItsFilePagesGo) {
  const fs::path dir = testing_support::temp_dir("converted-pages");
  nlohmann::json config = testing_support::tiny_config();
  config["vocab_size"] = 1024;
  config["d_model"] = 512;
  config["encoder_ffn_dim"] = config["decoder_ffn_dim"] = 2048;
  config["encoder_layers"] = config["decoder_layers"] = 1;
  testing_support::write_random_model(dir, config);  // 27 MB of float32 matrices
  for (const bool convert : {false, true}) {
    SCOPED_TRACE(convert ? "as int8" : "as stored");
    ModelConfig model_config = ModelConfig::load(dir / "config.json");
    if (convert) model_config.compute_type = Quantization{WeightFormat::Int8, 0};
    const WeightStore store = WeightStore::load(dir, model_config);
    double mapped = 0, bytes = 0;
    for (const TensorSpec& spec : expected_tensors(model_config))
      if (const TensorInfo* info = spec.matrix ? store.files().front().find(spec.name) : nullptr) {
        mapped += mapped_share(info->bytes) * static_cast<double>(info->bytes.size());
        bytes += static_cast<double>(info->bytes.size());
      }
    ASSERT_GT(bytes, 20e6);
    // As stored, the load's scan for non-finite values maps every page, and products
    // read them there; converted, only pages a neighbouring small tensor's read maps back.
    if (convert)
      EXPECT_LT(mapped / bytes, 0.25);
    else
      EXPECT_GT(mapped / bytes, 0.9);
  }
}

}  // namespace
}  // namespace ordo
