// An AttentionObserver that keeps what it sees: every head's probabilities, per kind,
// layer and sequence, assembled into full [queries, keys] matrices.
//
//   AttentionRecorder recorder;
//   EncoderWorkspace ws;
//   ws.attention.observer = &recorder;                     // encoder self-attention
//   encoder.encode(ids, rows, ws, out);
//   state.set_attention_observer(&recorder);               // decoder self + cross
//   decoder.feed(state, tokens, T, lengths, logits);       // or step() by step()
//   const Matrix& p = recorder.at({AttentionKind::Cross, layer, 0, head});  // [T, S]
//
// A decoder that runs step by step shows one query row per step; the recorder puts row
// i at its step, so the matrix grows to [steps, keys], zeros above the diagonal of a
// causal self-attention. Rows of a step taken again (a sequence fed twice) overwrite.
// Beam search reorders live sequences between steps, so `sequence` there names a slot in
// the live set, not a hypothesis: record greedy decodes (or teacher-forced feeds).
#pragma once

#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "engine/attention.h"

namespace ordo {

class AttentionRecorder final : public AttentionObserver {
 public:
  struct Key {
    AttentionKind kind;
    Index layer;
    Index sequence;
    Index head;
    auto operator<=>(const Key&) const = default;
  };

  void observe(const AttentionProbabilities& probabilities) override;

  // The probabilities recorded for `key` [queries, keys]; throws Error when nothing was.
  const Matrix& at(const Key& key) const;
  bool contains(const Key& key) const { return matrices_.contains(key); }
  // Every key recorded, in order (kind, layer, sequence, head).
  std::vector<Key> keys() const;
  void clear() { matrices_.clear(); }

 private:
  std::mutex mutex_;  // observe() runs on the attention threads
  std::map<Key, Matrix> matrices_;
};

}  // namespace ordo
