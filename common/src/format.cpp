// format.cpp: printing numbers, tuples, lists and tensors the way Python and PyTorch do.
#include "tiny/format.h"

#include <charconv>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <functional>

#include "internal.h"
#include "tiny/autograd.h"

namespace tiny {

std::string strprintf(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string out(static_cast<size_t>(std::max(n, 0)), '\0');
  std::vsnprintf(out.data(), out.size() + 1, fmt, args);
  va_end(args);
  return out;
}

std::string repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // The shortest digits that round-trip, in scientific form: "d.ddde+XX".
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const size_t e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  const int exponent = std::stoi(sci.substr(e + 1));
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  std::string out;
  if (exponent >= -5 + 1 && exponent < 16) {
    // Python writes these in positional notation, with ".0" when there is no fraction.
    if (exponent >= 0) {
      const size_t int_len = static_cast<size_t>(exponent) + 1;
      if (digits.size() <= int_len) out = digits + std::string(int_len - digits.size(), '0') + ".0";
      else out = digits.substr(0, int_len) + "." + digits.substr(int_len);
    } else {
      out = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out.append(1, '.').append(digits, 1);
    out += strprintf("e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  }
  if (negative) out.insert(out.begin(), '-');
  return out;
}

std::string format_list(const std::vector<double>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + repr(values[i]);
  return out + "]";
}

std::string format_tuple(const std::vector<int64_t>& values) {
  std::string out = "(";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  if (values.size() == 1) out += ",";
  return out + ")";
}

std::string with_commas(int64_t n) {
  // The magnitude as unsigned: -n overflows for INT64_MIN.
  const uint64_t magnitude = n < 0 ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
  std::string digits = std::to_string(magnitude);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  if (n < 0) out.insert(out.begin(), '-');
  return out;
}

// ---- tensors, following torch/_tensor_str.py ---------------------------------------------------

namespace {

constexpr int kPrecision = 4;         // digits after the point
constexpr int64_t kThreshold = 1000;  // more elements than this are summarised with "..."
constexpr int64_t kEdgeItems = 3;     // elements shown at each end when summarising
constexpr size_t kLineWidth = 80;

// One element to print: floats as a double, integers and bools exactly (an int64 above 2^53
// does not survive a double).
struct Element {
  double f = 0;
  int64_t i = 0;
};

// The element of a 0-dim tensor; integer tensors come here converted to int64.
Element element(const Tensor& t) {
  if (t.dtype() == kInt64) return {0, *t.data<int64_t>()};
  return {t.item(), 0};
}

// Decides, from all the values to be shown, one notation and one width for every element, so
// that columns line up: integers as "2." when every float is whole, fixed "0.3333", or
// scientific "5.0000e-01" when magnitudes span more than 1000x or leave [1e-4, 1e8].
class ElementFormatter {
 public:
  ElementFormatter(DType dtype, const std::vector<Element>& values)
      : floating_(is_floating(dtype)), bool_(dtype == kBool) {
    if (!floating_) {
      for (const Element& v : values) width_ = std::max(width_, raw(v).size());
      return;
    }
    std::vector<double> finite;
    for (const Element& e : values)
      if (std::isfinite(e.f) && e.f != 0) finite.push_back(e.f);
    if (finite.empty()) return;
    double lo = INFINITY, hi = 0;
    for (double v : finite) {
      lo = std::min(lo, std::fabs(v));
      hi = std::max(hi, std::fabs(v));
      if (v != std::ceil(v)) int_mode_ = false;
    }
    if (int_mode_) {
      sci_mode_ = hi / lo > 1000.0 || hi > 1e8;
      for (double v : finite)
        width_ = std::max(width_, sci_mode_ ? sci(v).size() : strprintf("%.0f", v).size() + 1);
    } else {
      sci_mode_ = hi / lo > 1000.0 || hi > 1e8 || lo < 1e-4;
      for (double v : finite)
        width_ =
            std::max(width_, sci_mode_ ? sci(v).size() : strprintf("%.*f", kPrecision, v).size());
    }
  }

  size_t width() const { return width_; }

  std::string format(const Element& e) const {
    const double v = e.f;
    std::string s;
    if (!floating_) s = raw(e);
    else if (sci_mode_) s = sci(v);
    else if (int_mode_) s = strprintf("%.0f", v) + (std::isfinite(v) ? "." : "");
    else s = strprintf("%.*f", kPrecision, v);
    if (std::isnan(v) && floating_) s = "nan";
    else if (std::isinf(v) && floating_ && !sci_mode_) s = v > 0 ? "inf" : "-inf";
    return std::string(width_ > s.size() ? width_ - s.size() : 0, ' ') + s;
  }

 private:
  // Integers and bools print as Python prints them.
  std::string raw(const Element& e) const {
    if (bool_) return e.i != 0 ? "True" : "False";
    return std::to_string(e.i);
  }
  static std::string sci(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    return strprintf("%.*e", kPrecision, v);
  }

  bool floating_;
  bool bool_;
  bool int_mode_ = true;
  bool sci_mode_ = false;
  size_t width_ = 1;
};

// The values that will be printed: everything, or only the edges when summarising.
void collect(const Tensor& t, bool summarize, std::vector<Element>& out) {
  if (t.dim() == 0) {
    out.push_back(element(t));
    return;
  }
  const int64_t n = t.size(0);
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) i = n - kEdgeItems;
    collect(t.select(0, i), summarize, out);
  }
}

std::string vector_str(const Tensor& t, size_t indent, bool summarize, const ElementFormatter& f) {
  const size_t element_length = f.width() + 2;
  const size_t per_line = std::max<size_t>(1, (kLineWidth - indent) / element_length);
  std::vector<std::string> data;
  const int64_t n = t.size(0);
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
      data.push_back(" ...");
      i = n - kEdgeItems;
    }
    data.push_back(f.format(element(t.select(0, i))));
  }
  std::string out = "[";
  for (size_t i = 0; i < data.size(); ++i) {
    if (i > 0) out += (i % per_line == 0) ? ",\n" + std::string(indent + 1, ' ') : ", ";
    out += data[i];
  }
  return out + "]";
}

std::string tensor_str(const Tensor& t, size_t indent, bool summarize, const ElementFormatter& f) {
  if (t.dim() == 0) return f.format(element(t));
  if (t.dim() == 1) return vector_str(t, indent, summarize, f);
  std::vector<std::string> slices;
  const int64_t n = t.size(0);
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
      slices.push_back("...");
      i = n - kEdgeItems;
    }
    slices.push_back(tensor_str(t.select(0, i), indent + 1, summarize, f));
  }
  std::string sep(1, ',');
  sep.append(static_cast<size_t>(t.dim() - 1), '\n').append(indent + 1, ' ');
  std::string out = "[";
  for (size_t i = 0; i < slices.size(); ++i) out += (i ? sep : "") + slices[i];
  return out + "]";
}

}  // namespace

std::string format_tensor(const Tensor& tensor) {
  if (!tensor.defined()) return "tensor(undefined)";
  // A GPU tensor is printed from one copy of its values (and printing it waits for them).
  // Integers and bools are read as int64, which holds each of them exactly.
  Tensor t = tensor.detach().cpu();  // the tensor itself when it is on the CPU
  if (!is_floating(t.dtype())) t = t.to(kInt64);
  const std::string prefix = "tensor(";
  const size_t indent = prefix.size();
  std::vector<std::string> suffixes;
  if (!tensor.device().is_cpu()) suffixes.push_back("device='" + tensor.device().str() + "'");
  std::string body;
  if (t.numel() == 0) {
    body = "[]";
    if (t.dim() != 1) suffixes.push_back("size=" + format_tuple(t.shape()));
  } else {
    const bool summarize = t.numel() > kThreshold;
    std::vector<Element> values;
    collect(t, summarize, values);
    const ElementFormatter f(tensor.dtype(), values);
    body = tensor_str(t, indent, summarize, f);
  }
  // The dtype is named unless the values already say it (float32 and int64 are the defaults, and
  // True/False can only be bool), which an empty tensor cannot: PyTorch names it there.
  const DType d = tensor.dtype();
  if ((d != kFloat32 && d != kInt64 && d != kBool) || (t.numel() == 0 && d != kFloat32))
    suffixes.push_back(std::string("dtype=torch.") + dtype_name(d));
  if (tensor.grad_fn()) suffixes.push_back("grad_fn=<" + tensor.grad_fn()->name() + ">");
  else if (tensor.requires_grad()) suffixes.push_back("requires_grad=True");
  // Suffixes go on the last line, or on a new one if the line would pass 80 characters.
  std::string out = prefix + body;
  // As Python computes it: len(s) - s.rfind('\n') + 1, where rfind gives -1 for no newline.
  const size_t pos = out.rfind('\n');
  const int64_t nl = pos == std::string::npos ? -1 : static_cast<int64_t>(pos);
  size_t last_line = static_cast<size_t>(static_cast<int64_t>(out.size()) - nl + 1);
  for (const std::string& s : suffixes) {
    if (last_line + s.size() + 2 > kLineWidth) {
      out += ",\n" + std::string(indent, ' ') + s;
      last_line = indent + s.size();
    } else {
      out += ", " + s;
      last_line += s.size() + 2;
    }
  }
  return out + ")";
}

}  // namespace tiny
