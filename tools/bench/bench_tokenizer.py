#!/usr/bin/env python3
"""A SentencePiece tokenizer for a random bench model: exactly its vocab_size pieces,
every one of which decodes, so that text goes in and out of it over HTTP.

    /usr/bin/python3 tools/bench/bench_tokenizer.py DIR     # writes DIR/tokenizer.model
    /usr/bin/python3 tools/bench/make_bench_model.py --shape llama --tokenizer --out DIR

A random model chooses any id of its vocabulary, and ordo fails a request whose ids its
tokenizer cannot spell (Tokenizer::decode); a tokenizer with fewer pieces than the model
is refused at load time only when it has more. So the model needs one of exactly
vocab_size pieces, made here without downloads and without training (training stops
short of 32000 pieces on a small corpus):

  ids of config.json's eos_token_id, bos_token_id and pad_token_id: </s>, <s>, <pad>,
      control pieces, as LLaMA's tokenizer has them (an id given twice keeps the first);
  the first free id: <unk>;
  the next ids: the 256 byte pieces <0x00>..<0xFF> (byte fallback: any text encodes);
  then the normal pieces of --pieces (default: weights/german-llama/tokenizer.model, the
      shipped language model's), with their scores, so that German prompts become the
      pieces a trained model would read ("▁Katze", not bytes);
  then filler up to vocab_size: "▁tok<ID>", which decodes to " tok<ID>", scored below
      every real piece (text never holds them, so they are never chosen but typed).

With bos 1 and eos 2 (the llama shape), that is LLaMA's own layout: 0 <unk>, 1 <s>,
2 </s>, 3..258 the bytes. The model type is unigram (any set of pieces with scores
segments by Viterbi; BPE would need every piece reachable by merges), the normalizer
identity (as LLaMA's: no compiled character map to carry).

The file is a ModelProto (sentencepiece_model.proto), written by the few lines of
protobuf wire format below: Debian's sentencepiece_model_pb2 needs python3-protobuf,
which nothing else here does. sentencepiece reads it back before it is kept.
"""
from __future__ import annotations

import argparse
import json
import os
import struct
import sys
from pathlib import Path

SOURCE_PIECES = Path(__file__).resolve().parents[2] / "weights" / "german-llama" / "tokenizer.model"

# ModelProto.SentencePiece.Type
NORMAL, UNKNOWN, CONTROL, BYTE = 1, 2, 3, 6
UNIGRAM = 1  # TrainerSpec.ModelType

BYTE_PIECES = [f"<0x{b:02X}>" for b in range(256)]


def filler_piece(token_id: int) -> str:
    return f"\u2581tok{token_id}"


# --- protobuf wire format (https://protobuf.dev/programming-guides/encoding/) ---

def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # a negative int32 is its 64-bit two's complement, 10 bytes
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _int(field: int, value: int) -> bytes:  # int32, enum, bool: wire type 0
    return _varint(field << 3) + _varint(int(value))


def _float(field: int, value: float) -> bytes:  # wire type 5
    return _varint(field << 3 | 5) + struct.pack("<f", value)


def _bytes(field: int, value: bytes) -> bytes:  # string, bytes, message: wire type 2
    return _varint(field << 3 | 2) + _varint(len(value)) + value


def _string(field: int, value: str) -> bytes:
    return _bytes(field, value.encode("utf-8"))


def model_proto(pieces, unk_id: int, bos_id: int, eos_id: int, pad_id: int) -> bytes:
    """A serialized ModelProto of `pieces` [(piece, score, type)], unigram with byte
    fallback and the identity normalizer. The ids are recorded in TrainerSpec as a
    trained model records them (-1: none); SentencePiece finds the special pieces by
    their names and types."""
    out = bytearray()
    for piece, score, kind in pieces:  # ModelProto.pieces = 1
        out += _bytes(1, _string(1, piece) + _float(2, score) + _int(3, kind))
    trainer = (_int(3, UNIGRAM) + _int(4, len(pieces)) + _int(35, True)  # model_type, vocab_size, byte_fallback
               + _int(40, unk_id) + _int(41, bos_id) + _int(42, eos_id) + _int(43, pad_id))
    out += _bytes(2, trainer)  # ModelProto.trainer_spec = 2
    # NormalizerSpec: name, add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces
    normalizer = _string(1, "identity") + _int(3, True) + _int(4, True) + _int(5, True)
    out += _bytes(3, normalizer)  # ModelProto.normalizer_spec = 3
    return bytes(out)


# --- the vocabulary ---

def _special_id(config: dict, key: str) -> int | None:
    value = config.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"config.json: {key} is {value!r}; a bench tokenizer places one piece at an "
                         f"integer id (a list of eos ids is not supported)")
    return value


def source_pieces(path: Path = SOURCE_PIECES) -> list[tuple[str, float]]:
    """The normal pieces of the SentencePiece model at `path`, with their scores, in id
    order (its control, unknown, byte and unused pieces left out)."""
    import sentencepiece as spm

    if not path.is_file():
        raise ValueError(f"{path}: no such file; give --pieces a SentencePiece model whose pieces to use")
    sp = spm.SentencePieceProcessor(model_file=str(path))
    return [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())
            if not (sp.is_control(i) or sp.is_unknown(i) or sp.is_byte(i) or sp.is_unused(i))]


def vocabulary(config: dict, pieces: list[tuple[str, float]]) -> tuple[list, dict]:
    """[(piece, score, type)] by id for config.json's vocab_size and special ids, and
    {"unk", "bos", "eos", "pad"} -> id (-1 when absent). ValueError when the ids do not
    fit or vocab_size cannot hold the specials, bytes and `pieces`."""
    vocab_size = config.get("vocab_size")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError(f"config.json: vocab_size is {vocab_size!r}, expected a positive integer")
    bos = _special_id(config, "bos_token_id")
    eos = _special_id(config, "eos_token_id")
    pad = _special_id(config, "pad_token_id")
    table: list = [None] * vocab_size
    for key, token_id, piece in (("eos_token_id", eos, "</s>"), ("bos_token_id", bos, "<s>"),
                                 ("pad_token_id", pad, "<pad>")):
        if token_id is None:
            continue
        if not 0 <= token_id < vocab_size:
            raise ValueError(f"config.json: {key} {token_id} is outside the vocabulary [0, {vocab_size})")
        if table[token_id] is None:  # else an earlier special's too: german-llama's bos is its eos, </s>
            table[token_id] = (piece, 0.0, CONTROL)
    free = iter([i for i, entry in enumerate(table) if entry is None])
    unk = next(free, None)
    needed = sum(entry is not None for entry in table) + 1 + len(BYTE_PIECES) + len(pieces)
    if unk is None or needed > vocab_size:
        raise ValueError(f"config.json: vocab_size {vocab_size} is too small for a bench tokenizer: its special "
                         f"pieces, <unk>, {len(BYTE_PIECES)} byte pieces and {len(pieces)} text pieces need "
                         f"{needed}")
    table[unk] = ("<unk>", 0.0, UNKNOWN)
    for piece in BYTE_PIECES:
        table[next(free)] = (piece, 0.0, BYTE)
    for piece, score in pieces:
        table[next(free)] = (piece, score, NORMAL)
    lowest = min((score for _, score in pieces), default=0.0)
    for token_id in free:
        table[token_id] = (filler_piece(token_id), lowest - 1.0, NORMAL)
    names = [entry[0] for entry in table]
    if len(set(names)) != len(names):
        raise ValueError("the bench tokenizer's pieces are not unique: --pieces holds a byte or filler piece?")

    def find(piece):
        return names.index(piece) if piece in names else -1

    return table, {"unk": unk, "bos": find("<s>"), "eos": find("</s>"), "pad": find("<pad>")}


def tokenizer_model(config: dict, pieces_path: Path = SOURCE_PIECES) -> bytes:
    """The tokenizer.model for a model of `config` (its config.json), read back by
    sentencepiece before it is returned. ValueError says what is wrong."""
    import sentencepiece as spm

    table, ids = vocabulary(config, source_pieces(Path(pieces_path)))
    data = model_proto(table, ids["unk"], ids["bos"], ids["eos"], ids["pad"])
    check = spm.SentencePieceProcessor()
    check.load_from_serialized_proto(data)
    if check.get_piece_size() != len(table):
        raise AssertionError(f"sentencepiece read {check.get_piece_size()} pieces of {len(table)}")
    return data


def save_tokenizer(data: bytes, model_dir: Path) -> Path:
    """model_dir/tokenizer.model = data, atomically: a reader never sees half a file."""
    out = Path(model_dir) / "tokenizer.model"
    partial = out.with_name(f".tokenizer.model.{os.getpid()}")
    partial.write_bytes(data)
    os.replace(partial, out)
    return out


def write_tokenizer(model_dir: Path, pieces_path: Path = SOURCE_PIECES) -> Path:
    """Writes model_dir/tokenizer.model for model_dir/config.json; returns its path."""
    config_path = Path(model_dir) / "config.json"
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{config_path}: cannot read a config.json ({e}); give the directory of a model") from None
    return save_tokenizer(tokenizer_model(config, pieces_path), model_dir)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model_dir", type=Path, help="a model directory: reads its config.json, writes tokenizer.model")
    p.add_argument("--pieces", type=Path, default=SOURCE_PIECES,
                   help="the SentencePiece model whose normal pieces to include (default: german-llama's)")
    args = p.parse_args()
    try:
        print(write_tokenizer(args.model_dir, args.pieces))
    except ValueError as e:
        print(f"bench_tokenizer.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
