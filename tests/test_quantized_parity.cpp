// Quantized models against the PyTorch oracle on their dequantized weights: the kernels
// proven exact, apart from the quantization error (issue 23).
//
// tools/oracle/make_parity_models.py writes the `quantized_models` of its index: every
// family (ordo's encoder-decoders with every position scheme, decoder-only ordo, LLaMA,
// Marian, M2M100/NLLB, T5), stored int8 with a scale a row or groups of 8, and int4 in
// groups of 32 (README, "Quantized weights"; one LLaMA model with a 48-wide width whose
// matrices the int4 directory stores int8, a scale a row). The oracle quantizes the random weights
// itself (tools/oracle/ordo_torch/quantization.py, written from the README's layout),
// reads the files back and computes in float64 with the exact products q x scale; ordo
// runs the files as stored, through its int8 and int4 kernels.
//
// Tolerances: those of test_parity.cpp (which derives them from float32's error), since
// what differs from the oracle is float32 rounding alone:
//   - from two rows on (prefill, scoring, batches, beams) ordo dequantizes into float32
//     (q x scale rounded once, as an F32 file would have stored it) and runs its float
//     path;
//   - at one row (a decode step of one sequence: greedy and sampled decoding here) it
//     sums q x x over a group in float32 and scales the sum once: per weight one product
//     rounded instead of two, per group one multiplication more. A dot product of n
//     terms then carries the same ~sqrt(n) u |x||w| error as the float path's, so the
//     same 1e-4 per log-probability holds; the test prints the worst seen.
// So: log-probabilities within 1e-4 absolute, encoder outputs within 1e-4, greedy and
// beam ids identical (the oracle keeps only decisions with margins >= 1e-2 and >= 1e-3
// on the dequantized model), beam scores within 1e-4.
//
// Sampling has no oracle (the generator is ordo's); each quantized model is sampled with
// a seed and compared with its `-dequantized` twin, the float32 file of fl32(q x scale):
// the same tokens and log-probabilities within 1e-4 (a draw lands within 1e-4 of a
// cumulative boundary with probability ~1e-4 a token; the seeds are fixed).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <span>

#include <nlohmann/json.hpp>

#include "engine/decode_inputs.h"
#include "engine/score.h"
#include "engine/search.h"
#include "models/loaded_model.h"
#include "models/safetensors.h"
#include "ordo/quantize.hpp"
#include "tests/parity_support.h"
#include "tests/reference.h"

namespace ordo {
namespace {

using testing_support::parity_dir;
const auto& read_json = testing_support::read_oracle_json;

std::vector<std::string> quantized_models() {
  return read_json(parity_dir() / "index.json").at("quantized_models").get<std::vector<std::string>>();
}

std::vector<int> ids_of(const nlohmann::json& j) { return j.get<std::vector<int>>(); }

// A case's encoder input and forced decoder input: an encoder-decoder reads its source,
// a decoder-only model continues its prompt.
DecodeRequest request_of(const nlohmann::json& c) {
  if (c.contains("source_ids")) return {ids_of(c.at("source_ids")), {}};
  return {{}, ids_of(c.at("prompt_ids"))};
}

std::vector<DecodeResult> run(const Transformer& t, const std::vector<DecodeRequest>& requests,
                              const DecodingOptions& options, std::span<const std::uint64_t> streams = {}) {
  DecodeWorkspace workspace;
  return decode_requests(t, requests, options, streams, workspace);
}

double worst_difference(std::span<const float> got, const std::vector<double>& want) {
  double worst = 0;
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i)
    worst = std::max(worst, std::abs(got[i] - want[i]));
  return worst;
}

TEST(QuantizedParity, OracleCoversEveryFamilySchemeAndFormat) {
  std::set<std::string> kinds;
  for (const std::string& name : quantized_models()) {
    SCOPED_TRACE(name);
    const auto model = LoadedModel::load(parity_dir() / name);
    const ModelConfig& c = model->config();
    const nlohmann::json reference = read_json(parity_dir() / name / "reference.json");
    const nlohmann::json& q = reference.at("quantization");
    const std::string format =
        q.at("type").get<std::string>() + (q.at("group_size").get<int>() == 0 ? " rows" : " groups");
    kinds.insert(format);
    kinds.insert(std::string(family_name(c.family)) + (c.has_encoder() ? "" : " decoder-only"));
    if (c.family == Family::Ordo) kinds.insert(std::string(position_encoding_name(c.position_encoding)));
    if (model->weights().files().size() > 1) kinds.insert("sharded");
    // Its matrices run as stored: the oracle's quantized files reach ordo's quantized kernels.
    const std::string formats = model->weights().matrix_formats();
    EXPECT_NE(formats.find(q.at("type").get<std::string>()), std::string::npos) << formats;
    // An int4 directory with int8 fallbacks (a width int4 cannot pack) beside its int4 matrices.
    if (format == "int4 groups" && formats.find("int8 (a scale per row)") != std::string::npos)
      kinds.insert("int4 mixed");
  }
  for (const char* want : {"int8 rows", "int8 groups", "int4 groups", "int4 mixed", "ordo", "ordo decoder-only",
                           "llama decoder-only", "marian", "t5", "m2m_100", "sinusoidal", "learned", "rope", "alibi",
                           "t5_relative", "none", "sharded"})
    EXPECT_TRUE(kinds.contains(want)) << "no quantized oracle model covers " << want;
}

TEST(QuantizedParity, EveryModelScoresEncodesAndDecodesAsTheOracle) {
  double worst_logprob = 0, worst_encoder = 0;
  std::string worst_model;
  std::size_t tokens = 0, models = 0;
  for (const std::string& name : quantized_models()) {
    SCOPED_TRACE("model " + name);
    const auto model = LoadedModel::load(parity_dir() / name);
    const Transformer& t = model->transformer();
    const nlohmann::json reference = read_json(parity_dir() / name / "reference.json");
    ASSERT_FALSE(reference.at("cases").empty());
    for (const nlohmann::json& c : reference.at("cases")) {
      const DecodeRequest request = request_of(c);
      SCOPED_TRACE("case " + c.dump().substr(0, 100));
      std::vector<int> target = c.contains("target_ids") ? ids_of(c.at("target_ids")) : request.prefix;
      if (c.contains("continuation_ids")) {
        const std::vector<int> continuation = ids_of(c.at("continuation_ids"));
        target.insert(target.end(), continuation.begin(), continuation.end());
      }
      const auto want = c.at("token_logprobs").get<std::vector<double>>();
      const std::vector<float> got = score_target(t, request.source, target);
      reference::expect_close(got, want, 1e-4, 0.0);
      if (const double e = worst_difference(got, want); e > worst_logprob) {
        worst_logprob = e;
        worst_model = name;
      }
      tokens += got.size();

      if (c.contains("encoder_output")) {
        const auto rows = c.at("encoder_output").get<std::vector<std::vector<double>>>();
        const Matrix encoded = encode(t, request.source);
        ASSERT_EQ(static_cast<std::size_t>(encoded.rows()), rows.size());
        for (std::size_t r = 0; r < rows.size(); ++r) {
          reference::expect_close(encoded.row(static_cast<Index>(r)), rows[r], 1e-4, 0.0);
          worst_encoder = std::max(worst_encoder, worst_difference(encoded.row(static_cast<Index>(r)), rows[r]));
        }
      }

      DecodingOptions greedy;  // one sequence: every step is a one-row (batch-1) product
      greedy.max_length = c.at("greedy_max_length").get<Index>();
      const DecodeResult decoded = run(t, {request}, greedy).front();
      ASSERT_TRUE(decoded.ok()) << decoded.error;
      EXPECT_EQ(decoded.hypotheses.front().ids, ids_of(c.at("greedy_ids")));
    }
    ++models;
  }
  EXPECT_GE(models, 20u);
  std::cout << "[ parity ] " << models << " quantized models, " << tokens << " scored tokens: worst |log-prob error| "
            << worst_logprob << " (" << worst_model << "), worst |encoder output error| " << worst_encoder << '\n';
}

TEST(QuantizedParity, BatchesMatchTheOraclesBatches) {
  for (const std::string& name : quantized_models()) {
    SCOPED_TRACE("model " + name);
    const auto model = LoadedModel::load(parity_dir() / name);
    const Transformer& t = model->transformer();
    const nlohmann::json batch = read_json(parity_dir() / name / "reference.json").at("batch");
    const bool seq2seq = batch.contains("sources");
    const auto inputs = batch.at(seq2seq ? "sources" : "prompts").get<std::vector<std::vector<int>>>();
    const auto scored_inputs = batch.at(seq2seq ? "targets" : "sequences").get<std::vector<std::vector<int>>>();
    const auto want_logprobs = batch.at("token_logprobs").get<std::vector<std::vector<double>>>();
    const auto want_ids = batch.at("greedy_ids").get<std::vector<std::vector<int>>>();

    const std::vector<std::vector<int>> no_sources;
    const std::vector<Score> scored = score_batch(t, seq2seq ? inputs : no_sources, scored_inputs);
    std::vector<DecodeRequest> requests;
    for (const auto& input : inputs) requests.push_back(seq2seq ? DecodeRequest{input, {}} : DecodeRequest{{}, input});
    DecodingOptions greedy;
    greedy.max_length = batch.at("greedy_max_length").get<Index>();
    const std::vector<DecodeResult> decoded = run(t, requests, greedy);
    ASSERT_EQ(scored.size(), inputs.size());
    ASSERT_EQ(decoded.size(), inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      SCOPED_TRACE("batch entry " + std::to_string(i));
      ASSERT_TRUE(scored[i].ok()) << scored[i].error;
      reference::expect_close(scored[i].token_logprobs, want_logprobs[i], 1e-4, 0.0);
      ASSERT_TRUE(decoded[i].ok()) << decoded[i].error;
      EXPECT_EQ(decoded[i].hypotheses.front().ids, want_ids[i]);
    }
  }
}

TEST(QuantizedParity, BeamSearchMatchesTheOraclesBeamSearch) {
  std::size_t cases = 0;
  for (const std::string& name : quantized_models()) {
    SCOPED_TRACE("model " + name);
    const auto model = LoadedModel::load(parity_dir() / name);
    const nlohmann::json reference = read_json(parity_dir() / name / "reference.json");
    for (const nlohmann::json& c : reference.at("beam")) {
      SCOPED_TRACE("beam case " + c.dump().substr(0, 120));
      const DecodeResult got =
          run(model->transformer(), {request_of(c)}, testing_support::beam_case_options(c)).front();
      ASSERT_TRUE(got.ok()) << got.error;
      testing_support::expect_oracle_hypotheses(got.hypotheses, c.at("hypotheses"));
      ++cases;
    }
  }
  EXPECT_GE(cases, 60u);
}

TEST(QuantizedParity, SamplingWithASeedDrawsWhatTheDequantizedTwinDraws) {
  const auto twins = read_json(parity_dir() / "index.json").at("dequantized_twins").get<std::map<std::string, std::string>>();
  ASSERT_EQ(twins.size(), quantized_models().size());
  std::size_t tokens = 0;
  for (const auto& [twin, name] : twins) {
    SCOPED_TRACE("model " + name + " against " + twin);
    const auto quantized = LoadedModel::load(parity_dir() / name);
    const auto plain = LoadedModel::load(parity_dir() / twin);
    EXPECT_EQ(plain->weights().matrix_formats().find("int"), std::string::npos) << "the twin is float";
    std::vector<DecodeRequest> requests;
    const nlohmann::json reference = read_json(parity_dir() / name / "reference.json");
    for (const nlohmann::json& c : reference.at("cases")) requests.push_back(request_of(c));
    DecodingOptions sampling;
    sampling.sample = true;
    sampling.seed = 11;
    sampling.max_length = 10;
    for (const bool one_at_a_time : {true, false}) {  // one-row steps, and a batch
      std::vector<DecodeResult> got, want;
      if (one_at_a_time) {
        for (std::size_t i = 0; i < requests.size(); ++i) {
          // Request i alone, with its generator stream (i) as in the batch.
          const std::uint64_t stream[] = {i};
          got.push_back(run(quantized->transformer(), {requests[i]}, sampling, stream).front());
          want.push_back(run(plain->transformer(), {requests[i]}, sampling, stream).front());
        }
      } else {
        got = run(quantized->transformer(), requests, sampling);
        want = run(plain->transformer(), requests, sampling);
      }
      for (std::size_t i = 0; i < requests.size(); ++i) {
        SCOPED_TRACE(std::string(one_at_a_time ? "alone" : "batched") + ", case " + std::to_string(i));
        ASSERT_TRUE(got[i].ok() && want[i].ok()) << got[i].error << want[i].error;
        const Hypothesis& g = got[i].hypotheses.front();
        const Hypothesis& w = want[i].hypotheses.front();
        EXPECT_EQ(g.ids, w.ids);
        reference::expect_close(g.token_logprobs, std::vector<double>(w.token_logprobs.begin(), w.token_logprobs.end()),
                                1e-4, 0.0);
        tokens += g.ids.size();
      }
    }
  }
  EXPECT_GE(tokens, 200u);
}

// Two quantizers written apart from one text (README's layout): the oracle's, in Python,
// and `ordo quantize`. Re-quantizing a model's float twin (fl32 of q x scale) gives back q
// and the scale exactly (int4: q x scale is exact in float32; int8: the scale comes back
// from fl32(127 x scale) / 127, checked here), so ordo must write, tensor for tensor, the
// bytes the oracle wrote.
std::map<std::string, std::vector<std::byte>> tensor_bytes(const std::filesystem::path& dir) {
  std::map<std::string, std::vector<std::byte>> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".safetensors") continue;
    const SafetensorsFile file = SafetensorsFile::open(entry.path());
    for (const TensorInfo& info : file.tensors()) out[info.name].assign(info.bytes.begin(), info.bytes.end());
  }
  return out;
}

TEST(QuantizedParity, OrdoQuantizeWritesTheOraclesBytes) {
  const auto twins = read_json(parity_dir() / "index.json").at("dequantized_twins").get<std::map<std::string, std::string>>();
  const std::filesystem::path scratch = std::filesystem::path(::testing::TempDir()) / "ordo-quantized-parity";
  std::size_t tensors = 0;
  for (const auto& [twin, name] : twins) {
    SCOPED_TRACE("model " + name);
    const nlohmann::json q = read_json(parity_dir() / name / "reference.json").at("quantization");
    QuantizeOptions options;
    options.type = q.at("type") == "int8" ? ComputeType::Int8 : ComputeType::Int4;
    options.group_size = q.at("group_size").get<int>();
    std::filesystem::remove_all(scratch);
    quantize_model(parity_dir() / twin, scratch, options);
    const auto want = tensor_bytes(parity_dir() / name);
    const auto got = tensor_bytes(scratch);
    ASSERT_EQ(got.size(), want.size());
    for (const auto& [tensor, bytes] : want) {
      ASSERT_TRUE(got.contains(tensor)) << tensor;
      EXPECT_TRUE(got.at(tensor) == bytes) << tensor;
      ++tensors;
    }
  }
  std::filesystem::remove_all(scratch);
  EXPECT_GE(tensors, 500u);
}

}  // namespace
}  // namespace ordo
