// ordo._ordo.Generator: ordo::Generator for Python, as translator.cpp binds the
// Translator (keywords as a dict, with_options per call, no GIL while computing), plus
// the token stream behind ordo.Generator.generate_tokens.
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

class GeneratorBinding {
 public:
  GeneratorBinding(const py::object& model_dir, const py::object& threads, const py::object& compute_type,
                    const py::object& group_size)
      : generator_(load(model_dir, threads, compute_type, group_size)) {}

  std::vector<Generation> generate_batch(const std::vector<std::string>& prompts,
                                         const std::vector<std::string>& sources, const py::dict& keywords) const {
    const Generator call = with(keywords);
    const py::gil_scoped_release release;
    return call.generate_batch(prompts, sources);
  }

  // The continuation of one prompt; `on_token(Token)` (unless None) is called, with the
  // GIL, for each token as it is chosen, and `stop()` (unless None) before every decoder
  // step: what either raises ends the call with that exception.
  Generation generate_streamed(const std::string& prompt, const std::string& source, const py::dict& keywords,
                               const py::object& on_token, const py::object& stop) const {
    const Generator call = with(keywords, stop);
    Generator::OnToken report = [](const GeneratedToken&) {};
    if (!on_token.is_none())
      report = [&on_token](const GeneratedToken& token) {
        const py::gil_scoped_acquire gil;
        on_token(token);
      };
    const py::gil_scoped_release release;
    return call.generate_streamed(call.prepare(prompt, source), report);
  }

  Score score(const std::string& text, const py::dict& keywords) const {
    const Generator call = with(keywords);
    const py::gil_scoped_release release;
    return call.score(text);
  }

  AttentionResult attention(const std::string& text, int layer, const py::dict& keywords) const {
    const Generator call = with(keywords);
    Attention all;
    {
      const py::gil_scoped_release release;
      all = call.attention(text);
    }
    return attention_layer(all, "decoder", layer);
  }

  py::object tokenizer() const { return tokenizer_of(generator_.model()); }
  std::string model_dir() const { return generator_.model().directory().string(); }
  bool decoder_only() const { return generator_.model().is_decoder_only(); }

 private:
  static Generator load(const py::object& model_dir, const py::object& threads, const py::object& compute_type,
                        const py::object& group_size) {
    const LoadOptions options = compute_keywords(threads, compute_type, group_size);
    return Generator(load_model(model_dir, true, options));
  }

  Generator with(const py::dict& keywords, const py::object& also = py::none()) const {
    GeneratorOptions options = generator_options(keywords, generator_.model());
    options.interrupt = interrupt_check(also);
    return generator_.with_options(options);
  }

  Generator generator_;
};

}  // namespace

void bind_generator(py::module_& m) {
  py::class_<GeneratorBinding>(m, "Generator",
                               "The compiled generator behind ordo.Generator, whose methods document the keywords.")
      .def(py::init<const py::object&, const py::object&, const py::object&, const py::object&>(), py::arg("model_dir"),
           py::arg("threads"), py::arg("compute_type"), py::arg("group_size"))
      .def("generate_batch", &GeneratorBinding::generate_batch, py::arg("prompts"), py::arg("sources"),
           py::arg("options"))
      .def("generate_streamed", &GeneratorBinding::generate_streamed, py::arg("prompt"), py::arg("source"),
           py::arg("options"), py::arg("on_token"), py::arg("stop"))
      .def("score", &GeneratorBinding::score, py::arg("text"), py::arg("options"))
      .def("attention", &GeneratorBinding::attention, py::arg("text"), py::arg("layer"), py::arg("options"))
      .def_property_readonly("tokenizer", &GeneratorBinding::tokenizer)
      .def_property_readonly("model_dir", &GeneratorBinding::model_dir)
      .def_property_readonly("decoder_only", &GeneratorBinding::decoder_only);
}

}  // namespace ordo::python
