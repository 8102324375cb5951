#include "engine/kernel_path.h"

#include <cstdlib>
#include <string>

#include "engine/error.h"

namespace ordo::kernels {

namespace {

constexpr const char* kVariable = "ORDO_CPU";

struct Setting {
  bool valid = true;
  bool force_portable = false;
  std::string value;
};

Setting read_setting() {
  Setting setting;
  const char* raw = std::getenv(kVariable);
  if (raw == nullptr) return setting;
  setting.value = raw;
  if (setting.value == "portable")
    setting.force_portable = true;
  else if (!setting.value.empty() && setting.value != "auto")
    setting.valid = false;
  return setting;
}

// Read once: the environment of a process does not change under its kernels.
const Setting& setting() {
  static const Setting value = read_setting();
  return value;
}

bool cpu_has_avx2() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

}  // namespace

KernelPath kernel_path() {
  static const KernelPath path =
      !setting().force_portable && cpu_has_avx2() ? KernelPath::Avx2 : KernelPath::Portable;
  return path;
}

std::string_view kernel_path_name(KernelPath path) {
  return path == KernelPath::Avx2 ? "avx2" : "portable";
}

void check_kernel_setting() {
  if (!setting().valid)
    throw Error(std::string("environment variable ") + kVariable,
                "unknown value '" + setting().value + "'",
                "the values are 'auto', the default, and 'portable'");
}

}  // namespace ordo::kernels
