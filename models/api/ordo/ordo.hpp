// ordo: a small Transformer inference engine. This is its public API; include this one
// header and link ordo::ordo (CMake) or `pkg-config --libs ordo`.
//
//   ordo::Model model = ordo::Model::load("weights/sinusoidal");  // throws ordo::Error
//   ordo::TranslatorOptions options;                                // documented defaults
//   options.decoding.beam_size = 4;
//   ordo::Translator translator(model, options);
//   std::string out = translator.translate("cats chase dogs");     // "Katzen jagen Hunde"
//   std::vector<ordo::Translation> batch = translator.translate_batch(lines);
//
// Below translation: Translator::score, ::encode (the encoder's output) and ::attention
// (every head's probabilities); decoder-only models (LLaMA layout) have a Generator.
// Every error is an ordo::Error whose message says what, where and what to do; a bad
// option is its subclass ordo::OptionError, which names the field.
//
// Nothing of the engine (BLAS, SentencePiece, JSON, the weight mapping) is visible here.
// The headers live with their code: the options, results and errors the engine reads
// and writes in engine/include/ordo/, the Model, Translator and Generator in
// models/api/ordo/; installed, they are one folder, <prefix>/include/ordo/.
#pragma once

#include "ordo/continuous_batch.hpp"
#include "ordo/decode_session.hpp"
#include "ordo/error.hpp"
#include "ordo/generator.hpp"
#include "ordo/model.hpp"
#include "ordo/options.hpp"
#include "ordo/positions.hpp"
#include "ordo/quantize.hpp"
#include "ordo/results.hpp"
#include "ordo/translator.hpp"
