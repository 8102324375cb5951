#!/usr/bin/python3
"""Writes the seeds of the torch_bin fuzz target, tests/fuzz/corpus/torch_bin/, with
torch.save itself (so it needs PyTorch: run it with Debian's python3-torch):

    /usr/bin/python3 tests/fuzz/make_torch_bin_corpus.py

The state dicts are the first TENSORS tensors of the shipped sinusoidal model made small
exactly as make_corpus.py makes its safetensors seeds (the whole model would only repeat
the same entries, at 30 KB a seed), saved as a module's state_dict() is (an OrderedDict with
`_metadata`), in F32, F16 and BF16; then the variants a real file may hold: a tied name
sharing a storage, a view at a storage offset, pickle protocol 4 (FRAME, MEMOIZE,
SHORT_BINUNICODE, STACK_GLOBAL), the entries deflated by another zip writer, and the
legacy format of torch.save before PyTorch 1.6 (which ordo refuses).
"""
import io
import pathlib
import sys
import zipfile
from collections import OrderedDict

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import make_corpus  # noqa: E402

OUT = make_corpus.CORPUS / "torch_bin"
TENSORS = 12
DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def state_dict(dtype):
    _, tensors, _ = make_corpus.small_model("sinusoidal")
    state = OrderedDict()
    for name, stored, shape, raw in tensors[:TENSORS]:
        t = torch.frombuffer(bytearray(raw), dtype=DTYPES[stored]).reshape(shape)
        state[name] = t.to(DTYPES[dtype]).clone()
    state._metadata = OrderedDict([("", {"version": 1}), ("model", {"version": 1})])
    return state


def saved(state, **kwargs) -> bytes:
    buffer = io.BytesIO()
    torch.save(state, buffer, **kwargs)
    return buffer.getvalue()


def deflated(data: bytes) -> bytes:
    """The same archive re-written by Python's zipfile with every entry deflated."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            target.writestr(info.filename, source.read(info))
    return out.getvalue()


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for dtype in DTYPES:
        (OUT / f"sinusoidal-{dtype.lower()}").write_bytes(saved(state_dict(dtype)))
    tied = state_dict("F32")
    first = next(iter(tied))
    tied["tied.copy"] = tied[first]  # one tensor, two names
    big = torch.arange(48, dtype=torch.float32)
    tied["view.at.offset"] = big[16:32].view(4, 4)  # a contiguous run inside a larger storage
    (OUT / "tied-and-view").write_bytes(saved(tied))
    (OUT / "protocol-4").write_bytes(saved(state_dict("F16"), pickle_protocol=4))
    (OUT / "deflated").write_bytes(deflated(saved(state_dict("BF16"))))
    (OUT / "legacy-format").write_bytes(saved(state_dict("F32"), _use_new_zipfile_serialization=False))
    for path in sorted(OUT.iterdir()):
        print(f"{path.name}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
