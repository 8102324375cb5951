"""ordo: a small Transformer inference engine, from Python.

    import ordo
    translator = ordo.Translator()                    # the shipped "sinusoidal" model
    translator.translate("cats chase dogs")           # 'Katzen jagen Hunde'
    generator = ordo.Generator("german-llama")
    for token in generator.generate_tokens("Die Katze"):
        print(token.text, end="", flush=True)
    generator.score("Die Katze jagt den Hund.").logprob

Translator and Generator take CTranslate2's keyword names where the concept is the
same (beam_size, num_hypotheses, sampling_topk, max_batch_size, ...). Errors are
ordo.Error (a RuntimeError, with the C++ library's message); a bad keyword value is
ordo.OptionError (an Error and a ValueError) naming the keyword. ordo.models() lists
the shipped models; ordo.tokenize() shows what a model reads; ordo.cpu_kernels() names
the instructions the kernels run.

The compiled part, ordo._ordo, is the public C++ API (<ordo/ordo.hpp>) bound with
pybind11; see tools/python/ in ordo's source tree.
"""

from ._ordo import (
    AttentionResult,
    Error,
    GenerationResult,
    OptionError,
    ScoreResult,
    Token,
    Tokenizer,
    Tokens,
    TranslationResult,
    cpu_kernels,
    models,
    tokenize,
)
from .generator import Generator
from .translator import Translator

__version__ = "0.1.0"

__all__ = [
    "AttentionResult",
    "Error",
    "GenerationResult",
    "Generator",
    "OptionError",
    "ScoreResult",
    "Token",
    "Tokenizer",
    "Tokens",
    "TranslationResult",
    "Translator",
    "cpu_kernels",
    "models",
    "tokenize",
]
