// ordo's own kernels (engine/matvec.h) and the thread pool that splits products
// (engine/thread_pool.h, engine/blas.cpp), against double-precision references.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <numbers>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/blas.h"
#include "engine/epilogue.h"
#include "engine/error.h"
#include "engine/kernel_path.h"
#include "engine/matvec.h"
#include "engine/thread_pool.h"
#include "tests/reference.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace ordo {
namespace {

namespace ref = reference;

// Every tail the vectorized loops leave (widths around 8 and 32), rows not a multiple
// of anything, a stride wider than the row, and alpha/beta. Tolerance 1e-5 + 1e-5|y|:
// float sums of up to 515 products of values in [-1, 1] against double.
TEST(Kernels, MatvecMatchesADoubleDotProduct) {
  std::mt19937 rng(1);
  for (const Index cols : {1, 7, 8, 9, 31, 32, 33, 64, 515}) {
    for (const Index rows : {1, 3, 17}) {
      SCOPED_TRACE("rows " + std::to_string(rows) + " cols " + std::to_string(cols));
      const Index stride = cols + 5;
      const Matrix w = ref::random_matrix(rows, stride, rng);
      const std::vector<float> x = ref::random_vector(cols, rng);
      std::vector<float> y = ref::random_vector(rows, rng);
      std::vector<double> want(static_cast<std::size_t>(rows));
      for (Index r = 0; r < rows; ++r) {
        double dot = 0.0;
        for (Index k = 0; k < cols; ++k) dot += static_cast<double>(w(r, k)) * x[static_cast<std::size_t>(k)];
        want[static_cast<std::size_t>(r)] = 0.5 * dot + 2.0 * y[static_cast<std::size_t>(r)];
      }
      kernels::matvec(w.data(), rows, cols, stride, x.data(), y.data(), 0.5f, 2.0f);
      EXPECT_TRUE(ref::all_close(y, want, 1e-5, 1e-5));
      // beta 0 overwrites, even a NaN already there.
      std::vector<float> fresh(static_cast<std::size_t>(rows), std::numeric_limits<float>::quiet_NaN());
      kernels::matvec(w.data(), rows, cols, stride, x.data(), fresh.data(), 1.0f, 0.0f);
      for (const float v : fresh) EXPECT_FALSE(std::isnan(v));
    }
  }
}

// The small-batch kernel for each of its tile shapes (chosen by the rows of x: up to 2,
// 4, 8, and more) and every edge of its tiles (rows of x and of w not multiples of the
// tile, widths around 8), strides wider than the rows, and alpha/beta; tolerance as
// matvec's.
TEST(Kernels, SmallGemmMatchesADoubleProduct) {
  std::mt19937 rng(4);
  for (const Index m : {2, 3, 4, 5, 7, 8, 9, 16, 17, 30, 64}) {
    for (const Index cols : {5, 8, 33, 130}) {
      SCOPED_TRACE("m " + std::to_string(m) + " cols " + std::to_string(cols));
      const Index rows = 11, x_stride = cols + 3, w_stride = cols + 1, y_stride = rows + 2;
      const Matrix x = ref::random_matrix(m, x_stride, rng);
      const Matrix w = ref::random_matrix(rows, w_stride, rng);
      Matrix y = ref::random_matrix(m, y_stride, rng);
      ref::Matrix64 want(m, rows);
      for (Index i = 0; i < m; ++i)
        for (Index r = 0; r < rows; ++r) {
          double dot = 0.0;
          for (Index k = 0; k < cols; ++k) dot += static_cast<double>(x(i, k)) * w(r, k);
          want(i, r) = 1.5 * dot - 0.5 * y(i, r);
        }
      kernels::small_gemm_nt(x.data(), m, x_stride, w.data(), rows, cols, w_stride, y.data(), y_stride, 1.5f, -0.5f);
      ref::expect_close(y.view().col_block(0, rows), want, 1e-5, 1e-5);
    }
  }
}

// Widths around its blocks of 32 and 8 (a head is 64 wide), a stride wider than the
// row, and alpha/beta; tolerance as matvec's.
TEST(Kernels, VecmatMatchesADoubleSum) {
  std::mt19937 rng(2);
  for (const Index cols : {5, 8, 37, 64, 77}) {
    SCOPED_TRACE("cols " + std::to_string(cols));
    const Index rows = 13, stride = cols + 3;
    const Matrix w = ref::random_matrix(rows, stride, rng);
    const std::vector<float> x = ref::random_vector(rows, rng);
    std::vector<float> y = ref::random_vector(cols, rng);
    std::vector<double> want(static_cast<std::size_t>(cols), 0.0);
    for (Index r = 0; r < rows; ++r)
      for (Index c = 0; c < cols; ++c)
        want[static_cast<std::size_t>(c)] += static_cast<double>(x[static_cast<std::size_t>(r)]) * w(r, c);
    for (Index c = 0; c < cols; ++c)
      want[static_cast<std::size_t>(c)] = 1.5 * want[static_cast<std::size_t>(c)] - 0.5 * y[static_cast<std::size_t>(c)];
    kernels::vecmat(x.data(), w.data(), rows, cols, stride, y.data(), 1.5f, -0.5f);
    EXPECT_TRUE(ref::all_close(y, want, 1e-5, 1e-5));
  }
}

// Products large enough to be split across threads give what one thread gives, bit
// for bit: each output element is computed by exactly one thread, in the same order.
TEST(Kernels, SplitProductsEqualOneThreadBitForBit) {
  std::mt19937 rng(3);
  const Matrix w = ref::random_matrix(4099, 300, rng);  // large enough to be split
  const Matrix x1 = ref::random_matrix(1, 300, rng);
  const Matrix x8 = ref::random_matrix(8, 300, rng);
  std::vector<Matrix> one, two;
  for (const int threads : {1, 2}) {
    threads::set_count(threads);
    auto& out = threads == 1 ? one : two;
    out.emplace_back(1, 4099);
    blas::gemm_nt(x1, w, out.back());
    out.emplace_back(8, 4099);
    blas::gemm_nt(x8, w, out.back());
  }
  for (std::size_t i = 0; i < one.size(); ++i)
    for (Index r = 0; r < one[i].rows(); ++r)
      for (Index c = 0; c < one[i].cols(); ++c) ASSERT_EQ(one[i](r, c), two[i](r, c)) << i << " " << r << " " << c;
  ref::expect_close(one[0], ref::matmul_nt(x1, w), 1e-4, 1e-5);
}

// Every part of every run happens exactly once, also when several threads call run()
// at once (the pool serves one; the others run their parts themselves).
TEST(Kernels, ThreadPoolRunsEveryPartOnceUnderConcurrentCallers) {
  ThreadPool pool(3);
  std::atomic<long> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&] {
      for (int i = 0; i < 500; ++i) {
        std::vector<int> seen(3, 0);
        pool.run([&](int part) { ++seen[static_cast<std::size_t>(part)]; });
        for (const int s : seen) EXPECT_EQ(s, 1);
        total += 1;
      }
    });
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(total.load(), 2000);
}

// The epilogue reaches each column of the output once, after the product wrote it, with
// the bias of that column: a per-column bias lands where it belongs, on one thread and
// on two, for each path (one row, a few rows, sgemm). Oracle: the product in double,
// plus column c's bias c + 1, through GELU; a column missed, or given its bias or GELU
// twice, is off by far more than the float32 tolerance.
TEST(Kernels, EpilogueSeesEveryBlockOnceAfterTheProduct) {
  std::mt19937 rng(5);
  const Matrix w = ref::random_matrix(4099, 300, rng);  // large enough to be split
  std::vector<float> bias(4099);
  for (std::size_t c = 0; c < bias.size(); ++c) bias[c] = static_cast<float>(c + 1);
  for (const Index m : {1, 8, 200}) {
    const Matrix x = ref::random_matrix(m, 300, rng);
    const ref::Matrix64 plain_product = ref::matmul_nt(x, w);
    for (const int threads : {1, 2}) {
      SCOPED_TRACE("rows " + std::to_string(m) + ", threads " + std::to_string(threads));
      threads::set_count(threads);
      Matrix y(m, 4099);
      blas::gemm_nt(x, w, y, Epilogue{bias, Activation::Gelu});
      ref::Matrix64 want = plain_product;
      for (Index r = 0; r < m; ++r)
        for (Index c = 0; c < 4099; ++c) {
          const double v = want(r, c) + static_cast<double>(c + 1);
          want(r, c) = 0.5 * v * std::erfc(-v / std::sqrt(2.0));
        }
      ref::expect_close(y, want, 1e-4, 1e-5);
    }
  }
}

// GELU's tanh form (Hugging Face's gelu_new) against the formula in double, over the
// range where it bends and far out on both sides (0 and x): float32 rounding of a
// handful of operations, 1e-6 relative.
TEST(Kernels, GeluTanhIsTheTanhApproximation) {
  std::vector<float> values{-30.0f, -5.0f, -1.0f, -0.1f, 0.0f, 0.3f, 1.0f, 2.5f, 30.0f};
  const std::vector<float> inputs = values;
  apply_activation(Activation::GeluTanh, MatrixRef(values.data(), 1, static_cast<Index>(values.size())));
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const double x = inputs[i];
    const double want = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
    EXPECT_NEAR(values[i], want, 1e-6 * std::max(1.0, std::abs(want))) << "x = " << x;
  }
}

// parallel_for covers every item once with parts below max_parts(), and an exception
// thrown by a part on a worker thread comes back to the caller (instead of ending
// the process).
TEST(Kernels, ParallelForCoversEachItemOnceAndCarriesExceptionsBack) {
  threads::set_count(2);
  std::vector<std::atomic<int>> seen(1000);
  std::atomic<int> highest_part{0};
  threads::parallel_for(1000, 1 << 20, [&](Index first, Index count, int part) {
    highest_part = std::max(highest_part.load(), part);
    for (Index i = first; i < first + count; ++i) ++seen[static_cast<std::size_t>(i)];
  });
  for (const auto& s : seen) ASSERT_EQ(s.load(), 1);
  EXPECT_LT(highest_part.load(), threads::count());
  EXPECT_EQ(highest_part.load(), 1) << "1000 items of 2^20 multiply-adds should be split across both threads";
  EXPECT_THROW(threads::parallel_for(1000, 1 << 20,
                                  [&](Index first, Index, int) {
                                    if (first > 0) throw Error("test", "second part fails");
                                  }),
               Error);
  // When several parts throw, the lowest part's error comes back, however the threads
  // ran: here the second part throws first, while the first waits for it (a second at
  // most, should the pool ever run the parts in turn).
  std::atomic<bool> second_threw{false};
  std::string message;
  try {
    threads::parallel_for(1000, 1 << 20, [&](Index first, Index, int) {
      if (first > 0) {
        second_threw = true;
        throw Error("items from " + std::to_string(first), "fail");
      }
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      while (!second_threw && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
      throw Error("items from 0", "fail");
    });
  } catch (const Error& error) {
    message = error.what();
  }
  EXPECT_EQ(message, "items from 0: fail");
}

// Whether the mask of extended state components that an arch_prctl request reads
// (ARCH_GET_XCOMP_SUPP: what Linux supports; ARCH_GET_XCOMP_PERM: what this process was
// granted) holds AMX's tile data (bit 18).
bool tile_data_in(long request) {
#if defined(__x86_64__)
  unsigned long mask = 0;
  return syscall(SYS_arch_prctl, request, &mask) == 0 && (mask & (1ul << 18)) != 0;
#else
  (void)request;
  return false;
#endif
}

// Whether the CPU has AMX's tiles and their int8 multiplies (CPUID leaf 7, EDX bits 24
// and 25) and Linux supports their state: what is true whatever ordo asked for.
bool amx_supported() {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0 || (edx & (3u << 24)) != (3u << 24)) return false;
  return tile_data_in(0x1021);  // ARCH_GET_XCOMP_SUPP
#else
  return false;
#endif
}

// Whether this process holds the tiles' permission: what ordo asked for.
bool amx_permitted() {
  (void)kernels::kernel_path();
  return tile_data_in(0x1022);  // ARCH_GET_XCOMP_PERM
}

// The kernels take the widest path the CPU has (AMX where Linux allows it, AVX-512, else
// AVX2 + FMA, else portable), capped by ORDO_CPU: CTest runs this file once more with
// ORDO_CPU=avx512 (kernels.avx512_path), avx2 (kernels.avx2_path) and portable
// (kernels.portable_path), so every path is tested on any machine that has it.
TEST(Kernels, PathFollowsTheCpuAndOrdoCpu) {
  const char* raw = std::getenv("ORDO_CPU");
  const std::string setting = raw != nullptr ? raw : "";
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f");
  // AMX only where ORDO_CPU allows it: a capped process never asks Linux for the tiles.
  const bool capped = setting == "portable" || setting == "avx2" || setting == "avx512";
  const bool amx = avx512 && amx_supported() && !capped;
  EXPECT_EQ(amx_permitted(), amx) << "ORDO_CPU=" << (raw ? raw : "(unset)");
  const kernels::KernelPath widest = amx      ? kernels::KernelPath::Amx
                                     : avx512 ? kernels::KernelPath::Avx512
                                     : avx2   ? kernels::KernelPath::Avx2
                                              : kernels::KernelPath::Portable;
  kernels::KernelPath want = widest;
  if (setting == "portable") want = kernels::KernelPath::Portable;
  if (setting == "avx2") want = std::min(widest, kernels::KernelPath::Avx2);
  if (setting == "avx512") want = std::min(widest, kernels::KernelPath::Avx512);
  EXPECT_EQ(kernels::kernel_path_name(kernels::widest_kernel_path()), kernels::kernel_path_name(widest));
  EXPECT_EQ(kernels::kernel_path_name(kernels::kernel_path()), kernels::kernel_path_name(want))
      << "ORDO_CPU=" << (raw ? raw : "(unset)") << ", CPU with AVX2+FMA: " << avx2 << ", AVX-512F: " << avx512
      << ", AMX supported and allowed: " << amx;
}

}  // namespace
}  // namespace ordo
