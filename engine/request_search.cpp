#include "engine/request_search.h"

#include <algorithm>
#include <cmath>

#include "engine/error.h"

namespace ordo {

namespace {

// Ranks candidates: higher total first; ties: the earlier beam, then the lower id.
bool better(const Candidate& a, const Candidate& b) {
  if (a.total != b.total) return a.total > b.total;
  if (a.beam != b.beam) return a.beam < b.beam;
  return a.token < b.token;
}

}  // namespace

SearchRules::SearchRules(const Transformer& model, const DecodingOptions& options)
    : options(options),
      processor(options, eos_ids(model.tokens), model.decoder.vocab_size()),
      sampler(options, model.decoder.vocab_size()) {}

RequestSearch::RequestSearch(const Transformer& model, std::shared_ptr<SearchRules> rules,
                             const DecodeRequest& request, Index max_length, std::uint64_t stream, OnToken on_token)
    : model_(model),
      rules_(std::move(rules)),
      beam_(rules_->options.beam_size),
      max_length_(max_length),
      prefix_length_(static_cast<Index>(request.prefix.size())),
      forced_length_(decoder_input_length(model, request)),
      width_(prefix_length_ + max_length),
      pool_(beam_, rules_->options.length_penalty),
      random_(rules_->options.seed, stream),
      on_token_(std::move(on_token)) {
  // Before the first choice there is one beam: the prefix, with nothing generated.
  const auto beams = static_cast<std::size_t>(beam_);
  ids_.resize(beams * static_cast<std::size_t>(width_));
  next_ids_.resize(ids_.size());
  logprobs_.resize(beams * static_cast<std::size_t>(max_length_));
  next_logprobs_.resize(logprobs_.size());
  std::copy(request.prefix.begin(), request.prefix.end(), ids_.begin());
  scores_.assign(1, 0.0);
  for (auto* v : {&scores_, &next_scores_}) v->reserve(beams);
  parents_.reserve(beams);
  next_tokens_.reserve(beams);
  next_logprob_.reserve(beams);
}

Hypothesis RequestSearch::hypothesis(Index beam, int token, float logprob, double total, bool finished) const {
  Hypothesis h;
  const auto ids = generated_ids(beam);
  const auto lps = generated_logprobs(beam);
  h.ids.assign(ids.begin(), ids.end());
  h.ids.push_back(token);
  h.token_logprobs.assign(lps.begin(), lps.end());
  h.token_logprobs.push_back(logprob);
  h.score = total;
  h.finished = finished;
  return h;
}

void RequestSearch::keep(Index beam, int token, float logprob, double total) {
  parents_.push_back(beam);
  next_tokens_.push_back(token);
  next_logprob_.push_back(logprob);
  next_scores_.push_back(total);
}

bool RequestSearch::advance(Matrix& logits, Index first, std::vector<Index>& parents, SearchScratch& scratch) {
  const Index beams = live();
  parents_.clear();
  next_tokens_.clear();
  next_logprob_.clear();
  next_scores_.clear();
  try {
    for (Index b = 0; b < beams; ++b) rules_->processor.process(logits.row(first + b), context_ids(b), generated_);
  } catch (const Error& e) {  // this request fails; the others go on
    error_ = e.what();
    scores_.clear();
    return false;
  }
  const Index length = generated_ + 1;  // of every hypothesis made now
  if (rules_->options.sample) {
    const int token = rules_->sampler.draw(logits.row(first), random_);
    const float logprob = logits(first, token);
    const double total = scores_.front() + logprob;
    if (on_token_) on_token_(token, logprob);
    if (model_.tokens.is_eos(token))
      pool_.offer(hypothesis(0, token, logprob, total, true));
    else
      keep(0, token, logprob, total);
  } else {
    select_beams(logits, first, scratch);
  }

  // Done? Beams at max_length join the pool unfinished; otherwise stop when no live
  // beam, normalized at its current length, beats the worst finished hypothesis.
  bool done = parents_.empty();
  if (!done && length >= max_length_) {
    for (std::size_t i = 0; i < parents_.size(); ++i)
      pool_.offer(hypothesis(parents_[i], next_tokens_[i], next_logprob_[i], next_scores_[i], false));
    done = true;
  } else if (!done && pool_.full()) {
    const double best_live = *std::max_element(next_scores_.begin(), next_scores_.end());
    done = pool_.normalize(best_live, length) <= pool_.worst();
  }
  if (done) {
    scores_.clear();
    return false;
  }
  for (const Index parent : parents_) parents.push_back(first + parent);
  follow_parents();
  return true;
}

// Beam search's step: rank the candidates, keep K live beams, send eos candidates
// ranked among the first K to the pool.
void RequestSearch::select_beams(const Matrix& logits, Index first, SearchScratch& scratch) {
  const Index vocab = model_.decoder.vocab_size();
  const Index per_beam = std::min<Index>(2 * beam_, vocab);
  scratch.candidates.clear();
  scratch.order.resize(static_cast<std::size_t>(vocab));
  for (Index b = 0; b < live(); ++b) {
    // A beam's best 2K tokens hold every candidate of it that can rank in the top 2K.
    const std::span<const float> row = logits.row(first + b);
    std::size_t possible = 0;
    for (Index v = 0; v < vocab; ++v)
      if (row[static_cast<std::size_t>(v)] != -INFINITY) scratch.order[possible++] = static_cast<int>(v);
    const auto by_logprob = [&](int x, int y) {
      const float a = row[static_cast<std::size_t>(x)], c = row[static_cast<std::size_t>(y)];
      return a > c || (a == c && x < y);
    };
    const auto take = std::min(possible, static_cast<std::size_t>(per_beam));
    std::partial_sort(scratch.order.begin(), scratch.order.begin() + static_cast<std::ptrdiff_t>(take),
                      scratch.order.begin() + static_cast<std::ptrdiff_t>(possible), by_logprob);
    for (std::size_t i = 0; i < take; ++i) {
      const int token = scratch.order[i];
      const float logprob = row[static_cast<std::size_t>(token)];
      scratch.candidates.push_back({scores_[static_cast<std::size_t>(b)] + logprob, b, token, logprob});
    }
  }
  const auto considered = std::min(scratch.candidates.size(), static_cast<std::size_t>(2 * beam_));
  std::partial_sort(scratch.candidates.begin(), scratch.candidates.begin() + static_cast<std::ptrdiff_t>(considered),
                    scratch.candidates.end(), better);
  // With one beam the best candidate is the token chosen, final at once.
  if (beam_ == 1 && on_token_ && considered > 0)
    on_token_(scratch.candidates.front().token, scratch.candidates.front().logprob);
  Index kept = 0;
  for (std::size_t rank = 0; rank < considered && kept < beam_; ++rank) {
    const Candidate& c = scratch.candidates[rank];
    if (model_.tokens.is_eos(c.token)) {
      if (static_cast<Index>(rank) < beam_) pool_.offer(hypothesis(c.beam, c.token, c.logprob, c.total, true));
    } else {
      keep(c.beam, c.token, c.logprob, c.total);
      ++kept;
    }
  }
}

// The kept candidates become the live beams: new beam i continues parents_[i] with
// its chosen token, its history row (ids and log-probs, the new token appended) and its
// score. (The decoder state follows through the parents advance() hands back.)
void RequestSearch::follow_parents() {
  for (std::size_t i = 0; i < parents_.size(); ++i) {
    const Index parent = parents_[i];
    const auto context = context_ids(parent);
    const auto to = static_cast<std::ptrdiff_t>(i) * width_;
    std::copy(context.begin(), context.end(), next_ids_.begin() + to);
    next_ids_[static_cast<std::size_t>(to) + context.size()] = next_tokens_[i];
    const auto lps = generated_logprobs(parent);
    const auto lp_to = static_cast<std::ptrdiff_t>(i) * max_length_;
    std::copy(lps.begin(), lps.end(), next_logprobs_.begin() + lp_to);
    next_logprobs_[static_cast<std::size_t>(lp_to + generated_)] = next_logprob_[i];
  }
  ids_.swap(next_ids_);
  logprobs_.swap(next_logprobs_);
  scores_.swap(next_scores_);
  ++generated_;
}

DecodeResult RequestSearch::result() {
  DecodeResult result;
  result.error = error_;
  if (!result.ok()) return result;
  result.hypotheses = pool_.take_best(rules_->options.n_best);
  if (result.hypotheses.empty())
    result.error =
        "decoder: no output satisfies the constraints (every token was impossible at some "
        "step; relax min_length or no_repeat_ngram_size)";
  return result;
}

}  // namespace ordo
