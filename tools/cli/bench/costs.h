// What the workload costs, counted from the model's own tensors: the bytes one decode
// step must read (which, over the machine's bandwidth, bound a batch-1 decode) and the
// FLOPs of the encode phase (which, over its time, give its GFLOP/s).
#pragma once

#include "engine/tensor.h"
#include "models/loaded_model.h"

namespace ordo::tools::bench {

// Bytes one decode step must read: every decoder weight a step touches (self-attention,
// the cross-attention's query and output projections, the feed-forward, the norms)
// and the output projection, in float32, the dtype ordo holds weights in (F16/BF16
// files are converted at load). Cross-attention K/V projections run once per source,
// not per step; the few embedding (and learned position) rows a step gathers are left
// out: negligible, and part of the output projection when tied.
double decode_weight_bytes(const LoadedModel& model);

// FLOPs of the encode phase's matrix products (2 per multiply-add) for `batch` sources
// of `length` tokens: every linear layer of the stack on B*S rows, attention's q k^T and
// p v (a causal prefill counts the S(S+1)/2 query-key pairs it needs), and for a
// prefill the output projection of each prompt's last row. Norms, activations and
// softmax are not counted.
double encode_flops(const LoadedModel& model, Index batch, Index length);

}  // namespace ordo::tools::bench
