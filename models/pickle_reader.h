// The pickle of a PyTorch state dict (data.pkl inside the zip torch.save writes), read
// by an allowlist, never by an interpreter.
//
// A pickle is a program: its GLOBAL opcode imports any Python callable and REDUCE calls
// it, so unpickling a stranger's file runs the stranger's code. A state dict needs a
// handful of opcodes and four kinds of callable, and this reader knows only those:
//   - opcodes: PROTO, FRAME, STOP, MARK, the empty and MARK/TUPLE1-3 containers, the
//     integers (BININT, BININT1, BININT2, LONG1), None/True/False, the unicode strings,
//     the memo (BINPUT, LONG_BINPUT, MEMOIZE, BINGET, LONG_BINGET), GLOBAL and
//     STACK_GLOBAL, BINPERSID, REDUCE, BUILD, SETITEM(S), APPEND(S);
//   - globals: collections.OrderedDict (called with no arguments; BUILD may set its
//     attributes, as nn.Module.state_dict() sets `_metadata`), torch._utils
//     ._rebuild_tensor_v2 (a tensor: storage, offset, shape, stride, requires_grad,
//     empty backward hooks), and torch's typed storage classes (torch.FloatStorage, ...),
//     which appear only inside persistent ids ('storage', type, key, location, numel),
//     each naming the zip entry data/<key>.
// Anything else (another global such as os.system, another opcode, a call of anything
// but those two callables) is refused with its name and byte offset before it could
// matter. Nothing of the pickle is ever run; the reader builds plain values on a stack.
//
// The result must be a dict of string names to tensors. Each tensor is checked against
// its storage: a known dtype, a shape whose element and byte counts fit 64 bits,
// contiguous row-major strides (a transposed view is refused by name: ordo reads
// tensors as flat rows), and offset + elements within the storage's elements.
//
// Limits, each refused by name (README, Untrusted input): the pickle at most
// kMaxPickleBytes, values held at most kMaxPickleValues, memo slots below
// kMaxMemoSlots, stack depth kMaxStackDepth, nested MARKs kMaxMarkDepth, tensors
// kMaxTensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "models/safetensors.h"

namespace ordo {

inline constexpr std::size_t kMaxPickleBytes = 64u << 20;    // 300,000 tensors take about 30 MB
inline constexpr std::size_t kMaxPickleValues = 1u << 23;    // strings, containers and their items
inline constexpr std::size_t kMaxMemoSlots = 1u << 23;       // torch writes about 10 per tensor
inline constexpr std::size_t kMaxStackDepth = 1u << 16;      // pickle batches SETITEMS by 1000
inline constexpr std::size_t kMaxMarkDepth = 256;            // a state dict nests 3 deep
inline constexpr std::size_t kMaxTensors = 1u << 20;

// One storage, as a persistent id names it: ('storage', torch.FloatStorage, "0", "cpu", 6).
struct PickledStorage {
  std::string key;       // its bytes are the zip entry <archive>/data/<key>
  DType dtype;
  std::int64_t numel;    // elements, not bytes
};

// One tensor of the state dict: a contiguous run of its storage.
struct PickledTensor {
  std::string name;
  std::size_t storage;   // index into PickledStateDict::storages
  std::int64_t offset;   // first element within the storage
  Shape shape;
};

struct PickledStateDict {
  std::vector<PickledStorage> storages;  // each key once, in order of first use
  std::vector<PickledTensor> tensors;    // in the dict's order
};

// Reads `pickle`. `where` names it in errors ("dir/pytorch_model.bin: data.pkl").
// Throws Error naming the opcode, global, key or tensor at fault and the byte offset.
PickledStateDict read_state_dict_pickle(std::span<const std::byte> pickle, const std::string& where);

}  // namespace ordo
