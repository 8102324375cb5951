// The AVX-512 VNNI kernels of engine/integer_product.h: vpdpbusd multiplies 64 unsigned
// bytes by 64 signed bytes and adds each four adjacent products into sixteen 32-bit
// sums, one instruction where AVX2 needs three for half the bytes. Integer sums are
// exact and the float steps are the shared definition's, so these kernels give the
// portable and AVX2 paths' numbers bit for bit.
#pragma once

#include "engine/weight_matrix.h"

namespace ordo::kernels {
class QuantizedActivations;
}

namespace ordo::kernels::avx512 {

// Whether this CPU has the instructions (AVX-512 F, BW, VL and VNNI) and w's groups are
// whole units of 64 weights (or one group a row, for int8): the rest run on AVX2.
bool integer_product_takes(const WeightMatrix& w);

#if defined(__x86_64__)
// As kernels::integer_product, for a w that integer_product_takes() accepts.
void integer_product(const QuantizedActivations& a, const WeightMatrix& w, Index first, Index count, float* y,
                     Index y_stride);
#endif

}  // namespace ordo::kernels::avx512
