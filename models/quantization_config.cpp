#include "models/quantization_config.h"

#include <nlohmann/json.hpp>

namespace ordo {

using namespace config_reader;

Index default_group_size(WeightFormat type) { return type == WeightFormat::Int4 ? kInt4Run : 0; }

Quantization read_quantization(const KeyReader& keys) {
  const json* value = keys.find("quantization");
  if (value == nullptr || value->is_null()) return {};
  if (!value->is_object())
    keys.fail("quantization", "expected an object or null, got " + describe_type(*value),
              "e.g. {\"type\": \"int8\", \"group_size\": 0}, as ordo quantize writes it");
  const auto fail = [&](const std::string& key, const std::string& what, const std::string& hint = "") {
    keys.fail("quantization." + key, what, hint);
  };
  for (const auto& [key, _] : value->items())
    if (key != "type" && key != "group_size")
      fail(key, "is not a key ordo reads", "quantization has \"type\" and \"group_size\"");
  const auto type = value->find("type");
  if (type == value->end()) fail("type", "is missing", "\"int8\" or \"int4\"");
  if (!type->is_string()) fail("type", "expected a string, got " + describe_type(*type), "\"int8\" or \"int4\"");
  Quantization q;
  if (*type == "int8")
    q.type = WeightFormat::Int8;
  else if (*type == "int4")
    q.type = WeightFormat::Int4;
  else
    fail("type", "unknown value " + json_excerpt(*type),
         "ordo reads \"int8\" and \"int4\" (F16 and BF16 weights need no quantization key)");
  q.group_size = default_group_size(q.type);
  if (const auto group = value->find("group_size"); group != value->end()) {
    if (!group->is_number_integer()) fail("group_size", "expected an integer, got " + describe_type(*group));
    // As written: a number beyond 64 bits read as int64 would be another one (2^64 - 1 as -1).
    const bool beyond = group->is_number_unsigned() && group->get<std::uint64_t>() > static_cast<std::uint64_t>(kMaxSize);
    const auto size = beyond ? kMaxSize + 1 : group->get<std::int64_t>();
    if (size < 0 || size > kMaxSize) fail("group_size", "must be in [0, " + std::to_string(kMaxSize) + "], got " + group->dump());
    q.group_size = size;
  }
  if (q.type == WeightFormat::Int4 && (q.group_size == 0 || q.group_size % kInt4Run != 0))
    fail("group_size", "is " + std::to_string(q.group_size) + ", and int4 needs a positive multiple of 32",
         "int4 packs runs of 32 weights; 32 is llama.cpp's Q4_0 group");
  return q;
}

nlohmann::json quantization_json(const Quantization& q) {
  if (!q.enabled()) return nullptr;
  return {{"type", std::string(weight_format_name(q.type))}, {"group_size", q.group_size}};
}

std::string describe(const Quantization& q) {
  if (!q.enabled()) return std::string(weight_format_name(q.type));
  return std::string(weight_format_name(q.type)) +
         (q.group_size == 0 ? ", one scale per row" : ", groups of " + std::to_string(q.group_size));
}

}  // namespace ordo
