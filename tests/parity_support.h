// What the two parity suites (test_parity.cpp, test_generation_parity.cpp) share: the
// oracle's output directory, reading its JSON, and its beam-search cases.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/decoding_options.h"
#include "engine/search.h"

namespace ordo::testing_support {

inline std::filesystem::path parity_dir() { return ORDO_PARITY_DIR; }

// A file the oracle wrote; a missing one says how to make it.
inline nlohmann::json read_oracle_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error(path.string() + " is missing: the oracle has not run (ctest runs it as the fixture "
                             "'oracle'; or run /usr/bin/python3 tools/oracle/make_parity_models.py --out " +
                             parity_dir().string() + ")");
  return nlohmann::json::parse(in);
}

// The options of one of the oracle's beam cases.
inline DecodingOptions beam_case_options(const nlohmann::json& c) {
  DecodingOptions options;
  options.beam_size = c.at("beam_size").get<Index>();
  options.n_best = c.at("n_best").get<Index>();
  options.length_penalty = c.at("length_penalty").get<double>();
  options.max_length = c.at("max_length").get<Index>();
  options.min_length = c.at("min_length").get<Index>();
  return options;
}

// ordo's hypotheses against the oracle's: same ids in the same order, same finished
// flags, scores within 1e-4 (ordo's float32 against the oracle's float64; a score sums
// up to 10 token log-probabilities whose float32 errors (test_parity.cpp derives them)
// partly cancel; worst measured 3.4e-5 to 6.9e-5 with OpenBLAS's Cooperlake, Prescott
// and Haswell kernels). Quantized models pass a wider tolerance (test_quantized_parity.cpp).
inline void expect_oracle_hypotheses(const std::vector<Hypothesis>& got, const nlohmann::json& want,
                                     double tolerance = 1e-4) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t k = 0; k < got.size(); ++k) {
    SCOPED_TRACE("hypothesis " + std::to_string(k));
    EXPECT_EQ(got[k].ids, want[k].at("ids").get<std::vector<int>>());
    EXPECT_NEAR(got[k].score, want[k].at("score").get<double>(), tolerance);
    EXPECT_NEAR(got[k].normalized_score, want[k].at("normalized_score").get<double>(), tolerance);
    EXPECT_EQ(got[k].finished, want[k].at("finished").get<bool>());
  }
}

}  // namespace ordo::testing_support
