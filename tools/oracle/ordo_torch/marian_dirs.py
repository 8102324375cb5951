"""Marian model directories as Hugging Face publishes them (opus-mt), written and read
back: `save_marian_dir` (config.json with every MarianConfig key, generation_config.json,
model.safetensors or shards with save_pretrained's tensor names), `write_marian_tokenizer`
(source.spm and target.spm trained here with the SentencePiece Python module, vocab.json
and with separate vocabularies target_vocab.json, tokenizer_config.json), and
`MarianTokenizerOracle`, MarianTokenizer's text -> ids written from
tokenization_marian.py."""
from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Iterable, List, Optional, Sequence

import sentencepiece as spm
import torch

from .marian import MARIAN_DEFAULTS, MarianMTModel, marian_config
from .model_dirs import (_SAVE_DTYPES, _TORCH_DTYPE_NAMES, load_checked, read_weight_files, round_weights_,
                         write_weight_files)

# What save_pretrained adds to MarianConfig's keys (PretrainedConfig's own).
_SAVED_EXTRAS = {"architectures": ["MarianMTModel"], "transformers_version": "4.44.0"}
SPECIAL_PIECES = ("</s>", "<unk>")  # ids 0 and 1 of every Marian vocab.json; <pad> is last


def hf_tied_aliases(config: dict) -> dict:
    """The names transformers' MarianMTModel.state_dict() lists besides the ones this
    oracle's model has, each tied to (the same tensor as) another: both stacks'
    embed_tokens are model.shared.weight when shared, and lm_head.weight is the decoder's
    table when tied. save_pretrained leaves them out of model.safetensors; a
    pytorch_model.bin saved with torch.save(model.state_dict()) holds them."""
    cfg = marian_config(config)
    aliases = {}
    if cfg["share_encoder_decoder_embeddings"]:
        aliases["model.encoder.embed_tokens.weight"] = "model.shared.weight"
        aliases["model.decoder.embed_tokens.weight"] = "model.shared.weight"
    if cfg["tie_word_embeddings"]:
        aliases["lm_head.weight"] = ("model.shared.weight" if cfg["share_encoder_decoder_embeddings"]
                                     else "model.decoder.embed_tokens.weight")
    return aliases


def save_marian_dir(model: MarianMTModel, out_dir, dtype: str = "F32", shards: int = 1,
                    generation: Optional[dict] = None, weights_format: str = "safetensors") -> None:
    """config.json (every MarianConfig key, torch_dtype, architectures), model.safetensors
    (or `shards` shards and the index) with the state_dict in `dtype` (the model is
    rounded to it first), and generation_config.json = `generation` when given (with
    transformers' own keys). Tied tensors are saved once, as save_pretrained does: the
    state_dict already holds each of them once (model.shared.weight, no lm_head when
    tied). weights_format "bin": pytorch_model.bin (or its shards and
    pytorch_model.bin.index.json) instead, written by torch.save as transformers wrote
    them before safetensors, with the tied names of hf_tied_aliases sharing storage."""
    round_weights_(model, dtype)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = dict(model.config, torch_dtype=_TORCH_DTYPE_NAMES[dtype], **_SAVED_EXTRAS)
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    tensors = {k: v.detach().to(_SAVE_DTYPES[dtype]) for k, v in model.state_dict().items()}
    write_weight_files(out, tensors, shards, weights_format, hf_tied_aliases(model.config))
    if generation is not None:
        doc = dict(generation, _from_model_config=False, transformers_version="4.44.0")
        (out / "generation_config.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")


def load_marian_dir(path, dtype: Optional[torch.dtype] = None) -> MarianMTModel:
    """A Marian directory's model in eval mode computing in `dtype` (torch's default if
    None). The files must hold exactly the tensors the config implies (the sinusoid
    tables may be there or not), with their shapes."""
    path = Path(path)
    config = json.loads((path / "config.json").read_text())
    source, tensors = read_weight_files(path)
    model = MarianMTModel(config, positions_in_file="model.encoder.embed_positions.weight" in tensors)
    return load_checked(model, source, tensors, dtype)


def train_spm(lines: Iterable[str], vocab_size: int) -> bytes:
    """A unigram SentencePiece model of `vocab_size` pieces trained on `lines`
    (deterministic: one thread, no sampling of sentences)."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(list(lines)), model_writer=model, vocab_size=vocab_size,
        model_type="unigram", character_coverage=1.0, num_threads=1,
        input_sentence_size=0, shuffle_input_sentence=False, minloglevel=2)
    return model.getvalue()


def _normal_pieces(model: bytes) -> List[str]:
    sp = spm.SentencePieceProcessor(model_proto=model)
    return [sp.id_to_piece(i) for i in range(sp.get_piece_size())
            if not (sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i))]


def marian_vocab(piece_lists: Sequence[List[str]], language_tokens: Sequence[str] = ()) -> dict:
    """vocab.json as Marian builds it: </s> 0, <unk> 1, the language tokens, then every
    piece of the models in turn, each once; <pad> last."""
    vocab = {piece: i for i, piece in enumerate(SPECIAL_PIECES)}
    for piece in list(language_tokens) + [p for pieces in piece_lists for p in pieces]:
        vocab.setdefault(piece, len(vocab))
    vocab["<pad>"] = len(vocab)
    return vocab


def write_marian_tokenizer(out_dir, source_lines: Sequence[str], target_lines: Sequence[str],
                           pieces: int, separate_vocabs: bool = False,
                           language_tokens: Sequence[str] = ()) -> dict:
    """Trains source.spm and target.spm (`pieces` pieces each) and writes them with
    vocab.json (both sides' pieces; with separate_vocabs the source's, and
    target_vocab.json the target's, both with <pad> at the same, last id) and
    tokenizer_config.json as MarianTokenizer.save_pretrained writes it. Returns the
    config keys the model needs: vocab_size, pad_token_id, eos_token_id,
    decoder_start_token_id."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    source_model, target_model = train_spm(source_lines, pieces), train_spm(target_lines, pieces)
    (out / "source.spm").write_bytes(source_model)
    (out / "target.spm").write_bytes(target_model)
    source_pieces, target_pieces = _normal_pieces(source_model), _normal_pieces(target_model)
    if separate_vocabs:
        vocab = marian_vocab([source_pieces], language_tokens)
        target_vocab = marian_vocab([target_pieces], language_tokens)
        pad = max(vocab["<pad>"], target_vocab["<pad>"])
        vocab["<pad>"] = target_vocab["<pad>"] = pad  # one pad id for both (ids may have holes)
        (out / "target_vocab.json").write_text(json.dumps(target_vocab, ensure_ascii=False, indent=2))
    else:
        vocab = marian_vocab([source_pieces, target_pieces], language_tokens)
        pad = vocab["<pad>"]
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False, indent=2))
    tokenizer_config = {
        "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>", "model_max_length": 512,
        "separate_vocabs": separate_vocabs, "source_lang": None, "target_lang": None,
        "sp_model_kwargs": {}, "target_vocab_file": "target_vocab.json" if separate_vocabs else None,
        "tokenizer_class": "MarianTokenizer"}
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2))
    return {"vocab_size": pad + 1, "pad_token_id": pad, "eos_token_id": vocab["</s>"],
            "decoder_start_token_id": pad}


class MarianTokenizerOracle:
    """MarianTokenizer's text -> ids (tokenization_marian.py): a source is the leading
    language token (">>" up to the first "<<", when the text starts with ">>"), then
    source.spm's pieces, each mapped through vocab.json (a piece it lacks: <unk>'s id),
    then </s>; a target is target.spm's pieces through target_vocab.json with
    separate_vocabs (vocab.json otherwise), then </s>."""

    def __init__(self, directory):
        d = Path(directory)
        config = json.loads((d / "tokenizer_config.json").read_text())
        self.source = spm.SentencePieceProcessor(model_file=str(d / "source.spm"))
        self.target = spm.SentencePieceProcessor(model_file=str(d / "target.spm"))
        self.vocab = json.loads((d / "vocab.json").read_text())
        separate = config.get("separate_vocabs", False)
        self.target_vocab = json.loads((d / "target_vocab.json").read_text()) if separate else self.vocab

    @staticmethod
    def _ids(pieces: List[str], vocab: dict) -> List[int]:
        return [vocab.get(p, vocab["<unk>"]) for p in pieces] + [vocab["</s>"]]

    def encode_source(self, text: str) -> List[int]:
        code: List[str] = []
        if text.startswith(">>") and text.find("<<") != -1:
            end = text.find("<<")
            code, text = [text[:end + 2]], text[end + 2:]
        return self._ids(code + self.source.encode(text, out_type=str), self.vocab)

    def encode_target(self, text: str) -> List[int]:
        return self._ids(self.target.encode(text, out_type=str), self.target_vocab)

    def source_pieces(self, text: str) -> List[str]:
        inverse = {i: p for p, i in self.vocab.items()}
        return [inverse[i] for i in self.encode_source(text)]


def marian_generation_config(config: dict, num_beams: int = 4, max_length: int = 512) -> dict:
    """The generation_config.json of an opus-mt model (GenerationConfig.from_model_config
    of its config): pad banned, decoding from pad, ending at eos."""
    cfg = marian_config(config)
    return {"bad_words_ids": [[cfg["pad_token_id"]]], "bos_token_id": 0,
            "decoder_start_token_id": cfg["pad_token_id"], "eos_token_id": cfg["eos_token_id"],
            "forced_eos_token_id": cfg["eos_token_id"], "max_length": max_length,
            "num_beams": num_beams, "pad_token_id": cfg["pad_token_id"]}


__all__ = ["MARIAN_DEFAULTS", "save_marian_dir", "hf_tied_aliases", "load_marian_dir", "write_marian_tokenizer",
           "MarianTokenizerOracle", "marian_generation_config", "train_spm", "marian_vocab"]
