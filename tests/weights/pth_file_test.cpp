// torch.save files: what Python's torch.save wrote reads back exactly (state_dict with _metadata,
// MAE checkpoints, views sharing storage, parameters, every dtype); code-running or foreign objects
// are refused without running; damaged archives are one-line RuntimeErrors.
#include "weights/pth_file.h"

#include <filesystem>

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include "weights_test_support.h"

namespace sparsevit::weights {
namespace {

using testing::expect_matches_fixture;
using testing::fixture;

weights::NamedTensors load_state_dict(const std::string& name) {
  return state_dict_from_pth(read_pth(fixture(name)), fixture(name));
}

TEST(Pth, ReadsAPlainStateDictWithMetadata) {
  expect_matches_fixture(load_state_dict("state_dict.pth"), "state_dict.expected.json");
}

TEST(Pth, FindsTheModelInsideAnMaeCheckpoint) {
  const c10::IValue root = read_pth(fixture("mae_checkpoint.pth"));
  ASSERT_TRUE(root.isGenericDict());
  EXPECT_EQ(root.toGenericDict().at(std::string("epoch")).toInt(), 3);
  EXPECT_EQ(root.toGenericDict().at(std::string("scaler")).toGenericDict().at(std::string("scale")).toDouble(), 65536.0);
  expect_matches_fixture(state_dict_from_pth(root, "m"), "mae_checkpoint.expected.json");
}

TEST(Pth, ViewsSharingOneStorageAndEveryDtypeComeBackExactly) {
  expect_matches_fixture(load_state_dict("views.pth"), "views.expected.json");
}

TEST(Pth, ParametersSavedDirectlyAreTensors) {
  expect_matches_fixture(load_state_dict("parameter.pth"), "parameter.expected.json");
  expect_matches_fixture(load_state_dict("crafted_ok.pth"), "crafted_ok.expected.json");
}

TEST(Pth, ForeignObjectsAreRefusedWithoutRunningAnything) {
  EXPECT_RUNTIME_ERROR_WITH(read_pth(fixture("namespace.pth")), fixture("namespace.pth"),
                            "refuses to load 'argparse.Namespace': a weight file may hold only tensors");
  EXPECT_RUNTIME_ERROR_WITH(read_pth(fixture("reduce_print.pth")), fixture("reduce_print.pth"),
                            "refuses to load '__builtin__.print'");
  std::filesystem::remove("/tmp/sparsevit_weights_pwned");
  EXPECT_RUNTIME_ERROR_WITH(read_pth(fixture("reduce_system.pth")), fixture("reduce_system.pth"),
                            "refuses to load 'posix.system'");
  EXPECT_FALSE(std::filesystem::exists("/tmp/sparsevit_weights_pwned"));
}

TEST(Pth, LegacyAndForeignFilesAreClearErrors) {
  EXPECT_RUNTIME_ERROR_WITH(read_pth(fixture("legacy.pth")), fixture("legacy.pth"),
                            "legacy torch.save format; re-save it with torch >= 1.6");
  EXPECT_RUNTIME_ERROR_WITH(read_pth(fixture("hand.safetensors")), fixture("hand.safetensors"), "no zip signature");
  EXPECT_RUNTIME_ERROR_WITH(read_pth("/nonexistent.pth"), "/nonexistent.pth", "cannot open");
  EXPECT_RUNTIME_ERROR_WITH(parse_pth("PK\x03\x04 this is no zip at all", "g.pth"), "g.pth", "");
}

TEST(Pth, DamagedArchivesAreOneLineErrors) {
  EXPECT_RUNTIME_ERROR_WITH(read_pth(fixture("bad_no_data_pkl.pth")), fixture("bad_no_data_pkl.pth"), "without data.pkl");
  EXPECT_RUNTIME_ERROR_WITH(read_pth(fixture("bad_storage_size.pth")), fixture("bad_storage_size.pth"),
                            "storage '0' has 16 bytes, its 5 Float elements need 20");
  EXPECT_RUNTIME_ERROR_WITH(read_pth(fixture("bad_missing_record.pth")), fixture("bad_missing_record.pth"),
                            "storage record 'data/0' is missing");
  EXPECT_RUNTIME_ERROR_WITH(read_pth(fixture("bad_view_beyond_storage.pth")), fixture("bad_view_beyond_storage.pth"),
                            "tensor view reaches element 4 of a storage of 4");
  EXPECT_RUNTIME_ERROR_WITH(state_dict_from_pth(read_pth(fixture("bad_not_tensor_in_model.pth")), "n.pth"), "n.pth",
                            "under 'model': 'note' is a String, not a tensor");
}

TEST(Pth, TruncatedOrCorruptedAnywhereIsAnErrorNotACrash) {
  const std::string bytes = testing::file_bytes(fixture("views.pth"));
  for (size_t cut = 0; cut < bytes.size(); cut += 7)
    EXPECT_THROW(parse_pth(std::string_view(bytes).substr(0, cut), "cut.pth"), RuntimeError) << cut;
  // Flip each byte in turn: either it still reads (a byte of tensor data) or it is a RuntimeError.
  for (size_t at = 0; at < bytes.size(); ++at) {
    std::string damaged = bytes;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x5a);
    try {
      (void)parse_pth(damaged, "flip.pth");
    } catch (const RuntimeError&) {
    }
  }
}

TEST(Pth, StateDictSearchNamesTheTopLevelKeysWhenNothingFits) {
  c10::impl::GenericDict root(c10::AnyType::get(), c10::AnyType::get());
  root.insert(std::string("epoch"), int64_t{3});
  root.insert(std::string("weights"), std::string("elsewhere"));
  EXPECT_RUNTIME_ERROR_WITH(state_dict_from_pth(root, "x.pth"), "x.pth", "(its keys: 'epoch', 'weights')");
  EXPECT_RUNTIME_ERROR_WITH(state_dict_from_pth(c10::IValue(int64_t{1}), "x.pth"), "x.pth", "not a dict of tensors");
}

class PthFiles : public testing::ScratchDir {};

TEST_F(PthFiles, WritePthReadPthRoundTrip) {
  const weights::NamedTensors tensors = testing::every_dtype();
  write_pth(path("w.pth"), tensors);
  testing::expect_same(state_dict_from_pth(read_pth(path("w.pth")), path("w.pth")), tensors);
  EXPECT_THROW(write_pth(path("d.pth"), {{"x", at::ones({1})}, {"x", at::ones({1})}}), UsageError);
}

// Python's torch.load(weights_only=True) (torch 2.6's default) refuses globals off its allow-list,
// such as the restore_type_tag that torch::jit::pickle_save writes for typed dicts; the Python side
// of this check is python_interop_test.cpp.
TEST_F(PthFiles, WritePthPicklesOnlyWhatTorchSaveDoes) {
  const at::Tensor base = at::arange(12, at::kFloat).reshape({3, 4});
  const weights::NamedTensors tensors = {{"first_row", base[0]}, {"last_row", base[2]}, {"other", at::ones({2})}};
  write_pth(path("w.pth"), tensors);
  testing::expect_same(state_dict_from_pth(read_pth(path("w.pth")), path("w.pth")), tensors);

  caffe2::serialize::PyTorchStreamReader reader(path("w.pth"));
  const auto [data, size] = reader.getRecord("data.pkl");
  const std::string pickle(static_cast<const char*>(data.get()), size);
  EXPECT_EQ(pickle.find("torch.jit"), std::string::npos) << "a TorchScript global in data.pkl";
  EXPECT_NE(pickle.find("_rebuild_tensor_v2"), std::string::npos);
  // The rows share one storage: written once, as torch.save does.
  EXPECT_TRUE(reader.hasRecord("data/0"));
  EXPECT_TRUE(reader.hasRecord("data/1"));
  EXPECT_FALSE(reader.hasRecord("data/2"));
}

// What write_pth wrote before it pickled like torch.save (torch::jit::pickle_save: a dict tagged with
// torch.jit._pickle.restore_type_tag) still reads.
TEST_F(PthFiles, FilesWrittenByPickleSaveStillRead) {
  const weights::NamedTensors tensors = testing::every_dtype();
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, tensor] : tensors) dict.insert(name, tensor);
  const std::vector<char> bytes = torch::jit::pickle_save(c10::IValue(dict));
  const std::string archive(bytes.data(), bytes.size());
  ASSERT_NE(archive.find("restore_type_tag"), std::string::npos) << "pickle_save no longer tags typed dicts";
  testing::write_bytes(path("old.pth"), archive);
  testing::expect_same(state_dict_from_pth(read_pth(path("old.pth")), path("old.pth")), tensors);
  testing::expect_same(state_dict_from_pth(parse_pth(archive, "old.pth"), "old.pth"), tensors);
}

}  // namespace
}  // namespace sparsevit::weights
