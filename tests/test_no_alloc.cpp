// A decoding step allocates nothing: every buffer is sized by Decoder::start().
// Counted by replacing the global operator new for this test binary; counting is off
// except inside the measured region.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "engine/search.h"
#include "models/model.h"
#include "tests/model_factory.h"

namespace {
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};
}  // namespace

void* operator new(std::size_t size) {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace ordo {
namespace {

TEST(NoAlloc, DecoderStepAllocatesNothing) {
  for (const char* scheme : {"sinusoidal", "learned", "rope", "none"}) {
    SCOPED_TRACE(scheme);
    const auto dir = testing_support::temp_dir("noalloc");
    auto config = testing_support::tiny_config();
    config["position_encoding"] = scheme;
    testing_support::write_random_model(dir, config);
    const auto model = Model::load(dir, nullptr);
    const Transformer& t = model->transformer();
    const std::vector<int> source = {5, 9, 3, 17, 1};
    const Matrix memory = encode(t, source);
    DecoderState state;
    t.decoder.start(state, memory, {}, 12);
    Matrix logits;
    int token = 0;
    t.decoder.step(state, std::span<const int>(&token, 1), logits);  // sizes `logits`

    allocations = 0;
    counting = true;
    for (int i = 0; i < 10; ++i) {
      token = (token + 3) % 23;
      t.decoder.step(state, std::span<const int>(&token, 1), logits);
    }
    counting = false;
    EXPECT_EQ(allocations.load(), 0);
  }
}

}  // namespace
}  // namespace ordo
