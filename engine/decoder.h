// The decoder stack, run incrementally over a set of live sequences.
//
// start() binds a batch of encoded sources: it projects the encoder output into every
// layer's cross-attention K/V once per source, and opens one sequence per entry of
// `source_of` (beams of one source share its K/V; nothing is copied per beam). A
// decoder-only model (no cross-attention) starts without memory; source_of then only
// says which request each sequence serves. step()
// then feeds one new token to every live sequence and returns their logits; feed()
// feeds several per sequence (teacher-forced scoring). Each sequence has its own
// length and so its own positions: sequence s's next token is at step steps(s).
// reorder() makes the live set follow a beam step: new sequence i continues old
// sequence parents[i] (and a shorter parents list drops sequences that finished).
//
//   tokens [S*T] -> embed -> N x [causal self-attn, (cross-attn), feed-forward]
//               -> (pre-norm: final LN) -> logits [S*T, V] = (h * head_scale) W^T (+ final_logits_bias)
// head_scale is 1 except where a family scales its tied head (T5: d_model^-0.5).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/attention.h"
#include "engine/embedding.h"
#include "engine/encoder.h"
#include "engine/feed_forward.h"
#include "engine/residual.h"

namespace ordo {

// Attention over the encoder output, with its norm: encoder-decoder models only.
struct CrossAttentionBlock {
  MultiHeadAttention attention;
  NormWeights norm;
};

struct DecoderLayer {
  MultiHeadAttention self_attention;
  NormWeights self_attention_norm;
  std::optional<CrossAttentionBlock> cross_attention;  // absent in decoder-only models
  FeedForward feed_forward;
  NormWeights final_norm;
};

// Everything a batch needs while decoding: caches and buffers, sized once by
// Decoder::start() for `max_sequences` sequences of up to `max_steps` tokens. One state
// per concurrent request; the Decoder itself is immutable.
//
// The self-attention caches hold a slot per sequence ([slots, capacity, width], see
// kv_cache.h), and the state maps live sequences to slots. reorder() therefore moves
// slot numbers: the first sequence to continue a parent takes over the parent's slot,
// and only further children of the same parent get a copy of its rows (into a slot
// nobody continued). Beams that each continue a different parent cost nothing; a
// parent chosen by c children costs c - 1 copies of its history. The alternative,
// paged blocks shared by reference, would copy even less but make every attention read
// a gather over blocks; at translation lengths the copies are a small part of a step.
class DecoderState {
 public:
  Index sequences() const { return static_cast<Index>(steps_.size()); }
  Index max_sequences() const { return static_cast<Index>(slot_kept_.size()); }
  // Tokens fed to live sequence s so far (its next token's step).
  Index steps(Index s) const { return steps_.at(static_cast<std::size_t>(s)); }
  // The source (index into the encoded batch) whose memory sequence s attends to.
  Index source_of(Index s) const { return source_of_.at(static_cast<std::size_t>(s)); }
  Index capacity() const { return capacity_; }

  // New live sequence i continues old live sequence parents[i]: its history, steps and
  // source. parents.size() <= max_sequences(); a parent may appear any number of times
  // or not at all. Allocates nothing. Throws Error on an out-of-range parent.
  void reorder(std::span<const Index> parents);

  // Shows every head's self- and cross-attention probabilities of the following
  // steps/feeds to `observer` (null: nobody, the default). The observer must outlive
  // its use; this state does not own it, and keeps it across start() until changed.
  void set_attention_observer(AttentionObserver* observer) { attention_.observer = observer; }

 private:
  friend class Decoder;
  std::vector<KeyValueCache> self_attention_;   // per layer: [slots, capacity, width]
  std::vector<KeyValueCache> cross_attention_;  // per layer: [sources, L, width]
  std::vector<Index> memory_lengths_;           // [sources]; empty without memory
  // Per live sequence.
  std::vector<Index> slot_of_;
  std::vector<Index> steps_;
  std::vector<Index> source_of_;
  std::vector<Index> ones_;  // [max_sequences] of 1: step()'s lengths
  // reorder()'s scratch, sized by start().
  std::vector<Index> next_slot_of_, next_steps_, next_source_of_, free_slots_;
  std::vector<std::uint8_t> slot_kept_;  // [slots]
  KeyValueCache joining_;                // admit(): newcomers' sources, projected before their slots are known
  std::vector<Index> joining_slots_;     // admit(): the source slot of each newcomer
  // Activations.
  Matrix hidden_;
  Matrix last_rows_;  // feed(LastRow): each sequence's last real row
  FeedForwardScratch feed_forward_;
  AttentionScratch attention_;
  ResidualScratch residual_;
  Index capacity_ = 0;
};

class Decoder {
 public:
  // `head_scale` multiplies the last hidden states before the output projection.
  Decoder(Embedding embedding, std::vector<DecoderLayer> layers,
          std::optional<NormWeights> final_norm, NormPlacement placement,
          Linear output_projection, float head_scale = 1.0f);

  // Binds the encoder output of a batch and opens one live sequence per entry of
  // source_of (each an index into memory's sources), with room for up to
  // max_sequences live sequences (>= source_of.size(); batch x beam) of up to
  // max_steps tokens each. Throws Error if max_steps exceeds max_steps() or ordo's
  // length limit, or if this decoder has no cross-attention.
  void start(DecoderState& state, const EncodedBatch& memory, std::span<const Index> source_of,
             Index max_sequences, Index max_steps) const;
  // The same for a decoder-only model: no memory; source_of[s] >= 0 names the request
  // sequence s serves. Throws Error if this decoder needs an encoder output.
  void start(DecoderState& state, std::span<const Index> source_of, Index max_sequences,
             Index max_steps) const;

  // Continuous batching: sequences join a live set between steps.
  //
  // clear() empties `state` and sizes it for max_sequences sequences of up to max_steps
  // tokens (and, with cross-attention, sources of up to rows_per_source encoder rows).
  // admit() appends one live sequence per entry of source_of, at step 0, after the live
  // ones: with cross-attention source_of indexes `memory` (the newcomers' encoded
  // sources, which take source slots no live sequence reads), without it memory is
  // null and source_of names requests as start() does. The state grows as needed,
  // keeping the live sequences' caches (a rare copy: a longer or a wider set than any
  // before). Throws Error as start() does.
  void clear(DecoderState& state, Index max_sequences, Index max_steps, Index rows_per_source = 0) const;
  void admit(DecoderState& state, const EncodedBatch* memory, std::span<const Index> source_of,
             Index max_steps) const;
  // Room for at least max_sequences sequences of max_steps tokens, keeping the live
  // ones (a beam search's newcomers branch into more sequences than admit() opens).
  void grow(DecoderState& state, Index max_sequences, Index max_steps) const;

  // Bytes start() takes for max_sequences of max_steps tokens (KV caches, the
  // reserved step buffers) and, for `sources` encoded sources of rows_per_source rows,
  // cross-attention K/V: what a request is checked against before it allocates.
  std::uint64_t state_bytes(Index max_sequences, Index max_steps, Index sources, Index rows_per_source) const;

  // Feeds tokens[s] to every live sequence s; logits is resized to [S, V]. Allocates
  // nothing once `logits` has had its size.
  void step(DecoderState& state, std::span<const int> tokens, Matrix& logits) const;

  // Which rows feed() computes logits for.
  enum class Logits {
    EveryRow,  // [S*T, V]: every fed token's prediction (teacher-forced scoring)
    LastRow,   // [S, V]: each sequence's prediction after its last real token (a prompt)
  };

  // Feeds up to T tokens to live sequences first .. first + S - 1 (S = lengths.size();
  // by default every live sequence): tokens [S*T], sequence s's first lengths[s] of
  // them real (the rest padding, ignored; lengths[s] >= 1 for LastRow). A set's
  // newcomers are prefilled this way (first = the live ones before them).
  void feed(DecoderState& state, std::span<const int> tokens, Index rows_per_sequence,
            std::span<const Index> lengths, Matrix& logits, Logits which = Logits::EveryRow,
            Index first = 0) const;

  Index vocab_size() const { return output_.out_features(); }
  Index dim() const { return embedding_.dim(); }
  Index layer_count() const { return static_cast<Index>(layers_.size()); }
  // False for a decoder-only model.
  bool has_cross_attention() const { return !layers_.empty() && layers_.front().cross_attention.has_value(); }
  const std::vector<DecoderLayer>& layers() const { return layers_; }
  // Longest target the positions allow.
  Index max_steps() const { return embedding_.max_steps(); }
  // Throws Error when a target of `length` tokens is longer than the positions or ordo
  // allow.
  void check_length(Index length) const;

 private:
  // Throws unless `memory` holds the sources it claims and source_of indexes them.
  void check_memory(const EncodedBatch* memory, std::span<const Index> source_of) const;
  // Gives the newcomers' sources slots in the cross-attention caches and projects them
  // there; returns each new sequence's source slot through `slots`.
  void bind_sources(DecoderState& state, const EncodedBatch& memory, std::span<const Index> source_of,
                    std::vector<Index>& slots) const;

  Embedding embedding_;
  std::vector<DecoderLayer> layers_;
  std::optional<NormWeights> final_norm_;
  NormPlacement placement_;
  Linear output_;
  float head_scale_;
};

}  // namespace ordo
