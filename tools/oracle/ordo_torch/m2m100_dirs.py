"""NLLB-200 model directories as Hugging Face publishes them (model_type m2m_100 with
NllbTokenizer), written and read back: `save_m2m100_dir` (config.json with every
M2M100Config key and tokenizer_class, generation_config.json, model.safetensors or shards
with save_pretrained's tensor names), `write_nllb_tokenizer` (sentencepiece.bpe.model, a
BPE model trained here with the SentencePiece Python module, tokenizer_config.json and
special_tokens_map.json as NllbTokenizer.save_pretrained writes them), and
`NllbTokenizerOracle`, NllbTokenizer's text -> ids written from tokenization_nllb.py."""
from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Iterable, List, Optional, Sequence

import sentencepiece as spm
import torch

from .m2m100 import M2M100Model
from .model_dirs import _SAVE_DTYPES, _TORCH_DTYPE_NAMES, load_checked, read_weight_files, round_weights_, \
    write_weight_files

_SAVED_EXTRAS = {"architectures": ["M2M100ForConditionalGeneration"], "transformers_version": "4.44.0"}
FAIRSEQ_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")  # ids 0..3; SentencePiece's piece i is id i + 1
FAIRSEQ_OFFSET = 1


def save_m2m100_dir(model: M2M100Model, out_dir, dtype: str = "F32", shards: int = 1,
                    generation: Optional[dict] = None, tokenizer_class: Optional[str] = "NllbTokenizer") -> None:
    """config.json (every M2M100Config key, torch_dtype, architectures, NLLB's
    tokenizer_class), the state_dict in `dtype` (the model is rounded to it first) in one
    file or `shards`, and generation_config.json = `generation` when given. The state_dict
    holds model.shared.weight alone for the tied tables, as save_pretrained writes them."""
    round_weights_(model, dtype)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = dict(model.config, torch_dtype=_TORCH_DTYPE_NAMES[dtype], **_SAVED_EXTRAS)
    if tokenizer_class is not None:
        config["tokenizer_class"] = tokenizer_class
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    tensors = {k: v.detach().to(_SAVE_DTYPES[dtype]) for k, v in model.state_dict().items()}
    write_weight_files(out, tensors, shards)
    if generation is not None:
        doc = dict(generation, _from_model_config=False, transformers_version="4.44.0")
        (out / "generation_config.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")


def load_m2m100_dir(path, dtype: Optional[torch.dtype] = None) -> M2M100Model:
    """An M2M100 directory's model in eval mode computing in `dtype`; the files must hold
    exactly the model's tensors, with their shapes."""
    path = Path(path)
    config = json.loads((path / "config.json").read_text())
    source, tensors = read_weight_files(path)
    return load_checked(M2M100Model(config), source, tensors, dtype)


def train_bpe(lines: Iterable[str], vocab_size: int) -> bytes:
    """A BPE SentencePiece model (NLLB's kind: <unk> 0, <s> 1, </s> 2) of `vocab_size`
    pieces trained on `lines`, deterministically."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(list(lines)), model_writer=model, vocab_size=vocab_size, model_type="bpe",
        character_coverage=1.0, num_threads=1, input_sentence_size=0, shuffle_input_sentence=False,
        minloglevel=2)
    return model.getvalue()


def _added(content: str, **flags) -> dict:
    token = {"content": content, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
             "special": True}
    token.update(flags)
    return token


def write_nllb_tokenizer(out_dir, lines: Sequence[str], pieces: int, codes: Sequence[str],
                         added_tokens_decoder: bool = True, legacy_behaviour: bool = False) -> dict:
    """Trains sentencepiece.bpe.model (`pieces` pieces) and writes it with
    tokenizer_config.json and special_tokens_map.json as NllbTokenizer.save_pretrained
    writes them: the language codes `codes` as additional_special_tokens at ids
    len(spm) + 1 + i, then <mask>. With added_tokens_decoder (transformers >= 4.34) the ids
    are listed there too; without it the codes are only in special_tokens_map.json, as in
    the published NLLB-200 directories. Returns {"tokens": the number of ids, "codes": code
    -> id}."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model = train_bpe(lines, pieces)
    (out / "sentencepiece.bpe.model").write_bytes(model)
    size = spm.SentencePieceProcessor(model_proto=model).get_piece_size()
    first = size + FAIRSEQ_OFFSET
    ids = {code: first + i for i, code in enumerate(codes)}
    mask = first + len(codes)
    mask_token = _added("<mask>", lstrip=True, normalized=True)
    config = {
        "additional_special_tokens": list(codes) if added_tokens_decoder else None,
        "bos_token": "<s>", "clean_up_tokenization_spaces": True, "cls_token": "<s>", "eos_token": "</s>",
        "legacy_behaviour": legacy_behaviour, "mask_token": "<mask>", "model_max_length": 1024,
        "pad_token": "<pad>", "sep_token": "</s>", "sp_model_kwargs": {}, "src_lang": "eng_Latn",
        "tgt_lang": None, "tokenizer_class": "NllbTokenizer", "tokenizer_file": None, "unk_token": "<unk>"}
    if added_tokens_decoder:
        decoder = {str(i): _added(t) for i, t in enumerate(FAIRSEQ_SPECIALS)}
        decoder.update({str(i): _added(code) for code, i in ids.items()})
        decoder[str(mask)] = mask_token
        config["added_tokens_decoder"] = decoder
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    special = {"additional_special_tokens": list(codes), "bos_token": "<s>", "cls_token": "<s>",
               "eos_token": "</s>", "mask_token": {k: v for k, v in mask_token.items() if k != "special"},
               "pad_token": "<pad>", "sep_token": "</s>", "unk_token": "<unk>"}
    (out / "special_tokens_map.json").write_text(json.dumps(special, indent=2, ensure_ascii=False) + "\n")
    return {"tokens": mask + 1, "codes": ids}


class NllbTokenizerOracle:
    """NllbTokenizer's text -> ids (tokenization_nllb.py): SentencePiece's pieces, each
    the id PieceToId(piece) + 1 (a piece it does not know, id 0: <unk>'s 3); a source is
    [src code] + ids + [</s>] (legacy_behaviour: ids + [</s>, src code]), a target the same
    with the target code. The codes' ids are read from the directory's files as
    NllbTokenizer reads them."""

    def __init__(self, directory):
        d = Path(directory)
        self.sp = spm.SentencePieceProcessor(model_file=str(d / "sentencepiece.bpe.model"))
        config = json.loads((d / "tokenizer_config.json").read_text())
        self.legacy = bool(config.get("legacy_behaviour", False))
        codes = config.get("additional_special_tokens") or \
            json.loads((d / "special_tokens_map.json").read_text())["additional_special_tokens"]
        decoder = config.get("added_tokens_decoder")
        if decoder:
            by_content = {token["content"]: int(i) for i, token in decoder.items()}
            self.codes = {code: by_content[code] for code in codes}
        else:
            first = self.sp.get_piece_size() + FAIRSEQ_OFFSET
            self.codes = {code: first + i for i, code in enumerate(codes)}

    def piece_ids(self, text: str) -> List[int]:
        ids = []
        for piece in self.sp.encode(text, out_type=str):
            spm_id = self.sp.piece_to_id(piece)
            ids.append(spm_id + FAIRSEQ_OFFSET if spm_id else FAIRSEQ_SPECIALS.index("<unk>"))
        return ids

    def encode(self, text: str, code: str) -> List[int]:
        eos = FAIRSEQ_SPECIALS.index("</s>")
        if self.legacy:
            return self.piece_ids(text) + [eos, self.codes[code]]
        return [self.codes[code]] + self.piece_ids(text) + [eos]


def nllb_generation_config(config: dict, max_length: int = 200) -> dict:
    """NLLB-200's generation_config.json (GenerationConfig.from_model_config of its
    config.json)."""
    return {"bos_token_id": config["bos_token_id"], "decoder_start_token_id": config["decoder_start_token_id"],
            "eos_token_id": config["eos_token_id"], "max_length": max_length, "pad_token_id": config["pad_token_id"]}


__all__ = ["save_m2m100_dir", "load_m2m100_dir", "write_nllb_tokenizer", "NllbTokenizerOracle",
           "nllb_generation_config", "train_bpe"]
