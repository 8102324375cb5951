// The public options (<ordo/options.hpp>) restate the engine's defaults so that a
// program reads them in its own header; this is the check that the two never drift.
// Oracle: the engine's own structs, default-constructed.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <type_traits>

// The engine's headers before the public one (models/api/internal.h says why).
#include "engine/decoding_options.h"
#include "models/generator.h"
#include "models/translator.h"
#include "ordo/options.hpp"

namespace {

// Converts to any field's type: T{AnyField{}, ...} compiles up to T's number of fields.
struct AnyField {
  template <class T>
  operator T() const;  // never called: only asked whether it converts
};

// How many fields an aggregate has (its members, not their members: AnyField converts
// to a nested struct whole, so no brace elision).
template <class T, class... Fields>
constexpr std::size_t field_count() {
  if constexpr (requires { T{Fields{}..., AnyField{}}; })
    return field_count<T, Fields..., AnyField>();
  else
    return sizeof...(Fields);
}

// Every field of `got` against the field in the same place of `want`, recursing into
// nested option structs; no list of names to forget. The public structs must declare
// their fields in the engine's order: a field added, dropped or moved on either side
// fails here.
template <class Got, class Want>
void expect_same_fields(const Got& got, const Want& want, const std::string& path);

template <class Got, class Want>
void expect_same_value(const Got& got, const Want& want, const std::string& path) {
  if constexpr (std::is_class_v<Got>)
    expect_same_fields(got, want, path);
  else
    EXPECT_EQ(got, static_cast<Got>(want)) << path;
}

template <class Got, class Want>
void expect_same_fields(const Got& got, const Want& want, const std::string& path) {
  constexpr std::size_t n = field_count<Got>();
  if constexpr (n != field_count<Want>()) {
    FAIL() << path << ": the public struct has " << n << " fields, the engine's " << field_count<Want>();
  } else if constexpr (n == 4) {
    const auto& [g0, g1, g2, g3] = got;
    const auto& [w0, w1, w2, w3] = want;
    expect_same_value(g0, w0, path + ".0"), expect_same_value(g1, w1, path + ".1");
    expect_same_value(g2, w2, path + ".2"), expect_same_value(g3, w3, path + ".3");
  } else if constexpr (n == 5) {
    const auto& [g0, g1, g2, g3, g4] = got;
    const auto& [w0, w1, w2, w3, w4] = want;
    expect_same_value(g0, w0, path + ".0"), expect_same_value(g1, w1, path + ".1");
    expect_same_value(g2, w2, path + ".2"), expect_same_value(g3, w3, path + ".3");
    expect_same_value(g4, w4, path + ".4");
  } else if constexpr (n == 12) {
    const auto& [g0, g1, g2, g3, g4, g5, g6, g7, g8, g9, g10, g11] = got;
    const auto& [w0, w1, w2, w3, w4, w5, w6, w7, w8, w9, w10, w11] = want;
    expect_same_value(g0, w0, path + ".0"), expect_same_value(g1, w1, path + ".1");
    expect_same_value(g2, w2, path + ".2"), expect_same_value(g3, w3, path + ".3");
    expect_same_value(g4, w4, path + ".4"), expect_same_value(g5, w5, path + ".5");
    expect_same_value(g6, w6, path + ".6"), expect_same_value(g7, w7, path + ".7");
    expect_same_value(g8, w8, path + ".8"), expect_same_value(g9, w9, path + ".9");
    expect_same_value(g10, w10, path + ".10"), expect_same_value(g11, w11, path + ".11");
  } else {
    FAIL() << path << ": " << n << " fields; add a case for that count to expect_same_fields";
  }
}

// Oracle: the engine's structs, default-constructed; every field, by place.
TEST(ApiOptions, DefaultsAreTheEngines) {
  expect_same_fields(ordo::api::DecodingOptions{}, ordo::DecodingOptions{}, "DecodingOptions");
  expect_same_fields(ordo::api::TranslatorOptions{}, ordo::TranslatorOptions{}, "TranslatorOptions");
  expect_same_fields(ordo::api::GeneratorOptions{}, ordo::GeneratorOptions{}, "GeneratorOptions");
}

}  // namespace
