// Which of ordo's own kernels run (engine/matvec.h): the AVX2 + FMA ones on a CPU that
// has both, else portable C++ that any x86-64 (or other) CPU runs. The choice is made
// once per process, at run time, from the CPU and the environment variable ORDO_CPU:
//   unset, "" or "auto"  the fastest path this CPU supports
//   "portable"           the portable path on any CPU, so that the path an older CPU
//                        takes is tested on this one (tools/scripts/run_tests.sh runs the
//                        kernel and parity tests once so)
// OpenBLAS, which runs the large products, makes its own choice (OPENBLAS_CORETYPE).
#pragma once

#include <string_view>

namespace ordo::kernels {

enum class KernelPath { Avx2, Portable };

// The path every kernel call takes. Never throws: an unknown ORDO_CPU value reads as
// "auto" here, and check_kernel_setting() reports it.
KernelPath kernel_path();

// "avx2" or "portable".
std::string_view kernel_path_name(KernelPath path);

// Throws ordo::Error naming ORDO_CPU, its value and the values it takes, when the
// variable holds anything else. Model::load calls it, so a typo is an error, never a
// silently ignored setting.
void check_kernel_setting();

}  // namespace ordo::kernels
