// einops.cpp: patterns with named dimensions, turned into reshape, permute, reductions and
// matrix products.
#include "tiny/einops.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <map>
#include <optional>
#include <set>

#include "internal.h"
#include "tiny/format.h"
#include "tiny/ops.h"

namespace tiny {

namespace {

const std::string kEllipsis = "...";
// The ellipsis inside parentheses, "(...)" or "(a ...)": its dimensions merged into one.
const std::string kMergedEllipsis = "(...)";
// How einops prints the ellipsis in its messages: it reads "..." as this one character.
const std::string kEllipsisGlyph = "\u2026";
// What marks an anonymous axis's name (see anonymous_length).
const std::string kAnonymousTag = "-axis#";

// One side of a pattern: a list of groups, each a list of axis names. A plain name is a group of
// one; "(h w)" a group of two; "()" or "1" an empty group (a dimension of size 1); "..." a group
// holding just the ellipsis.
using Groups = std::vector<std::vector<std::string>>;

struct PatternError {
  std::string message;
};

// einops' rule for an axis name: a Python identifier that neither starts nor ends with '_'.
// Returns why a token is not one, or "" if it is.
// A byte of a name: a letter, digit or '_', or any byte of a UTF-8 encoded character beyond
// ASCII, since a Python identifier may use letters of any script ("α b -> b α").
bool is_name_byte(char c) {
  const auto u = static_cast<unsigned char>(c);
  return std::isalnum(u) || c == '_' || u >= 0x80;
}

std::string axis_name_problem(const std::string& s) {
  const bool identifier = !s.empty() && !std::isdigit(static_cast<unsigned char>(s[0])) &&
                          std::all_of(s.begin(), s.end(), is_name_byte);
  if (!identifier) return "not a valid python identifier";
  if (s.front() == '_' || s.back() == '_')
    return "axis name should should not start or end with underscore";  // einops' words
  return "";
}

// An anonymous axis, a number other than 1 ("(h 2)"), is named "<n>-axis#<k>": no identifier
// has '-' or '#', and the running k keeps two of them apart, as einops keeps every anonymous
// axis distinct from every other. Its length is the number.
std::optional<int64_t> anonymous_length(const std::string& name) {
  const size_t at = name.find(kAnonymousTag);
  if (at == std::string::npos) return std::nullopt;
  return std::stoll(name.substr(0, at));
}

// How einops prints an axis in a set: a name quoted, an anonymous axis as "2-axis".
std::string axis_str(const std::string& name) {
  const size_t at = name.find(kAnonymousTag);
  // "2-axis": the tag without its "#"
  return at == std::string::npos ? "'" + name + "'" : name.substr(0, at + kAnonymousTag.size() - 1);
}

// One side of a pattern, read as einops reads it (einops/parsing.py, ParsedExpression): the
// ellipsis becomes one character, then names are runs of letters, digits and '_', separated by
// spaces and parentheses; any other character is refused. A name is checked when it ends.
Groups parse_side(const std::string& side, bool allow_duplicates = false) {
  static std::atomic<int64_t> anonymous_count{0};
  const char kMark = '\x1f';  // the ellipsis while reading, where einops uses kEllipsisGlyph
  std::string text = side;
  size_t mark_at = std::string::npos;  // where the ellipsis's mark is; a typed '\x1f' is not one
  if (text.find('.') != std::string::npos) {
    const size_t at = text.find(kEllipsis);
    if (at == std::string::npos)
      throw PatternError{"Expression may contain dots only inside ellipsis (...)"};
    if (text.find(kEllipsis, at + 1) != std::string::npos ||
        std::count(text.begin(), text.end(), '.') != 3)
      throw PatternError{
          "Expression may contain dots only inside ellipsis (...); only one ellipsis for tensor "};
    text.replace(at, kEllipsis.size(), 1, kMark);
    mark_at = at;
  }
  auto shown = [&](std::string t) {  // the text as einops prints it
    for (size_t at; (at = t.find(kMark)) != std::string::npos;) t.replace(at, 1, kEllipsisGlyph);
    return t;
  };
  Groups groups;
  std::set<std::string> seen;
  bool in_bracket = false;
  std::vector<std::string> bracket;
  auto place = [&](const std::string& name) {
    if (in_bracket) bracket.push_back(name);
    else groups.push_back({name});
  };
  auto add = [&](const std::string& token) {
    if (seen.count(token) && !allow_duplicates)
      throw PatternError{"Indexing expression contains duplicate dimension \"" + token + "\""};
    if (token == std::string(1, kMark)) {  // one at most: the dots were counted above
      if (in_bracket) bracket.push_back(kMergedEllipsis);
      else groups.push_back({kEllipsis});
      return;
    }
    const bool number = std::all_of(token.begin(), token.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c));
    });
    if (number) {
      const std::string digits =
          token.substr(std::min(token.find_first_not_of('0'), token.size() - 1));
      if (digits == "1") {  // a dimension of length 1; inside parentheses it changes nothing
        if (!in_bracket) groups.push_back({});
        return;
      }
      if (digits == "0") throw PatternError{"Anonymous axis should have positive length, not 0"};
      if (digits.size() > 18)
        throw PatternError{"Anonymous axis length " + token + " is too large"};
      place(digits + kAnonymousTag + std::to_string(anonymous_count++));
      return;
    }
    const std::string problem = axis_name_problem(token);
    if (!problem.empty())
      throw PatternError{"Invalid axis identifier: " + shown(token) + "\n" + problem};
    seen.insert(token);
    place(token);
  };
  std::string current;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '(' || c == ')' || c == ' ') {
      if (!current.empty()) add(current);
      current.clear();
      if (c == '(') {
        if (in_bracket)
          throw PatternError{
              "Axis composition is one-level (brackets inside brackets not allowed)"};
        in_bracket = true;
        bracket.clear();
      } else if (c == ')') {
        if (!in_bracket) throw PatternError{"Brackets are not balanced"};
        groups.push_back(bracket);
        in_bracket = false;
      }
    } else if (is_name_byte(c) || (c == kMark && i == mark_at)) {
      current += c;
    } else {
      throw PatternError{"Unknown character '" + std::string(1, c) + "'"};
    }
  }
  if (in_bracket)
    throw PatternError{"Imbalanced parentheses in expression: \"" + shown(text) + "\""};
  if (!current.empty()) add(current);
  return groups;
}

// The pattern's two sides. einops splits at "->" and unpacks two parts, so a pattern without
// one arrow fails in Python's unpacking ("not enough values to unpack"); the library says what
// is wrong instead.
std::pair<std::string, std::string> split_arrow(const std::string& pattern) {
  const size_t arrow = pattern.find("->");
  if (arrow == std::string::npos) throw PatternError{"Pattern must contain '->'"};
  if (pattern.find("->", arrow + 2) != std::string::npos)
    throw PatternError{"Pattern must contain '->' only once"};
  return {pattern.substr(0, arrow), pattern.substr(arrow + 2)};
}

std::vector<std::string> names_of(const Groups& groups) {
  std::vector<std::string> names;
  for (const auto& g : groups) names.insert(names.end(), g.begin(), g.end());
  return names;
}

std::string set_str(const std::set<std::string>& s) {
  std::string out = "{";
  for (const auto& n : s) out += (out.size() > 1 ? ", " : "") + axis_str(n);
  return out + "}";
}

bool merges_ellipsis(const std::vector<std::string>& g) {
  return std::find(g.begin(), g.end(), kMergedEllipsis) != g.end();
}

// Replaces the ellipsis by `count` axes named "...0", "...1", ...: as many groups where it
// stands alone, as many names in its group where it is inside parentheses.
Groups expand_ellipsis(const Groups& groups, int64_t count) {
  Groups out;
  for (const auto& g : groups) {
    if (g.size() == 1 && g[0] == kEllipsis) {
      for (int64_t k = 0; k < count; ++k) out.push_back({kEllipsis + std::to_string(k)});
    } else {
      std::vector<std::string> group;
      for (const auto& n : g) {
        if (n != kMergedEllipsis) group.push_back(n);
        else
          for (int64_t k = 0; k < count; ++k) group.push_back(kEllipsis + std::to_string(k));
      }
      out.push_back(group);
    }
  }
  return out;
}

bool has_ellipsis(const Groups& groups) {
  return std::any_of(groups.begin(), groups.end(), [](const auto& g) {
    return (g.size() == 1 && g[0] == kEllipsis) || merges_ellipsis(g);
  });
}

std::string sizes_str(const AxisSizes& sizes) {
  std::string out = "{";
  for (const auto& [k, v] : sizes)
    out += (out.size() > 1 ? ", '" : "'") + k + "': " + std::to_string(v);
  return out + "}";
}

// max or min over `dims`, one dimension at a time, last first so that the others keep their
// numbers. min is max on values turned upside down by a map that reverses their order exactly:
// -x for floats, and -1 - x (the bits' complement) for integers, which never overflows. bool
// goes through uint8.
Tensor extreme(Tensor t, std::vector<int64_t> dims, const std::string& which) {
  const bool is_min = which == "min";
  // einops calls amax/amin, whose words these are for an axis with nothing to reduce. It has
  // moved the reduced axes after the kept ones by then, so the dimension it names is counted
  // in that order.
  std::sort(dims.begin(), dims.end());
  const int64_t kept = t.dim() - static_cast<int64_t>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i)
    if (t.size(dims[i]) == 0)
      throw IndexError(std::string(is_min ? "amin" : "amax") + "(): Expected reduction dim " +
                       std::to_string(kept + static_cast<int64_t>(i)) + " to have non-zero size.");
  const DType dtype = t.dtype();
  if (is_min && dtype == kBool) t = t.to(kUInt8);
  const bool floating = is_floating(t.dtype());
  auto flip = [&](const Tensor& v) { return floating ? -v : Scalar(int64_t(-1)) - v; };
  if (is_min) t = flip(t);
  std::sort(dims.rbegin(), dims.rend());
  for (int64_t d : dims) t = max(t, d).values;
  if (is_min) t = flip(t);
  return t.to(dtype);
}

// The product over `dims`: they move last and merge into one, whose slices are multiplied in
// order. Integers and bool multiply in int64, as torch.prod does.
Tensor product(const Tensor& x, const std::vector<int64_t>& dims) {
  const Tensor t = is_floating(x.dtype()) ? x : x.to(kInt64);
  std::vector<int64_t> order;
  Shape kept;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) {
      order.push_back(d);
      kept.push_back(t.size(d));
    }
  order.insert(order.end(), dims.begin(), dims.end());
  int64_t length = 1;
  for (int64_t d : dims) length *= t.size(d);
  Shape rows = kept;
  rows.push_back(length);
  const Tensor flat = t.permute(order).reshape(rows);
  Tensor acc = ones(kept, t.dtype(), t.device());
  for (int64_t i = 0; i < flat.size(-1); ++i) acc = acc * flat.select(-1, i);
  return acc;
}

// The shared work of rearrange and reduce: split the input's dimensions into elementary axes,
// reduce the ones missing on the right, order the rest as the right side lists them, and merge
// the right side's groups.
Tensor rearrange_reduce(const Tensor& x, const std::string& pattern, const std::string& reduction,
                        const AxisSizes& sizes) {
  const bool is_reduce = !reduction.empty();
  try {
    const auto [left_text, right_text] = split_arrow(pattern);
    Groups left = parse_side(left_text);
    Groups right = parse_side(right_text);
    // einops' checks, in its order (einops.py, _prepare_transformation_recipe).
    if (has_ellipsis(right) && !has_ellipsis(left))
      throw PatternError{"Ellipsis found in right side, but not left side of a pattern " +
                         pattern};
    if (std::any_of(left.begin(), left.end(), merges_ellipsis))
      throw PatternError{"Ellipsis inside parenthesis in the left side is not allowed: " + pattern};
    // The names on each side, the ellipsis as one name, as einops prints it.
    auto identifiers = [](const Groups& groups) {
      std::set<std::string> out;
      for (const std::string& n : names_of(groups))
        out.insert(n == kEllipsis || n == kMergedEllipsis ? kEllipsisGlyph : n);
      return out;
    };
    const std::set<std::string> left_ids = identifiers(left), right_ids = identifiers(right);
    auto missing_from = [](const std::set<std::string>& a, const std::set<std::string>& b) {
      std::set<std::string> out;
      for (const auto& n : a)
        if (!b.count(n)) out.insert(n);
      return out;
    };
    // rearrange must keep every name, and einops lists all the odd ones out at once; reduce may
    // drop names (it reduces them) but not invent them.
    if (!is_reduce) {
      const auto has_anonymous = [&](const std::set<std::string>& names) {
        return std::any_of(names.begin(), names.end(),
                           [](const std::string& n) { return anonymous_length(n).has_value(); });
      };
      if (has_anonymous(left_ids) || has_anonymous(right_ids))
        throw PatternError{
            "Non-unitary anonymous axes are not supported in rearrange (exception is length 1)"};
      std::set<std::string> one_side = missing_from(left_ids, right_ids);
      one_side.merge(missing_from(right_ids, left_ids));
      if (!one_side.empty())
        throw PatternError{"Identifiers only on one side of expression (should be on both): " +
                           set_str(one_side)};
    } else {
      static const std::set<std::string> kReductions = {"min",  "max", "sum", "mean",
                                                        "prod", "any", "all"};
      if (!kReductions.count(reduction))
        throw PatternError{"Unknown reduction " + reduction +
                           ". Expect one of ('min', 'max', 'sum', 'mean', 'prod', 'any', 'all')."};
      const std::set<std::string> only_right = missing_from(right_ids, left_ids);
      if (!only_right.empty())
        throw PatternError{"Unexpected identifiers on the right side of reduce " + reduction +
                           ": " + set_str(only_right)};
    }

    // How many dimensions the ellipsis stands for.
    const int64_t named = static_cast<int64_t>(left.size()) - (has_ellipsis(left) ? 1 : 0);
    if (has_ellipsis(left) ? x.dim() < named : x.dim() != named)
      throw PatternError{"Wrong shape: expected " + std::string(has_ellipsis(left) ? ">=" : "") +
                         std::to_string(named) + " dims. Received " + std::to_string(x.dim()) +
                         "-dim tensor."};
    const int64_t ellipsis_dims = x.dim() - named;
    left = expand_ellipsis(left, ellipsis_dims);
    right = expand_ellipsis(right, ellipsis_dims);
    const auto lnames = names_of(left), rnames = names_of(right);
    const std::set<std::string> lset(lnames.begin(), lnames.end()),
        rset(rnames.begin(), rnames.end());
    for (const auto& [name, size] : sizes) {
      if (!axis_name_problem(name).empty())
        throw PatternError{"('Invalid name for an axis', '" + name + "')"};
      if (!lset.count(name)) throw PatternError{"Axis " + name + " is not used in transform"};
    }

    // Sizes of the elementary axes: each left group's size, divided among its axes.
    std::map<std::string, int64_t> axis;
    Shape elementary;
    // A length given for an axis: by the caller, or by the number an anonymous axis is.
    auto given = [&](const std::string& n) -> std::optional<int64_t> {
      if (auto a = anonymous_length(n)) return a;
      if (auto it = sizes.find(n); it != sizes.end()) return it->second;
      return std::nullopt;
    };
    // First every group may leave at most one length to infer, then the lengths must fit.
    for (const auto& group : left) {
      std::vector<std::string> unknown;
      for (const auto& n : group)
        if (!given(n)) unknown.push_back(n);
      if (unknown.size() > 1) {
        std::string names;
        for (const auto& n : unknown) names += (names.empty() ? "" : ", ") + axis_str(n);
        throw PatternError{"Could not infer sizes for {" + names + "}"};
      }
    }
    for (size_t g = 0; g < left.size(); ++g) {
      const int64_t length = x.size(static_cast<int64_t>(g));
      int64_t known = 1;
      bool overflow = false;
      std::optional<std::string> unknown;
      for (const auto& n : left[g]) {
        if (auto v = given(n)) overflow |= __builtin_mul_overflow(known, *v, &known);
        else unknown = n;
      }
      if (unknown) {
        if (overflow || known <= 0 || length % known != 0)
          throw PatternError{"Shape mismatch, can't divide axis of length " +
                             std::to_string(length) + " in chunks of " + std::to_string(known)};
        axis[*unknown] = length / known;
      } else if (overflow || known != length) {
        throw PatternError{"Shape mismatch, " + std::to_string(length) +
                           " != " + std::to_string(known)};
      }
      for (const auto& n : left[g]) {
        if (!axis.count(n)) axis[n] = *given(n);
        elementary.push_back(axis[n]);
      }
    }
    Tensor t = x.reshape(elementary);

    // Reduce the axes that the right side drops.
    std::vector<std::string> remaining;
    std::vector<int64_t> reduce_dims;
    for (size_t i = 0; i < lnames.size(); ++i) {
      if (rset.count(lnames[i])) remaining.push_back(lnames[i]);
      else reduce_dims.push_back(static_cast<int64_t>(i));
    }
    if (!reduce_dims.empty()) {
      if (reduction == "sum") t = sum(t, reduce_dims);
      else if (reduction == "mean") t = mean(t, reduce_dims);
      else if (reduction == "max" || reduction == "min") t = extreme(t, reduce_dims, reduction);
      else if (reduction == "prod") t = product(t, reduce_dims);
      else if (reduction == "any" || reduction == "all") {
        // Counts, so that an empty axis gives what torch.any and torch.all give: false (no
        // element is nonzero) and true (no element is zero).
        const Tensor zero = detail::number_tensor(0, t.dtype());
        const Tensor none = detail::number_tensor(0, kInt64);
        t = reduction == "any" ? gt(sum(ne(t, zero), reduce_dims), none)
                               : eq(sum(eq(t, zero), reduce_dims), none);
      }
      else
        throw PatternError{"Unknown reduction " + reduction +
                           ". Expect one of ('min', 'max', 'sum', 'mean', 'prod', 'any', 'all')."};
    }

    // Order as the right side lists its axes, then merge its groups.
    std::vector<int64_t> order;
    for (const auto& n : rnames)
      order.push_back(std::find(remaining.begin(), remaining.end(), n) - remaining.begin());
    t = t.permute(order);
    Shape out_shape;
    for (const auto& g : right) {
      int64_t size = 1;
      for (const auto& n : g) size *= axis[n];
      out_shape.push_back(size);
    }
    return t.reshape(out_shape);
  } catch (const PatternError& e) {
    // einops' own wording: rearrange is its reduction "rearrange", and reduce names the
    // reduction it was asked for ("sum-reduction pattern").
    throw EinopsError(" Error while processing " +
                       (is_reduce ? reduction : std::string("rearrange")) +
                       "-reduction pattern \"" + pattern +
                       "\".\n Input tensor shape: " + detail::torch_size_str(x.shape()) +
                       ". Additional info: " + sizes_str(sizes) + ".\n " + e.message);
  }
}

// A tensor with a name for each of its dimensions.
struct Named {
  Tensor t;
  std::vector<std::string> axes;
};

Named sum_out(Named a, const std::set<std::string>& needed) {
  std::vector<int64_t> dims;
  std::vector<std::string> kept;
  for (size_t i = 0; i < a.axes.size(); ++i) {
    if (needed.count(a.axes[i])) kept.push_back(a.axes[i]);
    else dims.push_back(static_cast<int64_t>(i));
  }
  if (!dims.empty()) a.t = sum(a.t, dims);
  return {a.t, kept};
}

// Multiplies two named tensors and sums the axes they share that are not in `keep`: one batched
// matmul with the shared kept axes as the batch, the shared dropped axes contracted.
Named contract(Named a, Named b, const std::set<std::string>& keep) {
  std::set<std::string> in_b(b.axes.begin(), b.axes.end()), in_a(a.axes.begin(), a.axes.end());
  std::set<std::string> need_a = keep, need_b = keep;
  need_a.insert(b.axes.begin(), b.axes.end());
  need_b.insert(a.axes.begin(), a.axes.end());
  a = sum_out(a, need_a);
  b = sum_out(b, need_b);
  std::vector<std::string> batch, left, contracted, right;
  for (const auto& n : a.axes) {
    if (in_b.count(n)) (keep.count(n) ? batch : contracted).push_back(n);
    else left.push_back(n);
  }
  for (const auto& n : b.axes)
    if (!in_a.count(n)) right.push_back(n);
  auto pos = [](const Named& x, const std::string& n) {
    return static_cast<int64_t>(std::find(x.axes.begin(), x.axes.end(), n) - x.axes.begin());
  };
  auto arrange = [&](const Named& x, const std::vector<std::vector<std::string>*>& parts) {
    std::vector<int64_t> order;
    for (auto* part : parts)
      for (const auto& n : *part) order.push_back(pos(x, n));
    return x.t.permute(order);
  };
  auto size_of = [&](const std::string& n) {  // a size-1 axis broadcasts against the other
    const int64_t sa = in_a.count(n) ? a.t.size(pos(a, n)) : 1;
    const int64_t sb = in_b.count(n) ? b.t.size(pos(b, n)) : 1;
    if (sa != sb && sa != 1 && sb != 1)
      throw RuntimeError("einsum(): axis '" + n + "' has size " + std::to_string(sa) +
                         " in one operand and " + std::to_string(sb) + " in another");
    return std::max(sa, sb);
  };
  Shape bshape, lshape, rshape;
  int64_t nb = 1, nl = 1, nc = 1, nr = 1;
  for (const auto& n : batch) {
    bshape.push_back(size_of(n));
    nb *= bshape.back();
  }
  for (const auto& n : left) {
    lshape.push_back(a.t.size(pos(a, n)));
    nl *= lshape.back();
  }
  Shape cshape;
  for (const auto& n : contracted) {
    cshape.push_back(size_of(n));
    nc *= cshape.back();
  }
  for (const auto& n : right) {
    rshape.push_back(b.t.size(pos(b, n)));
    nr *= rshape.back();
  }
  Shape ea = bshape, eb = bshape;
  ea.insert(ea.end(), lshape.begin(), lshape.end());
  ea.insert(ea.end(), cshape.begin(), cshape.end());
  eb.insert(eb.end(), cshape.begin(), cshape.end());
  eb.insert(eb.end(), rshape.begin(), rshape.end());
  const Tensor am = arrange(a, {&batch, &left, &contracted}).expand(ea).reshape({nb, nl, nc});
  const Tensor bm = arrange(b, {&batch, &contracted, &right}).expand(eb).reshape({nb, nc, nr});
  Shape out_shape = bshape;
  out_shape.insert(out_shape.end(), lshape.begin(), lshape.end());
  out_shape.insert(out_shape.end(), rshape.begin(), rshape.end());
  std::vector<std::string> axes = batch;
  axes.insert(axes.end(), left.begin(), left.end());
  axes.insert(axes.end(), right.begin(), right.end());
  return {matmul(am, bm).reshape(out_shape), axes};
}

}  // namespace

Tensor rearrange(const Tensor& x, const std::string& pattern, const AxisSizes& sizes) {
  return rearrange_reduce(x, pattern, "", sizes);
}

Tensor reduce(const Tensor& x, const std::string& pattern, const std::string& reduction,
              const AxisSizes& sizes) {
  return rearrange_reduce(x, pattern, reduction, sizes);
}

// einops.einsum in two steps, each with its checks in its own words. First einops turns the
// pattern into torch.einsum's one-letter subscripts ("batch i, i -> batch" becomes "ab,b->a"),
// letters given in order of first appearance; it refuses what einsum cannot do (a composition,
// a 1 or another number) and an output axis no input has (EinopsError). Then torch.einsum
// checks the operands against the subscripts (RuntimeError, naming the letters).
namespace {

std::map<std::string, char> einsum_letters(const std::string& pattern,
                                           const std::vector<Groups>& inputs,
                                           const Groups& output) {
  auto check = [](const std::vector<std::string>& g) {
    if (g.empty()) throw NotImplementedError("Singleton () axes are not yet supported in einsum.");
    if (g.size() > 1 || merges_ellipsis(g))
      throw NotImplementedError("Shape rearrangement is not yet supported in einsum.");
    if (anonymous_length(g[0]))
      throw NotImplementedError("Anonymous axes are not yet supported in einsum.");
  };
  const std::string letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  std::map<std::string, char> letter;
  for (const Groups& side : inputs)
    for (const auto& g : side) {
      if (g.size() == 1 && g[0] == kEllipsis) continue;
      check(g);
      if (letter.count(g[0])) continue;
      if (letter.size() == letters.size()) throw RuntimeError("Too many axes in einsum.");
      letter.emplace(g[0], letters[letter.size()]);
    }
  for (const auto& g : output) {
    if (g.size() == 1 && g[0] == kEllipsis) continue;
    check(g);
    if (!letter.count(g[0]))
      throw EinopsError("Unknown axis " + g[0] + " on right side of einsum " + pattern + ".");
  }
  return letter;
}

void check_einsum_operands(const std::vector<Tensor>& operands, const std::vector<Groups>& inputs,
                           const std::map<std::string, char>& letter) {
  if (operands.size() < inputs.size())
    throw RuntimeError("einsum(): fewer operands were provided than specified in the equation");
  if (operands.size() > inputs.size())
    throw RuntimeError("einsum(): more operands were provided than specified in the equation");
  for (size_t k = 0; k < operands.size(); ++k) {
    const int64_t named =
        static_cast<int64_t>(inputs[k].size()) - (has_ellipsis(inputs[k]) ? 1 : 0);
    const std::string counts = "einsum(): the number of subscripts in the equation (" +
                               std::to_string(named) + ") ";
    const std::string dims = "the number of dimensions (" + std::to_string(operands[k].dim()) +
                             ") for operand " + std::to_string(k);
    if (has_ellipsis(inputs[k]) && operands[k].dim() < named)
      throw RuntimeError(counts + "is more than " + dims);
    if (!has_ellipsis(inputs[k]) && operands[k].dim() != named)
      throw RuntimeError(counts + "does not match " + dims + " and no ellipsis was given");
  }
  // Sizes: an axis of size 1 broadcasts; any two other sizes of one axis must agree.
  std::map<std::string, int64_t> seen;
  for (size_t k = 0; k < operands.size(); ++k) {
    const Tensor& x = operands[k];
    const Groups& side = inputs[k];
    const size_t dots = static_cast<size_t>(
        std::find(side.begin(), side.end(), std::vector<std::string>{kEllipsis}) - side.begin());
    // Groups after the ellipsis count from the operand's last dimension.
    auto dim_of = [&](size_t i) {
      return i < dots ? static_cast<int64_t>(i) : x.dim() - static_cast<int64_t>(side.size() - i);
    };
    for (size_t i = 0; i < side.size(); ++i) {
      if (i == dots) continue;
      const int64_t s = x.size(dim_of(i));
      // A name repeated within one operand is a diagonal: both sizes must be equal.
      const size_t first =
          static_cast<size_t>(std::find(side.begin(), side.end(), side[i]) - side.begin());
      if (first < i) {
        const int64_t p = x.size(dim_of(first));
        if (s != p)
          throw RuntimeError(std::string("einsum(): subscript ") + letter.at(side[i][0]) +
                             " is repeated for operand " + std::to_string(k) +
                             " but the sizes don't match, " + std::to_string(s) +
                             " != " + std::to_string(p));
        continue;
      }
      int64_t& before = seen.try_emplace(side[i][0], 1).first->second;
      if (before == 1) before = s;
      else if (s != 1 && s != before)
        throw RuntimeError(std::string("einsum(): subscript ") + letter.at(side[i][0]) +
                           " has size " + std::to_string(s) + " for operand " +
                           std::to_string(k) + " which does not broadcast with previously seen size " +
                           std::to_string(before));
    }
  }
}

}  // namespace

Tensor einsum(const std::vector<Tensor>& operands, const std::string& pattern) {
  // einops splits at "->" and unpacks two sides, with Python's own message for more.
  const size_t arrow = pattern.find("->");
  if (arrow == std::string::npos) throw ValueError("Einsum pattern must contain '->'.");
  if (pattern.find("->", arrow + 2) != std::string::npos)
    throw ValueError("too many values to unpack (expected 2)");
  std::vector<Groups> inputs;
  Groups output;
  try {
    const std::string lhs = pattern.substr(0, arrow), rhs = pattern.substr(arrow + 2);
    for (size_t start = 0;;) {
      const size_t comma = lhs.find(',', start);
      // einops lets an input name an axis twice (a diagonal), not the output.
      inputs.push_back(parse_side(lhs.substr(start, comma - start), /*allow_duplicates=*/true));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    output = parse_side(rhs);
  } catch (const PatternError& e) {
    throw EinopsError(e.message);
  }
  check_einsum_operands(operands, inputs, einsum_letters(pattern, inputs, output));
  {
    // Each operand's axis names, its ellipsis expanded so that ellipses align at the right.
    int64_t ellipsis_dims = 0;
    std::vector<int64_t> own(operands.size(), 0);
    for (size_t k = 0; k < operands.size(); ++k) {
      const int64_t named =
          static_cast<int64_t>(inputs[k].size()) - (has_ellipsis(inputs[k]) ? 1 : 0);
      own[k] = operands[k].dim() - named;
      ellipsis_dims = std::max(ellipsis_dims, own[k]);
    }
    std::vector<Named> named;
    for (size_t k = 0; k < operands.size(); ++k) {
      Groups g = expand_ellipsis(inputs[k], own[k]);
      std::vector<std::string> axes;
      for (const auto& grp : g) {
        std::string n = grp[0];
        if (n.rfind(kEllipsis, 0) == 0 && n.size() > kEllipsis.size())  // "...i" -> align right
          n = kEllipsis + std::to_string(std::stoll(n.substr(3)) + ellipsis_dims - own[k]);
        axes.push_back(n);
      }
      // A name given twice is the diagonal of those two dimensions, which the view puts last.
      Tensor t = operands[k];
      for (size_t i = 0; i < axes.size();) {
        const size_t j = static_cast<size_t>(
            std::find(axes.begin() + static_cast<int64_t>(i) + 1, axes.end(), axes[i]) -
            axes.begin());
        if (j == axes.size()) {
          ++i;
          continue;
        }
        t = t.diagonal(0, static_cast<int64_t>(i), static_cast<int64_t>(j));
        const std::string name = axes[i];
        axes.erase(axes.begin() + static_cast<int64_t>(j));
        axes.erase(axes.begin() + static_cast<int64_t>(i));
        axes.push_back(name);  // i stays: the name now there has not been looked at
      }
      named.push_back({t, axes});
    }
    std::vector<std::string> out_axes = names_of(expand_ellipsis(output, ellipsis_dims));
    // Multiply left to right, keeping the axes that the output or a later operand needs.
    Named acc = named[0];
    for (size_t k = 1; k < named.size(); ++k) {
      std::set<std::string> keep(out_axes.begin(), out_axes.end());
      for (size_t j = k + 1; j < named.size(); ++j)
        keep.insert(named[j].axes.begin(), named[j].axes.end());
      acc = contract(acc, named[k], keep);
    }
    acc = sum_out(acc, std::set<std::string>(out_axes.begin(), out_axes.end()));
    std::vector<int64_t> order;
    for (const auto& n : out_axes)
      order.push_back(std::find(acc.axes.begin(), acc.axes.end(), n) - acc.axes.begin());
    return acc.t.permute(order);
  }
}

}  // namespace tiny
