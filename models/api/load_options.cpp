// RopeScalingOverride: the text of `--rope-scaling TYPE:FACTOR`, checked once here for
// the CLI and for programs alike.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>

#include "models/rope_scaling_config.h"
#include "ordo/error.hpp"
#include "ordo/options.hpp"

namespace ordo {

namespace {

constexpr const char* kTypes = "linear, dynamic, yarn, llama3, or none";

[[noreturn]] void bad(const std::string& what) { throw OptionError("rope_scaling", what); }

}  // namespace

RopeScalingOverride RopeScalingOverride::parse(std::string_view text) {
  const std::size_t colon = text.find(':');
  RopeScalingOverride out;
  out.type = std::string(text.substr(0, colon));
  if (colon == std::string_view::npos) {
    if (out.type == "none") return out;
    bad("'" + std::string(text) + "' is not TYPE:FACTOR (e.g. yarn:4; TYPE is " + kTypes + ")");
  }
  const std::string factor(text.substr(colon + 1));
  if (out.type == "none") bad("'none' takes no factor, got '" + std::string(text) + "'");
  // Decimal only, as every numeric flag: strtod would take hex and "inf".
  const bool decimal = !factor.empty() && factor.find_first_not_of("0123456789.eE+-") == std::string::npos;
  char* end = nullptr;
  errno = 0;
  out.factor = decimal ? std::strtod(factor.c_str(), &end) : std::nan("");
  if (!decimal || end != factor.c_str() + factor.size() || errno == ERANGE)
    bad("factor '" + factor + "' is not a finite number");
  out.validate();
  return out;
}

void RopeScalingOverride::validate() const {
  bool known = false;
  (void)rope_scaling_type_of(type, known);
  if (!known || type == "default") bad("unknown type '" + type + "' (expected " + kTypes + ")");
  if (type != "none" && (!(factor > 0.0) || !std::isfinite(factor)))
    bad("factor must be a finite number > 0, got " + std::to_string(factor));
}

namespace {
constexpr std::pair<ComputeType, std::string_view> kComputeTypes[] = {
    {ComputeType::Auto, "auto"}, {ComputeType::F32, "f32"},   {ComputeType::F16, "f16"},
    {ComputeType::BF16, "bf16"}, {ComputeType::Int8, "int8"}, {ComputeType::Int4, "int4"}};
}  // namespace

std::string_view compute_type_name(ComputeType type) {
  for (const auto& [value, name] : kComputeTypes)
    if (value == type) return name;
  return "?";
}

ComputeType parse_compute_type(std::string_view text) {
  for (const auto& [value, name] : kComputeTypes)
    if (name == text) return value;
  throw OptionError("compute_type", "unknown value '" + std::string(text) + "' (expected auto, f32, f16, bf16, int8 or int4)");
}

}  // namespace ordo
