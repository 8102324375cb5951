// The result classes: the C++ API's result structs (ordo/results.hpp) as they are, read
// through properties that convert on access, and the bindings' own Tokens and
// AttentionResult. Read-only: a result is what ordo computed.
#include "results.h"

#include <pybind11/stl.h>

#include <optional>
#include <vector>

#include "bindings.h"

namespace ordo::python {

namespace {

// One field of every hypothesis, in rank order.
template <class Field>
auto each(const std::vector<Hypothesis>& hypotheses, Field field) {
  std::vector<std::decay_t<decltype(field(hypotheses.front()))>> values;
  for (const Hypothesis& h : hypotheses) values.push_back(field(h));
  return values;
}

std::optional<std::string> error_of(const std::string& error) {
  if (error.empty()) return std::nullopt;
  return error;
}

// A field of a generation's best hypothesis, or None for a generation that failed.
template <class T>
std::optional<T> best(const Generation& g, T Hypothesis::*field) {
  if (g.hypotheses.empty()) return std::nullopt;
  return g.hypotheses.front().*field;
}

}  // namespace

void bind_results(py::module_& m) {
  py::class_<Translation>(m, "TranslationResult",
                          "One text's translations, best first, or why it failed (.error); translate_batch returns "
                          "one per text.")
      .def_property_readonly("hypotheses", [](const Translation& t) { return each(t.hypotheses, [](const Hypothesis& h) { return h.text; }); },
                             "list[str]: the translations, best first (num_hypotheses of them; empty on error).")
      .def_property_readonly("ids", [](const Translation& t) { return each(t.hypotheses, [](const Hypothesis& h) { return h.ids; }); },
                             "list[list[int]]: each hypothesis's target ids, eos included when it finished.")
      .def_property_readonly("scores", [](const Translation& t) { return each(t.hypotheses, [](const Hypothesis& h) { return h.score; }); },
                             "list[float]: each hypothesis's score, the sum of its token_logprobs.")
      .def_property_readonly("normalized_scores", [](const Translation& t) { return each(t.hypotheses, [](const Hypothesis& h) { return h.normalized_score; }); },
                             "list[float]: score / length**length_penalty, what the hypotheses are ranked by.")
      .def_property_readonly("token_logprobs", [](const Translation& t) { return each(t.hypotheses, [](const Hypothesis& h) { return h.token_logprobs; }); },
                             "list[list[float]]: log p(token | source, tokens before), one per id.")
      .def_property_readonly("finished", [](const Translation& t) { return each(t.hypotheses, [](const Hypothesis& h) { return h.finished; }); },
                             "list[bool]: True where a hypothesis ended with eos, False where max_length cut it.")
      .def_readonly("source", &Translation::source, "str: the input text.")
      .def_readonly("source_ids", &Translation::source_ids, "list[int]: what the encoder read, eos included.")
      .def_property_readonly("error", [](const Translation& t) { return error_of(t.error); },
                             "str | None: why this text failed (the others went on); None when it did not.")
      .def_readonly("truncated", &Translation::truncated, "bool: the source was cut to max_input_tokens (truncate=True).")
      .def("__repr__", [](const Translation& t) {
        return "TranslationResult(" + std::string(py::repr(py::cast(t.source))) +
               (t.ok() ? " -> " + std::string(py::repr(py::cast(t.hypotheses.empty() ? "" : t.hypotheses.front().text)))
                       : ", error=" + std::string(py::repr(py::cast(t.error)))) + ")";
      });

  py::class_<Generation>(m, "GenerationResult",
                         "One prompt's continuation (.text, .ids, .score: the best one's), all of them (.sequences), or "
                         "why it failed (.error).")
      .def_property_readonly("text", [](const Generation& g) { return best(g, &Hypothesis::text); },
                             "str | None: the best continuation's text (without the prompt); None on error.")
      .def_property_readonly("ids", [](const Generation& g) { return best(g, &Hypothesis::ids); },
                             "list[int] | None: its generated ids, eos included when it finished.")
      .def_property_readonly("score", [](const Generation& g) { return best(g, &Hypothesis::score); },
                             "float | None: the sum of its token_logprobs.")
      .def_property_readonly("token_logprobs", [](const Generation& g) { return best(g, &Hypothesis::token_logprobs); },
                             "list[float] | None: log p(token | prompt, tokens before), one per id.")
      .def_property_readonly("finished", [](const Generation& g) { return best(g, &Hypothesis::finished); },
                             "bool | None: True if it ended with eos, False if max_length cut it.")
      .def_property_readonly("sequences", [](const Generation& g) { return each(g.hypotheses, [](const Hypothesis& h) { return h.text; }); },
                             "list[str]: every continuation returned, best first (num_hypotheses).")
      .def_property_readonly("sequences_ids", [](const Generation& g) { return each(g.hypotheses, [](const Hypothesis& h) { return h.ids; }); },
                             "list[list[int]]: their ids.")
      .def_property_readonly("scores", [](const Generation& g) { return each(g.hypotheses, [](const Hypothesis& h) { return h.score; }); },
                             "list[float]: their scores.")
      .def_readonly("prompt", &Generation::prompt, "str: the prompt text.")
      .def_readonly("prompt_ids", &Generation::prompt_ids, "list[int]: what the decoder read first, bos included.")
      .def_readonly("source", &Generation::source, "str: the source an encoder-decoder model translates ('' otherwise).")
      .def_readonly("source_ids", &Generation::source_ids, "list[int]: its ids, eos included ([] otherwise).")
      .def_property_readonly("error", [](const Generation& g) { return error_of(g.error); },
                             "str | None: why this prompt failed (the others went on); None when it did not.")
      .def_readonly("truncated", &Generation::truncated, "bool: the prompt or source was cut to max_input_tokens.")
      .def("__repr__", [](const Generation& g) {
        return "GenerationResult(" + std::string(py::repr(py::cast(g.prompt))) +
               (g.ok() ? " + " + std::string(py::repr(py::cast(g.hypotheses.empty() ? "" : g.hypotheses.front().text)))
                       : ", error=" + std::string(py::repr(py::cast(g.error)))) + ")";
      });

  py::class_<Score>(m, "ScoreResult", "log p(target | source), token by token (teacher forcing), or why it failed.")
      .def_readonly("ids", &Score::ids, "list[int]: the scored tokens, eos included.")
      .def_readonly("token_logprobs", &Score::token_logprobs, "list[float]: log p(ids[t] | input, ids[<t]), one per id.")
      .def_readonly("logprob", &Score::logprob, "float: their sum.")
      .def_property_readonly("error", [](const Score& s) { return error_of(s.error); },
                             "str | None: why this pair failed; None when it did not.")
      .def_readonly("truncated", &Score::truncated, "bool: the source was cut to max_input_tokens (truncate=True).")
      .def("__repr__", [](const Score& s) {
        return s.ok() ? "ScoreResult(logprob=" + std::string(py::repr(py::cast(s.logprob))) + ")"
                      : "ScoreResult(error=" + std::string(py::repr(py::cast(s.error))) + ")";
      });

  py::class_<GeneratedToken>(m, "Token", "One generated token, as Generator.generate_tokens yields it.")
      .def_readonly("id", &GeneratedToken::id, "int: the token id.")
      .def_readonly("text", &GeneratedToken::text,
                    "str: what it adds to the text: '' for eos, and for a byte piece that begins a character (the token "
                    "that completes it carries it). Joined, the texts are the continuation.")
      .def_readonly("logprob", &GeneratedToken::logprob, "float: log p(id | prompt, tokens before).")
      .def_readonly("eos", &GeneratedToken::eos, "bool: an end-of-sequence token, the last one.")
      .def("__repr__", [](const GeneratedToken& t) {
        return "Token(id=" + std::to_string(t.id) + ", text=" + std::string(py::repr(py::cast(t.text))) +
               ", logprob=" + std::string(py::repr(py::cast(t.logprob))) + ")";
      });

  py::class_<Tokens>(m, "Tokens", "A text as the model reads it: token ids and their SentencePiece pieces.")
      .def_readonly("ids", &Tokens::ids, "list[int]: the ids (a source with eos, a prompt with bos, ...).")
      .def_readonly("pieces", &Tokens::pieces, "list[str]: one piece per id ('▁cats').")
      .def("__repr__", [](const Tokens& t) { return "Tokens(ids=" + std::string(py::repr(py::cast(t.ids))) + ")"; });

  py::class_<AttentionResult>(m, "AttentionResult",
                              "One layer's attention probabilities, every head: .weights[head, row, column], each row "
                              "summing to 1.")
      .def_readonly("kind", &AttentionResult::kind, "str: 'encoder', 'decoder' or 'cross'.")
      .def_readonly("layer", &AttentionResult::layer, "int: the layer, from 0.")
      .def_readonly("weights", &AttentionResult::weights, "numpy.ndarray: float32 [heads, rows, columns].")
      .def_readonly("rows", &AttentionResult::rows, "list[str]: the query tokens' pieces, one per row.")
      .def_readonly("columns", &AttentionResult::columns, "list[str]: the key tokens' pieces, one per column.")
      .def(
          "__array__",
          [](const AttentionResult& a, const py::object& dtype) -> py::object {
            if (dtype.is_none()) return a.weights;
            return a.weights.attr("astype")(dtype);
          },
          py::arg("dtype") = py::none(), "numpy.asarray(result) is result.weights.");
}

}  // namespace ordo::python
