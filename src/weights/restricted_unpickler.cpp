#include "weights/restricted_unpickler.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include <ATen/ATen.h>

#include "util/errors.h"
#include "weights/printable.h"

namespace sparsevit::weights {
namespace {

enum class Callable { ordered_dict, rebuild_tensor_v2, rebuild_parameter, rebuild_parameter_with_state, restore_type_tag };

struct TupleData;

// One stack or memo entry. Values are IValues; the rest exists only while unpickling: tuples stay
// Items until they land in a list, dict or the result (a persistent id tuple holds a storage type),
// callables are the allowed globals, storages come from BINPERSID.
struct Item {
  enum class Kind { value, tuple, callable, storage_type, storage };
  Kind kind = Kind::value;
  c10::IValue value;
  std::shared_ptr<TupleData> tuple;
  Callable callable = Callable::ordered_dict;
  at::ScalarType dtype = at::kFloat;  // storage_type, storage
  c10::Storage storage;               // storage
  int64_t numel = 0;                  // storage
};

struct TupleData {
  std::vector<Item> elements;
  int height = 1;
  c10::IValue converted;  // cache: a shared tuple converts once
};

struct ContainerInfo {
  int height = 1;
  bool frozen = false;        // inside another container: may not change any more
  bool ordered_dict = false;  // made by collections.OrderedDict(): BUILD may set its attributes
};

struct StorageType {
  const char* name;
  at::ScalarType dtype;
};
constexpr StorageType kStorageTypes[] = {
    {"FloatStorage", at::kFloat}, {"DoubleStorage", at::kDouble}, {"HalfStorage", at::kHalf},
    {"BFloat16Storage", at::kBFloat16}, {"LongStorage", at::kLong}, {"IntStorage", at::kInt},
    {"ShortStorage", at::kShort}, {"CharStorage", at::kChar}, {"ByteStorage", at::kByte},
    {"BoolStorage", at::kBool},
};

const char* opcode_name(uint8_t op) {
  switch (op) {
    case '(': return "MARK"; case '.': return "STOP"; case '0': return "POP"; case '1': return "POP_MARK";
    case '2': return "DUP"; case 'F': return "FLOAT"; case 'I': return "INT"; case 'J': return "BININT";
    case 'K': return "BININT1"; case 'L': return "LONG"; case 'M': return "BININT2"; case 'N': return "NONE";
    case 'P': return "PERSID"; case 'Q': return "BINPERSID"; case 'R': return "REDUCE"; case 'S': return "STRING";
    case 'T': return "BINSTRING"; case 'U': return "SHORT_BINSTRING"; case 'V': return "UNICODE";
    case 'X': return "BINUNICODE"; case 'a': return "APPEND"; case 'b': return "BUILD"; case 'c': return "GLOBAL";
    case 'd': return "DICT"; case '}': return "EMPTY_DICT"; case 'e': return "APPENDS"; case 'g': return "GET";
    case 'h': return "BINGET"; case 'i': return "INST"; case 'j': return "LONG_BINGET"; case 'l': return "LIST";
    case ']': return "EMPTY_LIST"; case 'o': return "OBJ"; case 'p': return "PUT"; case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT"; case 's': return "SETITEM"; case 't': return "TUPLE"; case ')': return "EMPTY_TUPLE";
    case 'u': return "SETITEMS"; case 'G': return "BINFLOAT"; case 0x80: return "PROTO"; case 0x81: return "NEWOBJ";
    case 0x82: return "EXT1"; case 0x83: return "EXT2"; case 0x84: return "EXT4"; case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2"; case 0x87: return "TUPLE3"; case 0x88: return "NEWTRUE"; case 0x89: return "NEWFALSE";
    case 0x8a: return "LONG1"; case 0x8b: return "LONG4"; case 'B': return "BINBYTES"; case 'C': return "SHORT_BINBYTES";
    case 0x8c: return "SHORT_BINUNICODE"; case 0x8d: return "BINUNICODE8"; case 0x8e: return "BINBYTES8";
    case 0x8f: return "EMPTY_SET"; case 0x90: return "ADDITEMS"; case 0x91: return "FROZENSET"; case 0x92: return "NEWOBJ_EX";
    case 0x93: return "STACK_GLOBAL"; case 0x94: return "MEMOIZE"; case 0x95: return "FRAME";
    case 0x96: return "BYTEARRAY8"; case 0x97: return "NEXT_BUFFER"; case 0x98: return "READONLY_BUFFER";
    default: return nullptr;
  }
}

std::string hex_byte(uint8_t b) {
  const char* digits = "0123456789abcdef";
  return std::string("0x") + digits[b >> 4] + digits[b & 15];
}

class Unpickler {
 public:
  Unpickler(std::string_view input, const StorageRecordLoader& loader, const std::string& source)
      : input_(input), loader_(loader), source_(source) {}

  c10::IValue run() {
    while (true) {
      op_pos_ = pos_;
      const uint8_t op = read_u8();
      if (op == '.') {
        if (stack_.empty()) fail("STOP with an empty stack");
        return to_value(stack_.back(), "the result");
      }
      step(op);
    }
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw RuntimeError(source_ + ": pickle byte " + std::to_string(op_pos_) + ": " + why);
  }

  // ---- input ----
  std::string_view take(uint64_t n) {
    if (n > input_.size() - pos_) fail("truncated pickle (wants " + std::to_string(n) + " more bytes)");
    const std::string_view out = input_.substr(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return out;
  }
  uint8_t read_u8() { return static_cast<uint8_t>(take(1)[0]); }
  uint64_t read_le(int bytes) {
    const std::string_view b = take(bytes);
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(b[i]);
    return v;
  }
  std::string read_line() {
    const size_t end = input_.find('\n', pos_);
    if (end == std::string_view::npos || end - pos_ > 256) fail("GLOBAL name without a newline within 256 bytes");
    std::string line(input_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return line;
  }

  // ---- stack ----
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  void push(Item item) {
    if (stack_.size() >= kMaxPickleStack) fail("more than 2^20 entries on the pickle stack");
    stack_.push_back(std::move(item));
  }
  void push_value(c10::IValue value) {
    Item item;
    item.value = std::move(value);
    push(std::move(item));
  }
  Item pop() {
    if (stack_.size() <= floor()) fail("pickle stack underflow");
    Item item = std::move(stack_.back());
    stack_.pop_back();
    return item;
  }
  Item& top() {
    if (stack_.size() <= floor()) fail("pickle stack underflow");
    return stack_.back();
  }
  std::vector<Item> pop_mark() {
    if (marks_.empty()) fail("no MARK on the pickle stack");
    std::vector<Item> items(std::make_move_iterator(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back())),
                            std::make_move_iterator(stack_.end()));
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }

  // ---- containers ----
  static bool is_container(const c10::IValue& v) { return v.isGenericDict() || v.isList() || v.isTuple(); }
  ContainerInfo& info(const c10::IValue& v) {
    const auto found = containers_.find(v.internalToPointer());
    if (found == containers_.end()) fail("internal error: a container the unpickler did not make");
    return found->second;
  }
  c10::IValue new_container(c10::IValue v, bool ordered_dict = false) {
    containers_[v.internalToPointer()] = ContainerInfo{1, false, ordered_dict};
    keep_alive_.push_back(v);  // addresses stay unique while containers_ refers to them
    return v;
  }
  int height(const Item& item) {
    if (item.kind == Item::Kind::tuple) return item.tuple->height;
    if (item.kind == Item::Kind::value && is_container(item.value)) return info(item.value).height;
    return 0;
  }
  void freeze(const Item& item) {
    if (item.kind == Item::Kind::value && is_container(item.value)) info(item.value).frozen = true;
  }

  Item make_tuple(std::vector<Item> elements) {
    auto data = std::make_shared<TupleData>();
    for (const Item& e : elements) {
      freeze(e);
      data->height = std::max(data->height, height(e) + 1);
    }
    if (data->height > kMaxPickleDepth) fail("nests deeper than 1000 levels");
    data->elements = std::move(elements);
    Item item;
    item.kind = Item::Kind::tuple;
    item.tuple = std::move(data);
    return item;
  }

  c10::IValue to_value(const Item& item, const char* context) {
    switch (item.kind) {
      case Item::Kind::value: return item.value;
      case Item::Kind::tuple: {
        TupleData& t = *item.tuple;
        if (!t.converted.isTuple()) {
          std::vector<c10::IValue> elements;
          elements.reserve(t.elements.size());
          for (const Item& e : t.elements) elements.push_back(to_value(e, context));
          t.converted = new_container(c10::ivalue::Tuple::create(std::move(elements)));
          info(t.converted).height = t.height;
          info(t.converted).frozen = true;
        }
        return t.converted;
      }
      case Item::Kind::callable: fail(std::string("a function appears as ") + context);
      case Item::Kind::storage_type: fail(std::string("a storage type appears as ") + context);
      case Item::Kind::storage: fail(std::string("a raw storage appears as ") + context + " (not inside a tensor)");
    }
    fail("unknown item");
  }

  // Adds `child` to `container` (a list or dict on the stack) under the freezing and depth rules.
  void adopt(const c10::IValue& container, const c10::IValue& child) {
    ContainerInfo& parent = info(container);
    if (parent.frozen)
      fail("changes a list or dict after placing it inside another (torch.save never does; it builds cycles)");
    if (is_container(child)) {
      if (child.internalToPointer() == container.internalToPointer()) fail("puts a container inside itself");
      ContainerInfo& c = info(child);
      c.frozen = true;
      parent.height = std::max(parent.height, c.height + 1);
      if (parent.height > kMaxPickleDepth) fail("nests deeper than 1000 levels");
    }
  }
  c10::IValue& list_on_top(const char* op) {
    Item& t = top();
    if (t.kind != Item::Kind::value || !t.value.isList()) fail(std::string(op) + " on something that is not a list");
    return t.value;
  }
  c10::IValue& dict_on_top(const char* op) {
    Item& t = top();
    if (t.kind != Item::Kind::value || !t.value.isGenericDict())
      fail(std::string(op) + " on something that is not a dict");
    return t.value;
  }
  void append(c10::IValue& list, const Item& item) {
    c10::IValue v = to_value(item, "a list element");
    adopt(list, v);
    list.toList().push_back(std::move(v));
  }
  void set_item(c10::IValue& dict, const Item& key_item, const Item& value_item) {
    c10::IValue key = to_value(key_item, "a dict key");
    if (!key.isString() && !key.isInt())
      fail(std::string("a dict key of type ") + key.tagKind() + " (only string and integer keys are supported)");
    c10::IValue value = to_value(value_item, "a dict value");
    adopt(dict, value);
    dict.toGenericDict().insert_or_assign(std::move(key), std::move(value));
  }

  // ---- typed access to REDUCE arguments ----
  const std::vector<Item>& tuple_of(const Item& item, const char* what) {
    if (item.kind != Item::Kind::tuple) fail(std::string(what) + " is not a tuple");
    return item.tuple->elements;
  }
  int64_t int_of(const Item& item, const char* what) {
    if (item.kind != Item::Kind::value || !item.value.isInt()) fail(std::string(what) + " is not an integer");
    return item.value.toInt();
  }
  std::string string_of(const Item& item, const char* what) {
    if (item.kind != Item::Kind::value || !item.value.isString()) fail(std::string(what) + " is not a string");
    return item.value.toStringRef();
  }
  std::vector<int64_t> ints_of(const Item& item, const char* what) {
    std::vector<int64_t> out;
    for (const Item& e : tuple_of(item, what)) out.push_back(int_of(e, what));
    return out;
  }

  // ---- globals, REDUCE, BUILD, BINPERSID ----
  Item resolve_global(const std::string& module, const std::string& name) {
    Item item;
    item.kind = Item::Kind::callable;
    if (module == "collections" && name == "OrderedDict") item.callable = Callable::ordered_dict;
    else if (module == "torch._utils" && name == "_rebuild_tensor_v2") item.callable = Callable::rebuild_tensor_v2;
    else if (module == "torch._utils" && name == "_rebuild_parameter") item.callable = Callable::rebuild_parameter;
    else if (module == "torch._utils" && name == "_rebuild_parameter_with_state")
      item.callable = Callable::rebuild_parameter_with_state;
    else if (module == "torch.jit._pickle" && name == "restore_type_tag") item.callable = Callable::restore_type_tag;
    else {
      const auto* storage = std::find_if(std::begin(kStorageTypes), std::end(kStorageTypes),
                                         [&](const StorageType& s) { return module == "torch" && name == s.name; });
      if (storage == std::end(kStorageTypes))
        throw RuntimeError(source_ + ": refuses to load '" + printable(module + "." + name) +
                           "': a weight file may hold only tensors, dicts, lists, numbers and strings");
      item.kind = Item::Kind::storage_type;
      item.dtype = storage->dtype;
    }
    return item;
  }

  c10::IValue rebuild_tensor(const std::vector<Item>& args) {
    if (args.size() != 6 && args.size() != 7) fail("_rebuild_tensor_v2 takes 6 or 7 arguments");
    const Item& s = args[0];
    if (s.kind != Item::Kind::storage) fail("_rebuild_tensor_v2's first argument is not a storage");
    const int64_t offset = int_of(args[1], "the storage offset");
    const std::vector<int64_t> size = ints_of(args[2], "the tensor size"), stride = ints_of(args[3], "the tensor stride");
    if (size.size() != stride.size()) fail("tensor size and stride have different lengths");
    if (size.size() > 64) fail("tensor with more than 64 dimensions");
    if (offset < 0 || offset > s.numel) fail("storage offset outside its storage");
    bool empty = false;
    for (size_t d = 0; d < size.size(); ++d) {
      if (size[d] < 0 || stride[d] < 0) fail("negative tensor size or stride");
      empty = empty || size[d] == 0;
    }
    int64_t numel = 1;
    if (!empty) {
      // The last element the view touches must lie inside the storage: no out-of-bounds view.
      int64_t last = offset;
      for (size_t d = 0; d < size.size(); ++d) {
        int64_t step = 0;
        if (__builtin_mul_overflow(size[d] - 1, stride[d], &step) || __builtin_add_overflow(last, step, &last) ||
            __builtin_mul_overflow(numel, size[d], &numel))
          fail("tensor size and stride overflow");
      }
      if (last >= s.numel)
        fail("tensor view reaches element " + std::to_string(last) + " of a storage of " + std::to_string(s.numel));
      // Views may overlap only within the storage's element count (no expanded views that would
      // multiply memory when copied out).
      if (numel > std::max<int64_t>(s.numel, 1)) fail("tensor has more elements than its storage (an expanded view)");
    }
    at::Tensor view = at::empty({0}, at::TensorOptions().dtype(s.dtype)).set_(s.storage, offset, size, stride);
    return view.clone(at::MemoryFormat::Contiguous);
  }

  Item reduce(const Item& callable, const Item& args_item) {
    if (callable.kind != Item::Kind::callable) fail("REDUCE applies something that is not an allowed function");
    const std::vector<Item>& args = tuple_of(args_item, "REDUCE's arguments");
    Item out;
    switch (callable.callable) {
      case Callable::ordered_dict:
        if (!args.empty()) fail("OrderedDict() with arguments");
        out.value = new_container(c10::impl::GenericDict(c10::AnyType::get(), c10::AnyType::get()), true);
        return out;
      case Callable::rebuild_tensor_v2: out.value = rebuild_tensor(args); return out;
      case Callable::rebuild_parameter:
      case Callable::rebuild_parameter_with_state: {
        const size_t want = callable.callable == Callable::rebuild_parameter ? 3 : 4;
        if (args.size() != want) fail("_rebuild_parameter with the wrong number of arguments");
        if (args[0].kind != Item::Kind::value || !args[0].value.isTensor()) fail("_rebuild_parameter of a non-tensor");
        out.value = args[0].value;
        return out;
      }
      case Callable::restore_type_tag:
        if (args.size() != 2) fail("restore_type_tag with the wrong number of arguments");
        return args[0];
    }
    fail("unknown function");
  }

  void build() {
    Item state = pop();
    Item& object = top();
    if (object.kind != Item::Kind::value || !object.value.isGenericDict() || !info(object.value).ordered_dict)
      fail("BUILD on something other than an OrderedDict");
    // An OrderedDict's state is its attributes (state_dict()'s _metadata): not part of the weights.
    if (!(state.kind == Item::Kind::value && (state.value.isGenericDict() || state.value.isNone())))
      fail("BUILD with a state that is not a dict");
  }

  Item persistent_load(const Item& pid) {
    const std::vector<Item>& t = tuple_of(pid, "a persistent id");
    if (t.size() != 5 || string_of(t[0], "the persistent id's kind") != "storage")
      fail("persistent id is not ('storage', type, key, location, numel)");
    if (t[1].kind != Item::Kind::storage_type) fail("persistent id without a torch storage type");
    const std::string key = string_of(t[2], "the storage key");
    (void)string_of(t[3], "the storage location");  // 'cpu', 'cuda:0' ...: everything loads to the CPU
    const int64_t numel = int_of(t[4], "the storage size");
    const at::ScalarType dtype = t[1].dtype;
    if (numel < 0) fail("negative storage size");
    auto found = storages_.find(key);
    if (found == storages_.end()) {
      auto [data, nbytes] = loader_(key);
      const uint64_t itemsize = c10::elementSize(dtype);
      if (static_cast<uint64_t>(numel) > UINT64_MAX / itemsize || static_cast<uint64_t>(numel) * itemsize != nbytes)
        fail("storage '" + printable(key) + "' has " + std::to_string(nbytes) + " bytes, its " + std::to_string(numel) + " " +
             c10::toString(dtype) + " elements need " + std::to_string(static_cast<uint64_t>(numel) * itemsize));
      if (dtype == at::kBool) {
        const auto* bytes = static_cast<const uint8_t*>(data.get());
        for (size_t i = 0; i < nbytes; ++i)
          if (bytes[i] > 1) fail("bool storage '" + printable(key) + "' holds a byte other than 0 or 1");
      }
      Item item;
      item.kind = Item::Kind::storage;
      item.dtype = dtype;
      item.numel = numel;
      item.storage = c10::Storage(c10::Storage::use_byte_size_t(), static_cast<int64_t>(nbytes), std::move(data),
                                  /*allocator=*/nullptr, /*resizable=*/false);
      found = storages_.emplace(key, std::move(item)).first;
    } else if (found->second.dtype != dtype || found->second.numel != numel) {
      fail("storage '" + printable(key) + "' is declared twice with different types or sizes");
    }
    return found->second;
  }

  // ---- the opcodes ----
  void step(uint8_t op) {
    switch (op) {
      case 0x80: if (read_u8() > 5) fail("pickle protocol above 5"); return;  // PROTO
      case 0x95: (void)read_le(8); return;                                        // FRAME: a hint only
      case '(':
        if (marks_.size() >= static_cast<size_t>(kMaxPickleDepth)) fail("more than 1000 nested MARKs");
        marks_.push_back(stack_.size());
        return;
      case '}': push_value(new_container(c10::impl::GenericDict(c10::AnyType::get(), c10::AnyType::get()))); return;
      case ']': push_value(new_container(c10::impl::GenericList(c10::AnyType::get()))); return;
      case ')': push(make_tuple({})); return;
      case 't': push(make_tuple(pop_mark())); return;
      case 0x85: case 0x86: case 0x87: {
        std::vector<Item> elements(static_cast<size_t>(op - 0x84));
        for (auto it = elements.rbegin(); it != elements.rend(); ++it) *it = pop();
        push(make_tuple(std::move(elements)));
        return;
      }
      case 'l': {
        std::vector<Item> items = pop_mark();
        push_value(new_container(c10::impl::GenericList(c10::AnyType::get())));
        for (const Item& i : items) append(stack_.back().value, i);
        return;
      }
      case 'd': {
        std::vector<Item> items = pop_mark();
        if (items.size() % 2) fail("DICT with an odd number of items");
        push_value(new_container(c10::impl::GenericDict(c10::AnyType::get(), c10::AnyType::get())));
        for (size_t i = 0; i < items.size(); i += 2) set_item(stack_.back().value, items[i], items[i + 1]);
        return;
      }
      case 'a': { Item v = pop(); append(list_on_top("APPEND"), v); return; }
      case 'e': {
        std::vector<Item> items = pop_mark();
        c10::IValue& list = list_on_top("APPENDS");
        for (const Item& i : items) append(list, i);
        return;
      }
      case 's': {
        Item v = pop(), k = pop();
        set_item(dict_on_top("SETITEM"), k, v);
        return;
      }
      case 'u': {
        std::vector<Item> items = pop_mark();
        if (items.size() % 2) fail("SETITEMS with an odd number of items");
        c10::IValue& dict = dict_on_top("SETITEMS");
        for (size_t i = 0; i < items.size(); i += 2) set_item(dict, items[i], items[i + 1]);
        return;
      }
      case 'q': memo_[read_le(1)] = top(); return;
      case 'r': memo_[read_le(4)] = top(); return;
      case 0x94: memo_[memo_.size()] = top(); return;
      case 'h': case 'j': {
        const uint64_t index = read_le(op == 'h' ? 1 : 4);
        const auto found = memo_.find(index);
        if (found == memo_.end()) fail("memo entry " + std::to_string(index) + " was never stored");
        push(found->second);
        return;
      }
      case 'N': push_value(c10::IValue()); return;
      case 0x88: push_value(true); return;
      case 0x89: push_value(false); return;
      case 'J': push_value(static_cast<int64_t>(static_cast<int32_t>(read_le(4)))); return;
      case 'K': push_value(static_cast<int64_t>(read_le(1))); return;
      case 'M': push_value(static_cast<int64_t>(read_le(2))); return;
      case 0x8a: {  // LONG1: little-endian two's complement of n bytes
        const uint8_t n = read_u8();
        if (n > 8) fail("integer wider than 64 bits");
        uint64_t v = n ? read_le(n) : 0;
        if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);
        push_value(static_cast<int64_t>(v));
        return;
      }
      case 'G': {  // BINFLOAT: big-endian IEEE double
        const std::string_view b = take(8);
        uint64_t bits = 0;
        for (const char c : b) bits = (bits << 8) | static_cast<uint8_t>(c);
        double d;
        std::memcpy(&d, &bits, 8);
        push_value(d);
        return;
      }
      case 'X': push_value(std::string(take(read_le(4)))); return;
      case 0x8c: push_value(std::string(take(read_le(1)))); return;
      case 0x8d: push_value(std::string(take(read_le(8)))); return;
      case 'T': {
        const int32_t n = static_cast<int32_t>(read_le(4));
        if (n < 0) fail("negative string length");
        push_value(std::string(take(static_cast<uint64_t>(n))));
        return;
      }
      case 'U': push_value(std::string(take(read_le(1)))); return;
      case 'B': push_value(std::string(take(read_le(4)))); return;
      case 'C': push_value(std::string(take(read_le(1)))); return;
      case 0x8e: push_value(std::string(take(read_le(8)))); return;
      case 'c': {
        const std::string module = read_line();
        const std::string name = read_line();
        push(resolve_global(module, name));
        return;
      }
      case 0x93: {  // STACK_GLOBAL
        Item name = pop(), module = pop();
        push(resolve_global(string_of(module, "STACK_GLOBAL's module"), string_of(name, "STACK_GLOBAL's name")));
        return;
      }
      case 'R': {
        Item args = pop(), callable = pop();
        push(reduce(callable, args));
        return;
      }
      case 'b': build(); return;
      case 'Q': { Item pid = pop(); push(persistent_load(pid)); return; }
      default: {
        const char* name = opcode_name(op);
        fail(std::string("unsupported pickle opcode ") + (name ? name : "(unknown)") + " (" + hex_byte(op) +
             "); weight files need only torch.save's opcodes");
      }
    }
  }

  std::string_view input_;
  const StorageRecordLoader& loader_;
  const std::string& source_;
  size_t pos_ = 0, op_pos_ = 0;
  std::vector<Item> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Item> memo_;
  std::map<std::string, Item> storages_;
  std::unordered_map<const void*, ContainerInfo> containers_;
  std::vector<c10::IValue> keep_alive_;
};

}  // namespace

c10::IValue restricted_unpickle(std::string_view pickle, const StorageRecordLoader& load_record,
                                const std::string& source) {
  Unpickler unpickler(pickle, load_record, source);
  return unpickler.run();
}

}  // namespace sparsevit::weights
