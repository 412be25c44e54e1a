// data.cpp: raw and .npy files, memory maps and get_batch (data.h).
//
// A .npy file is a 6-byte magic string ("\x93NUMPY"), a two-byte version, the header's length
// (2 bytes in version 1.0, 4 in 2.0 and 3.0), the header, and the elements. The header is a
// Python dictionary literal, {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), },
// padded with spaces and a final newline so that the elements start at a multiple of 64 bytes.
// Writing it as NumPy does makes our files byte for byte NumPy's; reading it takes a small,
// strict parser for that one kind of dictionary (never Python's eval).
#include "tiny/data.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <string_view>

#include "file_io.h"
#include "internal.h"

namespace tiny {

namespace {

// ---- sizes that cannot overflow ----------------------------------------------------------------

// numel * element size, or an error naming `what` when it does not fit in 64 bits.
uint64_t checked_bytes(const Shape& shape, size_t itemsize, const std::string& what) {
  uint64_t total = itemsize;
  for (int64_t s : shape) {
    if (s < 0)
      throw RuntimeError(what + ": negative size " + std::to_string(s) + " in shape " +
                         detail::shape_str(shape));
    if (__builtin_mul_overflow(total, static_cast<uint64_t>(s), &total))
      throw RuntimeError(what + ": shape " + detail::shape_str(shape) + " is too large (" +
                         "its size in bytes overflows 64 bits)");
  }
  return total;
}

// The elements of `tensor` as one contiguous block in CPU memory (itself when it is one).
Tensor host_contiguous(const Tensor& tensor) { return tensor.detach().cpu().contiguous(); }

// ---- memory maps -------------------------------------------------------------------------------

// A mapping of a whole file, unmapped when the last Storage holding it lets go.
struct Mapping {
  void* base = nullptr;
  size_t length = 0;
  ~Mapping() {
    if (base) ::munmap(base, length);
  }
};

// Maps all `length` bytes of an open file copy-on-write. MAP_PRIVATE makes writes land in
// private pages (the file never changes, and writing never faults); MAP_NORESERVE lets a file
// larger than memory plus swap be mapped, since only pages actually written need backing.
std::shared_ptr<Mapping> map_file(const detail::File& file, size_t length,
                                  const std::string& what) {
  void* base =
      ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, file.fd(), 0);
  if (base == MAP_FAILED) throw RuntimeError(detail::os_error_message(errno, file.path(), what));
  auto mapping = std::make_shared<Mapping>();
  mapping->base = base;
  mapping->length = length;
  return mapping;
}

// A tensor whose storage is `nbytes` of the mapping starting `offset` bytes in. The storage
// holds the mapping alive, so the file stays mapped exactly as long as some tensor uses it.
Tensor mapped_tensor(std::shared_ptr<Mapping> mapping, size_t offset, size_t nbytes, DType dtype,
                     const Shape& shape) {
  void* data = static_cast<char*>(mapping->base) + offset;
  auto storage = std::make_shared<Storage>(data, nbytes, Device::cpu(), std::move(mapping));
  return Tensor(std::move(storage), dtype, shape, contiguous_strides(shape), 0);
}

// ---- the .npy header ---------------------------------------------------------------------------

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyMagicLength = 6;
constexpr size_t kNpyAlign = 64;  // NumPy starts the elements at a multiple of 64 bytes
// NumPy leaves room for the first dimension to grow to 21 digits, so that appending to a file
// can rewrite the header in place; matching it makes our headers identical to its.
constexpr size_t kGrowthDigits = 21;

// NumPy's name for each dtype, "<f4" (little-endian, float, 4 bytes); "" where it has none.
const char* npy_descr(DType dtype) {
  switch (dtype) {
    case kFloat64: return "<f8";
    case kFloat32: return "<f4";
    case kFloat16: return "<f2";
    case kInt64: return "<i8";
    case kInt32: return "<i4";
    case kInt16: return "<i2";
    case kInt8: return "|i1";
    case kUInt8: return "|u1";
    case kBool: return "|b1";
    case kBFloat16: return "";
  }
  return "";
}

// The header, with its magic, version and length, ready to be written before the elements.
std::string npy_header(const Shape& shape, const char* descr) {
  std::string dict = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) dict += (i ? ", " : "") + std::to_string(shape[i]);
  dict += shape.size() == 1 ? ",), }" : "), }";  // Python writes a 1-tuple as (3,)
  if (!shape.empty()) {
    const size_t digits = std::to_string(shape[0]).size();
    if (digits < kGrowthDigits) dict.append(kGrowthDigits - digits, ' ');
  }
  // Version 1.0 stores the header length in 2 bytes; a longer header needs version 2.0 (4).
  for (int version = 1; version <= 2; ++version) {
    const size_t length_bytes = version == 1 ? 2 : 4;
    const size_t prefix = kNpyMagicLength + 2 + length_bytes;
    const size_t unpadded = prefix + dict.size() + 1;  // + the final newline
    const size_t padding = (kNpyAlign - unpadded % kNpyAlign) % kNpyAlign;
    const uint64_t header_length = dict.size() + padding + 1;
    if (version == 1 && header_length > 0xFFFF) continue;
    std::string out(kNpyMagic, kNpyMagicLength);
    out += static_cast<char>(version);
    out += '\0';
    for (size_t b = 0; b < length_bytes; ++b)
      out += static_cast<char>((header_length >> (8 * b)) & 0xFF);  // little-endian
    out += dict;
    out.append(padding, ' ');
    out += '\n';
    return out;
  }
  throw ValueError("save_npy: header too long");  // unreachable: 4 bytes hold any real header
}

// What a .npy header says.
struct NpyHeader {
  DType dtype = kFloat32;
  Shape shape;
  uint64_t data_offset = 0;  // where the elements start
  uint64_t nbytes = 0;       // how many bytes they take
};

// A strict reader for the one dictionary NumPy writes. Each method consumes what it reads;
// anything unexpected is an error that quotes the header.
class NpyDictReader {
 public:
  NpyDictReader(std::string_view text, const std::string& path) : text_(text), path_(path) {}

  NpyHeader read() {
    std::optional<std::string> descr;
    std::optional<bool> fortran;
    std::optional<Shape> shape;
    skip_spaces();
    expect('{');
    skip_spaces();
    while (!peek('}')) {
      const std::string key = read_string();
      skip_spaces();
      expect(':');
      skip_spaces();
      if (key == "descr" && !descr) {
        if (peek('[')) fail("structured dtypes (a list as 'descr') are not supported");
        descr = read_string();
      } else if (key == "fortran_order" && !fortran) {
        fortran = read_bool();
      } else if (key == "shape" && !shape) {
        shape = read_tuple();
      } else {
        fail("unexpected or repeated key '" + key + "'");
      }
      skip_spaces();
      if (!peek('}')) {
        expect(',');
        skip_spaces();
      }
    }
    expect('}');
    // After the dictionary: only the spaces and newline NumPy pads with.
    for (; pos_ < text_.size(); ++pos_)
      if (text_[pos_] != ' ' && text_[pos_] != '\n' && text_[pos_] != '\t' && text_[pos_] != '\r')
        fail("unexpected text after the dictionary");
    if (!descr || !fortran || !shape)
      fail("the header needs the keys 'descr', 'fortran_order' and 'shape'");
    if (*fortran)
      throw ValueError("load_npy: '" + path_ +
                       "' is in Fortran (column-major) order, which is not supported; save it "
                       "from NumPy as np.ascontiguousarray(a)");
    NpyHeader header;
    header.dtype = dtype_of_descr(*descr);
    header.shape = *shape;
    return header;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw ValueError("load_npy: cannot understand the header of '" + path_ + "': " + why +
                     " (header: " + std::string(text_.substr(0, 200)) + ")");
  }
  bool peek(char c) const { return pos_ < text_.size() && text_[pos_] == c; }
  void expect(char c) {
    if (!peek(c)) fail(std::string("expected '") + c + "' at offset " + std::to_string(pos_));
    ++pos_;
  }
  void skip_spaces() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }
  // A Python string literal in single or double quotes, without escapes (NumPy's keys and
  // dtype names never need them).
  std::string read_string() {
    if (!peek('\'') && !peek('"'))
      fail("expected a quoted string at offset " + std::to_string(pos_));
    const char quote = text_[pos_++];
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\' || text_[pos_] == '\n') fail("unsupported string literal");
      ++pos_;
    }
    if (pos_ >= text_.size()) fail("unterminated string");
    return std::string(text_.substr(start, pos_++ - start));
  }
  bool read_bool() {
    if (text_.substr(pos_, 4) == "True") return pos_ += 4, true;
    if (text_.substr(pos_, 5) == "False") return pos_ += 5, false;
    fail("expected True or False for 'fortran_order'");
  }
  // A tuple of non-negative integers: (), (3,), (2, 3) or (2, 3,). A lone (3) is the number 3
  // in Python, not a tuple, so it is refused as NumPy would.
  Shape read_tuple() {
    expect('(');
    Shape shape;
    bool trailing_comma = false;
    skip_spaces();
    while (!peek(')')) {
      shape.push_back(read_int());
      skip_spaces();
      trailing_comma = false;
      if (!peek(')')) {
        expect(',');
        trailing_comma = true;
        skip_spaces();
      }
    }
    expect(')');
    if (shape.size() == 1 && !trailing_comma) fail("'shape' must be a tuple, as (3,)");
    return shape;
  }
  int64_t read_int() {
    if (pos_ >= text_.size() || text_[pos_] < '0' || text_[pos_] > '9')
      fail("'shape' must hold non-negative integers");
    int64_t value = 0;
    for (; pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9'; ++pos_)
      if (__builtin_mul_overflow(value, 10, &value) ||
          __builtin_add_overflow(value, text_[pos_] - '0', &value))
        fail("a size in 'shape' does not fit in 64 bits");
    if (peek('L')) ++pos_;  // Python 2 wrote long integers as 3L
    return value;
  }
  // The dtype a descr names, or the reason it has none here.
  DType dtype_of_descr(const std::string& descr) const {
    if (descr.size() < 3) fail("unknown dtype '" + descr + "'");
    const char order = descr[0], kind = descr[1];
    const std::string size = descr.substr(2);
    if (order == '>' && size != "1")
      throw TypeError("load_npy: '" + path_ + "' holds big-endian data ('" + descr +
                      "'), which is not supported; convert it in NumPy with "
                      "a.astype(a.dtype.newbyteorder('<'))");
    if (order != '<' && order != '|' && order != '=' && order != '>')
      fail("unknown dtype '" + descr + "'");
    const std::string code = std::string(1, kind) + size;
    if (code == "f8") return kFloat64;
    if (code == "f4") return kFloat32;
    if (code == "f2") return kFloat16;
    if (code == "i8") return kInt64;
    if (code == "i4") return kInt32;
    if (code == "i2") return kInt16;
    if (code == "i1") return kInt8;
    if (code == "u1") return kUInt8;
    if (code == "b1") return kBool;
    std::string numpy_name = descr;
    const bool digits = !size.empty() && size.find_first_not_of("0123456789") == std::string::npos;
    if (digits && size.size() <= 2) {
      const std::string bits = std::to_string(8 * std::stoi(size));
      if (kind == 'i') numpy_name = "int" + bits;
      if (kind == 'u') numpy_name = "uint" + bits;
      if (kind == 'f') numpy_name = "float" + bits;
      if (kind == 'c') numpy_name = "complex" + bits;
    }
    throw TypeError("load_npy: '" + path_ + "' holds NumPy dtype " + numpy_name + " ('" + descr +
                    "'), which tiny has no dtype for (it reads float64, float32, float16, int64, "
                    "int32, int16, int8, uint8 and bool)");
  }

  std::string_view text_;
  std::string path_;
  size_t pos_ = 0;
};

// Reads and checks the header of an open .npy file of `file_size` bytes.
NpyHeader read_npy_header(const detail::File& file, uint64_t file_size) {
  const std::string& path = file.path();
  if (file_size < kNpyMagicLength + 4)
    throw ValueError("load_npy: '" + path + "' is too short to be a .npy file (" +
                     std::to_string(file_size) + " bytes)");
  unsigned char prefix[12] = {};
  file.read_at(prefix, std::min<uint64_t>(12, file_size), 0);
  if (std::memcmp(prefix, kNpyMagic, kNpyMagicLength) != 0)
    throw ValueError("load_npy: '" + path + "' is not a .npy file: it does not start with the " +
                     "magic string \\x93NUMPY (for a raw file, use memmap(path, dtype))");
  const int major = prefix[6], minor = prefix[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    throw ValueError("load_npy: '" + path + "' has .npy format version " + std::to_string(major) +
                     "." + std::to_string(minor) + "; supported versions are 1.0, 2.0 and 3.0");
  const size_t length_bytes = major == 1 ? 2 : 4;
  if (file_size < kNpyMagicLength + 2 + length_bytes)
    throw ValueError("load_npy: '" + path + "' ends inside its header");
  uint64_t header_length = 0;
  for (size_t b = 0; b < length_bytes; ++b)
    header_length |= static_cast<uint64_t>(prefix[8 + b]) << (8 * b);
  const uint64_t header_start = kNpyMagicLength + 2 + length_bytes;
  if (header_length > file_size - header_start)
    throw ValueError("load_npy: '" + path + "' is truncated: its header says it is " +
                     std::to_string(header_length) + " bytes long, but only " +
                     std::to_string(file_size - header_start) + " bytes follow");
  std::string text(header_length, '\0');
  file.read_at(text.data(), text.size(), header_start);
  NpyHeader header = NpyDictReader(text, path).read();
  header.data_offset = header_start + header_length;
  header.nbytes = checked_bytes(header.shape, element_size(header.dtype), "load_npy");
  if (header.nbytes > file_size - header.data_offset)
    throw ValueError("load_npy: '" + path + "' is truncated: shape " +
                     detail::shape_str(header.shape) + " of " + dtype_name(header.dtype) +
                     " needs " + std::to_string(header.nbytes) + " bytes after the header, " +
                     "but the file has " + std::to_string(file_size - header.data_offset));
  return header;
}

// Writes `prefix` and then the elements of the contiguous CPU tensor `host` to a new file at
// `path` (replacing one that is there).
void write_file(const std::string& path, const std::string& prefix, const Tensor& host,
                const std::string& what) {
  detail::File file(path, O_WRONLY | O_CREAT | O_TRUNC, 0644, what);
  if (!prefix.empty()) file.write_all(prefix.data(), prefix.size());
  if (host.nbytes() > 0) file.write_all(host.data_ptr(), host.nbytes());
  file.close();
}

}  // namespace

// ---- writing -------------------------------------------------------------------------------------

void tofile(const Tensor& tensor, const std::string& path) {
  if (!tensor.defined()) throw RuntimeError("tofile: got an undefined tensor");
  write_file(path, "", host_contiguous(tensor), "tofile");
}

void save_npy(const Tensor& tensor, const std::string& path) {
  if (!tensor.defined()) throw RuntimeError("save_npy: got an undefined tensor");
  const char* descr = npy_descr(tensor.dtype());
  if (*descr == '\0')
    throw TypeError(std::string("save_npy: NumPy has no ") + dtype_name(tensor.dtype()) +
                    " dtype; convert first (tensor.to(kFloat32)) or keep the raw bits with "
                    "tofile()");
  write_file(path, npy_header(tensor.shape(), descr), host_contiguous(tensor), "save_npy");
}

// ---- reading -------------------------------------------------------------------------------------

// A bool is one byte holding 0 or 1, and reading any other byte as a bool is undefined
// behaviour: so a bool tensor read or mapped from a file is checked byte by byte first (for a
// map, this reads the file once; bool files are one byte an element, rarely large).
namespace {
void check_bool_bytes(const Tensor& t, const std::string& who, const std::string& path) {
  if (t.dtype() != kBool) return;
  const auto* bytes = static_cast<const unsigned char*>(t.data_ptr());
  for (size_t i = 0; i < t.nbytes(); ++i)
    if (bytes[i] > 1)
      throw ValueError(who + ": '" + path + "': element " + std::to_string(i) +
                       " of a bool array is the byte " + std::to_string(bytes[i]) +
                       ", not 0 or 1");
}
}  // namespace

Tensor memmap(const std::string& path, DType dtype, const Shape& shape) {
  detail::File file(path, O_RDONLY, 0, "memmap");
  const uint64_t file_size = file.size();
  const uint64_t itemsize = element_size(dtype);
  if (file_size == 0) throw ValueError("memmap: cannot map the empty file '" + path + "'");
  if (file_size % itemsize != 0)
    throw ValueError("memmap: the size of '" + path + "' (" + std::to_string(file_size) +
                     " bytes) is not a multiple of the " + dtype_name(dtype) + " element size (" +
                     std::to_string(itemsize) + " bytes)");
  const int64_t count = static_cast<int64_t>(file_size / itemsize);
  // One -1 is inferred; otherwise the shape must account for every element, no more, no less.
  Shape resolved = shape;
  int64_t known = 1, unknown = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && unknown < 0) unknown = static_cast<int64_t>(i);
    else if (shape[i] < 0)
      throw ValueError("memmap: invalid shape " + detail::shape_str(shape) +
                       " (only one size may be -1)");
    else if (__builtin_mul_overflow(known, shape[i], &known))
      throw ValueError("memmap: shape " + detail::shape_str(shape) + " is too large");
  }
  if (unknown >= 0 && known != 0 && count % known == 0) resolved[unknown] = count / known;
  if ((unknown >= 0 && (known == 0 || count % known != 0)) || (unknown < 0 && known != count))
    throw ValueError("memmap: shape " + detail::shape_str(shape) + " does not match '" + path +
                     "': its " + std::to_string(file_size) + " bytes hold " +
                     std::to_string(count) + " " + dtype_name(dtype) + " elements");
  auto mapping = map_file(file, file_size, "memmap");
  Tensor out = mapped_tensor(std::move(mapping), 0, file_size, dtype, resolved);
  check_bool_bytes(out, "memmap", path);
  return out;
}

Tensor load_npy(const std::string& path, bool mmap, std::optional<DType> dtype) {
  detail::File file(path, O_RDONLY, 0, "load_npy");
  const uint64_t file_size = file.size();
  const NpyHeader header = read_npy_header(file, file_size);
  if (dtype && *dtype != header.dtype)
    throw TypeError("load_npy: expected '" + path + "' to hold " + dtype_name(*dtype) +
                    ", but it holds " + dtype_name(header.dtype));
  // The elements can be read in place only where they are aligned for their type; NumPy's files
  // always are (64-byte header), but another writer's need not be.
  const bool aligned = header.data_offset % element_size(header.dtype) == 0;
  if (mmap && aligned && header.nbytes > 0) {
    auto mapping = map_file(file, header.data_offset + header.nbytes, "load_npy");
    Tensor out = mapped_tensor(std::move(mapping), header.data_offset, header.nbytes,
                               header.dtype, header.shape);
    check_bool_bytes(out, "load_npy", path);
    return out;
  }
  Tensor out = empty(header.shape, header.dtype);
  if (header.nbytes > 0) file.read_at(out.data_ptr(), header.nbytes, header.data_offset);
  check_bool_bytes(out, "load_npy", path);
  return out;
}

// ---- batches ---------------------------------------------------------------------------------

Tensor get_batch(const Tensor& data, int64_t batch_size, int64_t sequence_length, Device device,
                 Generator& generator) {
  if (!data.defined()) throw RuntimeError("get_batch: got an undefined tensor as data");
  if (data.dim() != 1)
    throw RuntimeError("get_batch: data must be 1-D (one long sequence of tokens), got shape " +
                       detail::shape_str(data.shape()));
  if (batch_size <= 0)
    throw ValueError("get_batch: batch_size must be positive, got " + std::to_string(batch_size));
  if (sequence_length <= 0)
    throw ValueError("get_batch: sequence_length must be positive, got " +
                     std::to_string(sequence_length));
  const int64_t n = data.size(0);
  if (sequence_length >= n)
    throw ValueError("get_batch: sequence_length (" + std::to_string(sequence_length) +
                     ") must be shorter than the data (" + std::to_string(n) +
                     " elements): start indices are drawn from [0, len(data) - sequence_length)");
  Tensor x;  // (B, L)
  // BEGIN SOLUTION ch06 get_batch
  // The document's draw, unchanged: randint's upper bound is exclusive.
  const Tensor starts = randint(n - sequence_length, {batch_size}, generator);  // (B,)
  const int64_t* start = starts.data<int64_t>();
  x = empty({batch_size, sequence_length}, data.dtype());
  for (int64_t b = 0; b < batch_size; ++b)
    x.select(0, b).copy_(data.narrow(0, start[b], sequence_length).detach());
  // END SOLUTION ch06 get_batch
  if (!device.is_cuda()) return x;
  // Pinned memory lets the copy be queued (non_blocking): the GPU pulls the batch over the bus
  // while the host goes on; the pinned cache keeps the block until that copy has finished.
  return x.pin_memory().to(device, /*non_blocking=*/true);
}

}  // namespace tiny
