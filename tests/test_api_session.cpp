// ordo::DecodeSession and the other public calls `ordo bench` is written with
// (Model::decode_step_bytes / encode_flops, vocabulary_size, max_output_tokens,
// model_layout, write_safetensors, matmul_nt), as a program sees them. Oracles: the
// library's own searches (a greedy session must choose exactly the tokens greedy
// translation and generation choose: the same model, the same kernels, so bit for bit),
// the model directory's own files, and a naive product in double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <unistd.h>
#include <sstream>
#include <string>
#include <vector>

#include <ordo/model_files.hpp>
#include <ordo/ordo.hpp>

namespace {

namespace fs = std::filesystem;

const fs::path kWeights = fs::path(ORDO_SOURCE_DIR) / "weights";

int argmax(std::span<const float> row) { return static_cast<int>(std::max_element(row.begin(), row.end()) - row.begin()); }

bool says(const std::function<void()>& call, const std::string& part) {
  try {
    call();
  } catch (const ordo::Error& e) {
    if (std::string(e.what()).find(part) != std::string::npos) return true;
    ADD_FAILURE() << "the message was: " << e.what();
    return false;
  }
  ADD_FAILURE() << "nothing was thrown";
  return false;
}

// Greedy steps through a session are greedy translation: the same ids, for two sources
// of different lengths decoded side by side (each padded batch row is a sequence).
TEST(ApiSession, GreedyStepsAreGreedyTranslation) {
  const ordo::Model model = ordo::Model::load(kWeights / "sinusoidal");
  ordo::Translator translator(model);
  for (const std::string text : {"cats chase dogs", "the old dog sees the small cat"}) {
    const std::vector<int> source = model.tokenize_source(text);
    const ordo::Translation expected = translator.translate_batch(std::vector<std::string>{text}).front();
    ASSERT_TRUE(expected.ok()) << expected.error;
    const std::vector<int>& want = expected.hypotheses.front().ids;

    ordo::DecodeSession session(model);
    session.encode(source, 1, static_cast<int>(source.size()));
    const int sequence[] = {0};
    session.start(sequence, 1, static_cast<int>(want.size()));
    std::vector<int> tokens{session.decoder_start_token()}, got;
    for (std::size_t t = 0; t < want.size(); ++t) {
      const ordo::Logits logits = session.step(tokens);
      ASSERT_EQ(logits.rows, 1);
      ASSERT_EQ(logits.cols, model.vocabulary_size());
      tokens[0] = argmax(logits.row(0));
      got.push_back(tokens[0]);
    }
    EXPECT_EQ(got, want) << text;
  }
}

// A decoder-only model: prefill the prompt, then step; the tokens are greedy generation's.
TEST(ApiSession, PrefillThenStepsIsGreedyGeneration) {
  const ordo::Model model = ordo::Model::load(kWeights / "german-llama");
  ordo::GeneratorOptions options;
  options.decoding.max_length = 8;
  ordo::Generator generator(model, options);
  const ordo::Generation expected = generator.generate_detailed("Die Katze");
  const std::vector<int>& prompt = expected.prompt_ids;
  const std::vector<int>& want = expected.best().ids;
  ASSERT_FALSE(want.empty());

  ordo::DecodeSession session(model);
  EXPECT_TRUE(says([&] { session.encode(prompt, 1, static_cast<int>(prompt.size())); }, "decoder-only"));
  const int sequence[] = {0};
  session.start(sequence, 1, static_cast<int>(prompt.size() + want.size()));
  std::vector<int> tokens{argmax(session.prefill(prompt, static_cast<int>(prompt.size())).row(0))};
  std::vector<int> got{tokens[0]};
  while (got.size() < want.size()) {
    tokens[0] = argmax(session.step(tokens).row(0));
    got.push_back(tokens[0]);
  }
  EXPECT_EQ(got, want);
}

// reorder() moves caches: after two sequences took different paths, "swap them and copy
// the second" gives the same next logits as the unmoved pair, rows permuted (the
// histories decide the logits; the engine is deterministic, so bit for bit).
TEST(ApiSession, ReorderMakesASequenceContinueItsParent) {
  const ordo::Model model = ordo::Model::load(kWeights / "sinusoidal");
  const std::vector<int> source = model.tokenize_source("cats chase dogs");
  const int both_read_source_0[] = {0, 0};
  const auto two_paths = [&](ordo::DecodeSession& session, int room) {
    session.encode(source, 1, static_cast<int>(source.size()));
    session.start(both_read_source_0, room, 4);
    const int start = session.decoder_start_token();
    session.step(std::vector<int>{start, start});
    session.step(std::vector<int>{5, 9});
  };
  ordo::DecodeSession reference(model), moved(model);
  two_paths(reference, 2);
  two_paths(moved, 3);
  const ordo::Logits want = reference.step(std::vector<int>{7, 7});
  const int swap_and_copy[] = {1, 0, 1};
  moved.reorder(swap_and_copy);
  EXPECT_EQ(moved.sequences(), 3);
  const ordo::Logits got = moved.step(std::vector<int>{7, 7, 7});
  EXPECT_NE(std::vector<float>(want.row(0).begin(), want.row(0).end()),
            std::vector<float>(want.row(1).begin(), want.row(1).end()))
      << "the two paths must differ for the test to mean anything";
  for (int v = 0; v < want.cols; ++v) {
    ASSERT_EQ(got.row(0)[v], want.row(1)[v]) << v;
    ASSERT_EQ(got.row(1)[v], want.row(0)[v]) << v;
    ASSERT_EQ(got.row(2)[v], want.row(1)[v]) << v;
  }
}

TEST(ApiSession, CallsOutOfOrderOrOfTheWrongSizeAreErrors) {
  const ordo::Model model = ordo::Model::load(kWeights / "sinusoidal");
  const std::vector<int> source = model.tokenize_source("cats chase dogs");
  ordo::DecodeSession session(model);
  const int one[] = {0};
  EXPECT_TRUE(says([&] { session.start(one, 1, 4); }, "before encode()"));
  EXPECT_TRUE(says([&] { session.step(std::vector<int>{1}); }, "before start()"));
  EXPECT_TRUE(says([&] { session.reorder(one); }, "before start()"));
  EXPECT_TRUE(says([&] { session.encode(source, 2, static_cast<int>(source.size())); }, "ids for 2 sources"));
  // An encode that fails leaves nothing to start from, not the half-written batch.
  session.encode(source, 1, static_cast<int>(source.size()));
  std::vector<int> bad = source;
  bad[0] = model.vocabulary_size(ordo::Stack::Encoder);
  EXPECT_THROW(session.encode(bad, 1, static_cast<int>(bad.size())), ordo::Error);
  EXPECT_TRUE(says([&] { session.start(one, 1, 4); }, "before encode()"));
  session.encode(source, 1, static_cast<int>(source.size()));
  EXPECT_TRUE(says([&] { session.start(std::vector<int>{0, 0}, 1, 4); }, "room for 1"));
  EXPECT_TRUE(says([&] { session.start(std::vector<int>{1}, 1, 4); }, "source 1"));
  EXPECT_TRUE(says([&] { session.start(one, 1, 0); }, "max_steps 0"));
  session.start(one, 1, 2);
  EXPECT_TRUE(says([&] { session.step(std::vector<int>{1, 2}); }, "one token per live sequence"));
  EXPECT_TRUE(says([&] { session.step(std::vector<int>{model.vocabulary_size()}); }, "vocab"));
  EXPECT_TRUE(says([&] { session.reorder(std::vector<int>{3}); }, "parent 3"));
  EXPECT_EQ(session.sequences(), 1);
}

// The costs, from the model's own tensors: a step reads the whole decoder but the
// cross-attention's K/V projections and the (sinusoidal) embedding's position rows. The
// shipped model is F16: its weight matrices are read as stored (2 bytes a weight), its
// norms and biases in float32 (4 bytes).
TEST(ApiSession, CostsAndSizesComeFromTheModelsTensors) {
  const ordo::Model model = ordo::Model::load(kWeights / "sinusoidal");
  const ordo::ModelInfo info = model.info();
  double bytes = 0;
  for (const ordo::ModelInfo::Tensor& t : info.tensors) {
    const bool decoder = t.name.starts_with("model.decoder.") && t.name.find("encoder_attn.k_proj") == std::string::npos &&
                         t.name.find("encoder_attn.v_proj") == std::string::npos && t.name.find("embed_") == std::string::npos;
    if (decoder || t.name == "model.shared.weight" || t.name == "lm_head.weight" || t.name == "final_logits_bias") {
      std::int64_t n = 1;
      for (const std::int64_t d : t.shape) n *= d;
      const bool matrix = t.shape.size() == 2 && t.name != "final_logits_bias";
      bytes += static_cast<double>(n) * (matrix ? 2.0 : 4.0);
    }
  }
  EXPECT_EQ(model.decode_step_bytes(), bytes);
  EXPECT_GT(model.encode_flops(2, 10), 2 * model.encode_flops(1, 10) - 1);  // linear in the batch
  EXPECT_EQ(model.vocabulary_size(ordo::Stack::Encoder), model.vocabulary_size(ordo::Stack::Decoder));
  EXPECT_EQ(ordo::Model::load(kWeights / "german-llama").vocabulary_size(ordo::Stack::Encoder), 0);
  EXPECT_GT(model.max_output_tokens(), 0);
}

// model_layout counts what loading the directory counts; write_safetensors writes a
// directory that loads and holds exactly what `fill` gave.
TEST(ApiSession, LayoutAndWriterMakeALoadableModel) {
  for (const char* name : {"sinusoidal", "german-llama"}) {
    std::ifstream in(kWeights / name / "config.json");
    std::stringstream text;
    text << in.rdbuf();
    const ordo::ModelLayout layout = ordo::model_layout(text.str());
    const ordo::ModelInfo info = ordo::Model::load(kWeights / name).info();
    EXPECT_EQ(layout.parameters, info.parameters) << name;
    EXPECT_EQ(layout.decoder_only, info.decoder_only) << name;
    EXPECT_EQ(layout.family, info.family) << name;
  }
  EXPECT_TRUE(says([] { ordo::model_layout(R"({"model_type": "ordo", "d_model": -1})", "mine.json"); }, "mine.json"));

  const fs::path dir = fs::temp_directory_path() / ("ordo_api_layout_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ifstream in(kWeights / "sinusoidal" / "config.json");
  std::stringstream config;
  config << in.rdbuf();
  fs::copy_file(kWeights / "sinusoidal" / "config.json", dir / "config.json", fs::copy_options::overwrite_existing);
  const ordo::ModelLayout layout = ordo::model_layout(config.str());
  ordo::write_safetensors(dir / "model.safetensors", layout.tensors,
                          [](const std::string&, std::uint64_t first, std::span<float> out) {
                            for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>((first + i) % 7) * 0.01f;
                          });
  const ordo::ModelInfo written = ordo::Model::load(dir).info();
  EXPECT_EQ(written.parameters, layout.parameters);
  EXPECT_EQ(written.tensors.size(), layout.tensors.size());
  fs::remove_all(dir);
}

// Oracle: the naive triple loop in double; float32 products of small integers and
// quarters are exact, and so are their sums below 2^24.
TEST(ApiSession, MatmulIsTheProductWithBTransposed) {
  const int m = 3, n = 5, k = 7;
  std::vector<float> a(m * k), b(n * k), c(m * n);
  for (int i = 0; i < m * k; ++i) a[i] = static_cast<float>(i % 5) * 0.25f;
  for (int i = 0; i < n * k; ++i) b[i] = static_cast<float>(i % 3) - 1.0f;
  ordo::matmul_nt(a, b, c, m, n, k);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double want = 0;
      for (int p = 0; p < k; ++p) want += static_cast<double>(a[i * k + p]) * b[j * k + p];
      EXPECT_EQ(c[i * n + j], want) << i << "," << j;
    }
  EXPECT_TRUE(says([&] { ordo::matmul_nt(a, b, c, m, n, k + 1); }, "do not fit"));
}

}  // namespace
