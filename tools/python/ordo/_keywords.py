"""The decoding keywords every translating and generating method takes, in one place:
their names (CTranslate2's where the concept is the same), how a call collects them
for the compiled layer, and their documentation, appended to each method's docstring."""

import inspect

DECODING = (
    "beam_size", "num_hypotheses", "length_penalty", "max_length", "min_length",
    "sampling", "sampling_temperature", "sampling_topk", "sampling_topp", "seed",
    "no_repeat_ngram_size", "repetition_penalty", "max_batch_size", "max_input_tokens",
    "truncate", "add_bos", "source_lang", "target_lang",
)

DOC = """
Decoding keywords (the C++ DecodingOptions; `ordo translate --help` has the same).
None, the default of beam_size, length_penalty, max_length and no_repeat_ngram_size,
takes the model's own default from its generation_config.json (num_beams, ...; a
Marian, T5 or M2M100 config.json stands in for a missing one), else the value in
brackets; the model's bad_words_ids and forced_bos_token_id always apply. So a call
decodes as `ordo translate` does with the same flags, and as transformers' generate():
    beam_size: hypotheses kept per input [1]; 1 is greedy search.
    num_hypotheses: hypotheses returned per input, best first; at most beam_size.
    length_penalty: rank by score / length**length_penalty (length counts eos) [1.0];
        0 ranks by the plain sum of log-probabilities.
    max_length: most generated tokens, eos included [0]; 0: automatic (2 x source
        length + 10 when translating, 128 new tokens when continuing a prompt), never
        beyond the model's positions.
    min_length: fewest generated tokens, eos included (eos is impossible before).
    sampling: draw each token from the model's distribution (beam_size 1 only).
    sampling_temperature: sample from softmax(logits / T), T > 0.
    sampling_topk: sample among the K likeliest tokens (0: all).
    sampling_topp: sample among the likeliest tokens holding P of the probability.
    seed: input i of a call draws from its own generator seeded from (seed, i): the
        same output whatever the threads, batch size or batch order.
    no_repeat_ngram_size: a token completing an n-gram of this size already in the
        output is impossible [0: off].
    repetition_penalty: CTRL's penalty on tokens already in the output, in
        [0.01, 100] (1: off).
    max_batch_size: inputs decoded together (sorted by length first).
    max_input_tokens: most tokens an input may have (0: the model's own limit).
    truncate: cut an input beyond max_input_tokens instead of failing it.
    source_lang, target_lang: a multilingual model's language codes (NLLB-200's
        "eng_Latn", "deu_Latn"; Translator.language_codes lists them): texts are read
        as source_lang, translations (and a Generator's prompts) start with
        target_lang's code. Such a model needs them; a model of one pair takes none
        (None).

Bad values raise ordo.OptionError (a ValueError) naming the keyword; values of the
wrong type raise TypeError.
"""


def collect(values, names=DECODING):
    """The keywords among `values` (a call's locals()) as the compiled layer takes them."""
    return {name: values[name] for name in names if name in values}


def documented(method):
    """Appends the decoding keywords' documentation to `method`'s docstring."""
    method.__doc__ = inspect.cleandoc(method.__doc__ or "") + "\n" + DOC
    return method


def check_texts(name, texts):
    """A list of str, not one str (which would be read as a list of characters)."""
    if isinstance(texts, (str, bytes)):
        raise TypeError(f"{name}: expected a list of str, got a single {type(texts).__name__}")
    return list(texts)
