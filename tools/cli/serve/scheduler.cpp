#include "tools/cli/serve/scheduler.h"

#include <algorithm>
#include <exception>
#include <utility>

namespace ordo::tools::serve {

namespace {

// Thrown from the interrupt check when every job of a batch is abandoned.
struct Abandoned {};
// Thrown from a streamed token when the job's on_token ends its text.
struct TextEnded {};

bool same_languages(const Job& a, const Job& b) {
  return a.source_lang == b.source_lang && a.target_lang == b.target_lang;
}

bool same_decoding(const DecodingOptions& a, const DecodingOptions& b) {
  return a.beam_size == b.beam_size && a.n_best == b.n_best && a.length_penalty == b.length_penalty &&
         a.max_length == b.max_length && a.min_length == b.min_length &&
         a.no_repeat_ngram_size == b.no_repeat_ngram_size && a.repetition_penalty == b.repetition_penalty &&
         a.sample == b.sample && a.temperature == b.temperature && a.top_k == b.top_k && a.top_p == b.top_p &&
         a.seed == b.seed && a.bad_words_ids == b.bad_words_ids && a.forced_bos_token_id == b.forced_bos_token_id;
}

// A job that runs alone: streamed, or sampled. Text i of a request samples from the
// stream seeded by (seed, i), as `ordo translate --sample` numbers its texts; in a batch
// with another request's texts it would be numbered after them.
bool runs_alone(const Job& job) { return job.on_token != nullptr || job.decoding.sample; }

bool abandoned(const Job& job) { return job.abandoned && job.abandoned(); }

Outcome cancelled() {
  Outcome outcome;
  outcome.cancelled = true;
  return outcome;
}

Outcome failed(const std::string& error) {
  Outcome outcome;
  outcome.error = error;
  return outcome;
}

}  // namespace

BatchScheduler::BatchScheduler(std::string name, const Model& model, SchedulerLimits limits, Metrics& metrics)
    : name_(std::move(name)), limits_(limits), metrics_(metrics) {
  if (model.is_decoder_only()) {
    GeneratorOptions options;
    options.batch_size = limits.max_batch;
    generator_.emplace(model, options);
  } else {
    TranslatorOptions options;
    options.batch_size = limits.max_batch;
    translator_.emplace(model, options);
  }
  thread_ = std::thread([this] { loop(); });
}

BatchScheduler::~BatchScheduler() { stop(); }

void BatchScheduler::stop() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::future<Outcome> BatchScheduler::submit(Job job) {
  std::future<Outcome> future;
  {
    const std::lock_guard lock(mutex_);
    if (stopping_) throw Error("model " + name_, "the server is shutting down", "send the request to another replica");
    if (queue_.size() >= static_cast<std::size_t>(limits_.max_queue))
      throw QueueFull("model " + name_ + ": " + std::to_string(queue_.size()) +
                      " requests are waiting (--max-queue); try again shortly");
    Waiting& waiting = queue_.emplace_back(Waiting{std::move(job), {}});
    future = waiting.promise.get_future();
  }
  wake_.notify_one();
  return future;
}

ModelGauges BatchScheduler::gauges() const {
  const std::lock_guard lock(mutex_);
  return {name_, queue_.size(), live_};
}

void BatchScheduler::loop() {
  for (;;) {
    std::vector<Waiting> batch;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to run
      batch = next_batch();
      if (batch.empty()) continue;  // every waiting job was abandoned
      live_ = 0;
      for (const Waiting& w : batch) live_ += w.job.texts.size();
    }
    run(batch);
    const std::lock_guard lock(mutex_);
    live_ = 0;
  }
}

std::vector<BatchScheduler::Waiting> BatchScheduler::next_batch() {
  std::vector<Waiting> batch;
  std::size_t texts = 0;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (abandoned(it->job)) {
      it->promise.set_value(cancelled());
      it = queue_.erase(it);
      continue;
    }
    const Job& job = it->job;
    bool joins = batch.empty();
    if (!joins) {
      const Job& first = batch.front().job;
      joins = !runs_alone(first) && !runs_alone(job) && job.kind == first.kind &&
              same_decoding(job.decoding, first.decoding) && same_languages(job, first) &&
              texts + job.texts.size() <= static_cast<std::size_t>(limits_.max_batch);
    }
    if (!joins) {
      ++it;
      continue;
    }
    texts += job.texts.size();
    batch.push_back(std::move(*it));
    it = queue_.erase(it);
    if (runs_alone(batch.front().job) || texts >= static_cast<std::size_t>(limits_.max_batch)) break;
  }
  return batch;
}

void BatchScheduler::run(std::vector<Waiting>& batch) {
  if (batch.front().job.on_token) return run_streamed(batch.front());
  const Job& first = batch.front().job;
  std::vector<std::string> texts;
  for (const Waiting& w : batch) texts.insert(texts.end(), w.job.texts.begin(), w.job.texts.end());
  // The batch stops at its next decoder step once no client is waiting for it; while
  // one is, the others' texts finish with it (and are dropped by their handlers).
  const InterruptCheck interrupt = [&batch] {
    if (std::all_of(batch.begin(), batch.end(), [](const Waiting& w) { return abandoned(w.job); })) throw Abandoned{};
  };
  std::vector<Outcome> outcomes(batch.size());
  std::int64_t tokens_in = 0, tokens_out = 0;
  try {
    std::size_t at = 0;
    if (first.kind == Job::Kind::Translate) {
      if (!translator_) throw Error("model " + name_, "is decoder-only: it continues prompts", "use /v1/completions");
      TranslatorOptions options = translator_->options();
      options.decoding = first.decoding;
      options.source_lang = first.source_lang;
      options.target_lang = first.target_lang;
      options.interrupt = interrupt;
      std::vector<Translation> results = translator_->with_options(options).translate_batch(texts);
      for (std::size_t j = 0; j < batch.size(); ++j)
        for (std::size_t i = 0; i < batch[j].job.texts.size(); ++i, ++at) {
          Translation& t = results[at];
          tokens_in += static_cast<std::int64_t>(t.source_ids.size());
          if (t.ok() && !t.hypotheses.empty()) tokens_out += static_cast<std::int64_t>(t.best().ids.size());
          outcomes[j].translations.push_back(std::move(t));
        }
    } else {
      if (!generator_) throw Error("model " + name_, "is an encoder-decoder model: it translates", "use /v1/translate");
      GeneratorOptions options = generator_->options();
      options.decoding = first.decoding;
      options.interrupt = interrupt;
      std::vector<Generation> results = generator_->with_options(options).generate_batch(texts);
      for (std::size_t j = 0; j < batch.size(); ++j)
        for (std::size_t i = 0; i < batch[j].job.texts.size(); ++i, ++at) {
          Generation& g = results[at];
          tokens_in += static_cast<std::int64_t>(g.prompt_ids.size());
          if (g.ok() && !g.hypotheses.empty()) tokens_out += static_cast<std::int64_t>(g.best().ids.size());
          outcomes[j].generations.push_back(std::move(g));
        }
    }
  } catch (const Abandoned&) {
    for (Outcome& o : outcomes) o = cancelled();
  } catch (const std::exception& e) {
    for (Outcome& o : outcomes) o = failed(e.what());
  }
  metrics_.batch(name_, texts.size(), tokens_in, tokens_out);
  for (std::size_t j = 0; j < batch.size(); ++j) batch[j].promise.set_value(std::move(outcomes[j]));
}

void BatchScheduler::run_streamed(Waiting& waiting) {
  const Job& job = waiting.job;
  Outcome outcome;
  std::int64_t tokens_in = 0, tokens_out = 0;
  try {
    if (!generator_) throw Error("model " + name_, "is an encoder-decoder model: it translates", "use /v1/translate");
    GeneratorOptions options = generator_->options();
    options.decoding = job.decoding;
    options.interrupt = [&job] {
      if (abandoned(job)) throw Abandoned{};
    };
    const Generator generator = generator_->with_options(options);
    for (std::size_t i = 0; i < job.texts.size(); ++i) {
      Generation prepared = generator.prepare(job.texts[i]);
      tokens_in += static_cast<std::int64_t>(prepared.prompt_ids.size());
      outcome.stopped.push_back(false);
      if (!prepared.ok()) {
        outcome.generations.push_back(std::move(prepared));
        continue;
      }
      std::int64_t streamed = 0;
      const auto on_token = [&](const GeneratedToken& token) {
        ++streamed;
        if (!job.on_token(i, token)) throw TextEnded{};
      };
      try {
        outcome.generations.push_back(generator.generate_streamed(prepared, on_token, i));
      } catch (const TextEnded&) {
        outcome.generations.push_back(std::move(prepared));
        outcome.stopped.back() = true;
      } catch (const Error& e) {
        prepared.error = e.what();
        outcome.generations.push_back(std::move(prepared));
      }
      tokens_out += streamed;
    }
  } catch (const Abandoned&) {
    outcome = cancelled();
  } catch (const std::exception& e) {
    outcome = failed(e.what());
  }
  metrics_.batch(name_, job.texts.size(), tokens_in, tokens_out);
  waiting.promise.set_value(std::move(outcome));
}

}  // namespace ordo::tools::serve
