// The int4 products of engine/integer_product.h, on the panels of engine/int4_panels.h:
// portable, AVX2 (vpmaddubsw) and AVX-512 VNNI (vpdpbusd), every one giving the int4
// definition's numbers bit for bit. integer_product_on calls them.
#pragma once

#include "engine/integer_product.h"
#include "engine/kernel_path.h"
#include "engine/weight_matrix.h"

namespace ordo::kernels {

// y[i, r - first] for every row i of a and the weight rows r in [first, first + count)
// of the int4 matrix w, on `path` (at most widest_kernel_path()).
void int4_product(KernelPath path, const QuantizedActivations& a, const WeightMatrix& w, Index first, Index count,
                  float* y, Index y_stride);

}  // namespace ordo::kernels
