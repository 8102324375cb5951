// The AVX-512 kernels of one row of activations against an int8 or int4 matrix (a decode
// step of one sequence): engine/quantized_matvec.cpp calls them on the AVX-512 path
// (engine/kernel_path.h) and runs its AVX2 kernels for every other product.
//
// They give the AVX2 kernels' numbers bit for bit: the same products, summed in the same
// order (per group of a row, four chains of eight lanes over its runs of 32 weights,
// (a + b) + (c + d), then one FMA by the group's scale into eight running totals, and
// the totals' horizontal sum), so which path a CPU takes never changes an output. What
// is faster: sixteen lanes an instruction, int4 nibbles turned into floats by one
// permute each (no masks, no conversions), and two rows at a time, so that two chains of
// totals hide each other's FMA latency.
#pragma once

#include "engine/weight_matrix.h"

namespace ordo::kernels::avx512 {

// Whether these kernels take w: int8 or int4 whose rows and groups are whole runs of 32
// weights (every model's widths are; the AVX2 kernels take the rest).
bool takes(const WeightMatrix& w);

#if defined(__x86_64__)
// out[r] = dot(row r of w, x) for every row r, x [w.cols()]. Only for a w that takes()
// accepts, on a CPU with AVX-512F, AVX2, FMA and F16C (the caller's dispatch checks).
void dot_rows(const WeightMatrix& w, const float* x, float* out);
#endif

}  // namespace ordo::kernels::avx512
