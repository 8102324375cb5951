// What the public API's implementation shares: the engine's facades behind each public
// class, and the conversions between the two sets of types.
//
// Both sets are named alike: the engine's are ordo::Model, ordo::Translator, ...; the
// public ones ordo::api::Model, ... (spelled ordo::Model by programs through the
// using-directive in the public headers). Here, inside namespace ordo::api, a plain
// name means the public type and ordo::X the engine's: qualified lookup finds a
// declaration in ordo itself before what a using-directive brings in. The engine's
// headers come first: once the directive is seen, an unqualified Model inside plain
// namespace ordo would be ambiguous.
#pragma once

#include <memory>

#include "engine/attention_recorder.h"
#include "engine/error.h"
#include "models/generator.h"
#include "models/model.h"
#include "models/translator.h"
// The public API after the engine (see above).
#include "ordo/ordo.hpp"

namespace ordo::api {

struct Model::Impl {
  std::shared_ptr<const ordo::Model> model;
};

struct Translator::Impl {
  Model model;
  TranslatorOptions options;
  ordo::Translator translator;
};

struct Generator::Impl {
  Model model;
  GeneratorOptions options;
  ordo::Generator generator;
};

namespace detail {

// The engine's model behind a public one.
inline const std::shared_ptr<const ordo::Model>& engine_model(const Model::Impl& impl) { return impl.model; }

ordo::DecodingOptions to_engine(const DecodingOptions& options);
ordo::TranslatorOptions to_engine(const TranslatorOptions& options);
ordo::GeneratorOptions to_engine(const GeneratorOptions& options);

Hypothesis to_public(const ordo::TranslatedHypothesis& hypothesis);
Translation to_public(ordo::Translation translation);
Generation to_public(ordo::Generation generation);
Score to_public(ordo::Scored scored);

// Every head's attention while the decoder reads `decoder_input` (after encoding
// `source`, unless the model is decoder-only), teacher-forced. Labels are the pieces.
Attention record_attention(const ordo::Model& model, const std::vector<int>& source,
                           const std::vector<int>& decoder_input);

}  // namespace detail

}  // namespace ordo::api
