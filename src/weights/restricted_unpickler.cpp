#include "weights/restricted_unpickler.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <unordered_map>
#include <vector>

#include "util/errors.h"

namespace sparsevit::weights {
namespace {

// A global the allow-list names, as it sits on the stack until REDUCE applies it (callables) or a
// persistent id names it (storage types).
enum class Global { none, ordered_dict, rebuild_tensor, rebuild_parameter, rebuild_parameter_with_state, restore_type_tag, storage };

struct Item {
  c10::IValue value;
  Global global = Global::none;
  at::ScalarType storage_type = at::kFloat;  // for Global::storage
  int depth = 0;  // container nesting (a 1000-deep limit keeps recursion in IValue's destructor bounded)
};

const std::map<std::string, at::ScalarType>& storage_types() {
  static const std::map<std::string, at::ScalarType> types = {
      {"FloatStorage", at::kFloat}, {"DoubleStorage", at::kDouble}, {"HalfStorage", at::kHalf},
      {"BFloat16Storage", at::kBFloat16}, {"LongStorage", at::kLong}, {"IntStorage", at::kInt},
      {"ShortStorage", at::kShort}, {"CharStorage", at::kChar}, {"ByteStorage", at::kByte}, {"BoolStorage", at::kBool}};
  return types;
}

class Unpickler {
 public:
  Unpickler(std::string_view data, const StorageLoader& storages, std::string source)
      : data_(data), storages_(storages), source_(std::move(source)) {}

  c10::IValue run() {
    while (true) {
      const uint8_t op = byte();
      switch (op) {
        case 0x80: byte(); break;                 // PROTO
        case 0x95: bytes(8); break;               // FRAME
        case '.': {                               // STOP
          Item result = pop();
          if (result.global != Global::none) fail("the pickle's result is a bare global");
          check_allowed(result.value, 0);
          return result.value;
        }
        case '(': marks_.push_back(stack_.size()); break;  // MARK
        case '}': push(c10::impl::GenericDict(c10::AnyType::get(), c10::AnyType::get())); break;
        case ']': push(c10::impl::GenericList(c10::AnyType::get())); break;
        case ')': push(c10::ivalue::Tuple::create(std::vector<c10::IValue>{})); break;
        case 't': {
          const auto items = pop_mark();
          push(Item{tuple(items), Global::none, at::kFloat, depth_of(items)});
          break;
        }
        case 0x85: case 0x86: case 0x87: {        // TUPLE1..3
          std::vector<Item> items(op - 0x84);
          for (auto it = items.rbegin(); it != items.rend(); ++it) *it = pop();
          push(Item{tuple(items), Global::none, at::kFloat, depth_of(items)});
          break;
        }
        case 'l': {                               // LIST
          c10::impl::GenericList list(c10::AnyType::get());
          const auto items = pop_mark();
          for (const auto& item : items) list.push_back(value_of(item));
          push(Item{list, Global::none, at::kFloat, depth_of(items)});
          break;
        }
        case 'd': {                               // DICT
          auto items = pop_mark();
          c10::impl::GenericDict dict(c10::AnyType::get(), c10::AnyType::get());
          set_items(dict, items);
          push(Item{dict, Global::none, at::kFloat, depth_of(items)});
          break;
        }
        case 'a': {                               // APPEND
          Item v = pop();
          list_at_top().push_back(value_of(v));
          nest(v);
          break;
        }
        case 'e': {                               // APPENDS
          auto items = pop_mark();
          auto list = list_at_top();
          for (auto& item : items) {
            list.push_back(value_of(item));
            nest(item);
          }
          break;
        }
        case 's': {                               // SETITEM
          Item v = pop(), k = pop();
          std::vector<Item> items{k, v};
          auto dict = dict_at_top();
          set_items(dict, items);
          nest(v);
          break;
        }
        case 'u': {                               // SETITEMS
          auto items = pop_mark();
          auto dict = dict_at_top();
          set_items(dict, items);
          for (const auto& item : items) nest(item);
          break;
        }
        case 'q': memo_put(byte()); break;        // BINPUT
        case 'r': memo_put(u32()); break;         // LONG_BINPUT
        case 0x94: memo_put(memo_.size()); break; // MEMOIZE
        case 'h': memo_get(byte()); break;        // BINGET
        case 'j': memo_get(u32()); break;         // LONG_BINGET
        case '0': pop(); break;                   // POP
        case '2': {                               // DUP
          Item top = pop();
          push(top);
          push(top);
          break;
        }
        case 'N': push(c10::IValue()); break;
        case 0x88: push(true); break;
        case 0x89: push(false); break;
        case 'J': push(static_cast<int64_t>(static_cast<int32_t>(u32()))); break;
        case 'K': push(static_cast<int64_t>(byte())); break;
        case 'M': push(static_cast<int64_t>(u16())); break;
        case 0x8a: push(long1()); break;
        case 'G': push(binfloat()); break;
        case 'X': push(std::string(bytes(u32()))); break;
        case 0x8c: push(std::string(bytes(byte()))); break;
        case 0x8d: push(std::string(bytes(u64_size()))); break;
        case 'T': push(std::string(bytes(u32()))); break;
        case 'U': push(std::string(bytes(byte()))); break;
        case 'B': push(std::string(bytes(u32()))); break;
        case 'C': push(std::string(bytes(byte()))); break;
        case 'c': {                               // GLOBAL "module\nname\n"
          const std::string module = line(), name = line();
          push_global(module, name);
          break;
        }
        case 0x93: {                              // STACK_GLOBAL
          Item name = pop(), module = pop();
          if (!name.value.isString() || !module.value.isString()) fail("STACK_GLOBAL needs two strings");
          push_global(module.value.toStringRef(), name.value.toStringRef());
          break;
        }
        case 'R': reduce(); break;
        case 'b': build(); break;
        case 'Q': persistent_load(); break;
        default: fail("unsupported pickle opcode 0x" + hex(op) + " (only what torch.save writes is read)");
      }
    }
  }

 private:
  [[noreturn]] void fail(const std::string& why) const { throw RuntimeError(source_ + ": " + why); }
  static std::string hex(uint8_t v) {
    const char* digits = "0123456789abcdef";
    return std::string{digits[v >> 4], digits[v & 15]};
  }

  uint8_t byte() {
    if (pos_ >= data_.size()) fail("the pickle is truncated");
    return static_cast<uint8_t>(data_[pos_++]);
  }
  std::string_view bytes(uint64_t n) {
    if (n > data_.size() - pos_) fail("the pickle is truncated");
    const std::string_view out = data_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  uint32_t u32() {
    const std::string_view b = bytes(4);
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(b[i]);
    return v;
  }
  uint16_t u16() {
    const std::string_view b = bytes(2);
    return static_cast<uint16_t>(static_cast<uint8_t>(b[0]) | (static_cast<uint8_t>(b[1]) << 8));
  }
  uint64_t u64_size() {
    const std::string_view b = bytes(8);
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(b[i]);
    return v;
  }
  int64_t long1() {
    const uint8_t n = byte();
    if (n > 8) fail("integer wider than 64 bits");
    const std::string_view b = bytes(n);
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(b[i]);
    if (n > 0 && n < 8 && (static_cast<uint8_t>(b[n - 1]) & 0x80)) v |= ~uint64_t{0} << (8 * n);  // sign-extend
    return static_cast<int64_t>(v);
  }
  double binfloat() {
    const std::string_view b = bytes(8);
    uint64_t bits = 0;
    for (int i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<uint8_t>(b[i]);  // big-endian
    double v;
    std::memcpy(&v, &bits, 8);
    return v;
  }
  std::string line() {
    const std::size_t end = data_.find('\n', pos_);
    if (end == std::string_view::npos || end - pos_ > 256) fail("malformed GLOBAL");
    std::string out(data_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return out;
  }

  void push(c10::IValue v) { push(Item{std::move(v)}); }
  void push(Item item) {
    if (stack_.size() > (1u << 24)) fail("the pickle's stack is too deep");
    stack_.push_back(std::move(item));
  }
  Item pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) fail("malformed pickle (stack underflow)");
    Item top = std::move(stack_.back());
    stack_.pop_back();
    return top;
  }
  std::vector<Item> pop_mark() {
    if (marks_.empty()) fail("malformed pickle (no MARK)");
    const std::size_t mark = marks_.back();
    marks_.pop_back();
    if (mark > stack_.size()) fail("malformed pickle (MARK beyond the stack)");
    std::vector<Item> items(std::make_move_iterator(stack_.begin() + static_cast<std::ptrdiff_t>(mark)),
                            std::make_move_iterator(stack_.end()));
    stack_.resize(mark);
    return items;
  }
  Item& top() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) fail("malformed pickle (stack underflow)");
    return stack_.back();
  }
  c10::impl::GenericList list_at_top() {
    Item& t = top();
    if (t.global != Global::none || !t.value.isList()) fail("APPEND on something that is not a list");
    return t.value.toList();
  }
  c10::impl::GenericDict dict_at_top() {
    Item& t = top();
    if (t.global != Global::none || !t.value.isGenericDict()) fail("SETITEM on something that is not a dict");
    return t.value.toGenericDict();
  }
  const c10::IValue& value_of(const Item& item) const {
    if (item.global != Global::none) fail("a global used as a value");
    return item.value;
  }
  c10::IValue tuple(const std::vector<Item>& items) const {
    std::vector<c10::IValue> values;
    for (const auto& item : items) {
      if (item.global == Global::storage) {
        values.emplace_back(std::string("\x01storage:") + c10::toString(item.storage_type));
      } else {
        values.push_back(value_of(item));
      }
    }
    return c10::ivalue::Tuple::create(std::move(values));
  }
  void set_items(c10::impl::GenericDict& dict, const std::vector<Item>& items) const {
    if (items.size() % 2 != 0) fail("SETITEMS with an odd number of items");
    for (std::size_t i = 0; i < items.size(); i += 2) {
      const c10::IValue& key = value_of(items[i]);
      if (!key.isString() && !key.isInt()) fail("a dict key that is not a string or an integer");
      dict.insert_or_assign(key, value_of(items[i + 1]));
    }
  }
  int depth_of(const std::vector<Item>& items) const {
    int depth = 0;
    for (const auto& item : items) depth = std::max(depth, item.depth);
    if (depth + 1 > 1000) fail("nested more than 1000 levels");
    return depth + 1;
  }
  // `child` went into the container at the top of the stack.
  void nest(const Item& child) {
    Item& t = top();
    t.depth = std::max(t.depth, child.depth + 1);
    if (t.depth > 1000) fail("nested more than 1000 levels");
  }
  void memo_put(uint64_t index) {
    if (index > (1u << 24)) fail("memo index too large");
    memo_[index] = top();
  }
  void memo_get(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) fail("malformed pickle (unknown memo index " + std::to_string(index) + ")");
    push(it->second);
  }

  void push_global(const std::string& module, const std::string& name) {
    Item g;
    if (module == "collections" && name == "OrderedDict") {
      g.global = Global::ordered_dict;
    } else if (module == "torch._utils" && name == "_rebuild_tensor_v2") {
      g.global = Global::rebuild_tensor;
    } else if (module == "torch._utils" && name == "_rebuild_parameter") {
      g.global = Global::rebuild_parameter;
    } else if (module == "torch._utils" && name == "_rebuild_parameter_with_state") {
      g.global = Global::rebuild_parameter_with_state;
    } else if (module == "torch.jit._pickle" && name == "restore_type_tag") {
      g.global = Global::restore_type_tag;  // LibTorch's pickler tags typed containers: (value, "Dict[str, Tensor]")
    } else if (module == "torch" && storage_types().count(name)) {
      g.global = Global::storage;
      g.storage_type = storage_types().at(name);
    } else {
      fail("refuses to load '" + module + "." + name +
           "': a weight file may hold only tensors, dicts, lists, numbers and strings");
    }
    push(std::move(g));
  }

  std::vector<c10::IValue> args_of(const Item& args) const {
    if (args.global != Global::none || !args.value.isTuple()) fail("REDUCE arguments are not a tuple");
    return args.value.toTupleRef().elements().vec();
  }
  at::Tensor tensor_arg(const c10::IValue& v) const {
    if (!v.isTensor()) fail("a tensor rebuild without a tensor");
    return v.toTensor();
  }

  void reduce() {
    Item args = pop(), callable = pop();
    const std::vector<c10::IValue> a = args_of(args);
    switch (callable.global) {
      case Global::ordered_dict:
        if (!a.empty()) fail("OrderedDict with arguments");
        push(c10::impl::GenericDict(c10::AnyType::get(), c10::AnyType::get()));
        return;
      case Global::rebuild_tensor:
        push(rebuild_tensor(a));
        return;
      case Global::restore_type_tag:
        if (a.size() != 2 || !a[1].isString()) fail("malformed restore_type_tag");
        push(Item{a[0], Global::none, at::kFloat, args.depth});
        return;
      case Global::rebuild_parameter:
      case Global::rebuild_parameter_with_state:
        if (a.size() < 3) fail("_rebuild_parameter with too few arguments");
        push(tensor_arg(a[0]));
        return;
      default:
        fail("REDUCE applies something that is not an allowed callable");
    }
  }

  static bool int_list(const c10::IValue& v, std::vector<int64_t>& out) {
    if (!v.isTuple()) return false;
    for (const auto& e : v.toTupleRef().elements()) {
      if (!e.isInt()) return false;
      out.push_back(e.toInt());
    }
    return true;
  }

  // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
  at::Tensor rebuild_tensor(const std::vector<c10::IValue>& a) const {
    if (a.size() < 6 || !a[0].isTensor() || !a[1].isInt()) fail("malformed _rebuild_tensor_v2 arguments");
    const at::Tensor storage = a[0].toTensor();
    const int64_t offset = a[1].toInt();
    std::vector<int64_t> size, stride;
    if (!int_list(a[2], size) || !int_list(a[3], stride) || size.size() != stride.size() || size.size() > 64)
      fail("malformed tensor size or stride");
    int64_t last = offset, numel = 1;
    for (std::size_t i = 0; i < size.size(); ++i) {
      if (size[i] < 0 || stride[i] < 0 || size[i] > (int64_t{1} << 40) || stride[i] > (int64_t{1} << 40))
        fail("negative or huge tensor size or stride");
      if (size[i] == 0) numel = 0;
      else last += (size[i] - 1) * stride[i];
      if (last > (int64_t{1} << 50)) fail("tensor view beyond its storage");
    }
    if (offset < 0) fail("negative storage offset");
    if (numel == 0) return at::empty(size, storage.options());
    if (last >= storage.numel())
      fail("a tensor view reaches element " + std::to_string(last) + " of a storage of " + std::to_string(storage.numel()));
    return storage.as_strided(size, stride, offset).clone(at::MemoryFormat::Contiguous);
  }

  void build() {
    Item state = pop();
    Item& target = top();
    // OrderedDict's state is its attributes (state_dict()'s `_metadata`): not part of the weights.
    if (target.global != Global::none || !target.value.isGenericDict() || state.global != Global::none)
      fail("BUILD on something other than a dict (an object)");
  }

  // BINPERSID: ('storage', <storage type>, key, location, numel) -> the storage as a 1-d tensor.
  void persistent_load() {
    Item pid = pop();
    if (pid.global != Global::none || !pid.value.isTuple()) fail("malformed persistent id");
    const auto& e = pid.value.toTupleRef().elements();
    if (e.size() != 5 || !e[0].isString() || e[0].toStringRef() != "storage" || !e[1].isString() ||
        e[1].toStringRef().rfind("\x01storage:", 0) != 0 || !e[2].isString() || !e[4].isInt())
      fail("malformed persistent id (expected ('storage', type, key, location, numel))");
    at::ScalarType type = at::kFloat;
    bool found = false;
    for (const auto& [name, t] : storage_types())
      if (e[1].toStringRef() == std::string("\x01storage:") + c10::toString(t)) type = t, found = true;
    if (!found) fail("unknown storage type");
    const std::string key = e[2].toStringRef();
    const int64_t numel = e[4].toInt();
    if (numel < 0) fail("negative storage size");
    auto it = loaded_.find(key);
    if (it == loaded_.end()) {
      at::Tensor storage = storages_(key, type, numel);
      it = loaded_.emplace(key, storage).first;
    }
    if (it->second.scalar_type() != type || it->second.numel() != numel) fail("storage '" + key + "' is used with two types");
    push(it->second);
  }

  // Only plain data may come out, and not too deeply nested.
  void check_allowed(const c10::IValue& v, int depth) const {
    if (depth > 1000) fail("nested more than 1000 levels");
    if (v.isString() && v.toStringRef().rfind("\x01storage:", 0) == 0) fail("a storage type used as a value");
    if (v.isTuple())
      for (const auto& e : v.toTupleRef().elements()) check_allowed(e, depth + 1);
    if (v.isList())
      for (const auto& e : v.toListRef()) check_allowed(e, depth + 1);
    if (v.isGenericDict())
      for (const auto& kv : v.toGenericDict()) check_allowed(kv.value(), depth + 1);
  }

  std::string_view data_;
  std::size_t pos_ = 0;
  const StorageLoader& storages_;
  std::string source_;
  std::vector<Item> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<uint64_t, Item> memo_;
  std::unordered_map<std::string, at::Tensor> loaded_;
};

}  // namespace

c10::IValue restricted_unpickle(std::string_view pickle, const StorageLoader& storages, const std::string& source) {
  return Unpickler(pickle, storages, source).run();
}

}  // namespace sparsevit::weights
