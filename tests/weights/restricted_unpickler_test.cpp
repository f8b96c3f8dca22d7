// The restricted unpickler on hand-made pickles: what torch.save's opcodes build, and the hostile
// shapes a fuzzer or an attacker would try (cycles, deep nesting, bad memo indices, unknown opcodes).
#include "weights/restricted_unpickler.h"

#include "weights_test_support.h"

using namespace std::string_literals;

namespace sparsevit::weights {
namespace {

c10::IValue unpickle(const std::string& pickle) {
  const StorageRecordLoader none = [](const std::string& key) -> std::pair<at::DataPtr, size_t> {
    throw RuntimeError("p.pkl: storage record 'data/" + key + "' is missing");
  };
  return restricted_unpickle(pickle, none, "p.pkl");
}

TEST(RestrictedUnpickler, BuildsDictsListsTuplesAndScalars) {
  // {'a': [1, -2, 3.5, True, None, 'x'], 2: (300, 70000)} as protocol 2 writes it.
  const std::string p = std::string("\x80\x02}q\x00(X\x01\x00\x00\x00"s) + "aq\x01]q\x02(K\x01J\xfe\xff\xff\xff"s +
                        "G@\x0c\x00\x00\x00\x00\x00\x00\x88NX\x01\x00\x00\x00xeK\x02M,\x01J\x70\x11\x01\x00\x86u."s;
  const c10::IValue v = unpickle(p);
  ASSERT_TRUE(v.isGenericDict());
  const auto d = v.toGenericDict();
  const auto list = d.at(std::string("a"s)).toList();
  ASSERT_EQ(list.size(), 6u);
  EXPECT_EQ(list.get(0).toInt(), 1);
  EXPECT_EQ(list.get(1).toInt(), -2);
  EXPECT_EQ(list.get(2).toDouble(), 3.5);
  EXPECT_TRUE(list.get(3).toBool());
  EXPECT_TRUE(list.get(4).isNone());
  EXPECT_EQ(list.get(5).toStringRef(), "x"s);
  const auto tuple = d.at(int64_t{2}).toTuple();
  EXPECT_EQ(tuple->elements()[0].toInt(), 300);
  EXPECT_EQ(tuple->elements()[1].toInt(), 70000);
}

TEST(RestrictedUnpickler, Long1IsSignExtended) {
  EXPECT_EQ(unpickle("\x80\x02\x8a\x02\x00\xff."s).toInt(), -256);
  EXPECT_EQ(unpickle("\x80\x02\x8a\x00."s).toInt(), 0);
  EXPECT_THROW(unpickle("\x80\x02\x8a\x09\x01\x02\x03\x04\x05\x06\x07\x08\x09."s), RuntimeError);
}

TEST(RestrictedUnpickler, HostileShapesAreRefused) {
  const auto refuse = [](const std::string& p, const std::string& fragment) {
    EXPECT_RUNTIME_ERROR_WITH(unpickle(p), "p.pkl"s, fragment);
  };
  refuse("]q\x00h\x00"s "a."s, "inside itself"s);                            // l = []; l.append(l)
  refuse("]q\x00]q\x01h\x00"s "ah\x00h\x01"s "a."s, "after placing it inside"s);  // a in b, then b into a
  std::string deep = "]q\x00"s;                                             // [[[...]]] 1001 deep via the memo
  for (int i = 0; i < 1001; ++i) deep += "]h\x00"s "aq\x00"s;
  refuse(deep + "."s, "nests deeper than 1000"s);
  std::string tuples = ")q\x00"s;
  for (int i = 0; i < 1001; ++i) tuples += "h\x00\x85q\x00"s;
  refuse(tuples + "."s, "nests deeper than 1000"s);
  refuse(std::string(1001, '(') + "."s, "more than 1000 nested MARKs"s);
  refuse("h\x05."s, "memo entry 5 was never stored"s);
  refuse("a."s, "stack underflow"s);
  refuse("(K\x01"s "a."s, "stack underflow"s);
  refuse("X\xff\xff\x00\x00"s "abc"s, "truncated pickle"s);
  refuse("K\x01"s, "truncated pickle"s);
  refuse("\x81."s, "unsupported pickle opcode NEWOBJ (0x81)"s);
  refuse("\xff."s, "unsupported pickle opcode (unknown) (0xff)"s);
  refuse("cbuiltins\neval\n."s, "refuses to load 'builtins.eval'"s);
  refuse("cnumpy.core.multiarray\nscalar\n."s, "refuses to load 'numpy.core.multiarray.scalar'"s);
  refuse("c__builtin__\nset\n."s, "refuses to load '__builtin__.set'"s);
  refuse("ctorch\nFloatStorage\n."s, "a storage type appears as the result"s);
  refuse("}K\x01]b."s, "BUILD on something other than an OrderedDict"s);
  refuse("ccollections\nOrderedDict\nK\x01\x85R."s, "OrderedDict() with arguments"s);
  refuse("ctorch._utils\n_rebuild_tensor_v2\n)R."s, "takes 6 or 7 arguments"s);
  refuse("(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x00"s "0X\x03\x00\x00\x00"s "cpuK\x04tQ."s,
         "storage record 'data/0' is missing"s);
  refuse("}]K\x01s."s, "dict key of type GenericList"s);
}

TEST(RestrictedUnpickler, OrderedDictWithMetadataLikeStateDict) {
  // OrderedDict(); d['w'] = 1; d._metadata = OrderedDict() -- the shape of nn.Module.state_dict().
  const c10::IValue v = unpickle(
      "\x80\x02"s "ccollections\nOrderedDict\nq\x00)Rq\x01X\x01\x00\x00\x00wK\x01s}X\x09\x00\x00\x00_metadatah\x00)Rsb."s);
  ASSERT_TRUE(v.isGenericDict());
  EXPECT_EQ(v.toGenericDict().size(), 1u);
  EXPECT_EQ(v.toGenericDict().at(std::string("w"s)).toInt(), 1);
}

}  // namespace
}  // namespace sparsevit::weights
