#include "tools/cli/bench/probes.h"

#include <sys/resource.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <thread>

#include <ordo/model.hpp>

#include "tools/cli/bench/timing.h"

namespace ordo::tools::bench {

namespace {

// GFLOP/s of a plain [n, n] x [n, n]^T sgemm through the library's product
// (ordo::matmul_nt: BLAS split over ordo's threads, as a linear layer runs it), three times.
double gemm_gflops(const std::vector<float>& a, const std::vector<float>& b, std::vector<float>& c) {
  const auto start = Clock::now();
  for (int i = 0; i < 3; ++i) matmul_nt(a, b, c, kGemmSize, kGemmSize, kGemmSize);
  return 3 * 2.0 * std::pow(static_cast<double>(kGemmSize), 3) / seconds_since(start) / 1e9;
}

// GB/s of one read of `buffer` split across `threads` threads, each summing its share
// (integer sums vectorize without -ffast-math).
double bandwidth_gbs(const std::vector<std::uint64_t>& buffer, int threads) {
  std::vector<std::uint64_t> sums(static_cast<std::size_t>(threads));
  const std::size_t share = buffer.size() / static_cast<std::size_t>(threads);
  const auto sum = [&](int t) {
    const std::uint64_t* p = buffer.data() + static_cast<std::size_t>(t) * share;
    std::uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (std::size_t i = 0; i + 4 <= share; i += 4) {
      s0 += p[i];
      s1 += p[i + 1];
      s2 += p[i + 2];
      s3 += p[i + 3];
    }
    sums[static_cast<std::size_t>(t)] = s0 + s1 + s2 + s3;
  };
  const auto start = Clock::now();
  std::vector<std::thread> workers;
  for (int t = 1; t < threads; ++t) workers.emplace_back(sum, t);
  sum(0);
  for (std::thread& w : workers) w.join();
  const double seconds = seconds_since(start);
  volatile std::uint64_t sink = 0;  // the sums must be computed
  for (const std::uint64_t s : sums) sink = sink + s;
  return static_cast<double>(share * static_cast<std::size_t>(threads) * sizeof(std::uint64_t)) / seconds / 1e9;
}

}  // namespace

// The reads come first, all together, after a pause: OpenBLAS's threads spin for about
// 0.1 s after each call before they sleep, and a spinning thread on a core the read
// needs cost it a fifth of its rate on a 2-core machine.
MachineRates probe_machine(const BenchOptions& options) {
  MachineRates rates;
  std::vector<std::uint64_t> stream(kStreamBytes / sizeof(std::uint64_t));
  for (std::size_t i = 0; i < stream.size(); ++i) stream[i] = i;  // touch every page first
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  for (int i = 0; i < options.runs(); ++i) {
    const double gbs = bandwidth_gbs(stream, options.threads);
    if (i >= options.warmup) rates.bandwidth_gbs.push_back(gbs);
  }
  const std::size_t elements = static_cast<std::size_t>(kGemmSize) * kGemmSize;
  std::vector<float> a(elements), b(elements), c(elements);
  for (std::size_t i = 0; i < elements; ++i) {
    a[i] = static_cast<float>(i % 7) * 0.25f;
    b[i] = static_cast<float>(i % 5) * 0.5f;
  }
  for (int i = 0; i < options.runs(); ++i) {
    const double gflops = gemm_gflops(a, b, c);
    if (i >= options.warmup) rates.gemm_gflops.push_back(gflops);
  }
  return rates;
}

double peak_rss_mb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.starts_with("VmHWM:")) return std::stod(line.substr(6)) / 1024.0;
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

}  // namespace ordo::tools::bench
