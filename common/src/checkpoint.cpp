// checkpoint.cpp: safetensors files, written atomically and read with every field checked
// (checkpoint.h), and the state-dict comparison that names what does not match.
//
// The file is: 8 bytes, the header's length N (little-endian); N bytes of JSON, padded with
// spaces to a multiple of 8 so the data starts aligned; then the data, each tensor a byte range
// [begin, end) counted from the start of the data. The JSON reader below is written for bytes
// that may be anything (a truncated copy, a disk error, a hostile file): it never reads past
// the header, never recurses deeper than kMaxDepth, and explains the first thing it rejects.
#include "tiny/checkpoint.h"

#include <cerrno>
#include <cmath>
#include <cstring>

#include "tiny/amp.h"
#include "tiny/format.h"
#include "tiny/nn.h"
#include "tiny/optim.h"

#include <fcntl.h>
#include <libgen.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <set>
#include <string_view>
#include <unordered_map>

#include "file_io.h"
#include "internal.h"

namespace tiny {

namespace {

// ---- dtypes ----------------------------------------------------------------------------------

// The safetensors name of each dtype tiny has.
const char* safetensors_dtype(DType dtype) {
  switch (dtype) {
    case kFloat64: return "F64";
    case kFloat32: return "F32";
    case kFloat16: return "F16";
    case kBFloat16: return "BF16";
    case kInt64: return "I64";
    case kInt32: return "I32";
    case kInt16: return "I16";
    case kInt8: return "I8";
    case kUInt8: return "U8";
    case kBool: return "BOOL";
  }
  throw RuntimeError("save_safetensors: unknown dtype");
}

// The dtype a safetensors name stands for. Names safetensors defines but tiny lacks are a
// TypeError that says so; any other name is not a safetensors dtype at all.
DType dtype_from_safetensors(const std::string& name, const std::string& where) {
  for (DType d : kAllDTypes)
    if (name == safetensors_dtype(d)) return d;
  static const char* const kKnownElsewhere[] = {
      "U16",     "U32",     "U64",     "F8_E4M3",
      "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4",  "C64", "E8M0"};
  for (const char* known : kKnownElsewhere)
    if (name == known)
      throw TypeError(where + " has dtype " + name +
                      ", which tiny has no dtype for (it reads F64, F32, F16, BF16, I64, I32 and "
                      "BOOL)");
  throw RuntimeError(where + " has an unknown dtype \"" + name + "\"");
}

// ---- JSON ------------------------------------------------------------------------------------

constexpr int kMaxDepth = 64;  // deeper nesting is refused, never recursed
// A parsed value takes ~150 bytes, so a header of millions of tiny values ("[0,0,0,...") could
// cost a hundred times its size; a real header has a few values per tensor.
constexpr size_t kMaxValues = size_t{1} << 21;
constexpr uint64_t kMaxHeader = 100'000'000;     // safetensors' own limit on the header
constexpr size_t kWriteBlock = size_t{8} << 20;  // bytes written between hook calls

// A parsed JSON value. Objects keep their members in file order (a state dict is ordered), and
// numbers keep their text, converted only where an integer is expected.
struct Json {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  std::string text;  // a string's value, or a number as written
  std::vector<Json> items;
  // A std::pair of an incomplete Json would be undefined (libstdc++'s pair needs complete
  // members, and clang says so); a member struct completed below is allowed.
  struct Member;
  std::vector<Member> members;
};
struct Json::Member {
  std::string key;
  Json value;
};

const char* kind_name(Json::Kind kind) {
  switch (kind) {
    case Json::Kind::Null: return "null";
    case Json::Kind::Bool: return "a boolean";
    case Json::Kind::Number: return "a number";
    case Json::Kind::String: return "a string";
    case Json::Kind::Array: return "an array";
    case Json::Kind::Object: return "an object";
  }
  return "?";
}

// Length of the UTF-8 sequence starting at s[i], or 0 when it is not valid UTF-8 (overlong
// forms, surrogates and code points past U+10FFFF included, as the standard requires).
size_t utf8_length(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  uint32_t cp = 0;
  if ((c & 0xE0) == 0xC0) n = 2, cp = c & 0x1F;
  else if ((c & 0xF0) == 0xE0) n = 3, cp = c & 0x0F;
  else if ((c & 0xF8) == 0xF0) n = 4, cp = c & 0x07;
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  static const uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kSmallest[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// RFC 8259 JSON, strictly: no comments, no trailing commas, no NaN, no single quotes, valid
// UTF-8, and duplicate keys in one object refused (a header naming a tensor twice is corrupt).
class JsonReader {
 public:
  JsonReader(std::string_view text, std::string where) : text_(text), where_(std::move(where)) {}

  Json read_document() {
    skip_whitespace();
    Json value = read_value(0);
    skip_whitespace();
    if (pos_ != text_.size()) fail("unexpected text after the JSON value");
    return value;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw RuntimeError(where_ + ": the header is not valid JSON: " + why + " at byte " +
                       std::to_string(pos_) + " of the header");
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }
  void expect(char c) {
    if (peek() != c || at_end()) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  void skip_whitespace() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r'))
      ++pos_;
  }

  Json read_value(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    if (at_end()) fail("unexpected end of the header");
    if (++values_ > kMaxValues) fail("more than " + std::to_string(kMaxValues) + " values");
    Json value;
    switch (peek()) {
      case '{':
        value.kind = Json::Kind::Object;
        read_object(value, depth);
        break;
      case '[':
        value.kind = Json::Kind::Array;
        read_array(value, depth);
        break;
      case '"':
        value.kind = Json::Kind::String;
        value.text = read_string();
        break;
      case 't':
        read_word("true");
        value.kind = Json::Kind::Bool;
        value.boolean = true;
        break;
      case 'f':
        read_word("false");
        value.kind = Json::Kind::Bool;
        break;
      case 'n': read_word("null"); break;
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) {
          value.kind = Json::Kind::Number;
          value.text = read_number();
        } else {
          fail("unexpected character");
        }
    }
    return value;
  }

  void read_word(const char* word) {
    const std::string_view w(word);
    if (text_.substr(pos_, w.size()) != w) fail("unexpected word");
    pos_ += w.size();
  }

  void read_object(Json& object, int depth) {
    expect('{');
    skip_whitespace();
    std::set<std::string> seen;
    if (peek() == '}' && !at_end()) return void(++pos_);
    while (true) {
      skip_whitespace();
      if (peek() != '"' || at_end()) fail("expected a key in quotes");
      std::string key = read_string();
      if (!seen.insert(key).second) fail("the key \"" + key + "\" appears twice");
      skip_whitespace();
      expect(':');
      skip_whitespace();
      Json value = read_value(depth + 1);
      object.members.push_back({std::move(key), std::move(value)});
      skip_whitespace();
      if (peek() == ',' && !at_end()) {
        ++pos_;
        continue;
      }
      expect('}');
      return;
    }
  }

  void read_array(Json& array, int depth) {
    expect('[');
    skip_whitespace();
    if (peek() == ']' && !at_end()) return void(++pos_);
    while (true) {
      skip_whitespace();
      array.items.push_back(read_value(depth + 1));
      skip_whitespace();
      if (peek() == ',' && !at_end()) {
        ++pos_;
        continue;
      }
      expect(']');
      return;
    }
  }

  uint32_t read_hex4() {
    if (pos_ + 4 > text_.size()) fail("unfinished \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = text_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<uint32_t>(c - 'A' + 10);
      else fail("bad hex digit in a \\u escape");
    }
    return v;
  }

  std::string read_string() {
    expect('"');
    std::string out;
    while (true) {
      if (at_end()) fail("unterminated string");
      const char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) fail("a control character inside a string");
      if (c != '\\') {
        const size_t n = utf8_length(text_, pos_);
        if (n == 0) fail("invalid UTF-8");
        out.append(text_.substr(pos_, n));
        pos_ += n;
        continue;
      }
      ++pos_;
      if (at_end()) fail("unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = read_hex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) fail("a lone low surrogate in a \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {  // a high surrogate: its low half must follow
            if (text_.substr(pos_, 2) != "\\u") fail("a lone high surrogate in a \\u escape");
            pos_ += 2;
            const uint32_t low = read_hex4();
            if (low < 0xDC00 || low > 0xDFFF) fail("a lone high surrogate in a \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default: fail("unknown escape");
      }
    }
  }

  std::string read_number() {
    const size_t start = pos_;
    const auto digits = [&] {
      const size_t from = pos_;
      while (!at_end() && peek() >= '0' && peek() <= '9') ++pos_;
      return pos_ - from;
    };
    if (peek() == '-') ++pos_;
    if (peek() == '0' && !at_end()) ++pos_;  // a leading zero stands alone
    else if (digits() == 0) fail("a number without digits");
    if (peek() == '.' && !at_end()) {
      ++pos_;
      if (digits() == 0) fail("no digits after a decimal point");
    }
    if ((peek() == 'e' || peek() == 'E') && !at_end()) {
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (digits() == 0) fail("no digits in an exponent");
    }
    return std::string(text_.substr(start, pos_ - start));
  }

  std::string_view text_;
  std::string where_;
  size_t pos_ = 0;
  size_t values_ = 0;
};

// A JSON number that must be a non-negative integer (a size or an offset).
uint64_t json_uint(const Json& value, const std::string& what) {
  if (value.kind != Json::Kind::Number || value.text.empty() ||
      value.text.find_first_not_of("0123456789") != std::string::npos)
    throw RuntimeError(what + " must be a non-negative integer, got " +
                       (value.kind == Json::Kind::Number ? value.text : kind_name(value.kind)));
  uint64_t v = 0;
  for (char c : value.text)
    if (__builtin_mul_overflow(v, 10, &v) ||
        __builtin_add_overflow(v, static_cast<uint64_t>(c - '0'), &v))
      throw RuntimeError(what + " does not fit in 64 bits: " + value.text);
  return v;
}

void append_json_string(std::string& out, const std::string& s) {
  out += '"';
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\u00";
      out += kHex[u >> 4];
      out += kHex[u & 0xF];
    } else {
      out += c;
    }
  }
  out += '"';
}

// ---- the header's entries --------------------------------------------------------------------

struct Entry {
  std::string name;
  DType dtype = kFloat32;
  Shape shape;
  uint64_t begin = 0, end = 0;  // byte range within the data
};

// Reads one tensor's entry, checking every field; `where` names the file and the tensor.
Entry read_entry(const std::string& name, const Json& value, const std::string& where) {
  if (value.kind != Json::Kind::Object)
    throw RuntimeError(where + " must be an object, got " + kind_name(value.kind));
  const Json* dtype = nullptr;
  const Json* shape = nullptr;
  const Json* offsets = nullptr;
  for (const auto& [key, field] : value.members) {
    if (key == "dtype") dtype = &field;
    else if (key == "shape") shape = &field;
    else if (key == "data_offsets") offsets = &field;
    else throw RuntimeError(where + " has an unknown field \"" + key + "\"");
  }
  for (const auto& [field, pointer] :
       {std::pair{"dtype", dtype}, std::pair{"shape", shape}, std::pair{"data_offsets", offsets}})
    if (!pointer) throw RuntimeError(where + " has no \"" + field + "\" field");
  if (dtype->kind != Json::Kind::String)
    throw RuntimeError(where + ": \"dtype\" must be a string, got " + kind_name(dtype->kind));
  if (shape->kind != Json::Kind::Array)
    throw RuntimeError(where + ": \"shape\" must be an array, got " + kind_name(shape->kind));
  if (offsets->kind != Json::Kind::Array || offsets->items.size() != 2)
    throw RuntimeError(where + ": \"data_offsets\" must be an array [begin, end]");
  Entry entry;
  entry.name = name;
  entry.dtype = dtype_from_safetensors(dtype->text, where);
  for (const Json& size : shape->items) {
    const uint64_t s = json_uint(size, where + ": each size in \"shape\"");
    if (s > static_cast<uint64_t>(INT64_MAX)) throw RuntimeError(where + ": a size is too large");
    entry.shape.push_back(static_cast<int64_t>(s));
  }
  entry.begin = json_uint(offsets->items[0], where + ": \"data_offsets\"");
  entry.end = json_uint(offsets->items[1], where + ": \"data_offsets\"");
  if (entry.begin > entry.end)
    throw RuntimeError(where + ": \"data_offsets\" [" + std::to_string(entry.begin) + ", " +
                       std::to_string(entry.end) + "] ends before it begins");
  uint64_t nbytes = element_size(entry.dtype);
  for (int64_t s : entry.shape)
    if (__builtin_mul_overflow(nbytes, static_cast<uint64_t>(s), &nbytes))
      throw RuntimeError(where + ": shape " + detail::shape_str(entry.shape) + " is too large");
  if (entry.end - entry.begin != nbytes)
    throw RuntimeError(where + ": \"data_offsets\" [" + std::to_string(entry.begin) + ", " +
                       std::to_string(entry.end) + "] hold " +
                       std::to_string(entry.end - entry.begin) + " bytes, but shape " +
                       detail::shape_str(entry.shape) + " of " + dtype->text + " takes " +
                       std::to_string(nbytes));
  return entry;
}

// The folder part of a path ("." for a bare name), for the temporary file and the directory
// fsync.
std::string folder_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}
std::string base_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::atomic<detail::SaveProgressHook> save_hook{nullptr};

}  // namespace

detail::SaveProgressHook detail::set_save_progress_hook(SaveProgressHook hook) {
  return save_hook.exchange(hook);
}

// ---- TensorFile ------------------------------------------------------------------------------

bool TensorFile::contains(const std::string& name) const {
  return std::any_of(tensors.begin(), tensors.end(),
                     [&](const auto& e) { return e.first == name; });
}

const Tensor& TensorFile::at(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  throw RuntimeError("no tensor named '" + name + "' in the checkpoint (it holds " +
                     std::to_string(tensors.size()) + " tensors)");
}

// ---- saving ----------------------------------------------------------------------------------

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const std::string what = "save_safetensors";
  if (path.empty() || path.back() == '/')
    throw ValueError(what + ": '" + path + "' is not a file path");
  // Check every argument before touching the disk.
  std::set<std::string> names;
  for (const auto& [name, tensor] : tensors) {
    if (name.empty()) throw ValueError(what + ": a tensor has an empty name");
    if (name == "__metadata__")
      throw ValueError(what + ": \"__metadata__\" is reserved for the metadata, not a tensor name");
    if (!valid_utf8(name)) throw ValueError(what + ": the name of a tensor is not valid UTF-8");
    if (!names.insert(name).second)
      throw ValueError(what + ": the name '" + name + "' appears twice");
    if (!tensor.defined()) throw ValueError(what + ": tensor '" + name + "' is undefined");
  }
  for (const auto& [key, value] : metadata)
    if (!valid_utf8(key) || !valid_utf8(value))
      throw ValueError(what + ": metadata must be valid UTF-8 (key '" + key + "')");

  // Contiguous CPU copies, laid out widest element first, so that every tensor's bytes start at
  // a multiple of its element size (the data itself starts at a multiple of 8); the header
  // still lists the tensors in the caller's order.
  std::vector<Tensor> host;
  host.reserve(tensors.size());
  for (const auto& entry : tensors) host.push_back(entry.second.detach().cpu().contiguous());
  std::vector<size_t> layout(tensors.size());
  for (size_t i = 0; i < layout.size(); ++i) layout[i] = i;
  std::stable_sort(layout.begin(), layout.end(), [&](size_t a, size_t b) {
    return host[a].element_size() > host[b].element_size();
  });
  std::vector<uint64_t> begin(tensors.size());
  uint64_t data_size = 0;
  for (size_t i : layout) {
    begin[i] = data_size;
    data_size += host[i].nbytes();
  }

  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      if (!first) header += ',';
      first = false;
      append_json_string(header, key);
      header += ':';
      append_json_string(header, value);
    }
    header += "}";
    if (!tensors.empty()) header += ',';
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (i) header += ',';
    append_json_string(header, tensors[i].first);
    header += ":{\"dtype\":\"";
    header += safetensors_dtype(host[i].dtype());
    header += "\",\"shape\":[";
    for (int64_t d = 0; d < host[i].dim(); ++d) {
      if (d) header += ',';
      header += std::to_string(host[i].size(d));
    }
    header += "],\"data_offsets\":[" + std::to_string(begin[i]) + "," +
              std::to_string(begin[i] + host[i].nbytes()) + "]}";
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  if (header.size() > kMaxHeader) throw ValueError(what + ": the header is too large");

  // The temporary file: hidden, in the target's folder (a rename is atomic only within one
  // file system), and named so that nothing mistakes it for a checkpoint.
  const std::string folder = folder_of(path);
  std::string temp = folder + "/." + base_of(path) + ".tmp-XXXXXX";
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) throw RuntimeError(detail::os_error_message(errno, temp, what));
  detail::File file(fd, temp, what);
  try {
    ::fchmod(fd, 0644);  // mkstemp makes it private (0600); a checkpoint is usually shared
    unsigned char length[8];
    for (int b = 0; b < 8; ++b) length[b] = static_cast<unsigned char>(header.size() >> (8 * b));
    file.write_all(length, 8);
    file.write_all(header.data(), header.size());
    const uint64_t total = 8 + header.size() + data_size;
    uint64_t written = 8 + header.size();
    for (size_t i : layout) {
      const char* bytes = static_cast<const char*>(host[i].data_ptr());
      for (size_t done = 0; done < host[i].nbytes();) {
        const size_t n = std::min(kWriteBlock, host[i].nbytes() - done);
        file.write_all(bytes + done, n);
        done += n;
        written += n;
        if (auto hook = save_hook.load()) hook(written, total);
      }
    }
    file.sync();  // the bytes are on the disk before the name points at them
    file.close();
    if (::rename(temp.c_str(), path.c_str()) != 0)
      throw RuntimeError(detail::os_error_message(errno, path, what));
  } catch (...) {
    ::unlink(temp.c_str());
    throw;
  }
  // The rename itself lives in the folder; syncing it makes the new name survive a power cut.
  // (Failing here changes nothing a reader sees, so it is not an error.)
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

// ---- loading ---------------------------------------------------------------------------------

TensorFile load_safetensors(const std::string& path) {
  const std::string where = "load_safetensors: '" + path + "'";
  detail::File file(path, O_RDONLY, 0, "load_safetensors");
  const uint64_t file_size = file.size();
  if (file_size < 8)
    throw RuntimeError(where + " is too short to be a safetensors file (" +
                       std::to_string(file_size) + " bytes; the header length alone takes 8)");
  unsigned char length_bytes[8];
  file.read_at(length_bytes, 8, 0);
  uint64_t header_length = 0;
  for (int b = 0; b < 8; ++b) header_length |= static_cast<uint64_t>(length_bytes[b]) << (8 * b);
  if (header_length > file_size - 8)
    throw RuntimeError(where + " is truncated or corrupt: its header length is " +
                       std::to_string(header_length) + " bytes, but the file has only " +
                       std::to_string(file_size - 8) + " bytes after the length");
  if (header_length > kMaxHeader)
    throw RuntimeError(where + ": the header length " + std::to_string(header_length) +
                       " is larger than safetensors allows (" + std::to_string(kMaxHeader) + ")");
  std::string text(header_length, '\0');
  file.read_at(text.data(), text.size(), 8);
  if (text.empty() || text[0] != '{')
    throw RuntimeError(where + ": the header does not start with '{' (not a safetensors file?)");
  const Json root = JsonReader(text, where).read_document();

  TensorFile out;
  std::vector<Entry> entries;
  for (const auto& [name, value] : root.members) {
    if (name == "__metadata__") {
      if (value.kind == Json::Kind::Null) continue;
      if (value.kind != Json::Kind::Object)
        throw RuntimeError(where + ": \"__metadata__\" must be an object of strings");
      for (const auto& [key, item] : value.members) {
        if (item.kind != Json::Kind::String)
          throw RuntimeError(where + ": metadata \"" + key + "\" must be a string, got " +
                             kind_name(item.kind));
        out.metadata[key] = item.text;
      }
      continue;
    }
    entries.push_back(read_entry(name, value, where + ", tensor \"" + name + "\""));
  }

  // The ranges must tile the data exactly: sorted by start, each begins where the last ended,
  // and the last ends where the file does. That rules out overlaps, gaps and trailing bytes.
  const uint64_t data_start = 8 + header_length;
  const uint64_t data_size = file_size - data_start;
  std::vector<const Entry*> by_offset;
  for (const Entry& e : entries) by_offset.push_back(&e);
  std::stable_sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t cursor = 0;
  for (const Entry* e : by_offset) {
    std::string range = std::to_string(e->begin) + ", " + std::to_string(e->end);
    range = '[' + range + ']';
    if (e->end > data_size)
      throw RuntimeError(where + ", tensor \"" + e->name + "\": data_offsets " + range +
                         " reach past the end of the data (" + std::to_string(data_size) +
                         " bytes): the file is truncated or corrupt");
    if (e->begin < cursor)
      throw RuntimeError(where + ", tensor \"" + e->name + "\": data_offsets " + range +
                         " overlap another tensor's bytes");
    if (e->begin > cursor)
      throw RuntimeError(where + ", tensor \"" + e->name + "\": data_offsets " + range +
                         " leave a gap after byte " + std::to_string(cursor));
    cursor = e->end;
  }
  if (cursor != data_size)
    throw RuntimeError(where + ": the tensors' bytes end at " + std::to_string(cursor) +
                       ", but the data is " + std::to_string(data_size) + " bytes long");

  for (const Entry& e : entries) {
    Tensor t = empty(e.shape, e.dtype);
    if (e.end > e.begin) file.read_at(t.data_ptr(), e.end - e.begin, data_start + e.begin);
    // A bool is one byte holding 0 or 1; any other byte is corruption, and reading it as a
    // bool would be undefined behaviour.
    if (e.dtype == kBool) {
      const auto* bytes = static_cast<const unsigned char*>(t.data_ptr());
      for (uint64_t i = 0; i < e.end - e.begin; ++i)
        if (bytes[i] > 1)
          throw RuntimeError(where + ", tensor \"" + e.name + "\": byte " + std::to_string(i) +
                             " is " + std::to_string(bytes[i]) + ", not a bool (0 or 1)");
    }
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

// ---- comparing with a model --------------------------------------------------------------------

IncompatibleKeys check_tensors(const NamedTensors& tensors, const std::vector<TensorSpec>& expected,
                               const std::string& model_name, bool strict) {
  std::unordered_map<std::string, const Tensor*> found;
  for (const auto& [name, tensor] : tensors) {
    if (!tensor.defined()) throw ValueError("check_tensors: tensor '" + name + "' is undefined");
    if (!found.emplace(name, &tensor).second)
      throw ValueError("check_tensors: the name '" + name + "' appears twice in the checkpoint");
  }
  std::set<std::string> wanted;
  for (const TensorSpec& spec : expected)
    if (!wanted.insert(spec.name).second)
      throw ValueError("check_tensors: the name '" + spec.name + "' is expected twice");

  IncompatibleKeys keys;
  std::vector<std::string> mismatches;
  for (const TensorSpec& spec : expected) {
    auto it = found.find(spec.name);
    if (it == found.end()) {
      keys.missing_keys.push_back(spec.name);
      continue;
    }
    const Tensor& t = *it->second;
    if (t.shape() != spec.shape)
      mismatches.push_back("size mismatch for " + spec.name + ": copying a param with shape " +
                           detail::torch_size_str(t.shape()) +
                           " from checkpoint, the shape in current model is " +
                           detail::torch_size_str(spec.shape) + ".");
    if (spec.dtype && t.dtype() != *spec.dtype)
      mismatches.push_back("dtype mismatch for " + spec.name +
                           ": copying a param with dtype torch." + dtype_name(t.dtype()) +
                           " from checkpoint, the dtype in current model is torch." +
                           dtype_name(*spec.dtype) + ".");
  }
  for (const auto& entry : tensors)
    if (!wanted.count(entry.first)) keys.unexpected_keys.push_back(entry.first);

  // PyTorch's order: missing names, then unexpected ones, then each mismatch; the key lists end
  // with ". " exactly as PyTorch writes them.
  std::vector<std::string> errors;
  const auto quoted = [](const std::vector<std::string>& list) {
    std::string s;
    for (size_t i = 0; i < list.size(); ++i) s += (i ? ", \"" : "\"") + list[i] + "\"";
    return s;
  };
  if (strict && !keys.missing_keys.empty())
    errors.push_back("Missing key(s) in state_dict: " + quoted(keys.missing_keys) + ". ");
  if (strict && !keys.unexpected_keys.empty())
    errors.push_back("Unexpected key(s) in state_dict: " + quoted(keys.unexpected_keys) + ". ");
  errors.insert(errors.end(), mismatches.begin(), mismatches.end());
  if (!errors.empty()) {
    std::string message = "Error(s) in loading state_dict for " + model_name + ":";
    for (const std::string& e : errors) message += "\n\t" + e;
    throw RuntimeError(message);
  }
  return keys;
}

}  // namespace tiny

// ---- a training run's checkpoint --------------------------------------------------------------

namespace tiny {

namespace {

// A setting as JSON: a number (repr's shortest digits, which JSON reads back exactly), true or
// false, or [a, b].
std::string setting_json(const std::string& key, const optim::Value& v) {
  auto number = [&](double d) {
    if (!std::isfinite(d))
      throw ValueError("save_checkpoint: the setting '" + key + "' is " + repr(d) +
                       ", which JSON cannot hold");
    return repr(d);
  };
  if (const bool* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const double* d = std::get_if<double>(&v)) return number(*d);
  const auto& p = std::get<std::array<double, 2>>(v);
  std::string pair = "[";  // built step by step: GCC 12 warns (wrongly) about "[" + ...
  pair += number(p[0]);
  pair += ", ";
  pair += number(p[1]);
  pair += "]";
  return pair;
}

std::string groups_json(const optim::OptimizerState& state) {
  std::string out = "[";
  for (size_t g = 0; g < state.param_groups.size(); ++g) {
    if (g) out += ", ";
    out += "{";
    for (const auto& [key, value] : state.param_groups[g].first) {
      append_json_string(out, key);
      out += ": " + setting_json(key, value) + ", ";
    }
    out += "\"params\": [";
    const auto& indices = state.param_groups[g].second;
    for (size_t i = 0; i < indices.size(); ++i) {
      if (i) out += ", ";
      out += std::to_string(indices[i]);
    }
    out += "]}";
  }
  return out + "]";
}

double json_number(const Json& v, const std::string& what) {
  if (v.kind != Json::Kind::Number)
    throw RuntimeError(what + " must be a number, got " + kind_name(v.kind));
  // strtod, not stod: a number out of double's range ("1e999") is an error here, not an
  // exception of another kind.
  char* end = nullptr;
  errno = 0;
  const double d = std::strtod(v.text.c_str(), &end);
  if (end != v.text.c_str() + v.text.size() || errno == ERANGE || !std::isfinite(d))
    throw RuntimeError(what + " is not a finite number: " + v.text);
  return d;
}

// The inverse of groups_json, refusing anything else.
std::vector<std::pair<optim::Settings, std::vector<int64_t>>> parse_groups(
    const std::string& text, const std::string& where) {
  const Json root = JsonReader(text, where + ": optimizer.param_groups").read_document();
  if (root.kind != Json::Kind::Array)
    throw RuntimeError(where + ": optimizer.param_groups must be a JSON array");
  std::vector<std::pair<optim::Settings, std::vector<int64_t>>> groups;
  for (const Json& g : root.items) {
    if (g.kind != Json::Kind::Object)
      throw RuntimeError(where + ": each parameter group must be a JSON object");
    optim::Settings settings;
    std::vector<int64_t> params;
    bool has_params = false;
    for (const auto& [key, v] : g.members) {
      const std::string what = where + ": setting '" + key + "'";
      if (key == "params") {
        if (v.kind != Json::Kind::Array) throw RuntimeError(what + " must be an array");
        for (const Json& i : v.items)
          params.push_back(static_cast<int64_t>(std::min<uint64_t>(json_uint(i, what), INT64_MAX)));
        has_params = true;
      } else if (v.kind == Json::Kind::Bool) {
        settings[key] = v.boolean;
      } else if (v.kind == Json::Kind::Array && v.items.size() == 2) {
        settings[key] =
            std::array<double, 2>{json_number(v.items[0], what), json_number(v.items[1], what)};
      } else {
        settings[key] = json_number(v, what);
      }
    }
    if (!has_params) throw RuntimeError(where + ": a parameter group has no \"params\"");
    groups.emplace_back(std::move(settings), std::move(params));
  }
  return groups;
}

// A GradScaler's state_dict() as the JSON Python's json.dumps writes for PyTorch's: the same
// keys in the same order, floats as repr writes them, integers as integers.
std::string scaler_json(const amp::GradScaler& scaler) {
  const std::optional<amp::GradScalerState> state = scaler.state_dict();
  if (!state) return "{}";
  auto number = [](const char* key, double d) {
    if (!std::isfinite(d))
      throw ValueError(std::string("save_checkpoint: the scaler's ") + key + " is " + repr(d) +
                       ", which JSON cannot hold");
    return repr(d);
  };
  std::string out = "{\"scale\": " + number("scale", state->scale);
  out += ", \"growth_factor\": " + number("growth_factor", state->growth_factor);
  out += ", \"backoff_factor\": " + number("backoff_factor", state->backoff_factor);
  out += ", \"growth_interval\": " + std::to_string(state->growth_interval);
  out += ", \"_growth_tracker\": " + std::to_string(state->growth_tracker) + "}";
  return out;
}

// The inverse of scaler_json: {} is a disabled scaler's state (nullopt); anything else must be
// the five entries, each a number (the two counts whole numbers).
std::optional<amp::GradScalerState> parse_scaler(const std::string& text,
                                                 const std::string& where) {
  const Json root = JsonReader(text, where + ": grad_scaler").read_document();
  if (root.kind != Json::Kind::Object)
    throw RuntimeError(where + ": grad_scaler must be a JSON object");
  if (root.members.empty()) return std::nullopt;
  amp::GradScalerState state;
  double* const reals[] = {&state.scale, &state.growth_factor, &state.backoff_factor};
  int64_t* const counts[] = {&state.growth_interval, &state.growth_tracker};
  const char* const names[] = {"scale", "growth_factor", "backoff_factor", "growth_interval",
                               "_growth_tracker"};
  bool seen[5] = {};
  for (const auto& [key, value] : root.members) {
    const std::string what = where + ": grad_scaler \"" + key + "\"";
    size_t k = 0;
    while (k < 5 && key != names[k]) ++k;
    if (k == 5) throw RuntimeError(what + " is not an entry of GradScaler.state_dict()");
    seen[k] = true;
    const double d = json_number(value, what);
    if (k < 3) {
      *reals[k] = d;
    } else {
      // Whole numbers: the interval a Python int (int64 here), the tracker an int32, since it
      // is an int32 tensor that load_state_dict fills (and a fill that overflowed would fail
      // after the model and optimizer had been loaded).
      const bool tracker = k == 4;
      if (d != std::floor(d) ||
          !(tracker ? truncation_fits<int32_t>(d) : truncation_fits<int64_t>(d)))
        throw RuntimeError(what + " must be a whole number that " + (tracker ? "int32" : "int64") +
                           " holds, got " + value.text);
      *counts[k - 3] = static_cast<int64_t>(d);
    }
  }
  for (size_t k = 0; k < 5; ++k)
    if (!seen[k]) throw RuntimeError(where + ": grad_scaler has no \"" + names[k] + "\"");
  return state;
}

constexpr const char* kModelPrefix = "model.";
constexpr const char* kStatePrefix = "optimizer.state.";

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// Both save_checkpoint()s: with a scaler's state as JSON, or without (null).
void save_checkpoint_with(const std::string& path, const nn::Module& model,
                          const optim::Optimizer& optimizer, const std::string* scaler_state,
                          const std::map<std::string, std::string>& extra) {
  NamedTensors tensors;
  for (const auto& [name, t] : model.state_dict()) tensors.emplace_back(kModelPrefix + name, t);
  const optim::OptimizerState state = optimizer.state_dict();
  for (const auto& [index, entries] : state.state)
    for (const auto& [key, t] : entries)
      tensors.emplace_back(kStatePrefix + std::to_string(index) + "." + key, t);
  std::map<std::string, std::string> metadata = extra;
  for (const char* reserved : {"optimizer", "optimizer.param_groups", "grad_scaler"})
    if (metadata.count(reserved))
      throw ValueError(std::string("save_checkpoint: the metadata key '") + reserved +
                       "' is the checkpoint's own");
  metadata["optimizer"] = optimizer.name();
  metadata["optimizer.param_groups"] = groups_json(state);
  if (scaler_state) metadata["grad_scaler"] = *scaler_state;
  save_safetensors(path, tensors, metadata);
}

// Both load_checkpoint()s: restoring a scaler too, or not (null).
std::map<std::string, std::string> load_checkpoint_with(const std::string& path, nn::Module& model,
                                                        optim::Optimizer& optimizer,
                                                        amp::GradScaler* scaler) {
  const TensorFile file = load_safetensors(path);
  const std::string where = "checkpoint '" + path + "'";
  // The model: its names, shapes and dtypes, all at once.
  NamedTensors params;
  optim::OptimizerState state;
  for (const auto& [name, t] : file.tensors) {
    if (starts_with(name, kModelPrefix)) {
      params.emplace_back(name.substr(std::strlen(kModelPrefix)), t);
    } else if (starts_with(name, kStatePrefix)) {
      const std::string rest = name.substr(std::strlen(kStatePrefix));
      const size_t dot = rest.find('.');
      if (dot == 0 || dot == std::string::npos || dot > 18 ||
          rest.find_first_not_of("0123456789") != dot)
        throw RuntimeError(where + ": '" + name + "' is not optimizer.state.<index>.<key>");
      state.state[std::stoll(rest.substr(0, dot))][rest.substr(dot + 1)] = t;
    } else {
      throw RuntimeError(where + ": the tensor '" + name +
                         "' is neither model.* nor optimizer.state.*");
    }
  }
  std::vector<TensorSpec> expected;
  for (const auto& [name, p] : model.named_parameters())
    expected.push_back({name, p.shape(), p.dtype()});
  check_tensors(params, expected, model.type_name(), true);
  // The optimizer: the same kind, the same groups, state of the parameters' dtypes.
  auto meta = [&](const std::string& key) -> const std::string& {
    auto it = file.metadata.find(key);
    if (it == file.metadata.end()) throw RuntimeError(where + " has no \"" + key + "\" metadata");
    return it->second;
  };
  if (meta("optimizer") != optimizer.name())
    throw RuntimeError(where + " holds the state of " + meta("optimizer") + ", not of " +
                       optimizer.name());
  state.param_groups = parse_groups(meta("optimizer.param_groups"), where);
  std::vector<Tensor> flat;
  for (const auto& g : optimizer.param_groups())
    flat.insert(flat.end(), g.params.begin(), g.params.end());
  for (const auto& [index, entries] : state.state)
    for (const auto& [key, t] : entries) {
      const DType want = key == "step" ? kFloat32
                                       : (index >= 0 && index < static_cast<int64_t>(flat.size())
                                              ? flat[static_cast<size_t>(index)].dtype()
                                              : t.dtype());
      if (t.dtype() != want)
        throw RuntimeError(where + ": optimizer.state." + std::to_string(index) + "." + key +
                           " has dtype " + dtype_name(t.dtype()) + ", its parameter " +
                           dtype_name(want));
    }
  // The scaler's state, read now; an empty one is refused now too (by load_state_dict itself,
  // which raises before it changes anything), so that nothing below can fail on its account.
  std::optional<amp::GradScalerState> scaler_state;
  if (scaler) {
    scaler_state = parse_scaler(meta("grad_scaler"), where);
    if (!scaler_state) scaler->load_state_dict(scaler_state);
  }
  // All checked: the optimizer checks its groups and state shapes before it changes anything,
  // and neither the model's copy (after check_tensors) nor the scaler's can fail.
  optimizer.load_state_dict(state);
  model.load_state_dict(params);
  if (scaler) scaler->load_state_dict(scaler_state);
  std::map<std::string, std::string> extra = file.metadata;
  for (const char* own : {"optimizer", "optimizer.param_groups", "grad_scaler"}) extra.erase(own);
  return extra;
}

}  // namespace

void save_checkpoint(const std::string& path, const nn::Module& model,
                     const optim::Optimizer& optimizer,
                     const std::map<std::string, std::string>& extra) {
  save_checkpoint_with(path, model, optimizer, nullptr, extra);
}

void save_checkpoint(const std::string& path, const nn::Module& model,
                     const optim::Optimizer& optimizer, const amp::GradScaler& scaler,
                     const std::map<std::string, std::string>& extra) {
  const std::string state = scaler_json(scaler);
  save_checkpoint_with(path, model, optimizer, &state, extra);
}

std::map<std::string, std::string> load_checkpoint(const std::string& path, nn::Module& model,
                                                   optim::Optimizer& optimizer) {
  return load_checkpoint_with(path, model, optimizer, nullptr);
}

std::map<std::string, std::string> load_checkpoint(const std::string& path, nn::Module& model,
                                                   optim::Optimizer& optimizer,
                                                   amp::GradScaler& scaler) {
  return load_checkpoint_with(path, model, optimizer, &scaler);
}

}  // namespace tiny
