// Which of ordo's own kernels run (engine/matvec.h, engine/quantized_matvec.h): the
// widest path the CPU has, else portable C++ that any x86-64 (or other) CPU runs:
//   amx       AMX tiles beside AVX-512, where Linux grants a process their state: the
//             int8 products of many rows (engine/integer_product_amx.h); every other
//             kernel is the AVX-512 one
//   avx512    AVX-512 (F) beside AVX2 + FMA + F16C: the int8 and int4 products where the
//             CPU also has AVX-512 BW, VL and VNNI (engine/integer_product_avx512.h);
//             every other kernel is the AVX2 one
//   avx2      AVX2 + FMA (+ F16C for half-precision and quantized weights)
//   portable  one value at a time
// The choice is made once per process, at run time, from the CPU and the environment
// variable ORDO_CPU, which names the widest path to take:
//   unset, "" or "auto"  the widest path this CPU supports
//   "avx512"             at most AVX-512, so that the path a CPU without AMX (a Zen 4)
//                        takes is tested on one that has it
//   "avx2"               at most AVX2, so that the path a CPU without AVX-512 (a Zen 3)
//                        takes is tested on one that has it
//   "portable"           the portable path on any CPU, so that the path an older CPU
//                        takes is tested on this one
// (tests/CMakeLists.txt runs the kernel and parity suites once more on each narrower
// path). Every path gives the same numbers, bit for bit, except where a header says
// otherwise. OpenBLAS, which runs the large products, makes its own choice
// (OPENBLAS_CORETYPE).
#pragma once

#include <string_view>

namespace ordo::kernels {

// Ordered from the narrowest: a path includes every narrower one's instructions.
enum class KernelPath { Portable, Avx2, Avx512, Amx };

// The path every kernel call takes. Never throws: an unknown ORDO_CPU value reads as
// "auto" here, and check_kernel_setting() reports it.
KernelPath kernel_path();

// The widest path this CPU supports, whatever ORDO_CPU says, except AMX: its state is
// asked of Linux only when ORDO_CPU allows the tiles, so under "avx512" and narrower
// this is at most avx512.
KernelPath widest_kernel_path();

// True on the AVX2 path and every wider one: the AVX2 kernels may run.
inline bool has_avx2() { return kernel_path() >= KernelPath::Avx2; }

// "amx", "avx512", "avx2" or "portable".
std::string_view kernel_path_name(KernelPath path);

// Throws ordo::Error naming ORDO_CPU, its value and the values it takes, when the
// variable holds anything else. Model::load calls it, so a typo is an error, never a
// silently ignored setting.
void check_kernel_setting();

}  // namespace ordo::kernels
