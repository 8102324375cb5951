// ordo serve's scheduler: the one place a model's work is run. HTTP threads submit jobs
// (a request's texts and options) and wait for their outcome; the scheduler's thread owns
// the model and decides what runs together.
//
// Scheduler is the interface the routes use; ContinuousScheduler runs continuous
// batching on ordo::ContinuousBatch: between two decoder steps, waiting texts join the
// live set while fewer than --max-batch are live (each free place to the job with the
// fewest live texts), each with its own job's options and sampling streams; every step
// then decodes every live text of every client, and a text leaves as soon as it is
// done. A request that arrives while others decode waits for the next step, not for
// them to finish.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <ordo/ordo.hpp>

#include "tools/cli/serve/metrics.h"

namespace ordo::tools::serve {

// One request's work for one model.
struct Job {
  enum class Kind { Translate, Complete };
  Kind kind = Kind::Translate;
  DecodingOptions decoding;
  // Translate, a model with language codes: TranslatorOptions::source_lang / target_lang.
  std::string source_lang, target_lang;
  std::vector<std::string> texts;  // sources (Translate) or prompts (Complete)
  // Complete only: when set, receives each token of prompt i as it is chosen
  // (Generator::generate_streamed's tokens); returning false ends that prompt there (a
  // stop sequence was reached). Runs on the scheduler's thread.
  std::function<bool(std::size_t text, const GeneratedToken& token)> on_token;
  // True once the client is gone. An abandoned job is dropped: waiting, or from the live
  // set before the next decoder step. Runs on the scheduler's thread, once per decoder
  // step: keep it cheap.
  std::function<bool()> abandoned;
};

struct Outcome {
  std::vector<Translation> translations;  // Translate: one per text, in order
  std::vector<Generation> generations;    // Complete: one per text, in order
  std::vector<bool> stopped;              // streamed Complete: on_token ended text i early
  std::string error;                      // the job failed as a whole (its texts did not run)
  bool cancelled = false;                 // dropped or stopped because its client was gone
};

// Thrown by submit() when --max-queue jobs already wait: the server answers 503.
class QueueFull : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  // Queues `job`; the future gives its outcome. Throws QueueFull, and ordo::Error once
  // the scheduler is stopping.
  virtual std::future<Outcome> submit(Job job) = 0;
  // The model's queue depth and live sequences, for /metrics.
  virtual ModelGauges gauges() const = 0;
  // Runs every job already queued, then ends the thread. Idempotent.
  virtual void stop() = 0;
};

struct SchedulerLimits {
  int max_batch = 32;  // texts live at once (a larger request joins text by text as others leave)
  int max_queue = 64;  // jobs waiting for a place for (some of) their texts
};

class ContinuousScheduler final : public Scheduler {
 public:
  ContinuousScheduler(std::string name, const Model& model, SchedulerLimits limits, Metrics& metrics);
  ~ContinuousScheduler() override;
  ContinuousScheduler(const ContinuousScheduler&) = delete;
  ContinuousScheduler& operator=(const ContinuousScheduler&) = delete;

  std::future<Outcome> submit(Job job) override;
  ModelGauges gauges() const override;
  void stop() override;

 private:
  struct Waiting {
    Job job;
    std::promise<Outcome> promise;
  };
  // A job whose texts are (partly) in the live set. Its outcome fills in text by text.
  struct Running {
    Job job;
    std::promise<Outcome> promise;
    Outcome outcome;
    std::size_t admitted = 0;  // texts added to the batch so far
    std::size_t open = 0;      // texts added and not finished
    std::vector<ContinuousBatch::Key> keys;
    std::vector<std::int64_t> streamed;  // tokens each text streamed (on_token jobs)
    std::int64_t tokens_in = 0;
    std::uint64_t served = 0;  // when it was last given a place (places_given_)
  };

  void loop();
  // Gives the live set's free places to waiting texts (of running jobs, then of queued
  // ones), and adds them.
  void admit();
  Running& start(Waiting waiting);  // a queued job, into running_
  // Adds the next texts of each job of `group` (count each) in one add(); jobs whose
  // texts cannot join fail whole.
  void admit_group(const std::vector<std::pair<Running*, std::size_t>>& group);
  void finish_text(Running& running, std::size_t text);
  void cancel_abandoned();
  // Answers a job with `outcome` now (failed, or its client gone): its live texts leave
  // the batch at the next step, and those not yet in never join.
  void end_early(Running& running, Outcome outcome);
  void collect();
  void answer(Running& running);  // the promise, the metrics, and the job forgotten

  const std::string name_;
  const SchedulerLimits limits_;
  Metrics& metrics_;
  std::optional<Translator> translator_;  // encoder-decoder models
  std::optional<Generator> generator_;    // decoder-only models
  ContinuousBatch batch_;                 // the scheduler thread's only
  std::list<Running> running_;            // oldest first
  std::map<ContinuousBatch::Key, std::pair<Running*, std::size_t>> text_of_;  // live key -> (job, text)
  std::uint64_t places_given_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Waiting> queue_;
  std::size_t live_ = 0;  // live texts, for the gauge
  // Running jobs with texts still waiting for a place: they count as waiting, for
  // --max-queue and the gauge, until every text is in.
  std::size_t partly_waiting_ = 0;
  bool stopping_ = false;
  std::thread thread_;  // last: started once everything above is
};

}  // namespace ordo::tools::serve
