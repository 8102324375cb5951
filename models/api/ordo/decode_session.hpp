// A batch of sequences decoded one step at a time, the caller choosing every token: the
// level below the searches of Translator and Generator, for programs that run their own
// (a benchmark's fixed number of steps, a custom search, a scheduler of their own).
//
//   ordo::DecodeSession session(model);                      // an encoder-decoder model
//   session.encode(ids, /*sources=*/2, /*length=*/5);        // the encoder, once
//   const int sequences[] = {0, 1};                          // one sequence per source
//   session.start(sequences, /*max_sequences=*/2, /*max_steps=*/32);
//   std::vector<int> tokens(2, session.decoder_start_token());
//   for (int t = 0; t < 32; ++t) {
//     ordo::Logits logits = session.step(tokens);           // [2, vocab]
//     for (int s = 0; s < 2; ++s) tokens[s] = argmax(logits.row(s));
//   }
//
// A decoder-only model skips encode(): start() opens the sequences, prefill() feeds
// their prompts at once. A beam search calls reorder() after choosing its beams.
//
// A session owns its batch's caches and buffers: once it has run a batch of some size,
// running one of the same size again allocates nothing, so a program timing it times
// the model. One session per thread; any number of sessions may share one Model.
#pragma once

#include <memory>
#include <span>

#include "ordo/export.hpp"
#include "ordo/model.hpp"

namespace ordo {

// Logits of every live sequence, [rows, cols] = [sequences, vocabulary], row-major: a
// view of the session's buffer, valid until its next call. Writable, so that a search can
// turn them into log-probabilities in place.
struct Logits {
  float* values = nullptr;
  int rows = 0;
  int cols = 0;

  std::span<float> row(int r) const {
    return {values + static_cast<std::ptrdiff_t>(r) * cols, static_cast<std::size_t>(cols)};
  }
};

class ORDO_API DecodeSession {
 public:
  // A session on `model`, which it keeps alive. Throws nothing but std::bad_alloc. A
  // moved-from session may only be assigned to or destroyed.
  explicit DecodeSession(const Model& model);
  ~DecodeSession();
  DecodeSession(DecodeSession&&) noexcept;
  DecodeSession& operator=(DecodeSession&&) noexcept;

  // Encoder-decoder models: runs the encoder over `sources` sources of `length` ids
  // each (ids [sources, length], row-major; eos included, as Model::tokenize_source
  // gives them), and keeps its output for start(). Throws ordo::Error for a decoder-only
  // model, a size that does not match ids, a source longer than the model's positions,
  // or an id outside its vocabulary.
  void encode(std::span<const int> ids, int sources, int length);

  // Opens one live sequence per entry of `source_of`, at step 0, with room for
  // `max_sequences` (>= source_of.size(): what reorder() may grow to) of up to
  // `max_steps` tokens each. Encoder-decoder: source_of[i] is the encoded source that
  // sequence i reads (each source's cross-attention keys and values are computed once,
  // here, and shared by its sequences); decoder-only: any number >= 0, the request it
  // serves. Throws ordo::Error for a source out of range, an encoder-decoder model
  // without encode(), sizes the model cannot take, or a batch too large for memory.
  void start(std::span<const int> source_of, int max_sequences, int max_steps);

  // Feeds `length` tokens to every live sequence at once (a prompt: the prefill), ids
  // [sequences(), length] row-major, and returns each sequence's logits after its last
  // token, [sequences(), vocabulary]. Throws ordo::Error before start(), for a size that
  // does not match, an id outside the vocabulary, or more steps than start() allowed.
  Logits prefill(std::span<const int> ids, int length);

  // Feeds tokens[s] to every live sequence s and returns their logits for the next
  // token, [sequences(), vocabulary]. Throws ordo::Error as prefill() does.
  Logits step(std::span<const int> tokens);

  // Live sequence i now continues old live sequence parents[i]: its cache, its steps and
  // its source (a beam step; a parent may be chosen any number of times, and a shorter
  // list drops sequences). Allocates nothing. Throws ordo::Error before start(), for
  // more than max_sequences parents or a parent that is not a live sequence.
  void reorder(std::span<const int> parents);

  // Live sequences (0 before start()). Throws nothing.
  int sequences() const noexcept;
  // The decoder's vocabulary: the width of the logits. Throws nothing.
  int vocabulary_size() const noexcept;
  // The token an encoder-decoder's sequences start from (decoder_start_token_id). Throws nothing.
  int decoder_start_token() const noexcept;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ordo
