// Continuous batching: requests join a live set between decoder steps and leave as they
// finish, so requests that arrive at different times share every decoder step (what a
// server does with its clients' requests: ordo serve's scheduler runs on this).
//
//   ordo::ContinuousBatch batch(model);
//   ordo::Translator translator(model, options);
//   batch.add(translator, {translator.prepare("cats chase dogs")});
//   while (batch.live_requests() > 0) {
//     batch.step();                                  // one decoder step for all of them
//     for (ordo::ContinuousBatch::Finished& done : batch.take_finished())
//       use(done.key, done.translation());
//     // ... and batch.add(...) again whenever more requests arrive
//   }
//
// Every request keeps the options of the Translator or Generator that added it, its own
// sampling stream and its own length: it decodes the tokens Translator::translate_batch
// or Generator::generate_prepared_batch would give it (the same sampling stream index),
// whatever else is live. Scores may differ from those in the last float digits, since a
// different batch shape sums the same products in another order.
//
// One thread at a time: the batch owns its decoder state and buffers. Any number of
// batches (and Translators, Generators) may share one Model.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <variant>
#include <vector>

#include "ordo/export.hpp"
#include "ordo/generator.hpp"
#include "ordo/model.hpp"
#include "ordo/results.hpp"
#include "ordo/translator.hpp"

namespace ordo {

class ORDO_API ContinuousBatch {
 public:
  // What names a request from add() until it is taken finished, unique in this batch.
  using Key = std::uint64_t;
  // Receives a generation's tokens (Generator::generate_streamed's GeneratedToken) with
  // its request's key, on the thread calling step() or add().
  using OnToken = std::function<void(Key, const GeneratedToken&)>;

  struct Finished {
    Key key = 0;
    // What was added, completed: hypotheses with their texts, or its error.
    std::variant<Translation, Generation> result;

    // The result as what was added. Throws ordo::Error for the other kind.
    Translation& translation();
    Generation& generation();
    const Translation& translation() const;
    const Generation& generation() const;
  };

  // An empty batch decoding with `model`.
  explicit ContinuousBatch(const Model& model);
  ~ContinuousBatch();
  ContinuousBatch(ContinuousBatch&&) noexcept;
  ContinuousBatch& operator=(ContinuousBatch&&) noexcept;

  // Adds prepared translations (Translator::prepare) to decode with `translator`'s
  // options; request i samples from the stream seeded by (seed, indexes[i]) (indexes
  // empty: i), as translate_batch(lines, first_index) numbers line i first_index + i.
  // They join together before the next step: their sources encoded as one batch, their
  // first tokens chosen. A request that has an error or hypotheses already (a blank
  // line), or that the decoder cannot take (too long), finishes at once as it is or with
  // its error. Returns their keys, in order. Throws ordo::Error when the translator is of
  // another model, or the requests do not fit in memory beside the live ones: then none
  // joined, and the live requests go on.
  std::vector<Key> add(const Translator& translator, std::vector<Translation> requests,
                       std::span<const std::uint64_t> indexes = {});

  // The same for prepared generations (Generator::prepare). `on_token` (if set) receives
  // each one's tokens as generate_streamed's would: with beam_size 1 each as it is
  // chosen, with wider beams all of the best continuation once it is done. The first
  // tokens, chosen by add() itself, come at the start of the next step(), once add() has
  // returned their keys. What on_token throws ends that request, finished with the
  // message as its error.
  std::vector<Key> add(const Generator& generator, std::vector<Generation> requests,
                       std::span<const std::uint64_t> indexes = {}, OnToken on_token = {});

  // One decoder step for every live request, and each one's next choice. Requests that
  // end are then in take_finished() (those that add() finished already, too). Nothing
  // live: does nothing. A step that fails (out of memory) ends every live request with
  // its error instead of throwing.
  void step();

  // Ends request `key` now (its client is gone, or its text reached a stop sequence):
  // it leaves before the next step and is never reported finished. Unknown or finished
  // keys are ignored. May be called from an OnToken.
  void cancel(Key key);

  // Requests added and not yet finished or cancelled (step() until none are left), and
  // the decoder sequences they hold (a beam search holds beam_size).
  int live_requests() const;
  int live_sequences() const;

  // The requests finished since the last call, in the order they finished.
  std::vector<Finished> take_finished();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ordo
