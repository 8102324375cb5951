// ordo serve's scheduler: the one place a model's work is run. HTTP threads submit jobs
// (a request's texts and options) and wait for their outcome; the scheduler's thread owns
// the model and decides what runs together.
//
// Scheduler is the interface the routes use; BatchScheduler is today's policy: each time
// the model is free it takes the oldest waiting job and every other waiting job with the
// same kind and decoding options, up to --max-batch texts, and runs them as one call of
// the public API (Translator::translate_batch, Generator::generate_batch), so different
// clients' texts share each decoder step of that batch. A request that arrives while a
// batch decodes waits for the next one. A step-level scheduler (a request joining the
// live set at the next decoder step) replaces BatchScheduler behind the same interface.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
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
  // Complete only: when set, the job runs alone, prompt by prompt, and receives each
  // token of prompt i as it is chosen (Generator::generate_streamed); returning false
  // ends that prompt there (a stop sequence was reached). Runs on the scheduler's thread.
  std::function<bool(std::size_t text, const GeneratedToken& token)> on_token;
  // True once the client is gone. A waiting job that is abandoned is dropped; a running
  // batch stops at its next decoder step when all its jobs are. Runs on the scheduler's
  // thread, once per decoder step: keep it cheap.
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
  int max_batch = 32;  // texts decoded together (a larger request still runs, alone)
  int max_queue = 64;  // jobs waiting
};

class BatchScheduler final : public Scheduler {
 public:
  BatchScheduler(std::string name, const Model& model, SchedulerLimits limits, Metrics& metrics);
  ~BatchScheduler() override;
  BatchScheduler(const BatchScheduler&) = delete;
  BatchScheduler& operator=(const BatchScheduler&) = delete;

  std::future<Outcome> submit(Job job) override;
  ModelGauges gauges() const override;
  void stop() override;

 private:
  struct Waiting {
    Job job;
    std::promise<Outcome> promise;
  };

  void loop();
  // Takes the next batch off the queue (the lock held): the oldest job and the waiting
  // jobs it can share a batch with. Abandoned jobs met on the way are answered.
  std::vector<Waiting> next_batch();
  void run(std::vector<Waiting>& batch);
  void run_streamed(Waiting& waiting);

  const std::string name_;
  const SchedulerLimits limits_;
  Metrics& metrics_;
  std::optional<Translator> translator_;  // encoder-decoder models
  std::optional<Generator> generator_;    // decoder-only models

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Waiting> queue_;
  std::size_t live_ = 0;
  bool stopping_ = false;
  std::thread thread_;  // last: started once everything above is
};

}  // namespace ordo::tools::serve
