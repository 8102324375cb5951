// ordo::ContinuousBatch: the public face of the engine's live set (engine/live_batch.h).
// What it adds to LiveBatch is what a program holds: the prepared Translation or
// Generation behind each key, its texts once done, and a generation's tokens as they
// stream (with their text, as Generator::generate_streamed gives them).
#include "ordo/continuous_batch.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "engine/decoding_options.h"
#include "engine/error.h"
#include "engine/live_batch.h"
#include "engine/search.h"
#include "models/api/continuation_stream.h"
#include "models/api/internal.h"

namespace ordo {

struct ContinuousBatch::Impl {
  explicit Impl(const Model& handle)
      : model(detail::ModelAccess::loaded(handle)), live(model->transformer(), workspace.buffers()) {}

  // A request from add() until it is finished: what was added, and a streamed
  // generation's text so far.
  struct Pending {
    std::variant<Translation, Generation> request;
    OnToken on_token;                                  // generations only
    std::optional<detail::ContinuationStream> stream;  // with on_token
    Index max_length = 0;                              // tokens it may generate
    Index chosen = 0;                                  // tokens reported so far (beam 1)
    Index beam_size = 1;
  };

  void check_model(const Model& other, const char* adder) const {
    if (detail::ModelAccess::loaded(other) != model)
      throw Error("continuous batch",
                  std::string("the ") + adder + " decodes with another model (" +
                      detail::loaded(other).directory().string() + ") than the batch (" +
                      model->directory().string() + ")",
                  "add requests to a batch made with the same ordo::Model");
  }

  template <class Request>
  std::vector<Key> add(std::vector<Request>& requests, const DecodingOptions& options,
                       std::span<const std::uint64_t> indexes, const OnToken& on_token) {
    if (!indexes.empty() && indexes.size() != requests.size())
      throw Error("continuous batch", std::to_string(indexes.size()) + " sampling indexes for " +
                                          std::to_string(requests.size()) + " requests",
                  "give one index per request, or none");
    const Transformer& transformer = model->transformer();
    options.validate();
    // Lengths the decoder cannot honour at all fail the call, as in decode_requests.
    resolve_max_length(options, transformer.decoder, transformer.decoder_only() ? 0 : 1, 1);

    std::vector<Key> keys(requests.size());
    std::vector<Finished> at_once;
    std::vector<DecodeRequest> decode;
    std::vector<Index> max_lengths;
    std::vector<std::uint64_t> streams, joining_keys;
    std::vector<std::unique_ptr<Pending>> joining;
    for (std::size_t i = 0; i < requests.size(); ++i) {
      keys[i] = next_key++;
      Request& r = requests[i];
      if (!r.ok() || !r.hypotheses.empty()) {
        at_once.push_back({keys[i], std::move(r)});
        continue;
      }
      DecodeRequest d{r.source_ids, detail::forced_prefix(r)};
      Index max_length = 0;
      try {
        max_length = admitted_max_length(transformer, d, options);
      } catch (const Error& e) {
        r.error = e.what();
        at_once.push_back({keys[i], std::move(r)});
        continue;
      }
      auto pending = std::make_unique<Pending>(Pending{std::move(r), on_token, {}, max_length, 0, options.beam_size});
      if (pending->on_token)
        if (const Generation* g = std::get_if<Generation>(&pending->request))
          pending->stream.emplace(*model, g->prompt_ids);  // the Pending's own ids: they stay put
      decode.push_back(std::move(d));
      max_lengths.push_back(max_length);
      streams.push_back(indexes.empty() ? i : indexes[i]);
      joining_keys.push_back(keys[i]);
      joining.push_back(std::move(pending));
    }

    if (!decode.empty()) {
      check_request_memory(transformer, decode, options, max_lengths);
      // Known before they join: admit() already chooses their first tokens.
      for (std::size_t j = 0; j < joining.size(); ++j) pending.emplace(joining_keys[j], std::move(joining[j]));
      adding = true;
      try {
        live.admit(decode, max_lengths, joining_keys, std::make_shared<SearchRules>(transformer, options), streams,
                   [this](std::size_t key, int token, float logprob) { chosen(key, token, logprob); });
      } catch (...) {
        adding = false;
        for (Key key : joining_keys) pending.erase(key);
        std::erase_if(deferred, [&](const auto& d) { return pending.count(d.first) == 0; });
        throw;
      }
      adding = false;
    }
    for (Finished& f : at_once) finished.push_back(std::move(f));
    // What admission finished is collected by the next step(), after its tokens.
    return keys;
  }

  // A token of a beam-1 request is final: a streamed generation reports it. The first
  // tokens, chosen while add() runs, wait until it has returned their keys.
  void chosen(Key key, int token, float logprob) {
    const auto it = pending.find(key);
    if (it == pending.end() || !it->second->stream) return;
    Pending& p = *it->second;
    const bool eos = model->transformer().tokens.is_eos(token);
    // The last token holds nothing back: no token follows it.
    const bool last = ++p.chosen == p.max_length || eos;
    GeneratedToken chosen{token, logprob, p.stream->add(token, last), eos};
    if (adding)
      deferred.emplace_back(key, std::move(chosen));
    else
      report(key, p, chosen);
  }

  void report_deferred() {
    std::vector<std::pair<Key, GeneratedToken>> tokens;
    tokens.swap(deferred);
    for (const auto& [key, token] : tokens) {
      const auto it = pending.find(key);
      if (it != pending.end()) report(key, *it->second, token);  // not cancelled or failed meanwhile
    }
  }

  // Gives a token to the request's callback; what it throws ends the request.
  void report(Key key, Pending& p, const GeneratedToken& token) {
    try {
      p.on_token(key, token);
    } catch (const std::exception& e) {
      fail(key, e.what());
    } catch (...) {
      fail(key, "the token callback failed");
    }
  }

  void fail(Key key, const std::string& error) {
    const auto it = pending.find(key);
    if (it == pending.end()) return;
    std::visit(
        [&](auto& r) {
          r.hypotheses.clear();
          r.error = error;
        },
        it->second->request);
    finished.push_back({key, std::move(it->second->request)});
    pending.erase(it);
    live.cancel(key);
  }

  // Moves what the live set finished into `finished`, completed as decode_open does.
  void collect() {
    for (auto& finished_one : live.take_finished()) {
      // Named members, not a structured binding: clang 14 (the fuzz build's) refuses a
      // binding captured by a lambda, which C++20 allows.
      const auto& key = finished_one.first;
      auto& result = finished_one.second;
      const auto it = pending.find(key);
      if (it == pending.end()) continue;  // failed by its callback meanwhile
      std::unique_ptr<Pending> p = std::move(it->second);
      pending.erase(it);
      std::visit([&](auto& r) { complete(r, result); }, p->request);
      // A wider beam's tokens are final only now: the best continuation's, in order.
      Generation* g = std::get_if<Generation>(&p->request);
      if (g && p->stream && p->beam_size > 1 && g->ok()) {
        const Hypothesis best = g->best();
        try {
          for (std::size_t t = 0; t < best.ids.size(); ++t) {
            const int id = best.ids[t];
            p->on_token(key, GeneratedToken{id, best.token_logprobs[t], p->stream->add(id, t + 1 == best.ids.size()),
                                            model->transformer().tokens.is_eos(id)});
          }
        } catch (const std::exception& e) {
          g->hypotheses.clear();
          g->error = e.what();
        }
      }
      finished.push_back({key, std::move(p->request)});
    }
  }

  template <class Request>
  void complete(Request& r, DecodeResult& result) const {
    if (!result.ok()) {
      r.error = std::move(result.error);
      return;
    }
    try {
      for (Hypothesis& h : result.hypotheses)
        if (model->has_tokenizer()) h.text = detail::hypothesis_text(*model, r, h.ids);
      r.hypotheses = std::move(result.hypotheses);
    } catch (const Error& e) {
      r.hypotheses.clear();
      r.error = e.what();
    }
  }

  void step() {
    retired.clear();
    report_deferred();
    collect();
    try {
      live.step();
    } catch (const std::exception& e) {
      // The live set is not consistent after a failed step: every live request ends
      // with the error, and the batch takes new ones as if new.
      std::vector<Key> keys;
      for (const auto& entry : pending) keys.push_back(entry.first);
      std::sort(keys.begin(), keys.end());
      for (Key key : keys) fail(key, e.what());
      live.step();  // drops them all (nothing is live: no decoder work)
      return;
    }
    collect();
  }

  std::shared_ptr<const LoadedModel> model;
  DecodeWorkspace workspace;
  LiveBatch live;  // on workspace's buffers
  std::unordered_map<Key, std::unique_ptr<Pending>> pending;
  std::vector<Finished> finished;
  Key next_key = 0;
  std::vector<std::unique_ptr<Pending>> retired;          // cancelled, destroyed at the next step()
  bool adding = false;                                    // inside add(): tokens wait
  std::vector<std::pair<Key, GeneratedToken>> deferred;  // chosen by add(), for the next step()
};

const Translation& ContinuousBatch::Finished::translation() const {
  if (const Translation* t = std::get_if<Translation>(&result)) return *t;
  throw Error("continuous batch", "request " + std::to_string(key) + " is a generation, not a translation",
              "read it with generation()");
}

const Generation& ContinuousBatch::Finished::generation() const {
  if (const Generation* g = std::get_if<Generation>(&result)) return *g;
  throw Error("continuous batch", "request " + std::to_string(key) + " is a translation, not a generation",
              "read it with translation()");
}

Translation& ContinuousBatch::Finished::translation() {
  return const_cast<Translation&>(std::as_const(*this).translation());
}

Generation& ContinuousBatch::Finished::generation() {
  return const_cast<Generation&>(std::as_const(*this).generation());
}

ContinuousBatch::ContinuousBatch(const Model& model) : impl_(std::make_unique<Impl>(model)) {}
ContinuousBatch::~ContinuousBatch() = default;
ContinuousBatch::ContinuousBatch(ContinuousBatch&&) noexcept = default;
ContinuousBatch& ContinuousBatch::operator=(ContinuousBatch&&) noexcept = default;

std::vector<ContinuousBatch::Key> ContinuousBatch::add(const Translator& translator, std::vector<Translation> requests,
                                                       std::span<const std::uint64_t> indexes) {
  impl_->check_model(translator.model(), "translator");
  return impl_->add(requests, translator.options().decoding, indexes, {});
}

std::vector<ContinuousBatch::Key> ContinuousBatch::add(const Generator& generator, std::vector<Generation> requests,
                                                       std::span<const std::uint64_t> indexes, OnToken on_token) {
  impl_->check_model(generator.model(), "generator");
  return impl_->add(requests, generator.options().decoding, indexes, on_token);
}

void ContinuousBatch::step() { impl_->step(); }

void ContinuousBatch::cancel(Key key) {
  const auto it = impl_->pending.find(key);
  if (it == impl_->pending.end()) return;
  // Called from an OnToken, the request's own callback is running: it is destroyed at
  // the next step, not under its feet.
  impl_->retired.push_back(std::move(it->second));
  impl_->pending.erase(it);
  impl_->live.cancel(key);
}

int ContinuousBatch::live_requests() const { return static_cast<int>(impl_->pending.size()); }
int ContinuousBatch::live_sequences() const { return static_cast<int>(impl_->live.sequences()); }

std::vector<ContinuousBatch::Finished> ContinuousBatch::take_finished() {
  std::vector<Finished> out;
  out.swap(impl_->finished);
  return out;
}

}  // namespace ordo
