// What the files of the ordo._ordo extension share: each binds one part of the public
// C++ API (<ordo/ordo.hpp>) and registers it here, in module.cpp's order. Nothing in
// the extension reaches below the public API: it links libordo.so, which exports
// nothing else.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "ordo/ordo.hpp"

namespace ordo::python {

namespace py = pybind11;

void bind_errors(py::module_& m);      // errors.cpp: ordo.Error, ordo.OptionError
void bind_results(py::module_& m);     // results.cpp: TranslationResult, GenerationResult, ...
void bind_models(py::module_& m);      // models.cpp: models(), tokenize(), Tokenizer
void bind_translator(py::module_& m);  // translator.cpp: Translator
void bind_generator(py::module_& m);   // generator.cpp: Generator

// The model a Translator or Generator is given: a directory or a shipped model's name,
// or None for the default (the translation model, or the language model when
// `language_model`), loaded with `options`. Load-time warnings become Python
// UserWarnings. Throws ordo::Error, ordo::OptionError for options the model cannot take.
Model load_model(const py::object& model_dir, bool language_model, const LoadOptions& options = {});

// The model's tokenizer as a Python ordo.Tokenizer (models.cpp).
py::object tokenizer_of(const Model& model);

// The constructor keywords every model class shares: `threads` (ordo's compute threads,
// process-wide; 0 keeps them) is applied; `compute_type` (what `--compute-type` takes,
// or CTranslate2's spelling of the same type) and `group_size` (None: the type's
// default) become the LoadOptions returned. Throws ordo::OptionError naming the keyword.
// Each of the wrong type raises TypeError naming the keyword.
LoadOptions compute_keywords(const py::object& threads, const py::object& compute_type, const py::object& group_size);

// Raises ordo.OptionError on the Python side: what the translator in errors.cpp makes of
// an ordo::OptionError whose field is already the Python keyword.
[[noreturn]] void throw_option_error(const std::string& keyword, const std::string& problem);

}  // namespace ordo::python
