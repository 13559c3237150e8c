// Checkpoints: bit-identical round trips, atomic saves that never damage the previous file, and
// load errors that are one line naming the file and the item. Damaged and foreign files are made
// by editing a valid checkpoint with HDF5's C++ API, as another tool might.
#include "train/checkpoint.h"

#include <H5Cpp.h>
#include <gtest/gtest.h>

#include <unistd.h>
#include "tests/cli_runner.h"
#include "tests/test_helpers.h"

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "autograd/error.h"
#include "autograd/storage.h"

namespace gradlab::train {
namespace test_checkpoint {

using testing::expect_identical;

namespace fs = std::filesystem;

using testing::contains;

// Distinct, awkward float32 values: negative zero, a denormal, the largest finite value, a NaN
// with a payload and fractions that are not short decimals.
Tensor values(const Shape& shape, float seed) {
  std::vector<float> v(static_cast<size_t>(numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = seed + static_cast<float>(i) / 3.0f;
  if (!v.empty()) v[0] = -0.0f;
  if (v.size() > 1) v[1] = std::numeric_limits<float>::denorm_min();
  if (v.size() > 2) v[2] = std::numeric_limits<float>::max();
  if (v.size() > 3) v[3] = std::bit_cast<float>(uint32_t{0x7fc01234});
  return Tensor::from_vector(v, shape);
}

CheckpointData sample() {
  CheckpointData data;
  data.config = {{"task", std::string("copy")},
                 {"d_model", int64_t{64}},
                 {"lr", 3e-3},
                 {"min_lr", 0.1},
                 {"seed", int64_t{-7}},
                 {"max_int", std::numeric_limits<int64_t>::max()},
                 {"note", std::string("")},
                 {"tiny", std::numeric_limits<double>::denorm_min()}};
  data.model = {{"embed.weight", values({5, 3}, 1.0f)},
                {"blocks.0.ln1.weight", values({3}, 2.0f)},
                {"blocks.0.attn.q_proj.weight", values({3, 3}, 3.0f)},
                {"scale", values({}, 4.0f)},
                {"unused", values({0, 3}, 0.0f)},
                {"head.bias", values({5}, 5.0f)}};
  data.optimizer_step = 17;
  data.optimizer_state = {{"embed.weight/exp_avg", values({5, 3}, 6.0f)},
                          {"embed.weight/exp_avg_sq", values({5, 3}, 7.0f)},
                          {"head.bias/exp_avg", values({5}, 8.0f)},
                          {"head.bias/exp_avg_sq", values({5}, 9.0f)}};
  data.train.step = 123;
  data.train.data_seed = 0xdeadbeefcafef00dULL;
  data.train.dropout_rng = {1, (uint64_t{1} << 63) + 5, std::numeric_limits<uint64_t>::max(), 0};
  data.train.best_metric = 0.8125;
  data.train.best_step = 100;
  return data;
}

void expect_same_config(const std::vector<ConfigEntry>& got, const std::vector<ConfigEntry>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first);
    ASSERT_EQ(got[i].second.index(), want[i].second.index()) << want[i].first;
    if (const auto* d = std::get_if<double>(&want[i].second)) {
      // Bitwise, so that -0.0 or a denormal could not pass by comparing equal.
      const double g = std::get<double>(got[i].second);
      EXPECT_EQ(std::memcmp(&g, d, sizeof g), 0) << want[i].first;
    } else {
      EXPECT_EQ(got[i].second, want[i].second) << want[i].first;
    }
  }
}

// Edits a saved checkpoint in place.
void edit(const std::string& path, const std::function<void(H5::H5File&)>& change) {
  H5::Exception::dontPrint();
  H5::H5File file(path, H5F_ACC_RDWR);
  change(file);
}

// Written as variable-length strings, as h5py writes them.
void replace_string_attr(const H5::H5Object& object, const std::string& name,
                         const std::string& value) {
  if (object.attrExists(name)) object.removeAttr(name);
  const H5::StrType type(H5::PredType::C_S1, H5T_VARIABLE);
  object.createAttribute(name, type, H5::DataSpace(H5S_SCALAR)).write(type, value);
}

void replace_int_attr(const H5::H5Object& object, const std::string& name, int64_t value) {
  object.removeAttr(name);
  object.createAttribute(name, H5::PredType::STD_I64LE, H5::DataSpace(H5S_SCALAR))
      .write(H5::PredType::NATIVE_INT64, &value);
}

// Each test gets a fresh directory under the system's temporary directory, removed afterwards.
class Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = fs::temp_directory_path() /
           ("gradlab-test-checkpoint-" + std::to_string(::getpid()) + "-" + test);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  std::set<std::string> listing() const {
    std::set<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      names.insert(entry.path().filename().string());
    }
    return names;
  }

  // A valid checkpoint of sample() at dir/name.
  std::string saved(const std::string& name = "ckpt.h5") const {
    const std::string path = file(name);
    save_checkpoint(path, sample());
    return path;
  }

  // The message of the CheckpointError that f throws (a failure if it throws none).
  static std::string error_of(const std::function<void()>& f) {
    try {
      f();
    } catch (const CheckpointError& e) {
      const std::string message = e.what();
      EXPECT_FALSE(contains(message, "\n")) << message;
      return message;
    }
    ADD_FAILURE() << "no CheckpointError";
    return "";
  }

  static std::string load_error(const std::string& path) {
    return error_of([&] { read_checkpoint(path); });
  }

  fs::path dir_;
};

// --- Round trips -----------------------------------------------------------------------------

TEST_F(Checkpoint, RoundTripIsBitIdentical) {
  const CheckpointData want = sample();
  const std::string path = file("ckpt.h5");
  save_checkpoint(path, want);
  const CheckpointData got = read_checkpoint(path);

  expect_same_config(got.config, want.config);
  expect_identical(got.model, want.model);
  EXPECT_EQ(got.optimizer_step, 17);
  expect_identical(got.optimizer_state, want.optimizer_state);
  EXPECT_EQ(got.train.step, 123);
  EXPECT_EQ(got.train.data_seed, 0xdeadbeefcafef00dULL);
  EXPECT_EQ(got.train.dropout_rng, want.train.dropout_rng);
  EXPECT_EQ(got.train.best_metric, 0.8125);
  EXPECT_EQ(got.train.best_step, 100);
}

TEST_F(Checkpoint, Float64TensorsStayFloat64AndRestoreConverts) {
  CheckpointData data = sample();
  data.model = {
      {"w", Tensor::from_vector(std::vector<double>{0.1, -1e-300, 1.0 / 3}, {3}, DType::Float64)}};
  data.optimizer_state.clear();
  const std::string path = file("f64.h5");
  save_checkpoint(path, data);
  const CheckpointData got = read_checkpoint(path);
  expect_identical(got.model, data.model);

  const Tensor live = Tensor::zeros({3});  // float32
  restore_tensors(path, kModelGroup, got.model, {{"w", live}});
  EXPECT_EQ(live.dtype(), DType::Float32);
  EXPECT_EQ(live.data<float>()[0], 0.1f);
  EXPECT_EQ(live.data<float>()[2], static_cast<float>(1.0 / 3));
}

TEST_F(Checkpoint, ConfigCanBeReadAlone) {
  const std::string path = saved();
  expect_same_config(read_checkpoint_config(path), sample().config);
}

TEST_F(Checkpoint, ConfigValuesPrint) {
  EXPECT_EQ(to_string(ConfigValue{int64_t{-3}}), "-3");
  EXPECT_EQ(to_string(ConfigValue{3e-3}), "0.003");
  EXPECT_EQ(to_string(ConfigValue{0.1}), "0.1");
  EXPECT_EQ(to_string(ConfigValue{std::string("adamw")}), "adamw");
}

TEST_F(Checkpoint, RestoreCopiesIntoTheLiveTensors) {
  const std::string path = saved();
  const CheckpointData data = read_checkpoint(path);
  std::vector<nn::NamedTensor> live;
  for (const auto& [name, tensor] : sample().model)
    live.emplace_back(name, Tensor::zeros(tensor.shape()));
  const Tensor first = live[0].second;
  restore_tensors(path, kModelGroup, data.model, live);
  EXPECT_TRUE(live[0].second.same(first));  // same objects, new values
  expect_identical(live, sample().model);
}

TEST_F(Checkpoint, OneImageWritesTheSameFileAtSeveralPaths) {
  const CheckpointImage image(file("first.h5"), sample());
  image.write_to(file("first.h5"));
  image.write_to(file("second.h5"));
  EXPECT_EQ(testing::read_text(file("first.h5")), testing::read_text(file("second.h5")));
  expect_identical(read_checkpoint(file("second.h5")).model, sample().model);
}

// The in-memory file starts at an estimate of its size; metadata far beyond it (long config
// strings) makes HDF5 grow the buffer, and the file still ends where its superblock says.
TEST_F(Checkpoint, AFileLargerThanItsEstimateIsWhole) {
  CheckpointData data = sample();
  for (int i = 0; i < 8; ++i) {
    data.config.push_back({"note" + std::to_string(i), std::string(40000, char('a' + i))});
  }
  const std::string path = file("large.h5");
  save_checkpoint(path, data);
  EXPECT_GT(fs::file_size(path), 8u * 40000u);
  expect_same_config(read_checkpoint(path).config, data.config);
}

// Between training steps the step's buffers sit idle in the tensor pool; a save gives back
// enough of them for the file it builds, so it adds nothing to a run's peak memory, and keeps
// the rest for the next step.
TEST_F(Checkpoint, BuildingAFileReturnsCachedTensorBuffersFirst) {
  CheckpointData data = sample();
  data.model.emplace_back("large", values({256, 1024}, 5.0f));  // 1 MiB of values
  release_cached_storage();
  {
    std::vector<Tensor> step;  // six 2 MiB buffers, released into the pool
    for (int i = 0; i < 6; ++i) step.push_back(Tensor::zeros({512, 1024}));
  }
  const size_t cached = storage_stats().cached_bytes;
  ASSERT_EQ(cached, size_t{12} << 20);

  const std::string path = file("pooled.h5");
  CheckpointImage(path, data).write_to(path);
  const size_t given_back = cached - storage_stats().cached_bytes;
  EXPECT_GE(given_back, 2 * fs::file_size(path));
  EXPECT_LT(given_back, cached);
  expect_identical(read_checkpoint(path).model, data.model);
}

// --- Atomic saves ------------------------------------------------------------------------------

TEST_F(Checkpoint, SavingTwiceLeavesNoTemporaries) {
  const std::string path = saved();
  CheckpointData next = sample();
  next.train.step = 456;
  save_checkpoint(path, next);
  EXPECT_EQ(listing(), std::set<std::string>{"ckpt.h5"});
  EXPECT_EQ(read_checkpoint(path).train.step, 456);
}

TEST_F(Checkpoint, FailedSaveLeavesThePreviousFileIntact) {
  const std::string path = saved();
  const std::string before = testing::read_text(path);
  // A directory where the temporary file should go makes the save fail before the rename.
  const std::string temp = path + ".tmp-" + std::to_string(::getpid());
  fs::create_directory(temp);
  CheckpointData next = sample();
  next.train.step = 999;
  const std::string message = error_of([&] { save_checkpoint(path, next); });
  EXPECT_TRUE(contains(message, path + ": cannot create temporary file")) << message;
  EXPECT_EQ(testing::read_text(path), before);
  EXPECT_EQ(read_checkpoint(path).train.step, 123);
}

TEST_F(Checkpoint, SaveOverADirectoryFailsAndRemovesItsTemporary) {
  const std::string path = file("taken");
  fs::create_directory(path);
  const std::string message = error_of([&] { save_checkpoint(path, sample()); });
  EXPECT_TRUE(contains(message, path + ": cannot rename")) << message;
  EXPECT_EQ(listing(), std::set<std::string>{"taken"});
  EXPECT_TRUE(fs::is_empty(path));
}

TEST_F(Checkpoint, SaveIntoAMissingDirectoryFails) {
  const std::string path = file("no-such-dir/ckpt.h5");
  const std::string message = error_of([&] { save_checkpoint(path, sample()); });
  EXPECT_TRUE(contains(message, path + ": cannot create temporary file")) << message;
  EXPECT_TRUE(contains(message, "No such file or directory")) << message;
}

TEST_F(Checkpoint, InvalidNamesAreRejectedBeforeAnythingIsWritten) {
  const std::string path = saved();
  const std::string before = testing::read_text(path);

  CheckpointData duplicate = sample();
  duplicate.model.push_back({"head.bias", values({5}, 0.0f)});
  EXPECT_EQ(error_of([&] { save_checkpoint(path, duplicate); }),
            path + ": /model/head.bias: duplicate name");

  CheckpointData slash = sample();
  slash.model[0].first = "embed/weight";
  EXPECT_TRUE(contains(error_of([&] { save_checkpoint(path, slash); }), "contains '/'"));

  CheckpointData no_slot = sample();
  no_slot.optimizer_state[0].first = "embed.weight";
  EXPECT_TRUE(contains(error_of([&] { save_checkpoint(path, no_slot); }),
                       "/optimizer/embed.weight: name is not '<parameter>/<slot>'"));

  EXPECT_EQ(testing::read_text(path), before);
  EXPECT_EQ(listing(), std::set<std::string>{"ckpt.h5"});
}

// --- Load errors -------------------------------------------------------------------------------

TEST_F(Checkpoint, MissingFile) {
  const std::string path = file("absent.h5");
  EXPECT_EQ(load_error(path), path + ": cannot open: No such file or directory");
}

TEST_F(Checkpoint, NotAnHdf5File) {
  const std::string path = file("notes.h5");
  std::ofstream(path) << "step 100, loss 0.25\n";
  EXPECT_EQ(load_error(path), path + ": not an HDF5 file");
}

TEST_F(Checkpoint, TruncatedFileIsOneQuietLine) {
  const std::string path = saved();
  fs::resize_file(path, fs::file_size(path) / 2);
  ::testing::internal::CaptureStderr();
  const std::string message = load_error(path);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");  // HDF5 prints no error stack
  const uintmax_t half = fs::file_size(path);
  EXPECT_TRUE(contains(message, path + ": truncated file: " + std::to_string(half) + " bytes"))
      << message;
}

TEST_F(Checkpoint, ForeignHdf5File) {
  const std::string path = file("other.h5");
  H5::H5File(path, H5F_ACC_TRUNC).createGroup("data");
  EXPECT_EQ(load_error(path), path + ": not a gradlab checkpoint (no root attribute 'format')");
}

TEST_F(Checkpoint, WrongFormat) {
  const std::string path = saved();
  edit(path, [](H5::H5File& f) { replace_string_attr(f, "format", "foo"); });
  EXPECT_EQ(load_error(path), path + ": format 'foo' is not a gradlab checkpoint");
}

TEST_F(Checkpoint, WrongVersion) {
  const std::string path = saved();
  edit(path, [](H5::H5File& f) { replace_int_attr(f, "version", 7); });
  EXPECT_EQ(load_error(path), path + ": version 7 is not supported (this build reads version 1)");
  EXPECT_EQ(error_of([&] { read_checkpoint_config(path); }), load_error(path));
}

TEST_F(Checkpoint, WrongAttributeType) {
  const std::string path = saved();
  edit(path, [](H5::H5File& f) {
    H5::Group train = f.openGroup("train");
    replace_string_attr(train, "step", "123");
  });
  EXPECT_EQ(load_error(path),
            path + ": /train attribute 'step': expected an integer, found string");
}

TEST_F(Checkpoint, MissingTrainAttribute) {
  const std::string path = saved();
  edit(path, [](H5::H5File& f) { f.openGroup("train").removeAttr("dropout_rng"); });
  EXPECT_EQ(load_error(path), path + ": /train attribute 'dropout_rng': missing");
}

TEST_F(Checkpoint, WrongDatasetType) {
  const std::string path = saved();
  edit(path, [](H5::H5File& f) {
    H5::Group model = f.openGroup("model");
    model.unlink("head.bias");
    const hsize_t dims[1] = {5};
    model.createDataSet("head.bias", H5::PredType::STD_I32LE, H5::DataSpace(1, dims));
  });
  EXPECT_EQ(load_error(path), path + ": /model/head.bias: type int32 is not float32 or float64");
}

TEST_F(Checkpoint, ImplausibleShapesAreRefusedBeforeAllocating) {
  const std::string path = saved();
  edit(path, [](H5::H5File& f) {
    H5::Group model = f.openGroup("model");
    const std::vector<hsize_t> deep(9, 1);
    model.createDataSet("deep", H5::PredType::IEEE_F32LE, H5::DataSpace(9, deep.data()));
  });
  EXPECT_EQ(load_error(path), path + ": /model/deep: rank 9 exceeds the limit of 8");

  edit(path, [](H5::H5File& f) {
    H5::Group model = f.openGroup("model");
    model.unlink("deep");
    const hsize_t huge[2] = {1 << 20, 1 << 20};  // 4 TiB of float32, never written
    model.createDataSet("huge", H5::PredType::IEEE_F32LE, H5::DataSpace(2, huge));
  });
  EXPECT_EQ(load_error(path),
            path + ": /model/huge: shape [1048576,1048576] has more than 2^28 elements");
}

TEST_F(Checkpoint, SoftLinksAreRefused) {
  const std::string path = saved();
  edit(path, [](H5::H5File& f) { f.openGroup("model").link(H5L_TYPE_SOFT, "/train", "alias"); });
  EXPECT_EQ(load_error(path), path + ": /model/alias: a soft or external link (not allowed)");
}

TEST_F(Checkpoint, UnknownRootItemsAreIgnored) {
  const std::string path = saved();
  edit(path, [](H5::H5File& f) {
    f.createGroup("notes");
    replace_string_attr(f.openGroup("train"), "comment", "added later");
  });
  EXPECT_EQ(read_checkpoint(path).train.step, 123);
}

TEST_F(Checkpoint, OptimizerStateForAnUnknownParameter) {
  const std::string path = saved();
  edit(path, [](H5::H5File& f) { f.openGroup("model").unlink("head.bias"); });
  EXPECT_EQ(load_error(path), path + ": /optimizer/head.bias: no such parameter in /model");
}

// --- Restore errors ------------------------------------------------------------------------------

TEST_F(Checkpoint, MissingParameter) {
  const std::string path = saved();
  CheckpointData data = read_checkpoint(path);
  std::vector<nn::NamedTensor> live = sample().model;
  data.model.pop_back();  // head.bias
  EXPECT_EQ(error_of([&] { restore_tensors(path, kModelGroup, data.model, live); }),
            path + ": /model/head.bias: missing from the checkpoint");
}

TEST_F(Checkpoint, UnexpectedParameter) {
  const std::string path = saved();
  const CheckpointData data = read_checkpoint(path);
  std::vector<nn::NamedTensor> live = sample().model;
  live.erase(live.begin());  // embed.weight
  EXPECT_EQ(error_of([&] { restore_tensors(path, kModelGroup, data.model, live); }),
            path + ": /model/embed.weight: unexpected: not in the model");
}

TEST_F(Checkpoint, ShapeMismatch) {
  const std::string path = saved();
  const CheckpointData data = read_checkpoint(path);
  std::vector<nn::NamedTensor> live = sample().model;
  live[0].second = Tensor::zeros({3, 5});
  EXPECT_EQ(error_of([&] { restore_tensors(path, kModelGroup, data.model, live); }),
            path + ": /model/embed.weight: shape [5,3] does not match the model's [3,5]");
}

TEST_F(Checkpoint, MissingOptimizerSlot) {
  const std::string path = saved();
  CheckpointData data = read_checkpoint(path);
  const std::vector<nn::NamedTensor> live = sample().optimizer_state;
  data.optimizer_state.pop_back();
  EXPECT_EQ(error_of([&] { restore_tensors(path, kOptimizerGroup, data.optimizer_state, live); }),
            path + ": /optimizer/head.bias/exp_avg_sq: missing from the checkpoint");
}

TEST_F(Checkpoint, FailedRestoreChangesNothing) {
  const std::string path = saved();
  const CheckpointData data = read_checkpoint(path);
  std::vector<nn::NamedTensor> live;
  for (const auto& [name, tensor] : sample().model)
    live.emplace_back(name, Tensor::full(tensor.shape(), 7.0));
  live.back().second = Tensor::full({6}, 7.0);  // head.bias is [5] in the file: checked last
  const std::string message =
      error_of([&] { restore_tensors(path, kModelGroup, data.model, live); });
  EXPECT_TRUE(contains(message, "/model/head.bias: shape [5] does not match")) << message;
  for (const auto& [name, tensor] : live) {
    for (double v : tensor.to_vector()) ASSERT_EQ(v, 7.0) << name;
  }
}

}  // namespace test_checkpoint
}  // namespace gradlab::train
