#include "options.h"

#include <climits>
#include <cstdint>
#include <utility>

#include "bindings.h"

namespace ordo::python {

namespace {

// C++ field -> Python keyword, where they differ.
constexpr std::pair<const char*, const char*> kRenamed[] = {
    {"n_best", "num_hypotheses"},        {"sample", "sampling"},
    {"temperature", "sampling_temperature"}, {"top_k", "sampling_topk"},
    {"top_p", "sampling_topp"},          {"batch_size", "max_batch_size"},
};

std::string type_name(py::handle value) { return py::str(py::type::handle_of(value).attr("__name__")); }

}  // namespace

long long as_integer(py::handle value, const std::string& keyword, long long low, long long high) {
  if (!PyIndex_Check(value.ptr()) || PyBool_Check(value.ptr()))
    throw py::type_error(keyword + ": expected an int, got " + type_name(value));
  const py::object number = py::reinterpret_steal<py::object>(PyNumber_Index(value.ptr()));
  if (!number) throw py::error_already_set();
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(number.ptr(), &overflow);
  if (overflow != 0 || x < low || x > high)
    throw_option_error(keyword, "must be in [" + std::to_string(low) + ", " + std::to_string(high) + "], got " +
                                    std::string(py::str(value)));
  return x;
}

std::string as_text(py::handle value, const std::string& keyword) {
  if (!PyUnicode_Check(value.ptr())) throw py::type_error(keyword + ": expected a str, got " + type_name(value));
  return value.cast<std::string>();
}

namespace {

int as_int(py::handle value, const std::string& keyword) {
  return static_cast<int>(as_integer(value, keyword, INT_MIN, INT_MAX));
}

double as_float(py::handle value, const std::string& keyword) {
  if (PyBool_Check(value.ptr()) || !(PyFloat_Check(value.ptr()) || PyLong_Check(value.ptr())))
    throw py::type_error(keyword + ": expected a number, got " + type_name(value));
  return value.cast<double>();
}

bool as_bool(py::handle value, const std::string& keyword) {
  if (!PyBool_Check(value.ptr())) throw py::type_error(keyword + ": expected True or False, got " + type_name(value));
  return value.ptr() == Py_True;
}

std::uint64_t as_seed(py::handle value, const std::string& keyword) {
  if (!PyLong_Check(value.ptr()) || PyBool_Check(value.ptr()))
    throw py::type_error(keyword + ": expected an int, got " + type_name(value));
  const unsigned long long x = PyLong_AsUnsignedLongLong(value.ptr());
  if (PyErr_Occurred()) {
    PyErr_Clear();
    throw_option_error(keyword, "must be in [0, 2**64 - 1], got " + std::string(py::str(value)));
  }
  return x;
}

// Reads one keyword that every options struct has (decoding and batching); false when
// `keyword` is not one of them.
template <class Options>
bool read_shared(Options& options, const std::string& keyword, py::handle value) {
  DecodingOptions& d = options.decoding;
  if (keyword == "beam_size") d.beam_size = as_int(value, keyword);
  else if (keyword == "num_hypotheses") d.n_best = as_int(value, keyword);
  else if (keyword == "length_penalty") d.length_penalty = as_float(value, keyword);
  else if (keyword == "max_length") d.max_length = as_int(value, keyword);
  else if (keyword == "min_length") d.min_length = as_int(value, keyword);
  else if (keyword == "sampling") d.sample = as_bool(value, keyword);
  else if (keyword == "sampling_temperature") d.temperature = as_float(value, keyword);
  else if (keyword == "sampling_topk") d.top_k = as_int(value, keyword);
  else if (keyword == "sampling_topp") d.top_p = as_float(value, keyword);
  else if (keyword == "seed") d.seed = as_seed(value, keyword);
  else if (keyword == "no_repeat_ngram_size") d.no_repeat_ngram_size = as_int(value, keyword);
  else if (keyword == "repetition_penalty") d.repetition_penalty = as_float(value, keyword);
  else if (keyword == "max_batch_size") options.batch_size = as_int(value, keyword);
  else if (keyword == "max_input_tokens") options.max_input_tokens = as_int(value, keyword);
  else if (keyword == "truncate") options.truncate = as_bool(value, keyword);
  else return false;
  return true;
}

// A keyword passed (not None) for a field the checkpoint's generation_config.json has a
// default for: it is the caller's choice, and wins.
void mark_chosen(DecodingChoices& chosen, const std::string& keyword) {
  if (keyword == "beam_size") chosen.beam_size = true;
  else if (keyword == "max_length") chosen.max_length = true;
  else if (keyword == "length_penalty") chosen.length_penalty = true;
  else if (keyword == "no_repeat_ngram_size") chosen.no_repeat_ngram_size = true;
}

// A multilingual model's language code (NLLB-200's "eng_Latn"), checked by the
// Translator or Generator; false for another keyword.
template <class Options>
bool read_language(Options& options, const std::string& keyword, py::handle value) {
  if (keyword != "source_lang" && keyword != "target_lang") return false;
  (keyword == "source_lang" ? options.source_lang : options.target_lang) = as_text(value, keyword);
  return true;
}

template <class Options, class Extra>
Options read(const py::dict& keywords, const Model& model, Extra&& read_extra) {
  Options options;
  DecodingChoices chosen;
  for (const auto& [key, value] : keywords) {
    const std::string keyword = py::str(key);
    if (value.is_none()) continue;  // the default: the model's, else the C++ field's
    if (!read_shared(options, keyword, value) && !read_language(options, keyword, value) &&
        !read_extra(options, keyword, value))
      throw py::type_error("unexpected keyword argument '" + keyword + "'");
    mark_chosen(chosen, keyword);
  }
  options.decoding = model.with_generation_defaults(options.decoding, chosen);
  return options;
}

}  // namespace

TranslatorOptions translator_options(const py::dict& keywords, const Model& model) {
  return read<TranslatorOptions>(keywords, model, [](TranslatorOptions&, const std::string&, py::handle) {
    return false;
  });
}

GeneratorOptions generator_options(const py::dict& keywords, const Model& model) {
  return read<GeneratorOptions>(keywords, model,
                                [](GeneratorOptions& options, const std::string& keyword, py::handle value) {
                                  if (keyword != "add_bos") return false;
                                  options.add_bos = as_bool(value, keyword);
                                  return true;
                                });
}

std::string keyword_for(const std::string& field) {
  for (const auto& [cpp, python] : kRenamed)
    if (field == cpp) return python;
  return field;
}

}  // namespace ordo::python
