// The bench's clock, and the median it reports of every repeated measurement.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace ordo::tools::bench {

// Monotonic: a measurement must not jump with the wall clock.
using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The middle of `values` (the mean of the two middle ones for an even count): robust to
// the odd run a busy machine slows down, which a mean is not.
inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2.0;
}

}  // namespace ordo::tools::bench
