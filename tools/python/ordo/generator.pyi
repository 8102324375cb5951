# Type stubs of ordo.Generator (generator.py documents it).
import os
from typing import Iterator, Optional, Union

from ._ordo import AttentionResult, GenerationResult, ScoreResult, Token, Tokenizer

class Generator:
    def __init__(self, model_dir: Union[str, "os.PathLike[str]", None] = None, threads: int = 0,
                 compute_type: str = "auto", group_size: Optional[int] = None) -> None: ...
    @property
    def model_dir(self) -> str: ...
    @property
    def tokenizer(self) -> Tokenizer: ...
    def generate_batch(self, prompts: list[str], max_length: Optional[int] = None,
                       beam_size: Optional[int] = None, num_hypotheses: int = 1,
                       length_penalty: Optional[float] = None, min_length: int = 0, sampling: bool = False,
                       sampling_temperature: float = 1.0, sampling_topk: int = 0, sampling_topp: float = 1.0,
                       seed: int = 0, no_repeat_ngram_size: Optional[int] = None, repetition_penalty: float = 1.0,
                       max_batch_size: int = 32, max_input_tokens: int = 0, truncate: bool = False,
                       add_bos: bool = True, sources: Optional[list[str]] = None, source_lang: Optional[str] = None,
                       target_lang: Optional[str] = None) -> list[GenerationResult]: ...
    def generate(self, prompt: str, max_length: Optional[int] = None, beam_size: Optional[int] = None,
                 num_hypotheses: int = 1, length_penalty: Optional[float] = None, min_length: int = 0,
                 sampling: bool = False, sampling_temperature: float = 1.0, sampling_topk: int = 0,
                 sampling_topp: float = 1.0, seed: int = 0, no_repeat_ngram_size: Optional[int] = None,
                 repetition_penalty: float = 1.0, max_input_tokens: int = 0, truncate: bool = False,
                 add_bos: bool = True, source: Optional[str] = None, source_lang: Optional[str] = None,
                 target_lang: Optional[str] = None) -> str: ...
    def generate_tokens(self, prompt: str, max_length: Optional[int] = None, beam_size: Optional[int] = None,
                        num_hypotheses: int = 1, length_penalty: Optional[float] = None, min_length: int = 0,
                        sampling: bool = False, sampling_temperature: float = 1.0, sampling_topk: int = 0,
                        sampling_topp: float = 1.0, seed: int = 0, no_repeat_ngram_size: Optional[int] = None,
                        repetition_penalty: float = 1.0, max_input_tokens: int = 0, truncate: bool = False,
                        add_bos: bool = True, source: Optional[str] = None, source_lang: Optional[str] = None,
                        target_lang: Optional[str] = None) -> Iterator[Token]: ...
    def score(self, text: str, max_input_tokens: int = 0, add_bos: bool = True) -> ScoreResult: ...
    def attention(self, text: str, layer: int = 0, max_input_tokens: int = 0, add_bos: bool = True) -> AttentionResult: ...
