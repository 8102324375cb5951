#include "engine/int4_panels.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstring>
#include <new>

#include "engine/thread_pool.h"
#include "engine/weight_matrix.h"

namespace ordo {

namespace {

// The panels' memory: an anonymous mapping, filled in one call, and from 2 MB on placed
// on 2 MB boundaries and asked for in huge pages. Touched a 4 KB page at a time, as a
// vector's memory is, 36 MB took 110-220 ms of page faults on the VMs measured, longer
// than arranging into it; this way 7-45 ms. Only whole huge pages are asked for: the
// tail stays in 4 KB pages, where a huge page would hold up to 2 MB of nothing (0.8 MB
// of the int4 bench model's head). The requests are advice: a kernel without them
// faults the pages in as they are written.
constexpr std::size_t kHugePage = std::size_t{2} << 20;

std::byte* map_panels(std::size_t size) {
  const bool huge = size >= kHugePage;
  const std::size_t slack = huge ? kHugePage : 0;
  void* address = mmap(nullptr, size + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (address == MAP_FAILED) throw std::bad_alloc();
  auto* start = static_cast<std::byte*>(address);
  if (huge) {  // keep the 2 MB-aligned part
    const std::size_t head = (kHugePage - reinterpret_cast<std::uintptr_t>(start) % kHugePage) % kHugePage;
    if (head > 0) munmap(start, head);
    if (slack > head) munmap(start + head + size, slack - head);
    start += head;
#if defined(MADV_HUGEPAGE)
    (void)madvise(start, size / kHugePage * kHugePage, MADV_HUGEPAGE);
#endif
  }
#if defined(MADV_POPULATE_WRITE)
  (void)madvise(start, size, MADV_POPULATE_WRITE);
#endif
  return start;
}

// The four blocks' bytes of one stored run of 32 weights of a row (16 bytes: weight j in
// the low nibble of byte j, j + 16 in the high one). Block b takes weights 8 b .. 8 b + 7
// as four bytes, byte j holding weight 8 b + j low and 8 b + 4 + j high: the low nibbles
// of the run's bytes 0-7 make block 0, of bytes 8-15 block 1, their high nibbles blocks 2
// and 3. In 64-bit words, eight nibbles at a time: a word's upper four nibble bytes
// shifted up by 4 land beside the lower four (each at most 0x0f, so nothing carries).
// The words are the bytes in little-endian order, as ordo's hosts are (safetensors'
// values are read in place: models/safetensors.cpp asserts it too).
static_assert(std::endian::native == std::endian::little, "the weave reads bytes as little-endian words");
void weave_run(const std::uint8_t* run, std::uint32_t (&blocks)[4]) {
  constexpr std::uint64_t kLow = 0x0f0f0f0f0f0f0f0fULL;
  std::uint64_t first, second;
  std::memcpy(&first, run, 8);
  std::memcpy(&second, run + 8, 8);
  const std::uint64_t nibbles[4] = {first & kLow, second & kLow, (first >> 4) & kLow, (second >> 4) & kLow};
  for (int b = 0; b < 4; ++b)
    blocks[b] = static_cast<std::uint32_t>(nibbles[b] | (nibbles[b] >> 32 << 4));
}

}  // namespace

void Int4Panels::Unmap::operator()(std::byte* address) const { munmap(address, size); }

Int4Panels::Int4Panels(const std::uint8_t* runs, const std::uint16_t* scales, Index rows, Index cols, Index group)
    : Int4Panels(runs, scales, rows, cols, group, [](Index, Index) {}) {}

Int4Panels::Int4Panels(const std::uint8_t* runs, const std::uint16_t* scales, Index rows, Index cols, Index group,
                       FunctionRef<void(Index first, Index end)> rows_done)
    : rows_(rows), cols_(cols), group_(group) {
  assert(cols % kInt4Run == 0 && group % kInt4Run == 0 && cols % group == 0);
  Int4PanelLayout layout{nullptr, rows, cols, group};
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t size = std::max<std::size_t>((layout.bytes() + page - 1) / page * page, page);
  bytes_ = std::unique_ptr<std::byte, Unmap>(map_panels(size), Unmap{size});
  layout.start = bytes_.get();
  auto* const blocks = const_cast<std::uint8_t*>(layout.blocks(0));
  const Index groups = layout.groups();
  // A panel at a time on every thread, a row's runs woven into its four bytes of each
  // block. Padding rows are zero weights (n = 8) with scale 0.
  // Stretches of 64 panels: 1024 rows, 1 MB of a 2048-wide matrix.
  constexpr Index kPanelsDone = 64;
  threads::parallel_for(layout.panels(), kInt4PanelRows * cols, [&](Index first, Index count, int) {
    for (Index p = first; p < first + count; ++p) {
      if (p > first && (p - first) % kPanelsDone == 0)
        rows_done((p - kPanelsDone) * kInt4PanelRows, p * kInt4PanelRows);
      std::uint8_t* out = blocks + static_cast<std::size_t>(p) * layout.panel_block_bytes();
      auto* panel_scales = const_cast<std::uint16_t*>(layout.scales(p, 0));
      for (Index o = 0; o < kInt4PanelRows; ++o) {
        const Index r = p * kInt4PanelRows + o;
        if (r >= rows) {
          for (Index b = 0; b < cols / 8; ++b) std::memset(out + b * 64 + 4 * o, 0x88, 4);
          for (Index g = 0; g < groups; ++g) panel_scales[g * 16 + o] = 0;
          continue;
        }
        const std::uint8_t* row = runs + static_cast<std::size_t>(r) * static_cast<std::size_t>(cols / 2);
        for (Index run = 0; run < cols / kInt4Run; ++run) {
          std::uint32_t woven[4];
          weave_run(row + run * 16, woven);
          for (Index b = 0; b < 4; ++b) std::memcpy(out + (run * 4 + b) * 64 + 4 * o, &woven[b], 4);
        }
        for (Index g = 0; g < groups; ++g) panel_scales[g * 16 + o] = scales[r * groups + g];
      }
    }
    const Index last_stretch = first + (count - 1) / kPanelsDone * kPanelsDone;
    rows_done(last_stretch * kInt4PanelRows, std::min(rows, (first + count) * kInt4PanelRows));
  });
}

WeightMatrix Int4Panels::view() const {
  return WeightMatrix::int4(Int4PanelLayout{bytes_.get(), rows_, cols_, group_});
}

}  // namespace ordo
