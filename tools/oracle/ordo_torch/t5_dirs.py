"""T5 model directories as Hugging Face publishes them (t5-small, T5 v1.1, Flan-T5, mT5),
written and read back: `save_t5_dir` (config.json with every T5Config key,
generation_config.json, model.safetensors or shards with save_pretrained's tensor names:
shared.weight once, lm_head.weight only when untied), `write_t5_tokenizer` (spiece.model
trained here with the SentencePiece Python module, with T5's special ids, and
tokenizer_config.json), and `T5TokenizerOracle`, T5Tokenizer's text -> ids and ids ->
text written from tokenization_t5.py."""
from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Iterable, List, Optional, Sequence

import sentencepiece as spm
import torch

from .model_dirs import _SAVE_DTYPES, _TORCH_DTYPE_NAMES, load_checked, read_weight_files, round_weights_, \
    write_weight_files
from .t5 import T5ForConditionalGeneration, t5_config

_ARCHITECTURES = {"t5": "T5ForConditionalGeneration", "mt5": "MT5ForConditionalGeneration"}


def save_t5_dir(model: T5ForConditionalGeneration, out_dir, dtype: str = "F32", shards: int = 1,
                generation: Optional[dict] = None) -> None:
    """config.json (every T5Config key, torch_dtype, architectures), model.safetensors (or
    `shards` shards and the index) with the state_dict in `dtype` (the model is rounded to
    it first), and generation_config.json = `generation` when given. The state_dict holds
    each tied tensor once, as save_pretrained writes it (and the stacks' embed_tokens
    copies only for a model made with embed_copies_in_file)."""
    round_weights_(model, dtype)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg = model.config
    config = dict(cfg, torch_dtype=_TORCH_DTYPE_NAMES[dtype], architectures=[_ARCHITECTURES[cfg["model_type"]]],
                  transformers_version="4.44.0")
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    tensors = {k: v.detach().to(_SAVE_DTYPES[dtype]) for k, v in model.state_dict().items()}
    write_weight_files(out, tensors, shards)
    if generation is not None:
        doc = dict(generation, _from_model_config=True, transformers_version="4.44.0")
        (out / "generation_config.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")


def load_t5_dir(path, dtype: Optional[torch.dtype] = None) -> T5ForConditionalGeneration:
    """A T5 directory's model in eval mode computing in `dtype`. The files must hold exactly
    the tensors the config implies (the embed_tokens copies may be there or not)."""
    path = Path(path)
    config = json.loads((path / "config.json").read_text())
    source, tensors = read_weight_files(path)
    model = T5ForConditionalGeneration(config, embed_copies_in_file="encoder.embed_tokens.weight" in tensors)
    return load_checked(model, source, tensors, dtype)


def write_t5_tokenizer(out_dir, lines: Iterable[str], pieces: int, extra_ids: Optional[int] = 100,
                       multiple: int = 8) -> dict:
    """Trains spiece.model (`pieces` pieces, unigram, T5's ids: <pad> 0, </s> 1, <unk> 2, no
    <s>) and writes tokenizer_config.json as T5Tokenizer.save_pretrained does, with
    `extra_ids` (None: no tokenizer_config.json, T5Tokenizer's default 100 applies).
    Returns the config keys the model needs: vocab_size (pieces + sentinels, rounded up to
    `multiple` as T5 pads its embedding), pad_token_id, eos_token_id, decoder_start_token_id."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(list(lines)), model_writer=model, vocab_size=pieces,
        model_type="unigram", character_coverage=1.0, num_threads=1, input_sentence_size=0,
        shuffle_input_sentence=False, minloglevel=2, pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
    (out / "spiece.model").write_bytes(model.getvalue())
    sentinels = 100 if extra_ids is None else extra_ids
    if extra_ids is not None:
        doc = {"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>", "extra_ids": extra_ids,
               "additional_special_tokens": [f"<extra_id_{i}>" for i in range(extra_ids)],
               "model_max_length": 512, "sp_model_kwargs": {}, "legacy": True,
               "tokenizer_class": "T5Tokenizer"}
        (out / "tokenizer_config.json").write_text(json.dumps(doc, indent=2))
    vocab = -(-(pieces + sentinels) // multiple) * multiple
    return {"vocab_size": vocab, "pad_token_id": 0, "eos_token_id": 1, "decoder_start_token_id": 0}


class T5TokenizerOracle:
    """T5Tokenizer (tokenization_t5.py, legacy): text -> the SentencePiece model's pieces,
    each its own id (piece_to_id), then </s>; no bos. Sentinels <extra_id_N> are the ids
    pieces + extra_ids - 1 - N; decoding (skip_special_tokens=False, the special tokens
    </s> and <pad> left out) writes a sentinel after the text before it, a space first
    unless a special token precedes, and strips the ends (convert_tokens_to_string)."""

    def __init__(self, directory):
        d = Path(directory)
        self.sp = spm.SentencePieceProcessor(model_file=str(d / "spiece.model"))
        config_path = d / "tokenizer_config.json"
        config = json.loads(config_path.read_text()) if config_path.exists() else {}
        self.extra_ids = config.get("extra_ids", 100)
        self.vocab_size = self.sp.get_piece_size() + self.extra_ids

    def encode(self, text: str) -> List[int]:
        return [self.sp.piece_to_id(p) for p in self.sp.encode(text, out_type=str)] + [self.sp.piece_to_id("</s>")]

    def token(self, index: int) -> str:
        if index < self.sp.get_piece_size():
            return self.sp.id_to_piece(index)
        return f"<extra_id_{self.vocab_size - 1 - index}>"

    def decode(self, ids: Sequence[int]) -> str:
        run: List[str] = []
        out, after_special = "", False
        for token in (self.token(i) for i in ids):
            if token.startswith("<extra_id_"):
                if not after_special:
                    out += " "
                out += self.sp.decode(run) + token
                after_special, run = True, []
            else:
                run.append(token)
                after_special = False
        return (out + self.sp.decode(run)).strip()


def t5_generation_config(config: dict) -> dict:
    """The generation_config.json of a T5 checkpoint (GenerationConfig.from_model_config of
    its config): decoding from pad, ending at eos."""
    cfg = t5_config(config)
    return {"decoder_start_token_id": cfg["decoder_start_token_id"], "eos_token_id": cfg["eos_token_id"],
            "pad_token_id": cfg["pad_token_id"]}


__all__ = ["save_t5_dir", "load_t5_dir", "write_t5_tokenizer", "T5TokenizerOracle", "t5_generation_config"]
