#include "models/pickle_reader.h"

#include <cstring>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "engine/error.h"
#include "engine/printable.h"

namespace ordo {

namespace {

// What a value on the stack is. Containers, strings, storages and tensors live in the
// reader's arenas and a Value refers to them by index, so a dict filled by SETITEMS
// after BINPUT is the same dict a later BINGET fetches (pickle's reference semantics),
// and a pickle that puts a list inside itself makes no cycle of owners to leak.
enum class Kind : std::uint8_t { None, Bool, Int, String, Tuple, List, Dict, Global, Storage, Tensor };

// The only callables and types a state dict's pickle names.
enum class Global : std::uint8_t { OrderedDict, RebuildTensor, StorageType };

struct Value {
  Kind kind = Kind::None;
  Global global = Global::OrderedDict;  // Kind::Global
  std::uint32_t index = 0;              // into strings_, containers_, storages_ or tensors_
  std::int64_t number = 0;              // Bool, Int; a StorageType global: its DType
};

struct StorageType {
  std::string_view name;  // in module torch
  DType dtype;
};
// torch.save names a tensor's storage by its legacy typed class, in torch 2.x too
// (TypedStorage._pickle_storage_type()).
constexpr StorageType kStorageTypes[] = {
    {"FloatStorage", DType::F32}, {"HalfStorage", DType::F16},  {"BFloat16Storage", DType::BF16},
    {"DoubleStorage", DType::F64}, {"LongStorage", DType::I64}, {"IntStorage", DType::I32},
    {"ShortStorage", DType::I16}, {"CharStorage", DType::I8},   {"ByteStorage", DType::U8},
    {"BoolStorage", DType::Bool},
};

std::string_view storage_type_name(DType dtype) {
  for (const StorageType& type : kStorageTypes)
    if (type.dtype == dtype) return type.name;
  return "?";
}

// Every opcode of pickle protocols 0-5 (pickletools.opcodes), so that a refused one is
// named. Those this reader runs are the cases of Reader::step().
struct OpcodeName {
  std::uint8_t code;
  const char* name;
};
constexpr OpcodeName kOpcodeNames[] = {
    {0x49, "INT"},        {0x4a, "BININT"},          {0x4b, "BININT1"},      {0x4d, "BININT2"},
    {0x4c, "LONG"},       {0x8a, "LONG1"},           {0x8b, "LONG4"},        {0x53, "STRING"},
    {0x54, "BINSTRING"},  {0x55, "SHORT_BINSTRING"}, {0x42, "BINBYTES"},     {0x43, "SHORT_BINBYTES"},
    {0x8e, "BINBYTES8"},  {0x96, "BYTEARRAY8"},      {0x97, "NEXT_BUFFER"},  {0x98, "READONLY_BUFFER"},
    {0x4e, "NONE"},       {0x88, "NEWTRUE"},         {0x89, "NEWFALSE"},     {0x56, "UNICODE"},
    {0x8c, "SHORT_BINUNICODE"}, {0x58, "BINUNICODE"}, {0x8d, "BINUNICODE8"}, {0x46, "FLOAT"},
    {0x47, "BINFLOAT"},   {0x5d, "EMPTY_LIST"},      {0x61, "APPEND"},       {0x65, "APPENDS"},
    {0x6c, "LIST"},       {0x29, "EMPTY_TUPLE"},     {0x74, "TUPLE"},        {0x85, "TUPLE1"},
    {0x86, "TUPLE2"},     {0x87, "TUPLE3"},          {0x7d, "EMPTY_DICT"},   {0x64, "DICT"},
    {0x73, "SETITEM"},    {0x75, "SETITEMS"},        {0x8f, "EMPTY_SET"},    {0x90, "ADDITEMS"},
    {0x91, "FROZENSET"},  {0x30, "POP"},             {0x32, "DUP"},          {0x28, "MARK"},
    {0x31, "POP_MARK"},   {0x67, "GET"},             {0x68, "BINGET"},       {0x6a, "LONG_BINGET"},
    {0x70, "PUT"},        {0x71, "BINPUT"},          {0x72, "LONG_BINPUT"},  {0x94, "MEMOIZE"},
    {0x82, "EXT1"},       {0x83, "EXT2"},            {0x84, "EXT4"},         {0x63, "GLOBAL"},
    {0x93, "STACK_GLOBAL"}, {0x52, "REDUCE"},        {0x62, "BUILD"},        {0x69, "INST"},
    {0x6f, "OBJ"},        {0x81, "NEWOBJ"},          {0x92, "NEWOBJ_EX"},    {0x80, "PROTO"},
    {0x2e, "STOP"},       {0x95, "FRAME"},           {0x50, "PERSID"},       {0x51, "BINPERSID"},
};

const char* opcode_name(std::uint8_t code) {
  for (const OpcodeName& op : kOpcodeNames)
    if (op.code == code) return op.name;
  return nullptr;
}

std::string hex_byte(std::uint8_t byte) {
  constexpr char kDigits[] = "0123456789abcdef";
  return std::string("0x") + kDigits[byte >> 4] + kDigits[byte & 0xf];
}

// A tensor as _rebuild_tensor_v2 received it; checked once its name is known.
struct RawTensor {
  std::uint32_t storage;
  std::int64_t offset;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> stride;
};

class Reader {
 public:
  Reader(std::span<const std::byte> bytes, const std::string& where) : bytes_(bytes), where_(where) {}

  PickledStateDict read() {
    if (bytes_.size() > kMaxPickleBytes)
      throw Error(where_, "the pickle is " + std::to_string(bytes_.size()) + " bytes, more than ordo's limit of " +
                              std::to_string(kMaxPickleBytes) + " for a state dict's",
                  "a state dict of 300,000 tensors takes about 30 MB");
    while (!stopped_) step();
    return state_dict(result_);
  }

 private:
  // ------------------------------------------------------------------ errors, input

  [[noreturn]] void fail(const std::string& what, const std::string& hint = "") const {
    throw Error(where_ + ", byte " + std::to_string(op_at_), what, hint);
  }

  void need(std::size_t count) const {
    if (bytes_.size() - pos_ < count)
      fail("the pickle ends inside " + std::string(opcode_name(op_)) + ", " + std::to_string(count) +
               " bytes short",
           "a truncated file?");
  }
  std::uint64_t little_endian(std::size_t count) {
    need(count);
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < count; ++i)
      value |= static_cast<std::uint64_t>(std::to_integer<std::uint8_t>(bytes_[pos_ + i])) << (8 * i);
    pos_ += count;
    return value;
  }
  std::string text(std::uint64_t length) {
    need(length);  // also bounds length by the pickle's size
    std::string result(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<std::size_t>(length));
    pos_ += static_cast<std::size_t>(length);
    return result;
  }
  // A line of GLOBAL's operand, up to its newline.
  std::string line() {
    const auto* begin = reinterpret_cast<const char*>(bytes_.data() + pos_);
    const void* end = std::memchr(begin, '\n', bytes_.size() - pos_);
    if (end == nullptr) fail("the pickle ends inside GLOBAL's name, which a newline ends", "a truncated file?");
    std::string result(begin, static_cast<const char*>(end));
    pos_ += result.size() + 1;
    return result;
  }

  // ------------------------------------------------------------------ values

  void count_values(std::size_t added) {
    values_ += added;
    if (values_ > kMaxPickleValues)
      fail("the pickle builds more than " + std::to_string(kMaxPickleValues) + " values (strings, containers and their items), ordo's limit",
           "a state dict needs about 15 per tensor");
  }
  void push(Value value) {
    if (stack_.size() >= kMaxStackDepth)
      fail("the pickle's stack grows past " + std::to_string(kMaxStackDepth) + " values, ordo's limit",
           "pickle itself pushes at most about 2,000 for a dict");
    stack_.push_back(value);
  }
  Value pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back()))
      fail(std::string(opcode_name(op_)) + " takes a value from an empty stack", "not a pickle torch.save wrote");
    Value value = stack_.back();
    stack_.pop_back();
    return value;
  }
  Value& top() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back()))
      fail(std::string(opcode_name(op_)) + " needs a value on an empty stack", "not a pickle torch.save wrote");
    return stack_.back();
  }
  std::vector<Value> pop_to_mark() {
    if (marks_.empty()) fail(std::string(opcode_name(op_)) + " without a MARK before it", "not a pickle torch.save wrote");
    std::vector<Value> items(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }

  Value container(Kind kind, std::vector<Value> items) {
    count_values(1 + items.size());
    containers_.push_back(std::move(items));
    return {kind, Global::OrderedDict, static_cast<std::uint32_t>(containers_.size() - 1), 0};
  }
  Value string(std::string value) {
    count_values(1);
    strings_.push_back(std::move(value));
    return {Kind::String, Global::OrderedDict, static_cast<std::uint32_t>(strings_.size() - 1), 0};
  }
  static Value integer(std::int64_t value) { return {Kind::Int, Global::OrderedDict, 0, value}; }
  static Value boolean(bool value) { return {Kind::Bool, Global::OrderedDict, 0, value ? 1 : 0}; }
  static Value global(Global which, std::int64_t number = 0) { return {Kind::Global, which, 0, number}; }

  const std::vector<Value>& items(const Value& value) const { return containers_[value.index]; }

  std::string global_name(const Value& value) const {
    switch (value.global) {
      case Global::OrderedDict: return "collections.OrderedDict";
      case Global::RebuildTensor: return "torch._utils._rebuild_tensor_v2";
      case Global::StorageType: return "torch." + std::string(storage_type_name(static_cast<DType>(value.number)));
    }
    return "?";
  }

  // A value as a message names it.
  std::string describe(const Value& value) const {
    switch (value.kind) {
      case Kind::None: return "None";
      case Kind::Bool: return value.number != 0 ? "True" : "False";
      case Kind::Int: return "the integer " + std::to_string(value.number);
      case Kind::String: {
        const std::string& s = strings_[value.index];
        return "the string '" + printable(s.substr(0, 64)) + (s.size() > 64 ? "...'" : "'");
      }
      case Kind::Tuple: return "a tuple of " + std::to_string(items(value).size());
      case Kind::List: return "a list of " + std::to_string(items(value).size());
      case Kind::Dict: return "a dict of " + std::to_string(items(value).size() / 2) + " entries";
      case Kind::Global: return global_name(value);
      case Kind::Storage: return "a storage";
      case Kind::Tensor: return "a tensor";
    }
    return "?";
  }

  // ------------------------------------------------------------------ the opcodes

  void put(std::uint64_t slot) {
    if (slot >= kMaxMemoSlots)
      fail(std::string(opcode_name(op_)) + " writes memo slot " + std::to_string(slot) + ", beyond ordo's limit of " +
           std::to_string(kMaxMemoSlots) + " slots");
    const Value value = top();
    if (slot >= memo_.size()) memo_.resize(static_cast<std::size_t>(slot) + 1);
    if (!memo_[slot]) ++memo_entries_;
    memo_[slot] = value;
  }
  void get(std::uint64_t slot) {
    if (slot >= memo_.size() || !memo_[slot])
      fail(std::string(opcode_name(op_)) + " reads memo slot " + std::to_string(slot) +
               ", which no earlier BINPUT wrote",
           "a corrupted pickle");
    push(*memo_[slot]);
  }

  Value resolve_global(const std::string& module, const std::string& name) {
    if (module == "collections" && name == "OrderedDict") return global(Global::OrderedDict);
    if (module == "torch._utils" && name == "_rebuild_tensor_v2") return global(Global::RebuildTensor);
    if (module == "torch")
      for (const StorageType& type : kStorageTypes)
        if (name == type.name) return global(Global::StorageType, static_cast<std::int64_t>(type.dtype));
    fail("the pickle calls '" + printable(module) + "." + printable(name) +
             "', which a state dict never does: ordo refuses it",
         "a state dict names only collections.OrderedDict, torch._utils._rebuild_tensor_v2 and torch's storage "
         "types; this file is not one, or was made to run code");
  }

  Value persistent_load(const Value& pid) {
    const bool shaped = pid.kind == Kind::Tuple && items(pid).size() == 5;
    const std::vector<Value>* fields = shaped ? &items(pid) : nullptr;
    const auto field = [&](std::size_t i, Kind kind) { return fields != nullptr && (*fields)[i].kind == kind; };
    if (!(field(0, Kind::String) && strings_[(*fields)[0].index] == "storage" && field(1, Kind::Global) &&
          (*fields)[1].global == Global::StorageType && field(2, Kind::String) && field(3, Kind::String) &&
          field(4, Kind::Int) && (*fields)[4].number >= 0))
      fail("BINPERSID loads " + describe(pid) + ", not a storage ('storage', torch.<Type>Storage, key, location, elements)",
           "not a state dict torch.save wrote");
    const auto dtype = static_cast<DType>((*fields)[1].number);
    const std::string& key = strings_[(*fields)[2].index];
    const std::int64_t numel = (*fields)[4].number;
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(static_cast<std::uint64_t>(numel), dtype_size(dtype), &bytes))
      fail("storage '" + printable(key) + "' of " + std::to_string(numel) + " elements overflows 64 bits");
    const auto [found, fresh] = storage_index_.emplace(key, static_cast<std::uint32_t>(storages_.size()));
    if (fresh) {
      storages_.push_back({key, dtype, numel});
    } else {
      const PickledStorage& first = storages_[found->second];
      if (first.dtype != dtype || first.numel != numel)
        fail("storage '" + printable(key) + "' is loaded as torch." + std::string(storage_type_name(first.dtype)) +
             " of " + std::to_string(first.numel) + " elements and again as torch." +
             std::string(storage_type_name(dtype)) + " of " + std::to_string(numel));
    }
    return {Kind::Storage, Global::OrderedDict, found->second, 0};
  }

  bool all_ints(const Value& value) const {
    if (value.kind != Kind::Tuple) return false;
    for (const Value& item : items(value))
      if (item.kind != Kind::Int) return false;
    return true;
  }

  // torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
  // backward_hooks[, metadata]): torch 2.x adds metadata only when it is not empty.
  Value rebuild_tensor(const Value& args) {
    const std::vector<Value>& a = items(args);
    const std::string call = "torch._utils._rebuild_tensor_v2";
    if (a.size() != 6 && a.size() != 7)
      fail(call + " is called with " + std::to_string(a.size()) + " arguments, not 6",
           "not a state dict torch.save wrote");
    const auto expect = [&](bool ok, const char* argument, const char* wanted, const Value& got) {
      if (!ok) fail(call + "'s argument " + argument + " is " + describe(got) + ", expected " + wanted);
    };
    expect(a[0].kind == Kind::Storage, "storage", "a storage", a[0]);
    expect(a[1].kind == Kind::Int && a[1].number >= 0, "storage_offset", "an integer >= 0", a[1]);
    expect(all_ints(a[2]), "size", "a tuple of integers", a[2]);
    expect(all_ints(a[3]), "stride", "a tuple of integers", a[3]);
    expect(a[4].kind == Kind::Bool, "requires_grad", "True or False", a[4]);
    expect(a[5].kind == Kind::Dict && items(a[5]).empty(), "backward_hooks", "an empty OrderedDict", a[5]);
    if (a.size() == 7) expect(a[6].kind == Kind::Dict && items(a[6]).empty(), "metadata", "an empty dict", a[6]);
    if (tensors_.size() >= kMaxTensors)
      fail("the pickle rebuilds more than " + std::to_string(kMaxTensors) + " tensors, ordo's limit");
    RawTensor tensor{a[0].index, a[1].number, {}, {}};
    for (const Value& d : items(a[2])) tensor.shape.push_back(d.number);
    for (const Value& s : items(a[3])) tensor.stride.push_back(s.number);
    tensors_.push_back(std::move(tensor));
    return {Kind::Tensor, Global::OrderedDict, static_cast<std::uint32_t>(tensors_.size() - 1), 0};
  }

  void reduce() {
    const Value args = pop();
    const Value callable = pop();
    if (callable.kind != Kind::Global || callable.global == Global::StorageType)
      fail("REDUCE calls " + describe(callable) + ", which a state dict never does: ordo refuses it",
           "a state dict calls only collections.OrderedDict and torch._utils._rebuild_tensor_v2");
    if (args.kind != Kind::Tuple) fail("REDUCE calls " + describe(callable) + " with " + describe(args) + ", not a tuple of arguments");
    if (callable.global == Global::OrderedDict) {
      if (!items(args).empty())
        fail("collections.OrderedDict is called with " + std::to_string(items(args).size()) +
             " arguments; a state dict's is made empty and filled by SETITEMS");
      push(container(Kind::Dict, {}));
      return;
    }
    push(rebuild_tensor(args));
  }

  void set_items(std::vector<Value> pairs) {
    if (pairs.size() % 2 != 0) fail(std::string(opcode_name(op_)) + " has a key without a value");
    Value& target = top();
    if (target.kind != Kind::Dict)
      fail(std::string(opcode_name(op_)) + " sets items of " + describe(target) + ", not of a dict");
    count_values(pairs.size());
    std::vector<Value>& entries = containers_[target.index];
    entries.insert(entries.end(), pairs.begin(), pairs.end());
  }

  void append(std::vector<Value> values) {
    Value& target = top();
    if (target.kind != Kind::List)
      fail(std::string(opcode_name(op_)) + " appends to " + describe(target) + ", not to a list");
    count_values(values.size());
    std::vector<Value>& entries = containers_[target.index];
    entries.insert(entries.end(), values.begin(), values.end());
  }

  void step() {
    if (pos_ >= bytes_.size()) {
      op_at_ = pos_;
      fail("the pickle ends without its STOP opcode", "a truncated file?");
    }
    op_at_ = pos_;
    op_ = std::to_integer<std::uint8_t>(bytes_[pos_++]);
    switch (op_) {
      case 0x80: {  // PROTO
        const auto protocol = little_endian(1);
        if (protocol > 5) fail("pickle protocol " + std::to_string(protocol) + ", newer than any Python writes (0-5)");
        return;
      }
      case 0x95: little_endian(8); return;  // FRAME: a hint for buffering, nothing to do
      case 0x2e: result_ = pop(); stopped_ = true; return;  // STOP
      case 0x28:  // MARK
        if (marks_.size() >= kMaxMarkDepth)
          fail("the pickle nests MARKs more than " + std::to_string(kMaxMarkDepth) + " deep, ordo's limit");
        marks_.push_back(stack_.size());
        return;
      case 0x29: push(container(Kind::Tuple, {})); return;  // EMPTY_TUPLE
      case 0x5d: push(container(Kind::List, {})); return;   // EMPTY_LIST
      case 0x7d: push(container(Kind::Dict, {})); return;   // EMPTY_DICT
      case 0x74: push(container(Kind::Tuple, pop_to_mark())); return;  // TUPLE
      case 0x85: case 0x86: case 0x87: {  // TUPLE1, TUPLE2, TUPLE3
        std::vector<Value> values(op_ - 0x84);
        for (auto it = values.rbegin(); it != values.rend(); ++it) *it = pop();
        push(container(Kind::Tuple, std::move(values)));
        return;
      }
      case 0x4a: push(integer(static_cast<std::int32_t>(little_endian(4)))); return;  // BININT
      case 0x4b: push(integer(static_cast<std::int64_t>(little_endian(1)))); return;  // BININT1
      case 0x4d: push(integer(static_cast<std::int64_t>(little_endian(2)))); return;  // BININT2
      case 0x8a: {  // LONG1: n bytes, little-endian two's complement
        const auto length = little_endian(1);
        if (length > 8)
          fail("LONG1 holds an integer of " + std::to_string(length) + " bytes, larger than any number of a state dict");
        std::uint64_t value = little_endian(static_cast<std::size_t>(length));
        if (length > 0 && length < 8 && (value >> (8 * length - 1)) != 0) value |= ~std::uint64_t{0} << (8 * length);
        push(integer(static_cast<std::int64_t>(value)));
        return;
      }
      case 0x4e: push(Value{}); return;           // NONE
      case 0x88: push(boolean(true)); return;     // NEWTRUE
      case 0x89: push(boolean(false)); return;    // NEWFALSE
      case 0x58: push(string(text(little_endian(4)))); return;  // BINUNICODE
      case 0x8c: push(string(text(little_endian(1)))); return;  // SHORT_BINUNICODE
      case 0x8d: push(string(text(little_endian(8)))); return;  // BINUNICODE8
      case 0x71: put(little_endian(1)); return;   // BINPUT
      case 0x72: put(little_endian(4)); return;   // LONG_BINPUT
      case 0x94: put(memo_entries_); return;      // MEMOIZE: the next slot, as Python counts them
      case 0x68: get(little_endian(1)); return;   // BINGET
      case 0x6a: get(little_endian(4)); return;   // LONG_BINGET
      case 0x63: {  // GLOBAL "module\nname\n"
        std::string module = line();
        std::string name = line();
        push(resolve_global(module, name));
        return;
      }
      case 0x93: {  // STACK_GLOBAL
        const Value name = pop();
        const Value module = pop();
        if (module.kind != Kind::String || name.kind != Kind::String)
          fail("STACK_GLOBAL names a global by " + describe(module) + " and " + describe(name) + ", not two strings");
        push(resolve_global(strings_[module.index], strings_[name.index]));
        return;
      }
      case 0x51: push(persistent_load(pop())); return;  // BINPERSID
      case 0x52: reduce(); return;                       // REDUCE
      case 0x62: {  // BUILD
        const Value state = pop();
        const Value& target = top();
        // nn.Module.state_dict() hangs `_metadata` (each module's version) on its
        // OrderedDict as an attribute, which pickle restores by BUILD. ordo reads no
        // attribute, so the state is dropped; nothing else may be built.
        if (target.kind != Kind::Dict || state.kind != Kind::Dict)
          fail("BUILD sets the state of " + describe(target) + " to " + describe(state) +
               ", which a state dict never does: ordo refuses it");
        return;
      }
      case 0x73: {  // SETITEM
        const Value value = pop();
        const Value key = pop();
        set_items({key, value});
        return;
      }
      case 0x75: set_items(pop_to_mark()); return;  // SETITEMS
      case 0x61: append({pop()}); return;           // APPEND
      case 0x65: append(pop_to_mark()); return;     // APPENDS
      default: break;
    }
    if (const char* name = opcode_name(op_))
      fail("the pickle holds the opcode " + std::string(name) + " (" + hex_byte(op_) +
               "), which a state dict never uses: ordo refuses it",
           "ordo reads only the opcodes torch.save writes for a state dict");
    fail("the byte " + hex_byte(op_) + " is not a pickle opcode", "a corrupted file?");
  }

  // ------------------------------------------------------------------ the result

  PickledStateDict state_dict(const Value& result) const {
    if (result.kind != Kind::Dict)
      throw Error(where_, "the pickle holds " + describe(result) + ", not a state dict (a dict of tensors)",
                  "save model.state_dict() itself");
    PickledStateDict out;
    std::unordered_set<std::string> names;
    std::vector<std::int64_t> storage_out(storages_.size(), -1);  // pickle's index -> out.storages'
    const std::vector<Value>& entries = items(result);
    for (std::size_t i = 0; i < entries.size(); i += 2) {
      const Value& key = entries[i];
      const Value& value = entries[i + 1];
      if (key.kind != Kind::String)
        throw Error(where_, "the state dict has a key that is " + describe(key) + ", not a tensor name");
      const std::string& name = strings_[key.index];
      if (!names.insert(name).second) throw Error(where_ + ": tensor '" + printable(name) + "'", "appears twice in the state dict");
      if (value.kind != Kind::Tensor)
        throw Error(where_ + ": '" + printable(name) + "'", "holds " + describe(value) + ", not a tensor",
                    "ordo reads a plain state dict; a checkpoint that wraps one must be saved as model.state_dict()");
      const RawTensor& raw = tensors_[value.index];
      if (storage_out[raw.storage] < 0) {
        storage_out[raw.storage] = static_cast<std::int64_t>(out.storages.size());
        out.storages.push_back(storages_[raw.storage]);
      }
      const PickledStorage& storage = storages_[raw.storage];
      out.tensors.push_back({name, static_cast<std::size_t>(storage_out[raw.storage]), raw.offset,
                             checked_shape(name, raw, storage)});
    }
    return out;
  }

  // The shape of a tensor that is a contiguous row-major run of its storage.
  Shape checked_shape(const std::string& name, const RawTensor& raw, const PickledStorage& storage) const {
    const std::string where = where_ + ": tensor '" + printable(name) + "'";
    const Shape shape(raw.shape.begin(), raw.shape.end());
    const std::string type = "torch." + std::string(storage_type_name(storage.dtype));
    std::int64_t elements = 1;
    std::uint64_t bytes = dtype_size(storage.dtype);
    for (const std::int64_t d : raw.shape) {
      if (d < 0) throw Error(where, "shape " + to_string(shape) + " has a negative dimension");
      if (__builtin_mul_overflow(elements, d, &elements) ||
          __builtin_mul_overflow(bytes, static_cast<std::uint64_t>(d), &bytes))
        throw Error(where, "shape " + to_string(shape) + " of " + type + " overflows 64 bits", "a corrupted file?");
    }
    if (raw.stride.size() != raw.shape.size())
      throw Error(where, "has " + std::to_string(raw.stride.size()) + " strides for the " +
                             std::to_string(raw.shape.size()) + " dimensions of shape " + to_string(shape));
    if (elements > 0) {
      std::int64_t expected = 1;  // the row-major stride of dimension i
      for (std::size_t i = raw.shape.size(); i-- > 0;) {
        if (raw.shape[i] != 1 && raw.stride[i] != expected) {
          const Shape strides(raw.stride.begin(), raw.stride.end());
          throw Error(where, "strides " + to_string(strides) + " of shape " + to_string(shape) +
                                 " are not contiguous row-major (a transposed or sliced view?), which ordo does not read",
                      "save the state dict with .contiguous() tensors, or as safetensors");
        }
        expected *= raw.shape[i];
      }
    }
    if (raw.offset > storage.numel || elements > storage.numel - raw.offset)
      throw Error(where, "elements [" + std::to_string(raw.offset) + ", " + std::to_string(raw.offset) + " + " +
                             std::to_string(elements) + ") run past its storage '" + printable(storage.key) +
                             "' of " + std::to_string(storage.numel) + " elements",
                  "a corrupted file?");
    return shape;
  }

  std::span<const std::byte> bytes_;
  const std::string& where_;
  std::size_t pos_ = 0;
  std::size_t op_at_ = 0;      // where the opcode being run starts
  std::uint8_t op_ = 0;        // the opcode being run
  bool stopped_ = false;
  Value result_;

  std::vector<Value> stack_;
  std::vector<std::size_t> marks_;              // stack sizes at each open MARK
  std::vector<std::optional<Value>> memo_;
  std::size_t memo_entries_ = 0;
  std::size_t values_ = 0;
  std::vector<std::string> strings_;
  std::vector<std::vector<Value>> containers_;  // tuples, lists, dicts (key, value, key, value, ...)
  std::vector<PickledStorage> storages_;
  std::unordered_map<std::string, std::uint32_t> storage_index_;
  std::vector<RawTensor> tensors_;
};

}  // namespace

PickledStateDict read_state_dict_pickle(std::span<const std::byte> pickle, const std::string& where) {
  return Reader(pickle, where).read();
}

}  // namespace ordo
