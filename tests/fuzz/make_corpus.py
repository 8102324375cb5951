#!/usr/bin/env python3
"""Writes the fuzz seed corpus, tests/fuzz/corpus/<target>/, from the shipped models.

The seeds are the real files made small: each shipped model's safetensors header with
its tensor names, dtypes and metadata as published, its dimensions scaled down (d_model
128 -> 8, ...) and each tensor's data the first bytes of the real tensor's data; its
config.json with the same dimensions scaled, so that config and weights load together;
the same weights split over two shards with a Hugging Face index; and input lines from
weights/data plus the hostile texts of issue 11; and ordo serve's request bodies. Only Python's standard library is used.
Run it again after the shipped models change:  python3 tests/fuzz/make_corpus.py
"""
import json
import pathlib
import struct

ROOT = pathlib.Path(__file__).resolve().parents[2]
WEIGHTS = ROOT / "weights"
CORPUS = pathlib.Path(__file__).resolve().parent / "corpus"
SEPARATOR = b"\n--ordo-fuzz-file--\n"  # tests/fuzz/fuzz_support.h: kFileSeparator
MODELS = ["sinusoidal", "learned", "rope", "sinusoidal-split", "none", "german-llama"]
DTYPE_SIZE = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}

# Every dimension of the shipped models, scaled: vocab 344, d_model 128, ffn 256, the
# LLaMA model's K/V width 64 (2 heads x 32); max_position_embeddings 45 stays.
DIM = {344: 22, 128: 8, 256: 16, 64: 4, 45: 45, 1: 1}
CONFIG_KEYS = {"vocab_size", "decoder_vocab_size", "d_model", "hidden_size", "encoder_ffn_dim",
               "decoder_ffn_dim", "intermediate_size"}


def read_safetensors(path):
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n]), data[8 + n:]


def write_safetensors(tensors, metadata):
    """tensors: [(name, dtype, shape, bytes)] -> the file's bytes."""
    header, offset = {}, 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(raw for *_, raw in tensors)


def small_model(name, dims=None):
    """(config bytes, [(tensor name, dtype, scaled shape, bytes)], metadata); dims: the
    scaling (DIM by default)."""
    dims = dims or DIM
    header, data = read_safetensors(WEIGHTS / name / "model.safetensors")
    metadata = header.pop("__metadata__", None)
    tensors = []
    for tensor, entry in sorted(header.items(), key=lambda item: item[1]["data_offsets"][0]):
        shape = [dims[d] for d in entry["shape"]]
        count = 1
        for d in shape:
            count *= d
        begin = entry["data_offsets"][0]
        tensors.append((tensor, entry["dtype"], shape, data[begin:begin + count * DTYPE_SIZE[entry["dtype"]]]))
    config = json.loads((WEIGHTS / name / "config.json").read_text())
    for key in CONFIG_KEYS & config.keys():
        config[key] = dims[config[key]]
    if "head_dim" in config:  # LLaMA: 4 heads of 32 -> 4 heads of 2
        config["head_dim"] = dims[128] // config["num_attention_heads"]
    return json.dumps(config, indent=2).encode(), tensors, metadata


# Quantized seeds (README, "Quantized weights"): int4 packs runs of 32 weights, so its
# seed keeps every width a multiple of 32 (d_model and the feed-forward 32); the mixed
# one (german-llama) keeps its feed-forward 22 wide, so that its down projections are
# int8 with a scale a row inside the int4 directory.
DIM_INT4 = {344: 22, 128: 32, 256: 32, 45: 45, 1: 1}
DIM_INT4_MIXED = {344: 22, 128: 32, 64: 16, 45: 45, 1: 1}
FLOAT_FORMAT = {"F32": "f", "F16": "e"}


def is_matrix(name, shape):
    """What ordo runs in a stored format: linears, embeddings, the head; not position tables."""
    return len(shape) == 2 and name.endswith(".weight") and "embed_positions" not in name


def quantize_matrix(name, dtype, shape, raw, kind, group):
    """[(name, dtype, shape, bytes)]: the matrix and its `_scale`, as README lays them out."""
    rows, cols = shape
    values = struct.unpack(f"<{rows * cols}{FLOAT_FORMAT[dtype]}", raw)
    group = group or cols
    scales, out = [], bytearray(rows * cols if kind == "int8" else rows * cols // 2)
    for r in range(rows):
        for g in range(cols // group):
            block = values[r * cols + g * group: r * cols + (g + 1) * group]
            amax = max(abs(v) for v in block)
            if kind == "int8":
                scale = struct.unpack("<f", struct.pack("<f", amax / 127))[0] if amax > 0 else 1.0
                for k, v in enumerate(block):
                    out[r * cols + g * group + k] = max(-127, min(127, round(v / scale))) & 0xFF
            else:
                scale = struct.unpack("<e", struct.pack("<e", amax / 7))[0] if amax > 0 else 1.0
                scale = scale or 2.0 ** -24
                for k, v in enumerate(block):
                    at = g * group + k
                    n = max(-8, min(7, round(v / scale))) + 8
                    out[r * cols // 2 + at // 32 * 16 + at % 16] |= n if at % 32 < 16 else n << 4
            scales.append(scale)
    if kind == "int8":
        scale_shape = [rows] if group == cols else [rows, cols // group]
        return [(name, "I8", shape, bytes(out)),
                (name + "_scale", "F32", scale_shape, struct.pack(f"<{len(scales)}f", *scales))]
    return [(name, "U8", [rows, cols // 2], bytes(out)),
            (name + "_scale", "F16", [rows, cols // group], struct.pack(f"<{len(scales)}e", *scales))]


def quantized_model(name, kind, group, dims=None):
    """A small model (as small_model) with its matrices quantized and the config key set."""
    config, tensors, metadata = small_model(name, dims)
    config = json.loads(config)
    config["quantization"] = {"type": kind, "group_size": group}
    out = []
    for tensor in tensors:
        if not is_matrix(tensor[0], tensor[2]):
            out.append(tensor)
            continue
        # int4 stores a width its group does not divide as int8 with a scale a row.
        fallback = kind == "int4" and tensor[2][1] % group != 0
        out += quantize_matrix(*tensor, "int8" if fallback else kind, 0 if fallback else group)
    return json.dumps(config, indent=2).encode(), out, metadata


def write(target, name, data):
    directory = CORPUS / target
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_bytes(data)


def main():
    for name in MODELS:
        config, tensors, metadata = small_model(name)
        weights = write_safetensors(tensors, metadata)
        write("safetensors", name, weights)
        write("config", name, (WEIGHTS / name / "config.json").read_bytes())
        write("model_dir", name, config + SEPARATOR + weights)
        if name in ("sinusoidal", "german-llama"):
            half = len(tensors) // 2
            shards = [tensors[:half], tensors[half:]]
            files = [f"model-{k:05d}-of-{len(shards):05d}.safetensors" for k in range(1, len(shards) + 1)]
            index = {"metadata": {"total_size": sum(len(raw) for *_, raw in tensors)},
                     "weight_map": {t[0]: files[k] for k, shard in enumerate(shards) for t in shard}}
            parts = [json.dumps(index, indent=2).encode()] + [write_safetensors(s, metadata) for s in shards]
            write("shard_index", name, SEPARATOR.join(parts))
    # The quantized binder: int8 with a scale a row and in groups, int4 (groups of 32),
    # int4 with int8 fallbacks.
    for seed, (name, kind, group, dims) in {
            "sinusoidal-int8-rows": ("sinusoidal", "int8", 0, None),
            "german-llama-int8-groups": ("german-llama", "int8", 2, None),
            "rope-int4": ("rope", "int4", 32, DIM_INT4),
            "german-llama-int4-mixed": ("german-llama", "int4", 32, DIM_INT4_MIXED)}.items():
        config, tensors, metadata = quantized_model(name, kind, group, dims)
        weights = write_safetensors(tensors, metadata)
        write("safetensors", seed, weights)
        write("model_dir", seed, config + SEPARATOR + weights)
    write("safetensors", "empty-header", write_safetensors([], None))
    # A LLaMA config with an eos list and a null head_dim, as some checkpoints publish.
    llama = json.loads((WEIGHTS / "german-llama" / "config.json").read_text())
    llama.update({"eos_token_id": [1, 2], "head_dim": None})
    write("config", "llama-eos-list", json.dumps(llama, indent=2).encode())

    lines = []
    for tsv in ("test.tsv", "long.tsv"):
        with open(WEIGHTS / "data" / tsv, encoding="utf-8") as f:
            source, target = next(f).rstrip("\n").split("\t")[:2]
            lines += [source.encode(), target.encode()]
    lines += ["Straße café \U0001F431 cats".encode(), b"\xff\xfe cats chase dogs", b"cats \x80", b"\xc0\xaf",
              b"\xed\xa0\x80", b"cats \xe2\x82", b"cats\x00chase\tdogs\r", b"   \t "]
    for k, line in enumerate(lines):
        write("tokenizer", f"line-{k:02d}", line)

    # Hugging Face side files (fuzz_hf_files: vocab.json, generation_config.json,
    # tokenizer_config.json, special_tokens_map.json): the shipped Marian model's, and an
    # NLLB tokenizer description over the shipped SentencePiece model (344 pieces: the
    # codes from id 345, fairseq's offset) as NllbTokenizer.save_pretrained writes it,
    # with added_tokens_decoder and without (the codes in special_tokens_map.json).
    marian = WEIGHTS / "marian"
    write("hf_files", "marian", SEPARATOR.join([(marian / "vocab.json").read_bytes(),
                                                (marian / "generation_config.json").read_bytes(),
                                                (marian / "tokenizer_config.json").read_bytes()]))
    codes = ["eng_Latn", "deu_Latn", "fra_Latn"]

    def added(content):
        return {"content": content, "lstrip": False, "normalized": False, "rstrip": False,
                "single_word": False, "special": True}
    decoder = {str(i): added(t) for i, t in enumerate(["<s>", "<pad>", "</s>", "<unk>"])}
    decoder.update({str(345 + i): added(code) for i, code in enumerate(codes)})
    decoder[str(345 + len(codes))] = added("<mask>")
    nllb_config = {"additional_special_tokens": codes, "legacy_behaviour": False, "src_lang": "eng_Latn",
                   "tokenizer_class": "NllbTokenizer", "added_tokens_decoder": decoder}
    special = {"additional_special_tokens": codes, "eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>"}
    generation = {"decoder_start_token_id": 2, "eos_token_id": 2, "forced_bos_token_id": 5, "max_length": 200,
                  "num_beams": 4, "bad_words_ids": [[1]], "no_repeat_ngram_size": 3, "length_penalty": 1.0}
    vocabulary = {"<unk>": 0, "</s>": 1, "<pad>": 2, "▁cats": 3, ">>deu<<": 4}
    write("hf_files", "nllb", SEPARATOR.join(json.dumps(x, indent=2, ensure_ascii=False).encode()
                                              for x in (vocabulary, generation, nllb_config, special)))
    legacy = {"tokenizer_class": "NllbTokenizerFast", "legacy_behaviour": True}
    write("hf_files", "nllb-legacy", SEPARATOR.join(json.dumps(x).encode()
                                                     for x in (vocabulary, {"num_beams": 2}, legacy, special)))

    # ordo serve's request bodies: what its clients send (README's curl lines, an OpenAI
    # client's completions request with its nulls, LibreTranslate's), and near misses.
    requests = [
        {"text": ["cats chase dogs", "birds sing"], "beam_size": 4},
        {"text": "cats chase dogs", "model": "en-de", "num_hypotheses": 2, "beam_size": 2, "max_length": 20},
        {"text": ["cats"], "sampling": True, "temperature": 0.8, "top_k": 5, "top_p": 0.9, "seed": 7,
         "source_lang": "en", "target_lang": "de"},
        {"model": "german-llama", "prompt": "Die Katze", "max_tokens": 12, "temperature": 0},
        {"model": "german-llama", "prompt": ["Die Katze", "Der Hund"], "max_tokens": 16, "temperature": 0.7,
         "top_p": 1, "seed": 3, "stop": ["\n", "."], "stream": True, "logprobs": 0, "n": 1, "best_of": 1,
         "echo": False, "suffix": None, "user": "x", "frequency_penalty": 0, "presence_penalty": 0},
        {"q": "cats chase dogs", "source": "en", "target": "de", "format": "text", "api_key": ""},
        {"q": ["cats", "dogs"], "source": "auto", "target": "de"},
        {"text": "cats", "beam_size": 18446744073709551615, "seed": -1, "temperature": 1e308},
    ]
    for k, body in enumerate(requests):
        write("requests", f"body-{k:02d}.json", json.dumps(body).encode())
    write("requests", "not-an-object", b'["cats", 1, null, true, {"text": {}}]')


if __name__ == "__main__":
    main()
