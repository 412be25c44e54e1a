// checkpoint_test.cpp: safetensors files (tiny/checkpoint.h).
//
// Round trips in every dtype; files written by Python's safetensors (tests/fixtures/safetensors/,
// made by make_safetensors_fixtures.py there) read value for value; the bytes tiny writes fixed
// by a committed file that check_tiny_file.py reads with Python's library; a save killed halfway
// (SIGKILL, in a forked child) leaves the previous checkpoint whole; and every kind of damage
// to a file, including every truncation and thousands of random byte changes, is an exception.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "tiny/checkpoint.h"
#include "test_util.h"
#include "tiny/tiny.h"

namespace tiny {
namespace {

namespace fs = std::filesystem;
using testing::element_bytes;
using testing::read_bytes;
using testing::TempDir;
using testing::write_bytes;

std::string fixture(const std::string& name) {
  return std::string(TINY_SOURCE_DIR) + "/tests/fixtures/safetensors/" + name;
}

// Same names in the same order, and each tensor the same dtype, shape and bytes.
void expect_same(const NamedTensors& actual, const NamedTensors& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    SCOPED_TRACE(expected[i].first);
    EXPECT_EQ(actual[i].first, expected[i].first);
    EXPECT_EQ(actual[i].second.dtype(), expected[i].second.dtype());
    EXPECT_EQ(actual[i].second.shape(), expected[i].second.shape());
    EXPECT_EQ(element_bytes(actual[i].second), element_bytes(expected[i].second));
  }
}

template <typename E, typename F> void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected one mentioning " << parts.at(0);
  } catch (const E& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message: " << e.what() << "\nmissing: " << p;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

// A safetensors file from its parts: the length, the header text as given (no padding), and
// the data bytes.
std::string safetensors_bytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  for (int b = 0; b < 8; ++b) out[b] = static_cast<char>((header.size() >> (8 * b)) & 0xFF);
  return out + header + data;
}

// The tensors the committed tiny_written.safetensors holds, in every dtype and several layouts.
NamedTensors sample_tensors() {
  const Tensor values =
      from_vector<double>({0, 1, -2.5, 3, 1e-3, -7, 100, 0.5, 1, 0, 2, 9}, {3, 4});
  return {
      {"layers.0.weight", values.to(kFloat32)},
      {"layers.0.bias", from_vector<double>({0.25, -1.0, 3.5}, {3})},
      {"half", values.to(kFloat16).T()},  // not contiguous: saved in row-major order
      {"brain", values.to(kBFloat16).index({Slice{}, Slice{0, std::nullopt, 2}})},
      {"step", scalar_tensor(int64_t{1234567890123}, kInt64)},
      {"tokens", arange(1, 11, 1, kInt32)},
      {"mask", values.to(kBool)},
      {"empty", zeros({0, 4})},
  };
}

TEST(Checkpoint, RoundTripsEveryDtypeAndTheMetadata) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  const NamedTensors tensors = sample_tensors();
  const std::map<std::string, std::string> metadata = {
      {"step", "1000"}, {"note", "quotes \" and \\ and a tab\t and unicode \xc3\xa9"}};
  save_safetensors(path, tensors, metadata);
  const TensorFile file = load_safetensors(path);
  expect_same(file.tensors, tensors);
  EXPECT_EQ(file.metadata, metadata);
  EXPECT_TRUE(file.contains("layers.0.bias"));
  EXPECT_FALSE(file.contains("layers.1.bias"));
  EXPECT_EQ(file.at("tokens").at({9}), 10);
  expect_error<RuntimeError>([&] { file.at("nope"); }, {"no tensor named 'nope'"});
  // No metadata and no tensors are both valid files.
  save_safetensors(path, {});
  EXPECT_TRUE(load_safetensors(path).tensors.empty());
  EXPECT_TRUE(load_safetensors(path).metadata.empty());
  // The header is padded to a multiple of 8 and each tensor starts aligned for its dtype.
  save_safetensors(path, {{"a", ones({3}, kFloat16)}, {"b", ones({1}, kFloat64)}});
  const std::string bytes = read_bytes(path);
  EXPECT_EQ((bytes.size() - 8 - 3 * 2 - 8) % 8, 0u);
  EXPECT_NE(bytes.find("\"a\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[8,14]}"),
            std::string::npos);
  EXPECT_NE(bytes.find("\"b\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}"),
            std::string::npos);
  EXPECT_EQ(load_safetensors(path).tensors[0].first, "a");  // the caller's order, kept
}

// The bytes tiny writes for sample_tensors() are fixed by a committed file, which
// check_tiny_file.py (beside it) reads with Python's safetensors, NumPy and PyTorch. Set
// TINY_FIXTURE_OUT=<path> to write a new copy after a deliberate change of format.
TEST(Checkpoint, WritesTheCommittedBytesThatPythonReads) {
  TempDir dir;
  const std::string path = dir.file("tiny_written.safetensors");
  save_safetensors(path, sample_tensors(), {{"format", "pt"}, {"written_by", "tiny"}});
  if (const char* out = std::getenv("TINY_FIXTURE_OUT"))
    fs::copy_file(path, out, fs::copy_options::overwrite_existing);
  const std::string committed = read_bytes(fixture("tiny_written.safetensors"));
  ASSERT_FALSE(committed.empty()) << "missing fixture";
  EXPECT_EQ(read_bytes(path), committed);
}

TEST(Checkpoint, ReadsFilesWrittenByPythonsSafetensors) {
  const TensorFile file = load_safetensors(fixture("python_numpy.safetensors"));
  const NamedTensors expected = {
      // Python lays out (and lists) the tensors by alignment, then name.
      {"step", from_vector<int64_t>({1234567890123}, {1})},
      {"bias", from_vector<double>({1.0, -2.0, 0.25}, {3})},
      {"empty", zeros({0, 4})},
      {"scalar", scalar_tensor(7.0, kFloat32)},
      {"weight", from_vector<float>({0.5f, -1.25f, 3.0f, 0.1f, 3e38f, -0.0f}, {2, 3})},
      {"ids", arange(1, 6, 1, kInt32)},
      {"half", from_vector<float>({0.5f, 65504.0f, -0.0f, 0.1f}, {2, 2}).to(kFloat16)},
      {"mask", tensor({true, false, false, true})},
  };
  expect_same(file.tensors, expected);
  EXPECT_EQ(file.metadata, (std::map<std::string, std::string>{{"format", "np"}, {"epoch", "3"}}));

  const TensorFile bf16 = load_safetensors(fixture("python_torch_bf16.safetensors"));
  expect_same(bf16.tensors,
              {{"w", from_vector<float>({1.0f, -2.5f, 3.140625f}, {3}).to(kBFloat16)}});
  const TensorFile int8 = load_safetensors(fixture("python_int8.safetensors"));
  expect_same(int8.tensors, {{"q", from_vector<float>({-128.0f, 0.0f, 127.0f}, {3}).to(kInt8)}});
}

// ---- atomic saves --------------------------------------------------------------------------------

// The child's hook: die, as a killed process dies, once half of the file is written.
void kill_halfway(uint64_t written, uint64_t total) {
  if (written * 2 >= total) ::kill(::getpid(), SIGKILL);
}

TEST(Checkpoint, ASaveKilledHalfwayLeavesThePreviousFileWhole) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  const NamedTensors old_state = {{"w", arange(1000, kFloat32)}};
  save_safetensors(path, old_state, {{"step", "1"}});
  const std::string old_bytes = read_bytes(path);

  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // 32 MiB: four blocks, so the hook fires with part of the file on disk.
    detail::set_save_progress_hook(kill_halfway);
    try {
      save_safetensors(path, {{"w", ones({8 << 20}, kFloat32)}}, {{"step", "2"}});
    } catch (...) {
    }
    ::_exit(0);  // reached only if the hook did not kill us: the parent reports it
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the child was not killed";

  // The checkpoint is the old one, byte for byte, and loads.
  EXPECT_EQ(read_bytes(path), old_bytes);
  const TensorFile file = load_safetensors(path);
  expect_same(file.tensors, old_state);
  EXPECT_EQ(file.metadata.at("step"), "1");
  // What the killed save left is a hidden temporary file, never something named like a
  // checkpoint.
  int leftovers = 0;
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    const std::string name = entry.path().filename().string();
    if (name == "model.safetensors") continue;
    ++leftovers;
    EXPECT_EQ(name.rfind(".model.safetensors.tmp-", 0), 0u) << name;
    EXPECT_THROW(load_safetensors(entry.path().string()), Error) << "a half-written file loads";
  }
  EXPECT_EQ(leftovers, 1);

  // A save that completes replaces the file.
  save_safetensors(path, {{"w", ones({4})}}, {{"step", "2"}});
  EXPECT_EQ(load_safetensors(path).metadata.at("step"), "2");
}

TEST(Checkpoint, AFailedSaveChangesNothing) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  save_safetensors(path, {{"w", ones({2})}});
  const std::string before = read_bytes(path);
  expect_error<ValueError>(
      [&] {
        save_safetensors(path, {{"w", ones({2})}, {"w", ones({3})}});
      },
      {"'w' appears twice"});
  expect_error<ValueError>([&] { save_safetensors(path, {{"", ones({2})}}); }, {"empty name"});
  expect_error<ValueError>(
      [&] {
        save_safetensors(path, {{"__metadata__", ones({2})}});
      },
      {"reserved"});
  expect_error<ValueError>([&] { save_safetensors(path, {{"x", Tensor()}}); }, {"undefined"});
  expect_error<ValueError>([&] { save_safetensors(path, {{"bad\xff", ones({1})}}); }, {"UTF-8"});
  expect_error<RuntimeError>(
      [&] {
        save_safetensors(dir.file("no/such/folder/m.safetensors"), {{"w", ones({2})}});
      },
      {"No such file or directory"});
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

// ---- damaged files -------------------------------------------------------------------------------

TEST(Checkpoint, RefusesDamagedFilesWithTheReason) {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  const auto refuses = [&](const std::string& bytes, const std::vector<std::string>& parts) {
    write_bytes(path, bytes);
    expect_error<Error>([&] { load_safetensors(path); }, parts);
  };
  const std::string f32x2 = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  write_bytes(path, safetensors_bytes(f32x2, std::string(8, '\0')));
  EXPECT_EQ(load_safetensors(path).at("a").shape(), (Shape{2}));  // the helper makes valid files

  expect_error<RuntimeError>([&] { load_safetensors(dir.file("none.safetensors")); },
                             {"No such file or directory", "none.safetensors"});
  refuses("abc", {"too short", path});
  // A dtype safetensors defines and tiny lacks is refused by name.
  refuses(safetensors_bytes("{\"q\":{\"dtype\":\"U16\",\"shape\":[1],\"data_offsets\":[0,2]}}",
                            std::string(2, '\0')),
          {"tensor \"q\"", "dtype U16", "no dtype"});
  refuses(safetensors_bytes(f32x2, "").substr(0, 30), {"header length is", "only 22 bytes"});
  refuses(std::string("\xff\xff\xff\xff\xff\xff\xff\xff", 8) + "{}", {"header length"});
  refuses(safetensors_bytes("[1]", ""), {"does not start with '{'"});
  refuses(safetensors_bytes("{\"a\":", ""), {"not valid JSON", "end of the header"});
  refuses(safetensors_bytes("{\"a\":{}} x", ""), {"not valid JSON", "after the JSON value"});
  refuses(safetensors_bytes("{\"a\":tru}", ""), {"not valid JSON"});
  refuses(safetensors_bytes("{\"a\":1,}", ""), {"not valid JSON"});
  refuses(safetensors_bytes("{\"a\":01}", ""), {"not valid JSON"});
  refuses(safetensors_bytes("{\"a\":\"\x01\"}", ""), {"control character"});
  refuses(safetensors_bytes("{\"a\":\"\\ud800\"}", ""), {"surrogate"});
  refuses(safetensors_bytes("{\"\xc3\x28\":1}", ""), {"UTF-8"});
  // Nesting a million levels deep is refused at level 65, without recursing further.
  refuses(safetensors_bytes("{\"a\":" + std::string(1000000, '[') + "}", ""), {"nesting deeper"});
  // Entries with missing, wrong or unknown fields.
  refuses(safetensors_bytes("{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", std::string(8, 0)),
          {"tensor \"a\"", "no \"dtype\""});
  refuses(
      safetensors_bytes("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", std::string(8, 0)),
      {"no \"shape\""});
  refuses(safetensors_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", std::string(8, 0)),
          {"no \"data_offsets\""});
  refuses(safetensors_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],"
                            "\"x\":1}}",
                            std::string(8, 0)),
          {"unknown field \"x\""});
  refuses(safetensors_bytes("{\"a\":[1]}", ""), {"must be an object"});
  refuses(safetensors_bytes("{\"a\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}",
                            std::string(8, 0)),
          {"unknown dtype \"F33\""});
  refuses(safetensors_bytes("{\"a\":{\"dtype\":\"U16\",\"shape\":[2],\"data_offsets\":[0,4]}}",
                            std::string(4, 0)),
          {"dtype U16", "no dtype"});
  refuses(safetensors_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}",
                            std::string(8, 0)),
          {"non-negative integer, got -2"});
  refuses(safetensors_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,8]}}",
                            std::string(8, 0)),
          {"non-negative integer, got 1.5"});
  refuses(safetensors_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}",
                            std::string(8, 0)),
          {"[begin, end]"});
  refuses(safetensors_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,"
                            "4294967296],\"data_offsets\":[0,8]}}",
                            std::string(8, 0)),
          {"too large"});
  // Byte ranges: the wrong size for the shape, backwards, past the end, overlapping, with a
  // gap, and short of the end.
  refuses(safetensors_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}",
                            std::string(8, 0)),
          {"hold 8 bytes, but shape [3] of F32 takes 12"});
  refuses(safetensors_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}",
                            std::string(8, 0)),
          {"ends before it begins"});
  refuses(safetensors_bytes(f32x2, std::string(4, '\0')), {"past the end of the data (4 bytes)"});
  const std::string two =
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}";
  refuses(safetensors_bytes(two, std::string(12, '\0')), {"tensor \"b\"", "overlap"});
  const std::string gap =
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}";
  refuses(safetensors_bytes(gap, std::string(12, '\0')), {"gap after byte 4"});
  refuses(safetensors_bytes(f32x2, std::string(12, '\0')), {"end at 8", "12 bytes long"});
  // Names and metadata.
  const std::string twice =
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
      "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}";
  refuses(safetensors_bytes(twice, std::string(8, '\0')), {"\"a\" appears twice"});
  refuses(safetensors_bytes("{\"__metadata__\":{\"k\":1}}", ""),
          {"metadata \"k\" must be a string"});
  refuses(safetensors_bytes("{\"__metadata__\":[]}", ""), {"\"__metadata__\" must be an object"});
  // A bool is 0 or 1.
  refuses(safetensors_bytes("{\"m\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[0,2]}}",
                            std::string("\x01\x02", 2)),
          {"byte 1 is 2, not a bool"});
}

// Every truncation of a valid file is refused, and random changes to its bytes either leave a
// file that still reads (a change in the padding, say) or are refused: never a crash.
TEST(Checkpoint, NoTruncationOrByteChangeCrashes) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  save_safetensors(path, sample_tensors(), {{"step", "3"}});
  const std::string good = read_bytes(path);
  // Each damaged copy is a new file, removed after: rewriting one file in place makes ext4
  // flush it on every close (its guard for programs that replace a file by truncating it).
  const std::string damaged = dir.file("damaged.safetensors");
  for (size_t n = 0; n < good.size(); ++n) {
    write_bytes(damaged, good.substr(0, n));
    EXPECT_THROW(load_safetensors(damaged), Error) << "truncated to " << n << " bytes";
    fs::remove(damaged);
  }
  std::mt19937 rng(12345);  // fixed: the same changes on every run
  int refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bytes = good;
    const int changes = 1 + static_cast<int>(rng() % 3);
    for (int c = 0; c < changes; ++c) bytes[rng() % bytes.size()] = static_cast<char>(rng() & 0xFF);
    write_bytes(damaged, bytes);
    try {
      load_safetensors(damaged);
    } catch (const Error&) {
      ++refused;
    }
    fs::remove(damaged);
  }
  EXPECT_GT(refused, 100);  // most changes to the header are caught
}

// ---- comparing with a model --------------------------------------------------------------------

TEST(Checkpoint, ChecksTensorsAsLoadStateDictDoes) {
  const NamedTensors loaded = {{"weight", zeros({64, 64})}, {"extra", zeros({1})}};
  const std::vector<TensorSpec> linear = {{"weight", {64, 32}, kFloat32}, {"bias", {64}, kFloat32}};
  // PyTorch 1.13's text for nn.Linear(32, 64).load_state_dict of these tensors, verbatim.
  expect_error<RuntimeError>(
      [&] { check_tensors(loaded, linear, "Linear"); },
      {"Error(s) in loading state_dict for Linear:\n"
       "\tMissing key(s) in state_dict: \"bias\". \n"
       "\tUnexpected key(s) in state_dict: \"extra\". \n"
       "\tsize mismatch for weight: copying a param with shape torch.Size([64, 64]) from "
       "checkpoint, the shape in current model is torch.Size([64, 32])."});
  // strict = false reports the names instead of raising; a wrong shape still raises.
  const IncompatibleKeys keys =
      check_tensors({{"weight", zeros({64, 32})}}, linear, "Linear", /*strict=*/false);
  EXPECT_EQ(keys.missing_keys, (std::vector<std::string>{"bias"}));
  EXPECT_TRUE(keys.unexpected_keys.empty());
  expect_error<RuntimeError>(
      [&] {
        check_tensors({{"layers.0.weight", zeros({64, 64})}}, {{"layers.0.weight", {64, 32}}},
                      "model", false);
      },
      {"size mismatch for layers.0.weight: copying a param with shape torch.Size([64, 64]) from "
       "checkpoint, the shape in current model is torch.Size([64, 32])."});
  expect_error<RuntimeError>(
      [&] {
        check_tensors({{"w", zeros({2}, kFloat16)}}, {{"w", {2}, kFloat32}});
      },
      {"dtype mismatch for w: copying a param with dtype torch.float16 from checkpoint, the "
       "dtype in current model is torch.float32."});
  const IncompatibleKeys fine = check_tensors({{"w", zeros({2})}}, {{"w", {2}, kFloat32}});
  EXPECT_TRUE(fine.missing_keys.empty() && fine.unexpected_keys.empty());
  EXPECT_THROW(check_tensors({{"w", zeros({2})}, {"w", zeros({2})}}, {}), ValueError);
}

// ---- model + optimizer checkpoints (save_checkpoint / load_checkpoint) ------------------------

// A model whose parameters are trained with AdamW in two groups, for a few steps.
struct Trained {
  std::unique_ptr<nn::Linear> model;
  std::unique_ptr<optim::AdamW> opt;
  explicit Trained(uint64_t seed, double lr = 0.01) {
    Generator g(seed);
    model = std::make_unique<nn::Linear>(6, 3, true, kFloat32, g);
    opt = std::make_unique<optim::AdamW>(
        std::vector<optim::GroupSpec>{{{model->weight}, {{"weight_decay", 0.3}}},
                                      {{model->bias}, {{"weight_decay", 0.0}}}},
        optim::AdamW::Options{.lr = lr});
  }
  void train(int from, int to) {
    for (int step = from; step < to; ++step) {
      Generator g(100 + step);  // the batch is a function of the step
      Tensor x = randn({5, 6}, kFloat32, g);
      Tensor loss = (*model)(x).square().mean();
      opt->zero_grad();
      loss.backward();
      opt->step();
    }
  }
};

TEST(Checkpoint, ResumingGivesTheUninterruptedRunBitForBit) {
  TempDir dir;
  Trained straight(1);
  straight.train(0, 12);
  Trained first(1);
  first.train(0, 5);
  save_checkpoint(dir.file("ck.safetensors"), *first.model, *first.opt, {{"step", "5"}});
  Trained resumed(2, /*lr=*/0.9);  // another init and lr: both come from the file
  const auto meta = load_checkpoint(dir.file("ck.safetensors"), *resumed.model, *resumed.opt);
  EXPECT_EQ(meta.at("step"), "5");
  EXPECT_EQ(resumed.opt->param_groups()[0].number("lr"), 0.01);
  EXPECT_EQ(resumed.opt->param_groups()[0].number("weight_decay"), 0.3);
  EXPECT_EQ(resumed.opt->param_groups()[0].pair("betas")[1], 0.999);
  EXPECT_FALSE(resumed.opt->param_groups()[1].flag("amsgrad"));
  resumed.train(5, 12);
  EXPECT_TRUE(equal(straight.model->weight.detach(), resumed.model->weight.detach()));
  EXPECT_TRUE(equal(straight.model->bias.detach(), resumed.model->bias.detach()));
  // What Python sees: the names, and the groups as JSON.
  const TensorFile file = load_safetensors(dir.file("ck.safetensors"));
  EXPECT_TRUE(file.contains("model.weight"));
  EXPECT_TRUE(file.contains("optimizer.state.0.exp_avg_sq"));
  EXPECT_EQ(file.at("optimizer.state.1.step").item(), 5.0);
  EXPECT_EQ(file.metadata.at("optimizer"), "AdamW");
  EXPECT_EQ(file.metadata.at("optimizer.param_groups"),
            "[{\"amsgrad\": false, \"betas\": [0.9, 0.999], \"eps\": 1e-08, \"lr\": 0.01, "
            "\"maximize\": false, \"weight_decay\": 0.3, \"params\": [0]}, {\"amsgrad\": false, "
            "\"betas\": [0.9, 0.999], \"eps\": 1e-08, \"lr\": 0.01, \"maximize\": false, "
            "\"weight_decay\": 0.0, \"params\": [1]}]");
}

TEST(Checkpoint, LoadingSaysWhichNameShapeOrDtypeIsWrongAndChangesNothing) {
  TempDir dir;
  Trained saved(1);
  saved.train(0, 2);
  const std::string path = dir.file("ck.safetensors");
  save_checkpoint(path, *saved.model, *saved.opt);
  // A model of another shape: PyTorch's size-mismatch line.
  {
    Generator g(3);
    nn::Linear wide(7, 3, true, kFloat32, g);
    optim::AdamW opt(wide.parameters());
    const Tensor before = wide.weight.detach().clone();
    try {
      load_checkpoint(path, wide, opt);
      ADD_FAILURE() << "loaded into a model of another shape";
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("size mismatch for weight: copying a param with shape "
                                           "torch.Size([3, 6]) from checkpoint, the shape in "
                                           "current model is torch.Size([3, 7])."),
                std::string::npos)
          << e.what();
    }
    EXPECT_TRUE(equal(before, wide.weight.detach()));
  }
  // Another dtype.
  {
    Generator g(3);
    nn::Linear f64(6, 3, true, kFloat64, g);
    optim::AdamW opt(f64.parameters());
    try {
      load_checkpoint(path, f64, opt);
      ADD_FAILURE() << "loaded float32 into float64";
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("dtype mismatch for weight"), std::string::npos)
          << e.what();
    }
  }
  // A missing name (a model without a bias) and another optimizer.
  {
    Generator g(3);
    nn::Linear no_bias(6, 3, false, kFloat32, g);
    optim::AdamW opt(no_bias.parameters());
    try {
      load_checkpoint(path, no_bias, opt);
      ADD_FAILURE() << "loaded a bias into a model without one";
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("Unexpected key(s) in state_dict: \"bias\""),
                std::string::npos)
          << e.what();
    }
    Generator g2(3);
    nn::Linear same(6, 3, true, kFloat32, g2);
    optim::SGD sgd(same.parameters(), {.lr = 0.1});
    try {
      load_checkpoint(path, same, sgd);
      ADD_FAILURE() << "loaded AdamW's state into SGD";
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("holds the state of AdamW, not of SGD"),
                std::string::npos)
          << e.what();
    }
    // One group where the file has two.
    optim::AdamW one_group(same.parameters());
    EXPECT_THROW(load_checkpoint(path, same, one_group), ValueError);
  }
  // Metadata that parses as JSON but holds nonsense: an out-of-range number, a missing key.
  {
    TensorFile file = load_safetensors(path);
    auto groups = file.metadata.at("optimizer.param_groups");
    groups.replace(groups.find("0.01"), 4, "1e999");
    file.metadata["optimizer.param_groups"] = groups;
    const std::string bad = dir.file("bad.safetensors");
    save_safetensors(bad, file.tensors, file.metadata);
    Trained target(5);
    try {
      load_checkpoint(bad, *target.model, *target.opt);
      ADD_FAILURE() << "loaded lr = 1e999";
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("is not a finite number: 1e999"), std::string::npos)
          << e.what();
    }
    file.metadata.erase("optimizer");
    save_safetensors(bad, file.tensors, file.metadata);
    EXPECT_THROW(load_checkpoint(bad, *target.model, *target.opt), RuntimeError);
  }
  // A damaged file is refused by the reader before anything is loaded.
  std::string bytes = read_bytes(path);
  write_bytes(path, bytes.substr(0, bytes.size() / 2));
  Trained target(4);
  EXPECT_THROW(load_checkpoint(path, *target.model, *target.opt), RuntimeError);
}

}  // namespace
}  // namespace tiny
