// The keyword arguments of the Python methods (CTranslate2's names where the concept is
// the same: num_hypotheses, sampling_topk, max_batch_size, ...) -> the C++ options
// structs, and back: the keyword a C++ field is called in Python.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "ordo/ordo.hpp"

namespace ordo::python {

namespace py = pybind11;

// `keywords` maps keyword -> value, as the Python layer collects them (None: the
// default). A decoding field the checkpoint has a generation default for (num_beams,
// max_length, ... of its generation_config.json) takes `model`'s when its keyword is
// None, and the keyword's value otherwise (Model::with_generation_defaults, as the CLI's
// flags); bad_words_ids and forced_bos_token_id, which have no keyword, always take the
// model's. A value of the wrong type raises TypeError, one out of range for its C++
// field ordo::OptionError, both naming the keyword; the options' own validate() is left
// to the Translator or Generator that takes them. An unknown keyword is a TypeError.
TranslatorOptions translator_options(const py::dict& keywords, const Model& model);
GeneratorOptions generator_options(const py::dict& keywords, const Model& model);

// An int keyword: a Python int, or any integer with __index__ (numpy.int64), not a bool,
// within [low, high]. Raises TypeError for any other type, ordo.OptionError out of
// range, both naming the keyword.
long long as_integer(py::handle value, const std::string& keyword, long long low, long long high);

// A str keyword. Raises TypeError naming the keyword for any other type.
std::string as_text(py::handle value, const std::string& keyword);

// The Python keyword of a C++ options field ("n_best" -> "num_hypotheses"); any other
// name as it is.
std::string keyword_for(const std::string& field);

}  // namespace ordo::python
