// A decoding step allocates nothing: every buffer is sized by Decoder::start(), for any
// batch and beam size, and reordering beams moves slots and copies rows in place.
// Counted by replacing the global operator new for this test binary; counting is off
// except inside the measured region.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <numeric>

#include "engine/decode_inputs.h"
#include "engine/search.h"
#include "engine/thread_pool.h"
#include "models/loaded_model.h"
#include "models/weights.h"
#include "ordo/ordo.hpp"
#include "tests/model_factory.h"

namespace {
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};
}  // namespace

namespace {
void* counted_malloc(std::size_t size) noexcept {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size == 0 ? 1 : size);
}
}  // namespace

// GCC 12 at -O1 and above inlines these and warns that free() meets memory from
// operator new: here operator new is malloc.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

// Every plain form, throwing and nothrow, single and array, is replaced, so that each
// allocation is counted and every delete meets memory from malloc. (Replacing only some
// forms broke AddressSanitizer builds: std::stable_sort's nothrow buffer came from the
// sanitizer's operator new and went back through this file's delete to free.)
void* operator new(std::size_t size) {
  if (void* p = counted_malloc(size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) {
  if (void* p = counted_malloc(size)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return counted_malloc(size); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return counted_malloc(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace ordo {
namespace {

// Batch 4 x beam 4: four sources (or prompts) of different lengths, each opened as one
// sequence and grown to four beams by the first reorder, then stepped and reordered as
// a beam search does (parents chosen more than once, parents dropped, sequences
// finishing). Returns the allocations counted in the stepping.
long step_allocations(const Transformer& t) {
  constexpr Index kBatch = 4, kBeam = 4, kSteps = 12;
  const std::vector<std::vector<int>> sources = {{5, 9, 3, 17, 1}, {4, 1}, {7, 7, 8, 9, 10, 11, 12, 1}, {3, 1}};
  std::vector<Index> source_of(kBatch);
  std::iota(source_of.begin(), source_of.end(), Index{0});
  DecoderState state;
  if (t.decoder_only()) {
    t.decoder.start(state, source_of, kBatch * kBeam, kSteps);
  } else {
    const EncodedBatch memory = encode_batch(t, sources);
    t.decoder.start(state, memory, source_of, kBatch * kBeam, kSteps);
  }
  Matrix logits;
  logits.reserve(kBatch * kBeam * t.decoder.vocab_size());
  std::vector<int> tokens(kBatch * kBeam, 0);
  std::vector<Index> parents;
  parents.reserve(kBatch * kBeam);

  allocations = 0;
  counting = true;
  for (Index step = 0; step < 10; ++step) {
    t.decoder.step(state, std::span<const int>(tokens).first(static_cast<std::size_t>(state.sequences())), logits);
    // Each source's beams continue its first beam twice, its second once, drop the
    // rest; from step 6 on, one source has finished and leaves the live set.
    parents.clear();
    const Index per_source = state.sequences() / (step <= 6 ? kBatch : kBatch - 1);
    const Index sources_alive = step < 6 ? kBatch : kBatch - 1;
    for (Index b = 0; b < sources_alive; ++b) {
      const Index first = b * per_source;
      for (Index k = 0; k < kBeam; ++k) parents.push_back(first + std::min<Index>(k / 2, per_source - 1));
    }
    state.reorder(parents);
    for (Index s = 0; s < state.sequences(); ++s) tokens[static_cast<std::size_t>(s)] = static_cast<int>((step * 7 + s) % 23);
  }
  counting = false;
  EXPECT_EQ(state.sequences(), (kBatch - 1) * kBeam);
  EXPECT_EQ(state.steps(0), 10);
  return allocations.load();
}

std::shared_ptr<const LoadedModel> random_model(const nlohmann::json& config) {
  const auto dir = testing_support::temp_dir("noalloc");
  testing_support::write_random_model(dir, config);
  return LoadedModel::load(dir, nullptr);
}

TEST(NoAlloc, BatchedBeamStepAndReorderAllocateNothing) {
  for (const std::string_view scheme : position_encoding_names()) {  // every scheme config.json accepts
    SCOPED_TRACE(scheme);
    auto config = testing_support::tiny_config();
    config["position_encoding"] = std::string(scheme);
    EXPECT_EQ(step_allocations(random_model(config)->transformer()), 0);
  }
}

// The same for decoder-only models: ordo's format with grouped-query attention, and the
// LLaMA layout (RMSNorm, the gated feed-forward's second buffer, head_dim != d / heads).
TEST(NoAlloc, DecoderOnlyStepsAllocateNothing) {
  auto ordo_lm = testing_support::tiny_config();
  ordo_lm.update({{"encoder_layers", 0}, {"num_key_value_heads", 1}, {"normalize_before", true}});
  EXPECT_EQ(step_allocations(random_model(ordo_lm)->transformer()), 0);
  const nlohmann::json llama = {{"model_type", "llama"},  {"vocab_size", 23},           {"hidden_size", 16},
                                {"intermediate_size", 24}, {"num_hidden_layers", 2},   {"num_attention_heads", 4},
                                {"num_key_value_heads", 2}, {"head_dim", 6},          {"bos_token_id", 2},
                                {"eos_token_id", 1}};
  EXPECT_EQ(step_allocations(random_model(llama)->transformer()), 0);
}

// A token embedding only looked up is read from the file a row at a time
// (WeightMatrix::read_by_row): into the thread's buffers, not new ones each step. Stored
// half precision, int8 and int4 (the embedding of an untied LLaMA is only looked up).
// Their kernels' buffers are the threads' own, grown on first use: a first run of steps
// sizes them, and the second must allocate nothing.
TEST(NoAlloc, StepsThatReadEmbeddingRowsFromTheFileAllocateNothing) {
  const auto dir = testing_support::temp_dir("noalloc-stored");
  const nlohmann::json llama = {{"model_type", "llama"},  {"vocab_size", 23},         {"hidden_size", 32},
                                {"intermediate_size", 64}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
                                {"num_key_value_heads", 2}, {"head_dim", 8},         {"bos_token_id", 2},
                                {"eos_token_id", 1},      {"tie_word_embeddings", false}};
  testing_support::write_random_model(dir / "f32", llama);
  for (const ComputeType type : {ComputeType::F16, ComputeType::Int8, ComputeType::Int4}) {
    const auto out = dir / std::to_string(static_cast<int>(type));
    QuantizeOptions options;
    options.type = type;
    quantize_model(dir / "f32", out, options);
    const auto model = LoadedModel::load(out, nullptr);
    ASSERT_TRUE(model->weights().matrix("model.embed_tokens.weight").is_read_by_row());
    (void)step_allocations(model->transformer());
    EXPECT_EQ(step_allocations(model->transformer()), 0) << static_cast<int>(type);
  }
}

// Attention splits every layer of a batched step across the pool with parallel_for:
// running its parts allocates nothing either (it once kept a vector of each part's
// exception, a heap allocation every call).
TEST(NoAlloc, ParallelPartsAllocateNothing) {
  threads::set_count(2);
  threads::prepare();
  std::atomic<Index> covered{0};
  const auto task = [&](Index, Index count, int) { covered += count; };
  threads::parallel_for(1000, Index{1} << 20, task);  // warm: the pool's threads exist
  allocations = 0;
  counting = true;
  for (int call = 0; call < 20; ++call) threads::parallel_for(1000, Index{1} << 20, task);
  counting = false;
  threads::set_count(1);
  EXPECT_EQ(covered.load(), 21 * 1000);
  EXPECT_EQ(allocations.load(), 0);
}

}  // namespace
}  // namespace ordo
