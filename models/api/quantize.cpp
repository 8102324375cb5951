// ordo::quantize_model (ordo/quantize.hpp): a streaming pass over a model directory's
// tensors, one at a time, written into a temporary directory renamed into place once it
// loads.
#include "ordo/quantize.hpp"

#include <fstream>
#include <map>
#include <memory>
#include <system_error>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/regular_file.h"
#include "models/api/internal.h"
#include "models/api/output_directory.h"
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
  // Hugging Face's torch_dtype names the weights' dtype: for a float type, now the weight
  // matrices' (the bulk of the model; norms and biases keep the dtype they are stored in,
  // which transformers' torch_dtype="auto" converts with the rest). int8 and int4 keep
  // the config's: transformers cannot read their matrices, and it still names the rest.
  static const std::map<WeightFormat, const char*> torch_dtypes = {
      {WeightFormat::F32, "float32"}, {WeightFormat::F16, "float16"}, {WeightFormat::BF16, "bfloat16"}};
  if (config.contains("torch_dtype") && torch_dtypes.contains(target.type)) config["torch_dtype"] = torch_dtypes.at(target.type);
  return config.dump(2) + "\n";
}

// A matrix of the input as its file stores it (F32 read through the float path).
WeightMatrix stored_matrix(const TensorSpec& spec, const SafetensorsFile& file, const TensorInfo& info,
                           const std::vector<SafetensorsFile>& files, const ModelConfig& config,
                           std::vector<float>& converted, MatrixCopies& copies) {
  if (info.dtype == DType::F32) return file.as_float32(info, converted);
  StoredTensor scales;
  for (const SafetensorsFile& f : files)
    if (const TensorInfo* s = f.find(scale_tensor_name(spec.name))) scales = {&f, s};
  return bind_stored_matrix(spec, {&file, &info}, scales, config.quantization, copies);
}

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
  OutputDirectory out(output, source);
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
  report.group_size = target.enabled() ? static_cast<int>(target.group_size) : -1;
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
                           MatrixCopies copies;
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

  const fs::path weights_file = out.partial() / kWeightsFile;
  try {
    write_encoded_safetensors(weights_file, tensors, metadata);
  } catch (const Error& e) {
    // The writer's own errors (a full disk) name the file it writes: the user's instead.
    const std::string message = e.what(), written = weights_file.string();
    if (!message.starts_with(written)) throw;  // a tensor's, naming the input
    throw Error((output / kWeightsFile).string() + message.substr(written.size()));
  }
  {
    std::ofstream config_file(out.partial() / "config.json", std::ios::binary | std::ios::trunc);
    config_file << converted_config(source, target);
    config_file.close();
    if (!config_file) throw Error((output / "config.json").string(), "write failed", "disk full?");
  }
  for (const fs::directory_entry& entry : fs::directory_iterator(source)) {
    const std::string name = entry.path().filename().string();
    std::error_code error;
    if (name == "config.json" || is_weight_file(name) || !fs::is_regular_file(entry.path(), error)) continue;
    if (!std::ifstream(entry.path(), std::ios::binary))
      throw Error(entry.path().string(), "cannot be read, so it cannot be copied",
                  "make it readable, or move it out of the model directory");
    fs::copy_file(entry.path(), out.partial() / name, error);
    if (error) OutputDirectory::cannot_write(output / name, error);
    report.copied_files.push_back(name);
  }
  LoadedModel::load(out.partial(), [](const std::string&) {});  // what was written loads
  std::error_code error;
  report.bytes_out = fs::file_size(weights_file, error);
  stop_if_asked();
  out.commit();
  return report;
}

}  // namespace ordo
