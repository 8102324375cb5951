// ordo::quantize_model (ordo/quantize.hpp): a streaming pass over a model directory's
// tensors, one at a time, written into a temporary directory renamed into place once it
// loads.
#include "ordo/quantize.hpp"

#include <atomic>
#include <fstream>
#include <map>
#include <memory>
#include <system_error>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/regular_file.h"
#include "models/api/internal.h"
#include "models/json_message.h"
#include "models/quantize.h"
#include "models/shard_index.h"
#include "models/stored_matrix.h"
#include "models/tensor_names.h"

namespace ordo {

namespace fs = std::filesystem;

namespace {

constexpr const char* kWeightsFile = "model.safetensors";

// Weight files of the input, which the output replaces with its one model.safetensors.
bool is_weight_file(const std::string& name) {
  return name.ends_with(".safetensors") || name == kShardIndexFile || name.starts_with("pytorch_model.bin");
}

// The directory `output` names: "out/" is "out", as a shell's completion writes it.
fs::path output_directory(const fs::path& output) {
  const fs::path normal = output.lexically_normal();
  return normal.has_filename() || !normal.has_parent_path() ? normal : normal.parent_path();
}

// The output may exist only as an empty directory: ordo never writes over a model.
void check_output(const fs::path& output, const fs::path& input) {
  std::error_code error;
  if (fs::equivalent(output, input, error))
    throw Error(output.string(), "is the input directory", "write the converted model to a new directory");
  if (fs::is_symlink(output, error) && !fs::exists(output, error))
    throw Error(output.string(), "is a symbolic link to " + fs::read_symlink(output, error).string() + ", which does not exist",
                "create the directory it names, or choose another");
  if (!fs::exists(output, error)) return;
  if (!fs::is_directory(output, error)) throw Error(output.string(), "exists and is not a directory", "choose a new directory");
  if (!fs::is_empty(output, error))
    throw Error(output.string(), "exists and is not empty", "choose a new directory: ordo quantize never writes over files");
}

// What a failed write says: the user's path and the system's reason, not the temporary
// directory's name.
[[noreturn]] void cannot_write(const fs::path& output, const fs::filesystem_error& e) {
  throw Error(output.string(), "cannot be written: " + e.code().message(),
              "choose a directory you can write to, on a disk with room");
}

// config.json with `quantization` as the output stores it; every other key as it was, in order.
std::string converted_config(const fs::path& input, const Quantization& target) {
  const fs::path path = input / "config.json";
  nlohmann::ordered_json config;
  try {
    config = nlohmann::ordered_json::parse(read_regular_file(path, 16u << 20, "a config.json"));
  } catch (const nlohmann::json::exception& e) {
    throw Error(path.string(), "not valid JSON: " + json_message(e.what()));
  }
  if (target.enabled())
    config["quantization"] = nlohmann::ordered_json{{"type", std::string(weight_format_name(target.type))},
                                                    {"group_size", target.group_size}};
  else
    config.erase("quantization");
  // Hugging Face's torch_dtype says what the weights are: for a float type, now that.
  // (int8 and int4 keep it: it still says what the norms and biases are.)
  static const std::map<WeightFormat, const char*> torch_dtypes = {
      {WeightFormat::F32, "float32"}, {WeightFormat::F16, "float16"}, {WeightFormat::BF16, "bfloat16"}};
  if (config.contains("torch_dtype") && torch_dtypes.contains(target.type)) config["torch_dtype"] = torch_dtypes.at(target.type);
  return config.dump(2) + "\n";
}

// A matrix of the input as its file stores it (F32 read through the float path).
WeightMatrix stored_matrix(const TensorSpec& spec, const SafetensorsFile& file, const TensorInfo& info,
                           const std::vector<SafetensorsFile>& files, const ModelConfig& config,
                           std::vector<float>& converted, std::vector<std::vector<std::byte>>& copies) {
  if (info.dtype == DType::F32) return file.as_float32(info, converted);
  StoredTensor scales;
  for (const SafetensorsFile& f : files)
    if (const TensorInfo* s = f.find(scale_tensor_name(spec.name))) scales = {&f, s};
  return bind_stored_matrix(spec, {&file, &info}, scales, config.quantization, copies);
}

// Where the pass writes until it is complete: a directory beside a new `output`, renamed
// to it at the end; inside an existing (empty) one, whose files then move up, so that the
// directory itself (its permissions, owner, a symbolic link to it) stays as it was.
fs::path partial_directory(const fs::path& output, bool exists) {
  static std::atomic<int> counter{0};
  // Appended, not "." + string: g++ 12's -Wrestrict misfires on that (GCC bug 105329).
  std::string name(1, '.');
  if (!exists) name.append(output.filename().string());
  name.append(".partial-").append(std::to_string(::getpid())).append("-").append(std::to_string(counter++));
  if (exists) return output / name;
  return (output.has_parent_path() ? output.parent_path() : fs::path(".")) / name;
}

// The complete pass into place: one rename for a new directory; for an existing one, each
// file moved into it, config.json last (a directory without it is no model).
void move_into_place(const fs::path& partial, const fs::path& output, bool exists) {
  if (!exists) return fs::rename(partial, output);
  for (const fs::directory_entry& entry : fs::directory_iterator(partial))
    if (entry.path().filename() != "config.json") fs::rename(entry.path(), output / entry.path().filename());
  fs::rename(partial / "config.json", output / "config.json");
  fs::remove(partial);
}

struct RemoveUnlessKept {
  fs::path path;
  bool keep = false;
  ~RemoveUnlessKept() {
    std::error_code ignored;
    if (!keep) fs::remove_all(path, ignored);
  }
};

}  // namespace

QuantizeReport quantize_model(const fs::path& input, const fs::path& output, const QuantizeOptions& options) {
  if (options.type == ComputeType::Auto)
    throw OptionError("type", "auto names no format to write (expected f32, f16, bf16, int8 or int4)");
  LoadOptions load;
  load.compute_type = options.type;
  load.group_size = options.group_size;
  const Quantization target = *detail::compute_type_of(load);
  if (output.empty()) throw Error("output directory", "the path is empty", "give a new directory to write");
  const fs::path source = find_model_directory(input.string());
  const fs::path out = output_directory(output);
  check_output(out, source);
  const auto stop_if_asked = [&] {
    if (options.stop_requested && options.stop_requested())
      throw Error(output.string(), "stopped before it was complete; nothing was written");
  };

  // The input must load as a model: every shape, dtype, scale and value checked before a
  // byte is written. Its matrices stay as stored (mapped), so this costs no copy.
  const auto model = LoadedModel::load(source, [](const std::string&) {});
  const ModelConfig& config = model->config();
  std::map<std::string, TensorSpec> matrices;
  std::map<std::string, std::string> scale_of;  // scale name -> its matrix
  for (const TensorSpec& spec : expected_tensors(config))
    if (spec.matrix) {
      scale_of[scale_tensor_name(spec.name)] = spec.name;
      matrices.emplace(spec.name, spec);
    }

  QuantizeReport report;
  const std::vector<SafetensorsFile>& files = model->weights().files();
  std::vector<EncodedTensor> tensors;
  std::map<std::string, std::string> metadata;
  for (const SafetensorsFile& file : files) {
    std::error_code error;
    report.bytes_in += fs::file_size(file.path(), error);
    for (const auto& [key, value] : file.metadata()) metadata.emplace(key, value);
    for (const TensorInfo& info : file.tensors()) {
      if (scale_of.contains(info.name) && matrices.contains(scale_of[info.name])) continue;  // remade with its matrix
      const auto spec = matrices.find(info.name);
      if (spec == matrices.end()) {  // not a weight matrix: as it was
        tensors.push_back({info.name, info.dtype, info.shape, [&info, &stop_if_asked] {
                             stop_if_asked();
                             return std::vector<std::byte>(info.bytes.begin(), info.bytes.end());
                           }});
        continue;
      }
      // The matrix is encoded once, when its values are written; its scales follow.
      auto encoded = std::make_shared<EncodedMatrix>();
      EncodedMatrix layout;  // the shapes only, to write the header first
      layout.rows = spec->second.shape[0];
      layout.cols = spec->second.shape[1];
      const Quantization stored = target.stored_as(layout.cols);  // what encode_matrix writes
      layout.format = stored.type;
      layout.group = stored.enabled() ? stored.group_for(layout.cols) : 0;
      if (stored.type != target.type) ++report.int8_fallbacks;
      const std::string where = file.path().string() + ": tensor '" + info.name + "'";
      tensors.push_back({info.name, layout.values_dtype(), layout.values_shape(),
                         [&files, &config, &stop_if_asked, target, encoded, where, matrix = &spec->second, stored = &file,
                          values = &info] {
                           stop_if_asked();
                           std::vector<float> converted;
                           std::vector<std::vector<std::byte>> copies;
                           *encoded = encode_matrix(stored_matrix(*matrix, *stored, *values, files, config, converted, copies),
                                                    target, where);
                           return std::move(encoded->values);
                         }});
      if (target.enabled())
        tensors.push_back({scale_tensor_name(info.name), layout.scales_dtype(), layout.scales_shape(),
                           [encoded] { return std::move(encoded->scales); }});
      ++report.matrices;
    }
  }
  report.tensors = static_cast<int>(tensors.size());

  const bool exists = fs::exists(out);
  RemoveUnlessKept partial{partial_directory(out, exists)};
  try {
    fs::create_directories(partial.path);
  } catch (const fs::filesystem_error& e) {
    cannot_write(output, e);
  }
  write_encoded_safetensors(partial.path / kWeightsFile, tensors, metadata);
  {
    std::ofstream config_file(partial.path / "config.json", std::ios::binary | std::ios::trunc);
    config_file << converted_config(source, target);
    config_file.close();
    if (!config_file) throw Error((output / "config.json").string(), "write failed", "disk full?");
  }
  for (const fs::directory_entry& entry : fs::directory_iterator(source)) {
    const std::string name = entry.path().filename().string();
    std::error_code error;
    if (name == "config.json" || is_weight_file(name) || !fs::is_regular_file(entry.path(), error)) continue;
    try {
      fs::copy_file(entry.path(), partial.path / name);
    } catch (const fs::filesystem_error& e) {
      throw Error(entry.path().string(), "cannot be copied: " + e.code().message(),
                  "make it readable, or move it out of the model directory");
    }
    report.copied_files.push_back(name);
  }
  LoadedModel::load(partial.path, [](const std::string&) {});  // what was written loads
  std::error_code error;
  report.bytes_out = fs::file_size(partial.path / kWeightsFile, error);
  stop_if_asked();
  try {
    move_into_place(partial.path, out, exists);
  } catch (const fs::filesystem_error& e) {
    cannot_write(output, e);
  }
  partial.keep = true;
  return report;
}

}  // namespace ordo
