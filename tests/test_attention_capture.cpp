// The attention observer (engine/attention.h) and AttentionRecorder: what they are
// shown is exactly the softmax of the scores, for every layer, head and kind, and
// observing changes nothing that is computed.
//
// Oracles: reference::softmax_rows of q k^T / sqrt(dh) in double (tolerance 1e-6), and
// the same decoder run another way (step by step vs all at once, 1e-5 as in
// test_transformer).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/attention_recorder.h"
#include "engine/decode_inputs.h"
#include "engine/error.h"
#include "engine/search.h"
#include "models/loaded_model.h"
#include "tests/model_factory.h"
#include "tests/reference.h"

namespace ordo {
namespace {

using Key = AttentionRecorder::Key;

// q [Tq, H*dh], k [Tk, H*dh]: what head h's softmax should be, in double.
reference::Matrix64 expected_probabilities(const Matrix& q, const Matrix& k, Index heads, Index h,
                                           bool causal) {
  const Index dh = q.cols() / heads;
  reference::Matrix64 qh(q.view().col_block(h * dh, dh)), kh(k.view().col_block(h * dh, dh));
  reference::Matrix64 s = reference::matmul_nt(qh, kh);
  for (Index i = 0; i < s.rows(); ++i)
    for (Index j = 0; j < s.cols(); ++j) {
      s(i, j) /= std::sqrt(static_cast<double>(dh));
      if (causal && j > i) s(i, j) = -INFINITY;
    }
  return reference::softmax_rows(s);
}

TEST(AttentionCapture, ObserverSeesEachHeadsSoftmax) {
  std::mt19937 rng(7);
  const Index heads = 3, dh = 4, tq = 5, tk = 5;
  const Matrix q = reference::random_matrix(tq, heads * dh, rng);
  const Matrix k = reference::random_matrix(tk, heads * dh, rng);
  const Matrix v = reference::random_matrix(tk, heads * dh, rng);
  for (const bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "bidirectional");
    AttentionRecorder recorder;
    Matrix scores, context(tq, heads * dh), unobserved(tq, heads * dh);
    scaled_dot_product_attention(q, k, v, heads, AttentionMask{causal, 0}, nullptr, scores, context,
                                 {&recorder, AttentionKind::Decoder, 2, 1});
    scaled_dot_product_attention(q, k, v, heads, AttentionMask{causal, 0}, nullptr, scores, unobserved);
    reference::expect_close(context, reference::Matrix64(unobserved), 0, 0);  // observing changes nothing
    ASSERT_EQ(recorder.keys().size(), static_cast<std::size_t>(heads));
    for (Index h = 0; h < heads; ++h) {
      SCOPED_TRACE("head " + std::to_string(h));
      const Matrix& got = recorder.at({AttentionKind::Decoder, 2, 1, h});
      reference::expect_close(got, expected_probabilities(q, k, heads, h, causal), 1e-6, 1e-6);
    }
  }
}

std::shared_ptr<const LoadedModel> tiny_model() {
  const auto dir = testing_support::temp_dir("capture");
  testing_support::write_random_model(dir, testing_support::tiny_config(), 5);
  return LoadedModel::load(dir);
}

// Every layer and head of all three kinds is recorded, rows sum to 1, and a decoder fed
// one step at a time assembles the same matrices as one teacher-forced feed (causal:
// zeros above the diagonal).
TEST(AttentionCapture, RecorderAssemblesEveryLayerHeadAndKind) {
  const auto model = tiny_model();
  const Transformer& t = model->transformer();
  const Index layers = 2, heads = 2;
  const std::vector<int> source = {5, 9, 3, 17, 1};
  const std::vector<int> target = {0, 4, 8, 15};
  const auto S = static_cast<Index>(source.size()), T = static_cast<Index>(target.size());

  AttentionRecorder encoder_seen;
  EncoderWorkspace ws;
  ws.attention.observer = &encoder_seen;
  const std::vector<Index> first{0}, source_lengths{S};
  Matrix observed_out;
  t.encoder->encode(source, BatchRows{S, first, source_lengths}, ws, observed_out);
  reference::expect_close(observed_out, reference::Matrix64(encode(t, source)), 0, 0);
  EXPECT_EQ(encoder_seen.keys().size(), static_cast<std::size_t>(layers * heads));

  const std::vector<std::vector<int>> sources{source};
  const EncodedBatch memory = encode_batch(t, sources);
  const std::vector<Index> source_of{0}, target_lengths{T};
  AttentionRecorder all_seen, steps_seen;
  DecoderState all, steps;
  Matrix logits;
  t.decoder.start(all, memory, source_of, 1, T);
  all.set_attention_observer(&all_seen);
  t.decoder.feed(all, target, T, target_lengths, logits);
  t.decoder.start(steps, memory, source_of, 1, T);
  steps.set_attention_observer(&steps_seen);
  for (Index i = 0; i < T; ++i) t.decoder.step(steps, std::span<const int>(&target[static_cast<std::size_t>(i)], 1), logits);

  for (Index layer = 0; layer < layers; ++layer)
    for (Index h = 0; h < heads; ++h) {
      SCOPED_TRACE("layer " + std::to_string(layer) + " head " + std::to_string(h));
      const Matrix& enc = encoder_seen.at({AttentionKind::Encoder, layer, 0, h});
      ASSERT_EQ(enc.rows(), S);
      ASSERT_EQ(enc.cols(), S);
      for (const AttentionKind kind : {AttentionKind::Decoder, AttentionKind::Cross}) {
        const Matrix& a = all_seen.at({kind, layer, 0, h});
        ASSERT_EQ(a.rows(), T);
        ASSERT_EQ(a.cols(), kind == AttentionKind::Cross ? S : T);
        reference::expect_close(steps_seen.at({kind, layer, 0, h}), reference::Matrix64(a), 1e-5, 1e-5);
        for (Index i = 0; i < T; ++i) {
          double sum = 0;
          for (Index j = 0; j < a.cols(); ++j) {
            sum += a(i, j);
            if (kind == AttentionKind::Decoder && j > i) {
              EXPECT_EQ(a(i, j), 0.0f) << i << "," << j;
            }
          }
          EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << i;
        }
      }
    }
  EXPECT_THROW(all_seen.at({AttentionKind::Encoder, 0, 0, 0}), Error);  // the decoder records no encoder
}

}  // namespace
}  // namespace ordo
