// ordo::Generator (public API) on an encoder-decoder model: generate() has no source to
// translate, so it must say that a source is needed and how to give one, not report the
// missing source as "input text: is empty".
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "ordo/ordo.hpp"

namespace {

const std::filesystem::path kTranslationModel = std::filesystem::path(ORDO_SOURCE_DIR) / "weights" / "sinusoidal";

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const ordo::Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ApiGenerator, AnEncoderDecoderModelsGenerateSaysASourceIsNeeded) {
  const ordo::Model model = ordo::Model::load(kTranslationModel);
  const ordo::Generator generator(model);
  for (const std::string& message :
       {error_of([&] { generator.generate("Katzen"); }), error_of([&] { generator.generate_detailed("Katzen"); })}) {
    EXPECT_NE(message.find("encoder-decoder"), std::string::npos) << message;
    EXPECT_NE(message.find("generate_detailed(prompt, source)"), std::string::npos) << message;
    EXPECT_EQ(message.find("is empty"), std::string::npos) << message;
  }
  // With its source it continues the translation.
  EXPECT_EQ(generator.generate_detailed("Katzen", "cats chase dogs").hypotheses.front().text, " jagen Hunde");
}

}  // namespace
