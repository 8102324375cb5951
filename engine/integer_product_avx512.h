// The AVX-512 VNNI kernels of engine/integer_product.h: vpdpbusd multiplies 64 unsigned
// bytes by 64 signed ones and adds each four adjacent products into sixteen 32-bit
// lanes, one instruction where AVX2 needs three for half the bytes. Lanes 0-7 and 8-15
// hold the definition's lanes of the two runs of 32 in the 64 bytes, so integer sums
// are exact and the float steps are the definition's: these kernels give the portable
// and AVX2 paths' numbers bit for bit.
#pragma once

#include "engine/weight_matrix.h"

namespace ordo::kernels {
class QuantizedActivations;
}

namespace ordo::kernels::avx512 {

// Whether this CPU has the instructions: AVX-512 F, BW, VL and VNNI.
bool cpu_has_vnni();

// Whether this CPU has them and w's groups fit these int8 kernels: one scale a row or
// groups of a multiple of 64 (the rest run on AVX2; int4 has its own, engine/int4_product.h).
bool integer_product_takes(const WeightMatrix& w);

#if defined(__x86_64__)
// As kernels::integer_product, for a w that integer_product_takes() accepts.
void integer_product(const QuantizedActivations& a, const WeightMatrix& w, Index first, Index count, float* y,
                     Index y_stride);
#endif

}  // namespace ordo::kernels::avx512
