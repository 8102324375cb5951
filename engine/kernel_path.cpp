#include "engine/kernel_path.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "engine/error.h"

namespace ordo::kernels {

namespace {

constexpr const char* kVariable = "ORDO_CPU";

struct Setting {
  bool valid = true;
  KernelPath widest = KernelPath::Avx512;
  std::string value;
};

Setting read_setting() {
  Setting setting;
  const char* raw = std::getenv(kVariable);
  if (raw == nullptr) return setting;
  setting.value = raw;
  if (setting.value == "portable")
    setting.widest = KernelPath::Portable;
  else if (setting.value == "avx2")
    setting.widest = KernelPath::Avx2;
  else if (!setting.value.empty() && setting.value != "auto")
    setting.valid = false;
  return setting;
}

// Read once: the environment of a process does not change under its kernels.
const Setting& setting() {
  static const Setting value = read_setting();
  return value;
}

}  // namespace

KernelPath widest_kernel_path() {
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return KernelPath::Portable;
  return __builtin_cpu_supports("avx512f") ? KernelPath::Avx512 : KernelPath::Avx2;
#else
  return KernelPath::Portable;
#endif
}

KernelPath kernel_path() {
  static const KernelPath path = std::min(setting().widest, widest_kernel_path());
  return path;
}

std::string_view kernel_path_name(KernelPath path) {
  switch (path) {
    case KernelPath::Avx512: return "avx512";
    case KernelPath::Avx2: return "avx2";
    case KernelPath::Portable: return "portable";
  }
  return "?";
}

void check_kernel_setting() {
  if (!setting().valid)
    throw Error(std::string("environment variable ") + kVariable,
                "unknown value '" + setting().value + "'",
                "the values are 'auto', the default, 'avx2' and 'portable'");
}

}  // namespace ordo::kernels
