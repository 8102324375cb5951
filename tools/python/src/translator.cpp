// ordo._ordo.Translator: ordo::Translator for Python. Each call takes its keywords as a
// dict (the Python layer's signatures collect them, tools/python/ordo/translator.py),
// derives a translator with those options (with_options: the model and buffers are
// shared) and computes without the GIL, so Python threads run alongside and several can
// share one Translator. Ctrl-C stops a call between decoder steps (interrupt.h).
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "arrays.h"
#include "bindings.h"
#include "interrupt.h"
#include "options.h"

namespace ordo::python {

namespace {

class TranslatorBinding {
 public:
  TranslatorBinding(const py::object& model_dir, const py::object& threads, const py::object& compute_type,
                    const py::object& group_size)
      : translator_(load(model_dir, threads, compute_type, group_size)) {}

  std::vector<Translation> translate_batch(const std::vector<std::string>& texts, const py::dict& keywords) const {
    const Translator call = with(keywords);
    const py::gil_scoped_release release;
    return call.translate_batch(texts);
  }

  std::string translate(const std::string& text, const py::dict& keywords) const {
    const Translator call = with(keywords);
    const py::gil_scoped_release release;
    return call.translate(text);
  }

  std::vector<Translation> translate_ids_batch(const std::vector<std::vector<int>>& sources,
                                               const py::dict& keywords) const {
    const Translator call = with(keywords);
    const py::gil_scoped_release release;
    return call.translate_ids_batch(sources);
  }

  std::vector<Score> score_batch(const std::vector<std::string>& sources, const std::vector<std::string>& targets,
                                 const py::dict& keywords) const {
    const Translator call = with(keywords);
    const py::gil_scoped_release release;
    return call.score_batch(sources, targets);
  }

  Score score(const std::string& source, const std::string& target, const py::dict& keywords) const {
    const Translator call = with(keywords);
    const py::gil_scoped_release release;
    return call.score(source, target);
  }

  std::vector<py::array_t<float>> encode(const std::vector<std::string>& texts, const py::dict& keywords) const {
    const Translator call = with(keywords);
    std::vector<EncoderOutput> outputs;
    {
      const py::gil_scoped_release release;
      for (const std::string& text : texts) outputs.push_back(call.encode(text));
    }
    std::vector<py::array_t<float>> arrays;
    for (EncoderOutput& output : outputs) arrays.push_back(encoder_array(std::move(output)));
    return arrays;
  }

  AttentionResult attention(const std::string& text, const std::string& kind, int layer,
                            const std::optional<std::string>& target, const py::dict& keywords) const {
    const Translator call = with(keywords);
    Attention all;
    {
      const py::gil_scoped_release release;
      all = call.attention(text, target.value_or(""));
    }
    return attention_layer(all, kind, layer);
  }

  py::object tokenizer() const { return tokenizer_of(translator_.model()); }
  std::string model_dir() const { return translator_.model().directory().string(); }
  std::vector<std::string> language_codes() const { return translator_.model().language_codes(); }

 private:
  static Translator load(const py::object& model_dir, const py::object& threads, const py::object& compute_type,
                        const py::object& group_size) {
    const LoadOptions options = compute_keywords(threads, compute_type, group_size);
    return Translator(load_model(model_dir, false, options));
  }

  // The translator for one call: these keywords, and the check that lets Ctrl-C stop it.
  Translator with(const py::dict& keywords) const {
    TranslatorOptions options = translator_options(keywords, translator_.model());
    options.interrupt = interrupt_check();
    return translator_.with_options(options);
  }

  Translator translator_;
};

}  // namespace

void bind_translator(py::module_& m) {
  py::class_<TranslatorBinding>(m, "Translator",
                                "The compiled translator behind ordo.Translator, whose methods document the keywords.")
      .def(py::init<const py::object&, const py::object&, const py::object&, const py::object&>(), py::arg("model_dir"),
           py::arg("threads"), py::arg("compute_type"), py::arg("group_size"))
      .def("translate_batch", &TranslatorBinding::translate_batch, py::arg("texts"), py::arg("options"))
      .def("translate", &TranslatorBinding::translate, py::arg("text"), py::arg("options"))
      .def("translate_ids_batch", &TranslatorBinding::translate_ids_batch, py::arg("sources"), py::arg("options"))
      .def("score_batch", &TranslatorBinding::score_batch, py::arg("sources"), py::arg("targets"), py::arg("options"))
      .def("score", &TranslatorBinding::score, py::arg("source"), py::arg("target"), py::arg("options"))
      .def("encode", &TranslatorBinding::encode, py::arg("texts"), py::arg("options"))
      .def("attention", &TranslatorBinding::attention, py::arg("text"), py::arg("kind"), py::arg("layer"),
           py::arg("target"), py::arg("options"))
      .def_property_readonly("tokenizer", &TranslatorBinding::tokenizer)
      .def_property_readonly("model_dir", &TranslatorBinding::model_dir)
      .def_property_readonly("language_codes", &TranslatorBinding::language_codes);
}

}  // namespace ordo::python
