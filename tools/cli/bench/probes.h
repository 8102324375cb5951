// Probes of the machine, measured in the bench's own process so that its numbers sit
// next to what the machine could do: a plain sgemm (the compute ceiling), a streaming
// read (the bandwidth that bounds a batch-1 decode step, which must read every decoder
// weight once), and the peak resident set.
#pragma once

#include <cstddef>
#include <vector>

#include "tools/cli/bench/options.h"

namespace ordo::tools::bench {

inline constexpr int kGemmSize = 1024;                             // n of the n x n x n sgemm
inline constexpr std::size_t kStreamBytes = std::size_t{256} << 20;  // 8x a 32 MB L3

struct MachineRates {
  std::vector<double> bandwidth_gbs, gemm_gflops;  // one per measured run
};

// The streaming read's GB/s with options.threads threads, then the sgemm's GFLOP/s
// through ordo's BLAS door, each options.warmup + options.repeats times (the warm-up
// runs not kept). Run it after the workload, so that its buffers are not in the
// workload's peak RSS.
MachineRates probe_machine(const BenchOptions& options);

// Peak resident set of this process so far, MB: VmHWM, or getrusage where /proc is
// missing.
double peak_rss_mb();

}  // namespace ordo::tools::bench
