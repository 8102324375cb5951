#include "engine/kernel_path.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "engine/error.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace ordo::kernels {

namespace {

constexpr const char* kVariable = "ORDO_CPU";

struct Setting {
  bool valid = true;
  KernelPath widest = KernelPath::Amx;
  std::string value;
};

Setting read_setting() {
  Setting setting;
  const char* raw = std::getenv(kVariable);
  if (raw == nullptr) return setting;
  setting.value = raw;
  if (setting.value == "portable")
    setting.widest = KernelPath::Portable;
  else if (setting.value == "avx512")
    setting.widest = KernelPath::Avx512;
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

// Whether the CPU has AMX's tiles and int8 multiplies (CPUID leaf 7: EDX bits 24 and 25)
// and Linux lets this process use them: their 8 KiB of state is saved on a context
// switch only for processes that asked (arch_prctl ARCH_REQ_XCOMP_PERM, Linux 5.16 and
// later; an older kernel, or one that refuses, leaves the process on AVX-512). Asked once,
// and only when ORDO_CPU allows the tiles: a process capped below them keeps its context
// switches as they were.
bool amx_granted() {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  if ((edx & (1u << 24)) == 0 || (edx & (1u << 25)) == 0) return false;
  constexpr long kRequestPermission = 0x1023;  // ARCH_REQ_XCOMP_PERM
  constexpr long kTileData = 18;               // XFEATURE_XTILEDATA
  return syscall(SYS_arch_prctl, kRequestPermission, kTileData) == 0;
#else
  return false;
#endif
}

KernelPath widest_on_this_cpu() {
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return KernelPath::Portable;
  if (!__builtin_cpu_supports("avx512f")) return KernelPath::Avx2;
  const bool avx512_rest = __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  if (!avx512_rest) return KernelPath::Avx512;
  return setting().widest >= KernelPath::Amx && amx_granted() ? KernelPath::Amx : KernelPath::Avx512;
#else
  return KernelPath::Portable;
#endif
}

}  // namespace

KernelPath widest_kernel_path() {
  static const KernelPath widest = widest_on_this_cpu();
  return widest;
}

KernelPath kernel_path() {
  static const KernelPath path = std::min(setting().widest, widest_kernel_path());
  return path;
}

std::string_view kernel_path_name(KernelPath path) {
  switch (path) {
    case KernelPath::Amx: return "amx";
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
                "the values are 'auto', the default, 'avx512', 'avx2' and 'portable'");
}

}  // namespace ordo::kernels
