// The int8 product of engine/integer_product.h on AMX tiles (Intel Sapphire Rapids and
// later): one TDPBSSD multiplies a 16 x 64 tile of signed bytes by a 64 x 16 one into
// 16 x 16 exact 32-bit sums, 16,384 multiply-adds an instruction where AVX-512 VNNI's
// vpdpbusd does 64. A tile adds the products of a row's 64 bytes whatever their lane,
// so the definition's eight lanes come from the layout: each group of activations and
// of weights is copied lane by lane (the four bytes of lane l of every run of 32, in
// order), and a tile holds one lane's bytes. The integer sums are exact and the float
// steps are the definition's, vectorized across outputs instead of lanes: these tiles
// give every other path's numbers bit for bit.
//
// The copies are what this path pays: the activations once a product, the weights
// once a panel of 32 rows, read against every 32 rows of activations. So it takes
// products of at least kMinRows rows (a prefill, an encoder, a large batch); decode
// steps stay on the AVX-512 kernels.
#pragma once

#include "engine/weight_matrix.h"

namespace ordo::kernels {
class QuantizedActivations;
}

namespace ordo::kernels::amx {

// Fewer rows of activations than this run on AVX-512 VNNI: the copy of each weight panel
// is read by too few rows to pay for itself. One thread of an Intel Xeon, 2048 weight
// rows: at 16 rows the two ran alike (512 columns 103 and 98 GMAC/s, 768 columns 108
// and 111), at 24 the tiles 1.53x faster (147 and 96).
inline constexpr Index kMinRows = 17;

// Whether the tiles take this product: int8 weights whose groups are a multiple of 256
// (each lane of a group, G / 8 bytes, whole halves of a 64-byte tile row) and at least
// kMinRows rows of activations. The caller checks that the AMX path is in use.
bool takes(const QuantizedActivations& a, const WeightMatrix& w);

#if defined(__x86_64__)
// As kernels::integer_product, for a product takes() accepts, on a CPU whose widest path
// is AMX (engine/kernel_path.h: the CPU has the tiles and Linux granted their state).
void integer_product(const QuantizedActivations& a, const WeightMatrix& w, Index first, Index count, float* y,
                     Index y_stride);
#endif

}  // namespace ordo::kernels::amx
