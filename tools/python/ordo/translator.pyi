# Type stubs of ordo.Translator (translator.py documents it).
import os
from typing import Optional, Union

import numpy as np
import numpy.typing as npt

from ._ordo import AttentionResult, ScoreResult, Tokenizer, TranslationResult

class Translator:
    def __init__(self, model_dir: Union[str, "os.PathLike[str]", None] = None, threads: int = 0,
                 compute_type: str = "auto", group_size: Optional[int] = None) -> None: ...
    @property
    def model_dir(self) -> str: ...
    @property
    def language_codes(self) -> list[str]: ...
    @property
    def tokenizer(self) -> Tokenizer: ...
    def translate_batch(self, texts: list[str], beam_size: Optional[int] = None, num_hypotheses: int = 1,
                        length_penalty: Optional[float] = None, max_length: Optional[int] = None,
                        min_length: int = 0, sampling: bool = False, sampling_temperature: float = 1.0,
                        sampling_topk: int = 0, sampling_topp: float = 1.0, seed: int = 0,
                        no_repeat_ngram_size: Optional[int] = None, repetition_penalty: float = 1.0,
                        max_batch_size: int = 32, max_input_tokens: int = 0, truncate: bool = False,
                        source_lang: Optional[str] = None,
                        target_lang: Optional[str] = None) -> list[TranslationResult]: ...
    def translate(self, text: str, beam_size: Optional[int] = None, num_hypotheses: int = 1,
                  length_penalty: Optional[float] = None, max_length: Optional[int] = None, min_length: int = 0,
                  sampling: bool = False, sampling_temperature: float = 1.0, sampling_topk: int = 0,
                  sampling_topp: float = 1.0, seed: int = 0, no_repeat_ngram_size: Optional[int] = None,
                  repetition_penalty: float = 1.0, max_batch_size: int = 32, max_input_tokens: int = 0,
                  truncate: bool = False, source_lang: Optional[str] = None,
                  target_lang: Optional[str] = None) -> str: ...
    def translate_ids_batch(self, sources: list[list[int]], beam_size: Optional[int] = None,
                            num_hypotheses: int = 1, length_penalty: Optional[float] = None,
                            max_length: Optional[int] = None, min_length: int = 0, sampling: bool = False,
                            sampling_temperature: float = 1.0, sampling_topk: int = 0, sampling_topp: float = 1.0,
                            seed: int = 0, no_repeat_ngram_size: Optional[int] = None,
                            repetition_penalty: float = 1.0, max_batch_size: int = 32,
                            target_lang: Optional[str] = None) -> list[TranslationResult]: ...
    def score_batch(self, sources: list[str], targets: list[str], max_batch_size: int = 32,
                    max_input_tokens: int = 0, truncate: bool = False, source_lang: Optional[str] = None,
                    target_lang: Optional[str] = None) -> list[ScoreResult]: ...
    def score(self, source: str, target: str, max_input_tokens: int = 0, truncate: bool = False,
              source_lang: Optional[str] = None, target_lang: Optional[str] = None) -> ScoreResult: ...
    def encode(self, texts: list[str], max_input_tokens: int = 0, truncate: bool = False,
               source_lang: Optional[str] = None) -> list[npt.NDArray[np.float32]]: ...
    def attention(self, text: str, kind: str = "cross", layer: int = 0, target: Optional[str] = None,
                  max_input_tokens: int = 0) -> AttentionResult: ...
