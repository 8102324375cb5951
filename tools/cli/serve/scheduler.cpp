#include "tools/cli/serve/scheduler.h"

#include <algorithm>
#include <exception>
#include <numeric>
#include <utility>

namespace ordo::tools::serve {

namespace {

bool abandoned(const Job& job) { return job.abandoned && job.abandoned(); }

// Jobs whose texts can join in one add(): one Translator's or Generator's options, and
// all streamed or none.
bool same_group(const Job& a, const Job& b) {
  return a.kind == b.kind && a.decoding == b.decoding && a.source_lang == b.source_lang &&
         a.target_lang == b.target_lang && (a.on_token != nullptr) == (b.on_token != nullptr);
}

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

// The tokens a finished text read and wrote (its best hypothesis's), for /metrics.
template <class Request>
std::int64_t tokens_out(const Request& r) {
  return r.ok() && !r.hypotheses.empty() ? static_cast<std::int64_t>(r.best().ids.size()) : 0;
}

}  // namespace

ContinuousScheduler::ContinuousScheduler(std::string name, const Model& model, SchedulerLimits limits,
                                         Metrics& metrics)
    : name_(std::move(name)), limits_(limits), metrics_(metrics), batch_(model) {
  if (model.is_decoder_only())
    generator_.emplace(model);
  else
    translator_.emplace(model);
  thread_ = std::thread([this] { loop(); });
}

ContinuousScheduler::~ContinuousScheduler() { stop(); }

void ContinuousScheduler::stop() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::future<Outcome> ContinuousScheduler::submit(Job job) {
  std::future<Outcome> future;
  {
    const std::lock_guard lock(mutex_);
    if (stopping_) throw Error("model " + name_, "the server is shutting down", "send the request to another replica");
    const std::size_t waiting_jobs = queue_.size() + partly_waiting_;
    if (waiting_jobs >= static_cast<std::size_t>(limits_.max_queue))
      throw QueueFull("model " + name_ + ": " + std::to_string(waiting_jobs) +
                      " requests are waiting (--max-queue); try again shortly");
    Waiting& waiting = queue_.emplace_back(Waiting{std::move(job), {}});
    future = waiting.promise.get_future();
  }
  wake_.notify_one();
  return future;
}

ModelGauges ContinuousScheduler::gauges() const {
  const std::lock_guard lock(mutex_);
  return {name_, queue_.size() + partly_waiting_, live_};
}

void ContinuousScheduler::loop() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || !running_.empty(); });
      if (queue_.empty() && running_.empty()) return;  // stopping, and nothing left to run
    }
    admit();
    cancel_abandoned();
    if (batch_.live_requests() > 0) {
      metrics_.step(name_, static_cast<std::size_t>(batch_.live_requests()));
      batch_.step();
    }
    collect();
    const std::lock_guard lock(mutex_);
    live_ = static_cast<std::size_t>(batch_.live_requests());
    partly_waiting_ = static_cast<std::size_t>(std::count_if(
        running_.begin(), running_.end(), [](const Running& r) { return r.admitted < r.job.texts.size(); }));
  }
}

// Free places go first to jobs that have none yet (oldest first), then one at a time to
// the job with the fewest live texts, the one served least recently on a tie: a client
// with a thousand texts takes its share, and one that sends a sentence after it joins at
// the next place that frees, not after the thousand.
void ContinuousScheduler::admit() {
  auto room = static_cast<std::size_t>(std::max(0, limits_.max_batch - batch_.live_requests()));
  std::map<Running*, std::size_t> places;  // texts each job adds now
  const auto live_texts = [&](Running& r) { return r.open + places[&r]; };
  while (room > 0) {
    Running* next = nullptr;
    {
      const std::lock_guard lock(mutex_);
      while (!queue_.empty() && !next) {
        Waiting waiting = std::move(queue_.front());
        queue_.pop_front();
        if (abandoned(waiting.job))
          waiting.promise.set_value(cancelled());
        else
          next = &start(std::move(waiting));
      }
    }
    if (next && next->job.texts.empty()) {
      answer(*next);
      continue;
    }
    if (!next)
      for (Running& r : running_) {
        if (r.admitted + places[&r] == r.job.texts.size()) continue;
        if (!next || std::pair(live_texts(r), r.served) < std::pair(live_texts(*next), next->served)) next = &r;
      }
    if (!next) break;
    ++places[next];
    next->served = ++places_given_;
    --room;
  }
  // The texts that join now, in groups that decode alike: each group is one add(), so
  // requests that arrived together share one encoder pass and one prefill.
  std::vector<std::vector<std::pair<Running*, std::size_t>>> groups;
  for (Running& r : running_) {
    const auto p = places.find(&r);
    if (p == places.end() || p->second == 0) continue;
    const auto group = std::find_if(groups.begin(), groups.end(),
                                    [&](const auto& g) { return same_group(g.front().first->job, r.job); });
    if (group == groups.end())
      groups.push_back({{&r, p->second}});
    else
      group->push_back({&r, p->second});
  }
  for (const auto& group : groups) admit_group(group);
}

ContinuousScheduler::Running& ContinuousScheduler::start(Waiting waiting) {
  Running& r = running_.emplace_back();
  r.job = std::move(waiting.job);
  r.promise = std::move(waiting.promise);
  const std::size_t n = r.job.texts.size();
  r.keys.assign(n, 0);
  r.streamed.assign(n, 0);
  if (r.job.kind == Job::Kind::Translate) {
    r.outcome.translations.resize(n);
  } else {
    r.outcome.generations.resize(n);
    r.outcome.stopped.assign(n, false);
  }
  return r;
}

void ContinuousScheduler::admit_group(const std::vector<std::pair<Running*, std::size_t>>& group) {
  const Job& job = group.front().first->job;  // every member's kind, options and languages
  std::vector<std::uint64_t> indexes;  // text i of a job samples from (seed, i), as the CLI's line i
  for (const auto& [r, count] : group)
    for (std::size_t i = r->admitted; i < r->admitted + count; ++i) indexes.push_back(i);
  std::vector<ContinuousBatch::Key> keys;
  try {
    if (job.kind == Job::Kind::Translate) {
      if (!translator_) throw Error("model " + name_, "is decoder-only: it continues prompts", "use /v1/completions");
      TranslatorOptions options = translator_->options();
      options.decoding = job.decoding;
      options.source_lang = job.source_lang;
      options.target_lang = job.target_lang;
      const Translator translator = translator_->with_options(options);
      std::vector<Translation> prepared;
      for (const auto& [r, count] : group)
        for (std::size_t i = r->admitted; i < r->admitted + count; ++i) {
          prepared.push_back(translator.prepare(r->job.texts[i]));
          r->tokens_in += static_cast<std::int64_t>(prepared.back().source_ids.size());
        }
      keys = batch_.add(translator, std::move(prepared), indexes);
    } else {
      if (!generator_) throw Error("model " + name_, "is an encoder-decoder model: it translates", "use /v1/translate");
      GeneratorOptions options = generator_->options();
      options.decoding = job.decoding;
      const Generator generator = generator_->with_options(options);
      std::vector<Generation> prepared;
      for (const auto& [r, count] : group)
        for (std::size_t i = r->admitted; i < r->admitted + count; ++i) {
          prepared.push_back(generator.prepare(r->job.texts[i]));
          r->tokens_in += static_cast<std::int64_t>(prepared.back().prompt_ids.size());
          r->outcome.generations[i] = prepared.back();  // what a text cut by its stop sequence answers
        }
      ContinuousBatch::OnToken on_token;
      if (job.on_token)  // every member streams (same_group)
        on_token = [this](ContinuousBatch::Key key, const GeneratedToken& token) {
          const auto it = text_of_.find(key);
          if (it == text_of_.end()) return;
          auto [running, text] = it->second;
          ++running->streamed[text];
          if (running->job.on_token(text, token)) return;
          // A stop sequence: the text ends here, and the others of the job go on.
          running->outcome.stopped[text] = true;
          batch_.cancel(key);
          finish_text(*running, text);
        };
      keys = batch_.add(generator, std::move(prepared), indexes, on_token);
    }
  } catch (const std::exception& e) {
    // Nothing of these texts joined: their jobs fail as a whole.
    for (const auto& [r, count] : group) end_early(*r, failed(e.what()));
    return;
  }
  std::size_t k = 0;
  for (const auto& [r, count] : group) {
    for (std::size_t i = r->admitted; i < r->admitted + count; ++i, ++k) {
      r->keys[i] = keys[k];
      text_of_[keys[k]] = {r, i};
    }
    r->admitted += count;
    r->open += count;
  }
}

void ContinuousScheduler::finish_text(Running& r, std::size_t text) {
  text_of_.erase(r.keys[text]);
  if (--r.open == 0 && r.admitted == r.job.texts.size()) answer(r);
}

void ContinuousScheduler::cancel_abandoned() {
  for (auto it = running_.begin(); it != running_.end();) {
    Running& r = *it++;
    if (abandoned(r.job)) end_early(r, cancelled());
  }
}

void ContinuousScheduler::end_early(Running& r, Outcome outcome) {
  for (std::size_t i = 0; i < r.admitted; ++i)
    if (text_of_.erase(r.keys[i]) > 0) batch_.cancel(r.keys[i]);
  r.admitted = r.job.texts.size();
  r.open = 0;
  r.outcome = std::move(outcome);
  answer(r);
}

void ContinuousScheduler::collect() {
  for (ContinuousBatch::Finished& done : batch_.take_finished()) {
    const auto it = text_of_.find(done.key);
    if (it == text_of_.end()) continue;  // its job was answered already
    auto [running, text] = it->second;
    if (running->job.kind == Job::Kind::Translate)
      running->outcome.translations[text] = std::move(done.translation());
    else
      running->outcome.generations[text] = std::move(done.generation());
    finish_text(*running, text);
  }
}

void ContinuousScheduler::answer(Running& r) {
  std::int64_t out = 0;
  for (const Translation& t : r.outcome.translations) out += tokens_out(t);
  for (std::size_t i = 0; i < r.outcome.generations.size(); ++i)
    out += r.outcome.stopped.at(i) ? r.streamed[i] : tokens_out(r.outcome.generations[i]);
  metrics_.tokens(name_, r.tokens_in, out);
  r.promise.set_value(std::move(r.outcome));
  running_.remove_if([&r](const Running& other) { return &other == &r; });
}

}  // namespace ordo::tools::serve
