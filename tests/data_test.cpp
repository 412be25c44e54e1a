// data_test.cpp: raw files, .npy files, memory maps and get_batch (tiny/data.h).
//
// NumPy's own files (tests/fixtures/npy/, written by make_npy_fixtures.py there) are the
// reference: save_npy() must write their bytes exactly and load_npy() must read them. The
// memory-map tests check what a map promises: nothing is read until touched, the map goes away
// with its last tensor, and a write through the tensor changes neither the file nor anything
// but the process's own copy. get_batch() is checked against PyTorch's indices for the seed.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "tiny/data.h"
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
  return std::string(TINY_SOURCE_DIR) + "/tests/fixtures/npy/" + name;
}

void expect_same(const Tensor& actual, const Tensor& expected) {
  EXPECT_EQ(actual.dtype(), expected.dtype());
  EXPECT_EQ(actual.shape(), expected.shape());
  EXPECT_EQ(element_bytes(actual), element_bytes(expected));
}

// Runs `f` and checks that it throws E with a message holding every one of `parts`.
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

// The arrays make_npy_fixtures.py saves, built here independently of the files.
std::map<std::string, Tensor> numpy_arrays() {
  std::map<std::string, Tensor> a;
  a["float64.npy"] = from_vector<double>({0.5, -1.25, 3.0, 0.1, 1e300, -0.0}, {2, 3});
  a["float32.npy"] = from_vector<float>({0.5f, -1.25f, 3.0f, 0.1f, 3e38f, -0.0f}, {2, 3});
  // Every value is a float16 or rounds to the float16 NumPy stores (0.1 -> 0.0999755859375).
  a["float16.npy"] =
      from_vector<float>({0.5f, -1.25f, 3.0f, 0.1f, 65504.0f, -0.0f}, {2, 3}).to(kFloat16);
  a["int64.npy"] =
      from_vector<int64_t>({-3, 0, int64_t{1} << 40, 7, -(int64_t{1} << 62), 1}, {2, 3});
  a["int32.npy"] = arange(1, 11, 1, kInt32);
  a["bool.npy"] = tensor({true, false, true, true});
  a["scalar_float32.npy"] = scalar_tensor(2.5, kFloat32);
  a["empty_float32.npy"] = zeros({0, 3});
  a["int32_2x3x4.npy"] = arange(24, kInt32).reshape({2, 3, 4});
  return a;
}

// Is any page of [data, data + n) still mapped? /proc/self/maps lists the file's path while it
// is.
bool path_is_mapped(const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find(fs::canonical(path).string()) != std::string::npos) return true;
  return false;
}

// ---- tofile and memmap ---------------------------------------------------------------------------

TEST(Data, TofileWritesRawLittleEndianBytes) {
  TempDir dir;
  const std::string path = dir.file("data.bin");
  tofile(arange(1, 11, 1, kInt32), path);  // the document's orig_data.tofile("data.npy")
  const std::string bytes = read_bytes(path);
  ASSERT_EQ(bytes.size(), 40u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(static_cast<unsigned char>(bytes[4 * i]), i + 1);
    EXPECT_EQ(bytes.substr(4 * i + 1, 3), std::string(3, '\0'));
  }
  // A transposed view writes its elements in its own row-major order, as NumPy's tofile does.
  const Tensor m = from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3}).T();  // (3, 2)
  tofile(m, path);
  expect_same(memmap(path, kInt32, {3, 2}), m.contiguous());
  // bfloat16 has no NumPy dtype, but its raw bits are still bytes.
  const Tensor b = from_vector<float>({1.0f, -2.0f}, {2}).to(kBFloat16);
  tofile(b, path);
  expect_same(memmap(path, kBFloat16), b);
  EXPECT_THROW(tofile(Tensor(), path), RuntimeError);
  expect_error<RuntimeError>([&] { tofile(b, dir.file("no/such/folder/x.bin")); },
                             {"No such file or directory", "no/such/folder/x.bin"});
}

TEST(Data, MemmapReadsTheDocumentsExample) {
  TempDir dir;
  const std::string path = dir.file("data.npy");  // the document's name for a raw file
  const Tensor orig = arange(1, 11, 1, kInt32);
  tofile(orig, path);
  const int64_t allocated = memory_allocated();
  const Tensor data = memmap(path, kInt32);
  expect_same(data, orig);
  EXPECT_TRUE(data.storage()->external());
  EXPECT_EQ(memory_allocated(), allocated);  // the file is the memory: nothing was allocated
  EXPECT_EQ(data.index({Slice{1, 4}}).tolist(), (std::vector<double>{2, 3, 4}));
  // Shapes: one -1 inferred, or exactly the elements the file holds.
  EXPECT_EQ(memmap(path, kInt32, {2, -1}).shape(), (Shape{2, 5}));
  EXPECT_EQ(memmap(path, kInt32, {5, 2}).at({4, 1}), 10);
  EXPECT_EQ(memmap(path, kInt64).shape(), (Shape{5}));
}

TEST(Data, MemmapRefusesWhatDoesNotFit) {
  TempDir dir;
  const std::string path = dir.file("data.bin");
  tofile(arange(1, 11, 1, kInt32), path);  // 40 bytes
  expect_error<ValueError>(
      [&] {
        memmap(path, kInt32, {3, -1});
      },
      {"shape [3, -1]", path, "40 bytes", "10 int32"});
  expect_error<ValueError>([&] { memmap(path, kInt32, {11}); }, {"shape [11]", path, "10 int32"});
  expect_error<ValueError>([&] { memmap(path, kInt32, {-1, -1}); }, {"[-1, -1]"});
  expect_error<ValueError>([&] { memmap(path, kInt32, {0, -1}); }, {"[0, -1]"});
  write_bytes(path, std::string(41, 'x'));
  expect_error<ValueError>([&] { memmap(path, kInt32); },
                           {path, "41 bytes", "not a multiple", "4 bytes"});
  write_bytes(path, "");
  expect_error<ValueError>([&] { memmap(path, kInt32); }, {"empty", path});
  expect_error<RuntimeError>([&] { memmap(dir.file("missing.bin"), kInt32); },
                             {"[Errno 2] No such file or directory", "missing.bin"});
  expect_error<RuntimeError>([&] { memmap(dir.file(""), kInt32); }, {"Is a directory"});
}

// A 1 GiB file (sparse: it takes no disk) mapped whole; reading a few elements and drawing a
// batch brings in a few pages, not the file. mincore() reports which pages of a mapping are in
// memory; the bound leaves room for the kernel's read-ahead.
TEST(Data, MemmapIsLazyAndUnmapsWithItsLastTensor) {
  TempDir dir;
  const std::string path = dir.file("big.bin");
  constexpr int64_t kBytes = int64_t{1} << 30;
  write_bytes(path, "");
  fs::resize_file(fs::path(path), static_cast<uintmax_t>(kBytes));
  {
    Tensor data = memmap(path, kInt32);  // 256 Mi tokens
    ASSERT_EQ(data.numel(), kBytes / 4);
    EXPECT_EQ(data.at({0}), 0);
    EXPECT_EQ(data.at({-1}), 0);
    manual_seed(0);
    const Tensor batch = get_batch(data, 4, 16);
    EXPECT_EQ(batch.shape(), (Shape{4, 16}));
    EXPECT_EQ(batch.sum().item(), 0);  // holes read as zeros

    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> resident(static_cast<size_t>(kBytes) / page);
    ASSERT_EQ(::mincore(data.data_ptr(), static_cast<size_t>(kBytes), resident.data()), 0);
    size_t in_memory = 0;
    for (unsigned char r : resident) in_memory += r & 1;
    EXPECT_LT(in_memory * page, size_t{64} << 20) << in_memory << " pages in memory";

    // A view keeps the map alive after the tensor it came from is gone.
    Tensor tail = data.narrow(0, data.numel() - 4, 4);
    data = Tensor();
    EXPECT_TRUE(path_is_mapped(path));
    EXPECT_EQ(tail.sum().item(), 0);
  }
  EXPECT_FALSE(path_is_mapped(path));  // the last view died: unmapped
}

// Writes through a map land in the process's private copy of the page: the tensor sees them,
// the file and other maps of it do not, and no write (an op, a copy, a raw pointer) faults.
TEST(Data, WritesThroughAMapNeverReachTheFile) {
  TempDir dir;
  const std::string raw = dir.file("data.bin");
  tofile(arange(1, 11, 1, kInt32), raw);
  const std::string before = read_bytes(raw);
  Tensor data = memmap(raw, kInt32);
  data.fill_(7);
  data.index({Slice{0, 2}}) = 100;
  data.data<int32_t>()[9] = -1;
  data.add_(1);
  EXPECT_EQ(data.tolist(), (std::vector<double>{101, 101, 8, 8, 8, 8, 8, 8, 8, 0}));
  EXPECT_EQ(read_bytes(raw), before);
  EXPECT_EQ(memmap(raw, kInt32).tolist(), (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));

  const std::string npy = dir.file("data.npy");
  save_npy(arange(1, 11, 1, kInt32), npy);
  const std::string npy_before = read_bytes(npy);
  Tensor mapped = load_npy(npy);
  ASSERT_TRUE(mapped.storage()->external());
  mapped.mul_(3);
  mapped.data<int32_t>()[0] = 42;
  EXPECT_EQ(mapped.at({0}), 42);
  EXPECT_EQ(mapped.at({1}), 6);
  EXPECT_EQ(read_bytes(npy), npy_before);
}

// ---- .npy ----------------------------------------------------------------------------------------

TEST(Npy, SaveWritesNumpysBytes) {
  TempDir dir;
  for (const auto& [name, array] : numpy_arrays()) {
    SCOPED_TRACE(name);
    save_npy(array, dir.file(name));
    const std::string ours = read_bytes(dir.file(name));
    const std::string numpys = read_bytes(fixture(name));
    ASSERT_FALSE(numpys.empty()) << "missing fixture " << fixture(name);
    EXPECT_EQ(ours, numpys);
  }
}

TEST(Npy, LoadReadsNumpysFiles) {
  for (const auto& [name, array] : numpy_arrays())
    for (bool mmap : {true, false}) {
      SCOPED_TRACE(name + (mmap ? " (mapped)" : " (read)"));
      const Tensor t = load_npy(fixture(name), mmap);
      expect_same(t, array);
      // An empty array has nothing to map; everything else is mapped when asked.
      EXPECT_EQ(t.storage()->external(), mmap && array.numel() > 0);
    }
  // numpy.save writes version 2.0 only for huge headers; write_array(version=(2, 0)) forces it.
  expect_same(load_npy(fixture("version2_int32.npy")), arange(1, 11, 1, kInt32));
}

TEST(Npy, RoundTripsEveryDtypeItShares) {
  TempDir dir;
  const std::string path = dir.file("t.npy");
  const Tensor values =
      from_vector<double>({0, 1, -2.5, 3, 1e-3, -7, 100, 0.5, 1, 0, 2, 9}, {3, 4});
  for (DType dtype : {kFloat64, kFloat32, kFloat16, kInt64, kInt32, kBool}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor t = values.to(dtype).T();  // (4, 3), not contiguous
    save_npy(t, path);
    expect_same(load_npy(path, true), t);
    expect_same(load_npy(path, false), t);
    expect_same(load_npy(path, true, dtype), t);
  }
  expect_error<TypeError>([&] { save_npy(values.to(kBFloat16), path); },
                          {"NumPy has no bfloat16", "tofile"});
  EXPECT_THROW(save_npy(Tensor(), path), RuntimeError);
}

// A valid .npy prefix (magic, version 1.0, length) around the given header text, padded as
// NumPy pads, followed by `body`.
std::string npy_with_header(std::string header, const std::string& body, char major = 1) {
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += major;
  out += '\0';
  out += static_cast<char>(header.size() & 0xFF);
  out += static_cast<char>(header.size() >> 8);
  return out + header + body;
}

TEST(Npy, RefusesFilesItCannotRead) {
  TempDir dir;
  const std::string path = dir.file("bad.npy");
  const std::string body(40, '\0');  // ten int32 zeros
  const auto refuses = [&](const std::string& bytes, const std::vector<std::string>& parts) {
    write_bytes(path, bytes);
    for (bool mmap : {true, false}) expect_error<Error>([&] { load_npy(path, mmap); }, parts);
  };
  const std::string good = "{'descr': '<i4', 'fortran_order': False, 'shape': (10,), }";
  write_bytes(path, npy_with_header(good, body));
  EXPECT_EQ(load_npy(path).shape(), (Shape{10}));  // the helper itself makes a valid file

  expect_error<RuntimeError>([&] { load_npy(dir.file("missing.npy")); },
                             {"No such file or directory", "missing.npy"});
  refuses("short", {"too short", path});
  refuses("hello, this is not a .npy file at all", {"magic string", path});
  refuses(npy_with_header(good, body, 4), {"version 4.0", path});
  std::string minor = npy_with_header(good, body);
  minor[7] = 1;
  refuses(minor, {"version 1.1"});
  // Headers that are not NumPy's dictionary.
  refuses(npy_with_header("not a dict", body), {"cannot understand the header", path});
  refuses(npy_with_header("{'descr': '<i4', 'shape': (10,), }", body), {"needs the keys"});
  refuses(npy_with_header("{'descr': '<i4', 'fortran_order': False, 'shape': (10), }", body),
          {"must be a tuple"});
  refuses(npy_with_header("{'descr': '<i4', 'fortran_order': 0, 'shape': (10,), }", body),
          {"True or False"});
  refuses(npy_with_header("{'descr': '<i4', 'descr': '<i4', 'fortran_order': False, "
                          "'shape': (10,), }",
                          body),
          {"repeated key 'descr'"});
  refuses(
      npy_with_header("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (10,), }", body),
      {"structured"});
  refuses(npy_with_header("{'descr': '<i4', 'fortran_order': False, 'shape': (-10,), }", body),
          {"non-negative integers"});
  refuses(npy_with_header("{'descr': '<i4', 'fortran_order': False, "
                          "'shape': (99999999999999999999,), }",
                          body),
          {"64 bits"});
  refuses(npy_with_header(good + " trailing", body), {"after the dictionary"});
  refuses(npy_with_header("{'descr': '<x9', 'fortran_order': False, 'shape': (10,), }", body),
          {"holds NumPy dtype", "'<x9'"});
  // A header length past the end of the file, and a body shorter than the shape needs.
  std::string cut = npy_with_header(good, body).substr(0, 60);
  refuses(cut, {"truncated", "header says"});
  refuses(npy_with_header(good, body.substr(0, 36)),
          {"truncated", "shape [10] of int32 needs 40 bytes", "has 36"});
  write_bytes(path, npy_with_header("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }",
                                    std::string("\x01\x07", 2)));
  for (bool mmap : {true, false})
    expect_error<ValueError>([&] { load_npy(path, mmap); }, {"element 1", "byte 7, not 0 or 1"});
  write_bytes(path, std::string("\x00\x01\x02", 3));
  expect_error<ValueError>([&] { memmap(path, kBool); }, {"memmap", "element 2", "byte 2"});
  // NumPy's own files in layouts or dtypes tiny does not read.
  expect_error<ValueError>([&] { load_npy(fixture("fortran_float32.npy")); }, {"Fortran"});
  expect_error<TypeError>([&] { load_npy(fixture("bigendian_int32.npy")); },
                          {"big-endian", "'>i4'"});
  EXPECT_TRUE(equal(load_npy(fixture("int8.npy")), arange(4).to(kInt8)));
  write_bytes(path, npy_with_header("{'descr': '<u2', 'fortran_order': False, 'shape': (1,), }",
                                    std::string(2, '\0')));
  expect_error<TypeError>([&] { load_npy(path); }, {"uint16", "'<u2'", "no dtype"});
  expect_error<TypeError>([&] { load_npy(fixture("int32.npy"), true, kFloat32); },
                          {"expected", "int32.npy", "to hold float32", "holds int32"});
}

// ---- get_batch -----------------------------------------------------------------------------------

// The document's example: data 1..10, B = 2, L = 4. PyTorch (torch.manual_seed(0), then
// torch.randint(6, (2,))) draws starts [2, 3], so the batch is [[3, 4, 5, 6], [4, 5, 6, 7]]
// with dtype int32 (torch 1.13 on this machine).
TEST(Data, GetBatchDrawsPyTorchsWindows) {
  TempDir dir;
  tofile(arange(1, 11, 1, kInt32), dir.file("data.bin"));
  const Tensor data = memmap(dir.file("data.bin"), kInt32);
  manual_seed(0);
  const Tensor x = get_batch(data, 2, 4);
  EXPECT_EQ(x.shape(), (Shape{2, 4}));
  EXPECT_EQ(x.dtype(), kInt32);
  EXPECT_TRUE(x.device().is_cpu());
  EXPECT_EQ(x.tolist(), (std::vector<double>{3, 4, 5, 6, 4, 5, 6, 7}));
  EXPECT_FALSE(x.shares_storage_with(data));  // a copy: the batch outlives changes to the map

  // Any generator, and the starts exactly as randint draws them from it.
  Generator g(1234), reference(1234);
  const Tensor batch = get_batch(data, 5, 3, Device::cpu(), g);
  const Tensor starts = randint(10 - 3, {5}, reference);
  for (int64_t b = 0; b < 5; ++b)
    for (int64_t j = 0; j < 3; ++j)
      EXPECT_EQ(batch.at({b, j}), starts.at({b}) + 1 + static_cast<double>(j));
  // Data of another dtype keeps it, as torch.tensor of the rows does.
  manual_seed(0);
  EXPECT_EQ(get_batch(arange(10, kFloat64), 2, 4).dtype(), kFloat64);
}

TEST(Data, GetBatchChecksItsArguments) {
  const Tensor data = arange(1, 11, 1, kInt32);
  expect_error<ValueError>([&] { get_batch(data, 2, 10); },
                           {"sequence_length (10)", "shorter than the data (10 elements)"});
  expect_error<ValueError>([&] { get_batch(data, 2, 11); }, {"sequence_length (11)"});
  expect_error<ValueError>([&] { get_batch(data, 0, 4); }, {"batch_size must be positive, got 0"});
  expect_error<ValueError>([&] { get_batch(data, 2, -1); },
                           {"sequence_length must be positive, got -1"});
  expect_error<RuntimeError>(
      [&] {
        get_batch(data.reshape({2, 5}), 2, 2);
      },
      {"must be 1-D", "[2, 5]"});
  expect_error<RuntimeError>([&] { get_batch(Tensor(), 2, 2); }, {"undefined"});
}

TEST(Data, GetBatchOnCudaMatchesTheCpuBatch) {
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device: " << cuda::unavailable_reason();
  const Tensor data = arange(1, 1001, 1, kInt32);
  Generator a(7), b(7);
  const Tensor cpu_batch = get_batch(data, 8, 32, Device::cpu(), a);
  const Tensor gpu_batch = get_batch(data, 8, 32, Device::cuda(), b);
  EXPECT_TRUE(gpu_batch.device().is_cuda());
  expect_same(gpu_batch, cpu_batch);  // .cpu() synchronizes with the queued copy
}

}  // namespace
}  // namespace tiny
