// ordo bench: how fast this machine runs a model, and how fast it could.
//
//   ordo bench --model DIR --batch 16 --src-len 32 --new-tokens 32 --threads 2
//   ordo bench --shape base --batch 1 --src-len 32 --new-tokens 32 --threads 1 --json
//   ordo bench --shape llama --batch 1 --src-len 32 --new-tokens 32 --threads 2
//
// The workload is fixed so that every engine does the same work (tools/bench/bench_peer.py
// runs the same one in PyTorch; tools/bench/bench.sh runs both side by side):
//   - B sources (decoder-only: prompts) of S random ids from splitmix64 (below);
//   - encode: the encoder over [B, S] (decoder-only: the prompt prefill, its last-row
//     logits and the first choice of tokens);
//   - decode: exactly N one-token decoder steps per sequence, eos ignored, through the
//     engine API (Decoder::start / step), not the search, so nothing can stop early.
//     Encoder-decoder: the cross-attention K/V projection (Decoder::start), then N
//     steps from decoder_start. With --beam K every source runs K sequences: each step
//     ranks, per source, score + log_softmax over all K x V continuations, keeps the K
//     best and reorders the KV caches to them (the first step starts from one beam,
//     the others at score -inf); nothing is reordered after the last step.
// Each phase is timed with steady_clock over --repeats runs after --warmup runs, and
// the medians are reported, next to two probes of the machine in the same process: a
// plain sgemm (the compute ceiling) and a streaming read (the bandwidth that bounds a
// batch-1 decode step, which must read every decoder weight once).
//
// Source ids, shared with bench_peer.py: splitmix64(seed, j) = mix(seed + (j+1) * G)
// (Steele et al.'s SplitMix64: G = 0x9E3779B97F4A7C15, mix as below); token t of source
// b is 3 + splitmix64(0x6F72646F62656E63, b*S + t) % (vocab - 3), ids 0-2 being the
// usual specials (vocabularies of 3 or fewer use all ids).
//
// --shape base (a Marian-base-shaped encoder-decoder, see base_config) and --shape llama
// (a decoder-only model in Hugging Face's LLaMA layout, see llama_config) write a random
// model into a private directory on /dev/shm, load it, and unlink it (the mapping stays
// valid). Its values are those tools/bench/make_bench_model.py --shape writes: value j of
// tensor `name` is u = (splitmix64(fnv1a64(name), j) >> 40) / 2^24,
// v = (2u - 1) * 0.05 in double, then float32; norm weights (LayerNorm and RMSNorm) get
// 1 + v. So `--shape S` and `--model <that directory>` run the same model.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/blas.h"
#include "engine/error.h"
#include "engine/limits.h"
#include "engine/ops.h"
#include "engine/search.h"
#include "engine/thread_pool.h"
#include "models/loaded_model.h"
#include "models/tensor_names.h"
#include "tools/cli/commands.h"
#include "tools/cli/common.h"
#include "tools/cli/progress.h"

namespace ordo::tools {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct BenchOptions {
  std::string model_dir;
  std::string shape;
  Index batch = 1;
  Index src_len = 32;
  Index new_tokens = 32;
  Index beam = 1;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int repeats = 5;
  int warmup = 1;
  bool json = false;
};

// ---- deterministic numbers, identical in bench_peer.py and make_bench_model.py ----

constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;
constexpr std::uint64_t kSourceSeed = 0x6F72646F62656E63ull;  // "ordobenc"

std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Output j of the SplitMix64 stream seeded with `seed`: random access, so a tensor or a
// batch can be generated in any order, and vectorized in numpy.
std::uint64_t splitmix64(std::uint64_t seed, std::uint64_t j) { return mix(seed + (j + 1) * kGolden); }

std::uint64_t fnv1a64(const std::string& text) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (const unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

// [B*S] ids, source b in [b*S, (b+1)*S).
std::vector<int> random_sources(Index batch, Index length, Index vocab) {
  const std::uint64_t low = vocab > 3 ? 3 : 0;
  std::vector<int> ids(static_cast<std::size_t>(batch * length));
  for (std::size_t j = 0; j < ids.size(); ++j)
    ids[j] = static_cast<int>(low + splitmix64(kSourceSeed, j) % (static_cast<std::uint64_t>(vocab) - low));
  return ids;
}

// ---- --shape: random models ----

// Marian's transformer-base as Hugging Face's opus-mt models configure it (swish,
// scaled embeddings, split sinusoids, tied shared embeddings, post-norm), with a
// 32000-piece vocabulary.
nlohmann::json base_config() {
  return {{"model_type", "ordo"},
          {"vocab_size", 32000},
          {"d_model", 512},
          {"encoder_layers", 6},
          {"decoder_layers", 6},
          {"encoder_attention_heads", 8},
          {"decoder_attention_heads", 8},
          {"encoder_ffn_dim", 2048},
          {"decoder_ffn_dim", 2048},
          {"activation_function", "swish"},
          {"normalize_before", false},
          {"scale_embedding", true},
          {"max_position_embeddings", 512},
          {"position_encoding", "sinusoidal"},
          {"sinusoidal_layout", "split"},
          {"share_encoder_decoder_embeddings", true},
          {"tie_word_embeddings", true},
          {"pad_token_id", 31999},
          {"eos_token_id", 0},
          {"decoder_start_token_id", 31999}};
}

// A LLaMA-layout decoder of 99,496,704 parameters in Hugging Face's config keys:
// hidden 768, 8 layers, 12 query heads sharing 4 K/V heads (head_dim 64), SwiGLU 2048,
// a 32000-piece vocabulary with an untied lm_head (2 x 24.6 M), RMSNorm, RoPE.
nlohmann::json llama_config() {
  return {{"model_type", "llama"},
          {"vocab_size", 32000},
          {"hidden_size", 768},
          {"intermediate_size", 2048},
          {"num_hidden_layers", 8},
          {"num_attention_heads", 12},
          {"num_key_value_heads", 4},
          {"hidden_act", "silu"},
          {"max_position_embeddings", 2048},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0},
          {"tie_word_embeddings", false},
          {"attention_bias", false},
          {"mlp_bias", false},
          {"bos_token_id", 1},
          {"eos_token_id", 2},
          {"torch_dtype", "float32"}};
}

// The config of --shape `shape` (the flag's check admits only these).
nlohmann::json shape_config(const std::string& shape) { return shape == "llama" ? llama_config() : base_config(); }

// Ordo's and Marian's LayerNorms (*_layer_norm, layer_norm, layernorm_embedding) and
// LLaMA's RMSNorms (input_layernorm, post_attention_layernorm, model.norm).
bool is_norm_weight(const std::string& name) {
  return name.ends_with("norm.weight") || name.ends_with("layernorm_embedding.weight");
}

// Writes `spec`'s values, a chunk at a time: a base model is 240 MB (llama: 400 MB),
// which should not inflate the peak RSS this command reports.
void write_random_values(std::ofstream& out, const TensorSpec& spec) {
  const std::uint64_t seed = fnv1a64(spec.name);
  const double one = is_norm_weight(spec.name) ? 1.0 : 0.0;
  const auto count = static_cast<std::uint64_t>(element_count(spec.shape));
  std::vector<float> chunk;
  for (std::uint64_t first = 0; first < count; first += chunk.size()) {
    chunk.resize(static_cast<std::size_t>(std::min<std::uint64_t>(count - first, 1u << 20)));
    for (std::size_t i = 0; i < chunk.size(); ++i) {
      const double u = static_cast<double>(splitmix64(seed, first + i) >> 40) * 0x1p-24;
      chunk[i] = static_cast<float>(one + (2.0 * u - 1.0) * 0.05);
    }
    out.write(reinterpret_cast<const char*>(chunk.data()), static_cast<std::streamsize>(chunk.size() * sizeof(float)));
  }
}

// model.safetensors (F32) with every required tensor of `config`.
void write_random_safetensors(const fs::path& path, const ModelConfig& config) {
  std::vector<TensorSpec> specs = expected_tensors(config);
  std::erase_if(specs, [](const TensorSpec& s) { return !s.required; });
  nlohmann::json header = nlohmann::json::object();
  std::uint64_t offset = 0;
  for (const TensorSpec& spec : specs) {
    const std::uint64_t bytes = static_cast<std::uint64_t>(element_count(spec.shape)) * sizeof(float);
    header[spec.name] = {{"dtype", "F32"}, {"shape", spec.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the F32 data 8-byte aligned
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(path.string(), "cannot open for writing", "is the directory writable?");
  char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  out.write(length, sizeof length);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const TensorSpec& spec : specs) write_random_values(out, spec);
  out.close();
  if (!out) throw Error(path.string(), "writing the random model failed", "is the disk (or /dev/shm) full?");
}

// A model directory that exists while this object does: RAM-backed /dev/shm when it
// has room, so "in memory" stays true and no disk is written.
class ScratchModel {
 public:
  ScratchModel(const std::string& shape, const nlohmann::json& config) {
    const fs::path parent = has_room("/dev/shm", std::uintmax_t{1} << 30) ? fs::path("/dev/shm") : fs::temp_directory_path();
    std::string pattern = (parent / "ordo-bench-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw Error(parent.string(), "cannot create a scratch directory for --shape", "is it writable?");
    dir_ = pattern;
    std::ofstream(dir_ / "config.json") << config.dump(2) << '\n';
    write_random_safetensors(dir_ / "model.safetensors", ModelConfig::from_json(config, "--shape " + shape));
  }
  ~ScratchModel() {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  ScratchModel(const ScratchModel&) = delete;
  ScratchModel& operator=(const ScratchModel&) = delete;
  const fs::path& dir() const { return dir_; }

 private:
  static bool has_room(const fs::path& dir, std::uintmax_t bytes) {
    std::error_code error;
    const fs::space_info space = fs::space(dir, error);
    return !error && space.available >= bytes;
  }
  fs::path dir_;
};

// ---- what the workload costs, from the model's tensors ----

Index weight_elements(const LoadedModel& model, Stack stack, Role role, Part part, Index layer = 0) {
  const auto name = tensor_name(model.config(), stack, role, part, layer);
  if (!name) return 0;
  const TensorView tensor = model.weights().get(*name);
  return tensor.empty() ? 0 : tensor.size();  // optional tensors the file lacks are empty
}

// Bytes one decode step must read: every decoder weight a step touches (self-attention,
// the cross-attention's query and output projections, the feed-forward, the norms)
// and the output projection, in float32, the dtype ordo holds weights in (F16/BF16
// files are converted at load). Cross-attention K/V projections run once per source,
// not per step; the few embedding (and learned position) rows a step gathers are left
// out: negligible, and part of the output projection when tied.
double decode_weight_bytes(const LoadedModel& model) {
  static constexpr Role kPerLayer[] = {Role::SelfQuery,   Role::SelfKey,       Role::SelfValue,     Role::SelfOutput,
                                       Role::SelfNorm,    Role::CrossQuery,    Role::CrossOutput,   Role::CrossNorm,
                                       Role::FeedForwardIn, Role::FeedForwardUp, Role::FeedForwardOut, Role::FeedForwardNorm};
  static constexpr Role kOnce[] = {Role::EmbeddingNorm, Role::FinalNorm, Role::FinalLogitsBias};
  Index elements = 0;
  for (Index layer = 0; layer < model.config().decoder_layers; ++layer)
    for (const Role role : kPerLayer)
      for (const Part part : {Part::Weight, Part::Bias})
        elements += weight_elements(model, Stack::Decoder, role, part, layer);
  for (const Role role : kOnce)
    for (const Part part : {Part::Weight, Part::Bias}) elements += weight_elements(model, Stack::Decoder, role, part);
  const Index head = weight_elements(model, Stack::Decoder, Role::OutputHead, Part::Weight);
  elements += head > 0 ? head : weight_elements(model, Stack::Decoder, Role::TokenEmbedding, Part::Weight);
  return static_cast<double>(elements) * sizeof(float);
}

// FLOPs of the encode phase's matrix products (2 per multiply-add): every linear layer
// of the stack on B*S rows, attention's q k^T and p v (a causal prefill counts the
// S(S+1)/2 query-key pairs it needs), and for a prefill the output projection of each
// prompt's last row. Norms, activations and softmax are not counted.
double encode_flops(const LoadedModel& model, Index batch, Index length) {
  static constexpr Role kLinears[] = {Role::SelfQuery,     Role::SelfKey,       Role::SelfValue,
                                      Role::SelfOutput,    Role::FeedForwardIn, Role::FeedForwardUp,
                                      Role::FeedForwardOut};
  const bool prefill = !model.config().has_encoder();
  const Stack stack = prefill ? Stack::Decoder : Stack::Encoder;
  const Index layers = prefill ? model.config().decoder_layers : model.config().encoder_layers;
  const double rows = static_cast<double>(batch * length);
  const double pairs = prefill ? batch * (length * (length + 1) / 2.0) : static_cast<double>(batch * length * length);
  double flops = 0;
  for (Index layer = 0; layer < layers; ++layer) {
    for (const Role role : kLinears) flops += 2.0 * rows * static_cast<double>(weight_elements(model, stack, role, Part::Weight, layer));
    const Index query_width = weight_elements(model, stack, Role::SelfQuery, Part::Weight, layer) / model.config().d_model;
    flops += 4.0 * pairs * static_cast<double>(query_width);
  }
  if (prefill) {
    const Index head = weight_elements(model, Stack::Decoder, Role::OutputHead, Part::Weight);
    flops += 2.0 * static_cast<double>(batch) *
             static_cast<double>(head > 0 ? head : weight_elements(model, Stack::Decoder, Role::TokenEmbedding, Part::Weight));
  }
  return flops;
}

// ---- choosing the next tokens ----

// The next input of every sequence: the argmax of its logits (beam 1), or a fixed beam
// step: per source, the K best of score + log_softmax over every live beam's V
// continuations (ties: the earlier beam, then the lower id).
class NextTokens {
 public:
  NextTokens(Index sources, Index beam) : sources_(sources), beam_(beam) {}

  // `live` beams per source to start with: scores 0 for the first, -inf for the rest,
  // so that a first step from K identical beams expands only one.
  void reset(Index live) {
    scores_.assign(static_cast<std::size_t>(sources_ * live), 0.0f);
    for (std::size_t i = 0; i < scores_.size(); ++i)
      if (i % static_cast<std::size_t>(live) != 0) scores_[i] = -std::numeric_limits<float>::infinity();
  }

  // logits [sources * live, V] (clobbered) -> tokens() [sources * K], parents() for
  // DecoderState::reorder (beam > 1).
  void choose(MatrixRef logits) {
    if (beam_ == 1) return argmax(logits);
    beam_step(logits);
  }

  const std::vector<int>& tokens() const { return tokens_; }
  const std::vector<Index>& parents() const { return parents_; }

 private:
  struct Candidate {
    float total;
    Index row;
    int token;
  };
  static bool better(const Candidate& a, const Candidate& b) {
    if (a.total != b.total) return a.total > b.total;
    return a.row != b.row ? a.row < b.row : a.token < b.token;
  }

  void argmax(ConstMatrixRef logits) {
    tokens_.resize(static_cast<std::size_t>(logits.rows()));
    for (Index r = 0; r < logits.rows(); ++r) {
      const auto row = logits.row(r);
      tokens_[static_cast<std::size_t>(r)] = static_cast<int>(std::max_element(row.begin(), row.end()) - row.begin());
    }
  }

  // The K best candidates of one row, appended to candidates_: score + the K largest
  // log-probabilities (a beam can contribute at most K survivors).
  void best_of_row(std::span<const float> row, Index r, float score) {
    const std::size_t first = candidates_.size();
    for (std::size_t v = 0; v < row.size(); ++v) {
      const Candidate c{score + row[v], r, static_cast<int>(v)};
      if (candidates_.size() - first == static_cast<std::size_t>(beam_) && !better(c, candidates_.back())) continue;
      if (candidates_.size() - first == static_cast<std::size_t>(beam_)) candidates_.pop_back();
      auto at = std::upper_bound(candidates_.begin() + static_cast<std::ptrdiff_t>(first), candidates_.end(), c, better);
      candidates_.insert(at, c);
    }
  }

  void beam_step(MatrixRef logits) {
    ops::log_softmax_rows(logits);
    const Index live = logits.rows() / sources_;
    tokens_.clear();
    parents_.clear();
    next_scores_.clear();
    for (Index b = 0; b < sources_; ++b) {
      candidates_.clear();
      for (Index r = b * live; r < (b + 1) * live; ++r) best_of_row(logits.row(r), r, scores_[static_cast<std::size_t>(r)]);
      std::partial_sort(candidates_.begin(), candidates_.begin() + beam_, candidates_.end(), better);
      for (Index k = 0; k < beam_; ++k) {
        const Candidate& c = candidates_[static_cast<std::size_t>(k)];
        tokens_.push_back(c.token);
        parents_.push_back(c.row);
        next_scores_.push_back(c.total);
      }
    }
    scores_.swap(next_scores_);
  }

  Index sources_, beam_;
  std::vector<float> scores_, next_scores_;
  std::vector<int> tokens_;
  std::vector<Index> parents_;
  std::vector<Candidate> candidates_;
};

// ---- the workload ----

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Encode and decode of one fixed batch, reusing every buffer across repetitions as a
// server would.
class Workload {
 public:
  Workload(const Transformer& model, const BenchOptions& options)
      : model_(model),
        batch_(options.batch),
        length_(options.src_len),
        steps_(options.new_tokens),
        beam_(options.beam),
        ids_(random_sources(batch_, length_, model.decoder_only() ? model.decoder.vocab_size()
                                                                  : model.encoder->embedding().vocab_size())),
        first_steps_(static_cast<std::size_t>(batch_), 0),
        lengths_(static_cast<std::size_t>(batch_), length_),
        next_(batch_, beam_) {
    memory_.lengths = lengths_;
    memory_.rows_per_source = length_;
    for (Index b = 0; b < batch_; ++b)
      for (Index k = 0; k < (model.decoder_only() ? 1 : beam_); ++k) source_of_.push_back(b);
    history_.resize(static_cast<std::size_t>(steps_));
  }

  // Seconds of each phase.
  double encode() {
    const auto start = Clock::now();
    if (model_.decoder_only())
      prefill();
    else
      model_.encoder->encode(ids_, BatchRows{length_, first_steps_, lengths_}, encoder_, memory_.states);
    return seconds_since(start);
  }

  double decode() {
    const auto start = Clock::now();
    if (!model_.decoder_only()) {
      model_.decoder.start(state_, memory_, source_of_, batch_ * beam_, steps_);
      next_.reset(beam_);
      inputs_.assign(static_cast<std::size_t>(batch_ * beam_), model_.tokens.decoder_start);
    }
    for (Index step = 0; step < steps_; ++step) {
      model_.decoder.step(state_, inputs_, logits_);
      next_.choose(logits_);
      inputs_ = next_.tokens();
      auto& [tokens, parents] = history_[static_cast<std::size_t>(step)];
      tokens = next_.tokens();  // copies into kept capacity: no allocation after the first run
      parents = next_.parents();
      if (beam_ > 1 && step + 1 < steps_) state_.reorder(next_.parents());
    }
    return seconds_since(start);
  }

  // The decode phase's tokens of the best final sequence (sequence 0), followed back
  // through its parents: a fingerprint to compare engines by.
  std::vector<int> best_sequence() const {
    std::vector<int> ids(static_cast<std::size_t>(steps_));
    Index at = 0;
    for (Index step = steps_ - 1; step >= 0; --step) {
      const auto& [tokens, parents] = history_[static_cast<std::size_t>(step)];
      ids[static_cast<std::size_t>(step)] = tokens[static_cast<std::size_t>(at)];
      if (beam_ > 1) at = parents[static_cast<std::size_t>(at)];
    }
    return ids;
  }

 private:
  // Decoder-only: the prompts in one pass, their last-row logits, the first tokens (and
  // with a beam, K copies of each prompt's cache).
  void prefill() {
    model_.decoder.start(state_, source_of_, batch_ * beam_, length_ + steps_);
    model_.decoder.feed(state_, ids_, length_, lengths_, logits_, Decoder::Logits::LastRow);
    next_.reset(1);
    next_.choose(logits_);
    inputs_ = next_.tokens();
    if (beam_ > 1) state_.reorder(next_.parents());
  }

  const Transformer& model_;
  Index batch_, length_, steps_, beam_;
  std::vector<int> ids_;
  std::vector<Index> first_steps_, lengths_, source_of_;
  EncoderWorkspace encoder_;
  EncodedBatch memory_;
  DecoderState state_;
  Matrix logits_;
  std::vector<int> inputs_;
  NextTokens next_;
  std::vector<std::pair<std::vector<int>, std::vector<Index>>> history_;  // per step: tokens, parents
};

// ---- probes of the machine ----

constexpr Index kGemmSize = 1024;                       // n of the n x n x n probe
constexpr std::size_t kStreamBytes = std::size_t{256} << 20;  // 8x a 32 MB L3

// GFLOP/s of a plain [n, n] x [n, n]^T sgemm through ordo's BLAS door, three times.
double gemm_gflops(Matrix& a, Matrix& b, Matrix& c) {
  const auto start = Clock::now();
  for (int i = 0; i < 3; ++i) blas::gemm_nt(a, b, c);
  return 3 * 2.0 * std::pow(static_cast<double>(kGemmSize), 3) / seconds_since(start) / 1e9;
}

// GB/s of one read of `buffer` split across `threads` threads, each summing its share
// (integer sums vectorize without -ffast-math).
double bandwidth_gbs(const std::vector<std::uint64_t>& buffer, int threads) {
  std::vector<std::uint64_t> sums(static_cast<std::size_t>(threads));
  const std::size_t share = buffer.size() / static_cast<std::size_t>(threads);
  const auto sum = [&](int t) {
    const std::uint64_t* p = buffer.data() + static_cast<std::size_t>(t) * share;
    std::uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (std::size_t i = 0; i + 4 <= share; i += 4) {
      s0 += p[i];
      s1 += p[i + 1];
      s2 += p[i + 2];
      s3 += p[i + 3];
    }
    sums[static_cast<std::size_t>(t)] = s0 + s1 + s2 + s3;
  };
  const auto start = Clock::now();
  std::vector<std::thread> workers;
  for (int t = 1; t < threads; ++t) workers.emplace_back(sum, t);
  sum(0);
  for (std::thread& w : workers) w.join();
  const double seconds = seconds_since(start);
  volatile std::uint64_t sink = 0;  // the sums must be computed
  for (const std::uint64_t s : sums) sink = sink + s;
  return static_cast<double>(share * static_cast<std::size_t>(threads) * sizeof(std::uint64_t)) / seconds / 1e9;
}

// Peak resident set of this process, MB: VmHWM, or getrusage where /proc is missing.
double peak_rss_mb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.starts_with("VmHWM:")) return std::stod(line.substr(6)) / 1024.0;
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2.0;
}

// ---- the command ----

struct Results {
  std::vector<double> load_s, encode_s, decode_s, gemm_gflops, bandwidth_gbs;
  double peak_rss_mb = 0;
  double weight_bytes = 0, flops = 0;
  std::vector<int> sample_ids;
};

// Loads the model warmup + repeats times, timing each (directory open to ready);
// returns the last. Load warnings are printed once.
std::shared_ptr<const LoadedModel> timed_loads(const fs::path& dir, const BenchOptions& options, Results& results) {
  std::shared_ptr<const LoadedModel> model;
  for (int i = 0; i < options.warmup + options.repeats; ++i) {
    model.reset();  // one model at a time: the peak RSS is one model's
    const auto start = Clock::now();
    model = LoadedModel::load(dir, i == 0 ? LoadedModel::WarningHandler(LoadedModel::print_warning) : [](const std::string&) {});
    if (i >= options.warmup) results.load_s.push_back(seconds_since(start));
  }
  return model;
}

// Lengths the model cannot run are usage errors naming the flag.
void check_lengths(const Transformer& model, const BenchOptions& options) {
  const auto limit = [](Index positions) { return std::min(positions, kMaxSequenceLength); };
  if (model.decoder_only()) {
    const Index most = limit(model.decoder.max_steps());
    if (options.src_len + options.new_tokens > most)
      throw CLI::ValidationError("--src-len/--new-tokens", "a prompt of " + std::to_string(options.src_len) + " plus " +
                                                               std::to_string(options.new_tokens) + " new tokens is more than the " +
                                                               std::to_string(most) + " positions this model has");
  } else {
    const Index source_most = limit(model.encoder->embedding().max_steps());
    if (options.src_len > source_most)
      throw CLI::ValidationError("--src-len", std::to_string(options.src_len) + " is more than the " +
                                                  std::to_string(source_most) + " source positions this model has");
    const Index target_most = limit(model.decoder.max_steps());
    if (options.new_tokens > target_most)
      throw CLI::ValidationError("--new-tokens", std::to_string(options.new_tokens) + " is more than the " +
                                                     std::to_string(target_most) + " target positions this model has");
  }
  if (options.beam > model.decoder.vocab_size())
    throw CLI::ValidationError("--beam", std::to_string(options.beam) + " is more than the " +
                                             std::to_string(model.decoder.vocab_size()) + " tokens of the vocabulary");
}

void run_workload(const LoadedModel& model, const BenchOptions& options, Results& results) {
  Workload workload(model.transformer(), options);
  // Drawn between runs, outside the timed phases, and only on a terminal's stderr.
  const auto runs = static_cast<std::size_t>(options.warmup + options.repeats);
  ProgressBar bar("bench", "runs", runs, stderr_is_terminal());
  for (int i = 0; i < options.warmup + options.repeats; ++i) {
    const double encode = workload.encode();
    const double decode = workload.decode();
    bar.advance(1, static_cast<std::size_t>(options.batch * options.new_tokens));
    if (i < options.warmup) continue;
    results.encode_s.push_back(encode);
    results.decode_s.push_back(decode);
  }
  bar.finish();
  results.sample_ids = workload.best_sequence();
}

// After the workload, so that the probes' buffers are not in its peak RSS. The reads
// come first, all together, after a pause: OpenBLAS's threads spin for about 0.1 s after
// each call before they sleep, and a spinning thread on a core the read needs cost it a
// fifth of its rate on a 2-core machine.
void run_probes(const BenchOptions& options, Results& results) {
  std::vector<std::uint64_t> stream(kStreamBytes / sizeof(std::uint64_t));
  for (std::size_t i = 0; i < stream.size(); ++i) stream[i] = i;  // touch every page first
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  for (int i = 0; i < options.warmup + options.repeats; ++i) {
    const double gbs = bandwidth_gbs(stream, options.threads);
    if (i >= options.warmup) results.bandwidth_gbs.push_back(gbs);
  }
  Matrix a(kGemmSize, kGemmSize), b(kGemmSize, kGemmSize), c(kGemmSize, kGemmSize);
  for (Index i = 0; i < kGemmSize * kGemmSize; ++i) {
    a.data()[i] = static_cast<float>(i % 7) * 0.25f;
    b.data()[i] = static_cast<float>(i % 5) * 0.5f;
  }
  for (int i = 0; i < options.warmup + options.repeats; ++i) {
    const double gflops = gemm_gflops(a, b, c);
    if (i >= options.warmup) results.gemm_gflops.push_back(gflops);
  }
}

nlohmann::json report_json(const LoadedModel& model, const std::string& name, const BenchOptions& options, const Results& r) {
  const double tokens_in = static_cast<double>(options.batch * options.src_len);
  const double tokens_out = static_cast<double>(options.batch * options.new_tokens);
  const double bandwidth = median(r.bandwidth_gbs);
  return {{"engine", "ordo"},
          {"model", name},
          {"decoder_only", model.transformer().decoder_only()},
          {"batch", options.batch},
          {"src_len", options.src_len},
          {"new_tokens", options.new_tokens},
          {"beam", options.beam},
          {"threads", options.threads},
          {"repeats", options.repeats},
          {"warmup", options.warmup},
          {"load_s", median(r.load_s)},
          {"encode_tok_s", tokens_in / median(r.encode_s)},
          {"decode_tok_s", tokens_out / median(r.decode_s)},
          {"peak_rss_mb", r.peak_rss_mb},
          {"gemm_gflops", median(r.gemm_gflops)},
          {"encode_gflops", r.flops / median(r.encode_s) / 1e9},
          {"bandwidth_gbs", bandwidth},
          {"decode_bound_tok_s", bandwidth * 1e9 / r.weight_bytes},
          {"decode_weight_bytes", r.weight_bytes},
          {"encode_flops", r.flops},
          {"sample_ids", r.sample_ids}};
}

void print_table(const nlohmann::json& j, std::ostream& out) {
  const auto num = [&](const char* key, int precision) {
    std::ostringstream s;
    s << std::fixed << std::setprecision(precision) << j[key].get<double>();
    return s.str();
  };
  out << "ordo bench: " << j["model"].get<std::string>() << (j["decoder_only"].get<bool>() ? " (decoder-only)" : "")
      << "\n  batch " << j["batch"] << ", " << (j["decoder_only"].get<bool>() ? "prompt " : "source ") << j["src_len"]
      << " tokens, " << j["new_tokens"] << " new tokens, beam " << j["beam"] << ", " << j["threads"]
      << " threads; medians of " << j["repeats"] << " runs after " << j["warmup"] << " warm-up\n\n";
  const std::vector<std::vector<std::string>> rows = {
      {"load", num("load_s", 4) + " s", "directory open to ready"},
      {"encode", num("encode_tok_s", 1) + " tok/s", num("encode_gflops", 2) + " GFLOP/s of matrix products"},
      {"decode", num("decode_tok_s", 1) + " tok/s", "generated tokens, all sequences of the batch"},
      {"decode bound", num("decode_bound_tok_s", 1) + " tok/s",
       "per sequence: bandwidth / " + num("decode_weight_bytes", 0) + " bytes of weights per step"},
      {"sgemm", num("gemm_gflops", 2) + " GFLOP/s", std::to_string(kGemmSize) + "^3, the compute ceiling"},
      {"bandwidth", num("bandwidth_gbs", 2) + " GB/s", "streaming read of 256 MB"},
      {"peak RSS", num("peak_rss_mb", 1) + " MB", "before the probes"},
  };
  for (const auto& row : rows)
    out << "  " << std::left << std::setw(14) << row[0] << std::right << std::setw(20) << row[1] << "   " << row[2] << '\n';
}

void run_bench(const BenchOptions& options) {
  threads::set_count(options.threads);
  Results results;
  std::shared_ptr<const LoadedModel> model;
  {
    std::optional<ScratchModel> scratch;
    if (!options.shape.empty()) scratch.emplace(options.shape, shape_config(options.shape));
    model = timed_loads(scratch ? scratch->dir() : fs::path(options.model_dir), options, results);
  }  // a scratch directory is gone now; its mapping stays valid
  check_lengths(model->transformer(), options);
  results.weight_bytes = decode_weight_bytes(*model);
  results.flops = encode_flops(*model, options.batch, options.src_len);
  run_workload(*model, options, results);
  results.peak_rss_mb = peak_rss_mb();
  run_probes(options, results);

  const std::string name = options.shape.empty() ? options.model_dir : options.shape + " (random, in memory)";
  const nlohmann::json report = report_json(*model, name, options, results);
  if (options.json)
    print_json_line(report);
  else
    print_table(report, std::cout);
}

}  // namespace

void setup_bench(CLI::App& app) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* command = app.add_subcommand(
      "bench",
      "Measure load, encode and decode speed on a fixed random batch (exactly --new-tokens\n"
      "decoder steps, eos ignored), next to this machine's sgemm rate and memory bandwidth.\n"
      "Give --model DIR, or --shape for a random model built in memory: base (Marian base,\n"
      "encoder-decoder) or llama (decoder-only, LLaMA layout, 99,496,704 parameters).");
  const auto positive = CLI::Range(Index{1}, Index{1} << 20);
  auto* model = command
                    ->add_option("-m,--model", options->model_dir,
                                 "Model directory to measure, or a shipped model's name")
                    ->transform(shipped_model_transform())
                    ->type_name("DIR");
  command
      ->add_option("--shape", options->shape,
                   "A random model of this shape instead of --model: base (Marian base: d 512, 6+6 layers, 8 heads,\n"
                   "FFN 2048, vocab 32000, tied) or llama (hidden 768, 8 layers, 12 heads over 4 K/V heads,\n"
                   "SwiGLU 2048, vocab 32000, untied lm_head: 99,496,704 parameters; --src-len is the prompt)")
      ->check(CLI::Validator(
          [](const std::string& s) {
            return s == "base" || s == "llama" ? "" : "'" + s + "' is not a known shape (known: base, llama)";
          },
          "base|llama"))
      ->excludes(model);
  command->add_option("--batch", options->batch, "Sources (prompts) decoded together")->check(positive)->capture_default_str();
  command->add_option("--src-len", options->src_len, "Tokens per source (prompt)")->check(positive)->capture_default_str();
  command->add_option("--new-tokens", options->new_tokens, "Decoder steps per sequence")->check(positive)->capture_default_str();
  command->add_option("--beam", options->beam, "Sequences per source (1: greedy)")->check(CLI::Range(Index{1}, Index{1024}))->capture_default_str();
  command->add_option("-t,--threads", options->threads, "Threads for BLAS and the bandwidth probe")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  command->add_option("--repeats", options->repeats, "Measured runs; medians are reported")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  command->add_option("--warmup", options->warmup, "Unmeasured runs first")->check(CLI::Range(0, 1000))->capture_default_str();
  command->add_flag("--json", options->json, "One JSON object instead of the table");
  command->callback([options, command] {
    if (options->shape.empty() && !given(*command, "--model"))
      throw CLI::ValidationError("--model", "give a model directory, or --shape base|llama for a random one");
    run_bench(*options);
  });
}

}  // namespace ordo::tools
