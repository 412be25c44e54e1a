// einops.cpp: patterns with named dimensions, turned into reshape, permute, reductions and
// matrix products.
#include "tiny/einops.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "internal.h"
#include "tiny/format.h"
#include "tiny/ops.h"

namespace tiny {

namespace {

const std::string kEllipsis = "...";
// The ellipsis inside parentheses, "(...)" or "(a ...)": its dimensions merged into one.
const std::string kMergedEllipsis = "(...)";

// One side of a pattern: a list of groups, each a list of axis names. A plain name is a group of
// one; "(h w)" a group of two; "()" or "1" an empty group (a dimension of size 1); "..." a group
// holding just the ellipsis.
using Groups = std::vector<std::vector<std::string>>;

struct PatternError {
  std::string message;
};

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

Groups parse_side(const std::string& side) {
  Groups groups;
  std::vector<std::string>* open = nullptr;  // the group being filled inside parentheses
  std::vector<std::string> bracket;
  size_t i = 0;
  auto add = [&](const std::string& token) {
    if (token == kEllipsis) {
      if (open) open->push_back(kMergedEllipsis);
      else groups.push_back({kEllipsis});
    } else if (token == "1") {
      if (open) throw PatternError{"'1' is not allowed inside parentheses"};
      groups.push_back({});
    } else if (is_identifier(token)) {
      if (open) open->push_back(token);
      else groups.push_back({token});
    } else {
      throw PatternError{"Invalid axis identifier: '" + token + "'"};
    }
  };
  while (i < side.size()) {
    const char c = side[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '(') {
      if (open)
        throw PatternError{"Axis composition is one-level (brackets inside brackets not allowed)"};
      bracket.clear();
      open = &bracket;
      ++i;
    } else if (c == ')') {
      if (!open) throw PatternError{"Brackets are not balanced"};
      groups.push_back(bracket);
      open = nullptr;
      ++i;
    } else {
      size_t j = i;
      while (j < side.size() && !std::isspace(static_cast<unsigned char>(side[j])) &&
             side[j] != '(' && side[j] != ')')
        ++j;
      add(side.substr(i, j - i));
      i = j;
    }
  }
  if (open) throw PatternError{"Imbalanced parentheses in expression: \"" + side + "\""};
  return groups;
}

std::vector<std::string> names_of(const Groups& groups) {
  std::vector<std::string> names;
  for (const auto& g : groups) names.insert(names.end(), g.begin(), g.end());
  return names;
}

void check_unique(const Groups& groups) {
  std::set<std::string> seen;
  for (const std::string& n : names_of(groups))
    if (!seen.insert(n).second)
      throw PatternError{n == kEllipsis
                             ? "Expression may contain dots only inside ellipsis (...)"
                             : "Indexing expression contains duplicate dimension \"" + n + "\""};
}

std::string set_str(const std::set<std::string>& s) {
  std::string out = "{";
  for (const auto& n : s) out += (out.size() > 1 ? ", '" : "'") + n + "'";
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
    const size_t arrow = pattern.find("->");
    if (arrow == std::string::npos) throw PatternError{"Pattern must contain '->'"};
    Groups left = parse_side(pattern.substr(0, arrow));
    Groups right = parse_side(pattern.substr(arrow + 2));
    check_unique(left);
    check_unique(right);
    if (std::any_of(left.begin(), left.end(), merges_ellipsis))
      throw PatternError{"Ellipsis inside parenthesis in the left side is not allowed"};
    if (has_ellipsis(right) && !has_ellipsis(left))
      throw PatternError{"Ellipsis found in right side, but not left side of a pattern " +
                         pattern};

    // How many dimensions the ellipsis stands for.
    const int64_t named = static_cast<int64_t>(left.size()) - (has_ellipsis(left) ? 1 : 0);
    if (has_ellipsis(left) ? x.dim() < named : x.dim() != named)
      throw PatternError{"Wrong shape: expected " + std::to_string(named) +
                         (has_ellipsis(left) ? " or more" : "") + " dims. Received " +
                         std::to_string(x.dim()) + "-dim tensor."};
    const int64_t ellipsis_dims = x.dim() - named;
    left = expand_ellipsis(left, ellipsis_dims);
    right = expand_ellipsis(right, ellipsis_dims);

    const auto lnames = names_of(left), rnames = names_of(right);
    const std::set<std::string> lset(lnames.begin(), lnames.end()),
        rset(rnames.begin(), rnames.end());
    // A name on one side only: reduce may drop names (it reduces them) but not invent them;
    // rearrange must keep every name, and einops lists all the odd ones out at once.
    std::set<std::string> only_right, one_side;
    for (const auto& n : rset)
      if (!lset.count(n)) only_right.insert(n);
    one_side = only_right;
    for (const auto& n : lset)
      if (!rset.count(n)) one_side.insert(n);
    if (is_reduce && !only_right.empty())
      throw PatternError{"Unexpected identifiers on the right side of reduce " + reduction + ": " +
                         set_str(only_right)};
    if (!is_reduce && !one_side.empty())
      throw PatternError{"Identifiers only on one side of expression (should be on both): " +
                         set_str(one_side)};
    for (const auto& [name, size] : sizes)
      if (!lset.count(name)) throw PatternError{"Axis " + name + " is not used in transform"};

    // Sizes of the elementary axes: each left group's size, divided among its axes.
    std::map<std::string, int64_t> axis;
    Shape elementary;
    for (size_t g = 0; g < left.size(); ++g) {
      const int64_t length = x.size(static_cast<int64_t>(g));
      int64_t known = 1;
      std::optional<std::string> unknown;
      for (const auto& n : left[g]) {
        auto it = sizes.find(n);
        if (it != sizes.end()) known *= it->second;
        else if (unknown)
          throw PatternError{"Could not infer sizes for {'" + *unknown + "', '" + n + "'}"};
        else unknown = n;
      }
      if (unknown) {
        if (known == 0 || length % known != 0)
          throw PatternError{"Shape mismatch, can't divide axis of length " +
                             std::to_string(length) + " in chunks of " + std::to_string(known)};
        axis[*unknown] = length / known;
      } else if (known != length) {
        throw PatternError{"Shape mismatch, " + std::to_string(length) +
                           " != " + std::to_string(known)};
      }
      for (const auto& n : left[g]) {
        if (!axis.count(n)) axis[n] = sizes.at(n);
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
      else if (reduction == "any" || reduction == "all")  // is any (all) element nonzero
        t = extreme(ne(t, scalar_tensor(0, t.dtype())), reduce_dims,
                    reduction == "any" ? "max" : "min");
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
    throw RuntimeError(" Error while processing " +
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

Tensor einsum(const std::vector<Tensor>& operands, const std::string& pattern) {
  try {
    const size_t arrow = pattern.find("->");
    if (arrow == std::string::npos) throw PatternError{"Pattern must contain '->'"};
    std::vector<Groups> inputs;
    std::string lhs = pattern.substr(0, arrow);
    for (size_t start = 0;;) {
      const size_t comma = lhs.find(',', start);
      inputs.push_back(parse_side(lhs.substr(start, comma - start)));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    Groups output = parse_side(pattern.substr(arrow + 2));
    if (inputs.size() != operands.size())
      throw PatternError{"The pattern names " + std::to_string(inputs.size()) + " operands, but " +
                         std::to_string(operands.size()) + " were given"};
    // Each operand's axis names, its ellipsis expanded so that ellipses align at the right.
    int64_t ellipsis_dims = 0;
    std::vector<int64_t> own(operands.size(), 0);
    for (size_t k = 0; k < operands.size(); ++k) {
      for (const auto& g : inputs[k])
        if (g.size() != 1 || merges_ellipsis(g))
          throw PatternError{"einsum does not take parentheses or '1' in its pattern"};
      check_unique(inputs[k]);
      const int64_t named =
          static_cast<int64_t>(inputs[k].size()) - (has_ellipsis(inputs[k]) ? 1 : 0);
      if (has_ellipsis(inputs[k]) ? operands[k].dim() < named : operands[k].dim() != named)
        throw PatternError{"operand " + std::to_string(k) + " has " +
                           std::to_string(operands[k].dim()) + " dims, but its pattern names " +
                           std::to_string(named)};
      own[k] = operands[k].dim() - named;
      ellipsis_dims = std::max(ellipsis_dims, own[k]);
    }
    for (const auto& g : output)
      if (g.size() != 1 || merges_ellipsis(g))
        throw PatternError{"einsum does not take parentheses or '1' in its pattern"};
    check_unique(output);
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
      named.push_back({operands[k], axes});
    }
    std::vector<std::string> out_axes = names_of(expand_ellipsis(output, ellipsis_dims));
    for (const auto& n : out_axes) {
      bool found = false;
      for (const auto& x : named) found |= std::count(x.axes.begin(), x.axes.end(), n) > 0;
      if (!found) throw PatternError{"output axis '" + n + "' appears in no input"};
    }
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
  } catch (const PatternError& e) {
    throw RuntimeError("Error while processing einsum pattern \"" + pattern + "\".\n " + e.message);
  }
}

}  // namespace tiny
