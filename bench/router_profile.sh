#!/bin/sh
# router_profile.sh: where bench_router's training loop spends its instructions, inside the
# kernels or outside them (the issue's bar: under 10% outside). Runs the benchmark once under
# callgrind, counting only inside the loop function (the warm-up's 100 steps and the timed
# 10,000; the data set, Google Benchmark's harness and start-up are not counted), then splits
# each function's own instructions (self cost) between the two sides and prints the split, the
# outside part by group, and the top functions.
#
# Inside the kernels: a kernel's whole call, everything it runs. The kernels are the CPU
# backend's work functions, every function whose name is in tiny::detail::cpu (the elementwise
# loops, copy, where, sum, max_rows, matmul, optimizer_update, zero_bytes, and the templates
# instantiated for them, such as for_each_row over a kernel's row), except
# cpu::allocate/release/synchronize; what they call counts with them: the strided-loop helpers
# they share with the CUDA backend (coalesce, broadcast_strides), Tensor's accessors (data_ptr,
# stride), libm, OpenBLAS, memcpy. A function called from both sides is split in proportion to
# the instructions each side's calls of it cost: a memcpy called from cpu::copy is kernel work,
# one called from a std::vector copy is not.
# Outside: everything else: the dispatcher, autograd, the caching allocator, shapes and strides,
# the optimizer's bookkeeping, reference counts, the CPUGraph's replay loop; and malloc/free and
# operator new/delete, even when a kernel calls them.
# (Until the CPUGraph, only the cpu namespace's own instructions counted as inside, and the
# helpers as outside; by that stricter count the eager loop is 79% outside and the replayed one
# 28%, by this one 74% and 8.7%, on an Intel Xeon with AVX-512.)
#
# Callgrind counts instructions, not time: the kernels' instructions (divisions, exp, log) take
# more cycles each than the dispatcher's, so the time share inside the kernels is somewhat
# larger than this; the instruction split is the reproducible one (perf stat/record swing ~40%
# on this shared machine).
#
# The second argument picks the loop: `eager` (the default) runs every op through the
# dispatcher and the tape; `replayed` captures the step once in a CPUGraph (tiny/capture.h)
# and replays it, which is the loop that meets the bar.
#   bench/router_profile.sh [build-dir] [eager|replayed]   (default: build eager; needs
#                                                           valgrind and python3)
set -eu
build=${1:-build}
case ${2:-eager} in
  eager) loop=train_router benchmark='BM_RouterTraining/' ;;
  replayed) loop=train_router_replayed benchmark='BM_RouterTrainingReplayed/' ;;
  *) echo "router_profile.sh: the loop is 'eager' or 'replayed', not '$2'" >&2; exit 2 ;;
esac
out=$(mktemp /tmp/router_callgrind.XXXXXX)
trap 'rm -f "$out"' EXIT
valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect="$loop(*" \
  "$build/bench/bench_router" --benchmark_filter="$benchmark" >/dev/null 2>&1
python3 - "$out" "$loop" <<'EOF'
import collections, re, sys

LOOP = sys.argv[2]
names = {}
def name(v):
    m = re.match(r"\((\d+)\)(?: (.*))?$", v)
    if not m:
        return v
    if m.group(2) is not None:
        names[m.group(1)] = m.group(2)
    return names[m.group(1)]

self_cost, edges, obj, calls = collections.Counter(), collections.Counter(), {}, collections.Counter()
fn = ob = cob = cfn = None
in_call = False
for line in open(sys.argv[1]):
    line = line.rstrip("\n")
    if not line:
        continue
    if line[0].isdigit() or line[0] in "+-*":
        parts = line.split()
        ir = int(parts[1]) if len(parts) > 1 else 0
        if in_call:
            edges[(fn, cfn)] += ir
            obj.setdefault(cfn, cob)
            in_call = False
        else:
            self_cost[fn] += ir
        continue
    key, _, val = line.partition("=")
    if key == "ob":
        ob = cob = name(val)
    elif key == "fn":
        fn = name(val)
        obj.setdefault(fn, ob)
        cob = ob
    elif key == "cob":
        cob = name(val)
    elif key == "cfn":
        cfn = name(val)
    elif key == "calls":
        calls[cfn] += int(val.split()[0])
        in_call = True

MALLOC = re.compile(r"^(malloc|free|_int_free|_int_malloc|calloc|realloc|cfree|tcache|"
                    r"malloc_consolidate|unlink_chunk|_int_memalign|_mid_memalign|aligned_alloc|"
                    r"posix_memalign|memalign|arena_get2|operator new|operator delete)")
NOT_WORK = re.compile(r"^tiny::detail::cpu::\(anonymous namespace\)::(allocate|release|synchronize)\(")

def head(f):
    """The name with its template arguments, without its parameter list."""
    f = f.replace("(anonymous namespace)", "{anon}")
    depth = 0
    for i, ch in enumerate(f):
        depth += (ch == "<") - (ch == ">")
        if ch == "(" and depth == 0 and not f.startswith("operator()", max(0, i - 8)):
            return f[:i]
    return f

def kind(f):
    if "tiny::detail::cpu::" in head(f) and not NOT_WORK.search(f):
        return "kernel"
    if MALLOC.match(f) or f.startswith(LOOP + "("):
        return "outside"
    return "caller's"

callers = collections.defaultdict(list)
for (g, f), c in edges.items():
    if g != f:
        callers[f].append((g, c))
share = {}
def kernel_share(f, depth=0):
    k = kind(f)
    if k != "caller's":
        return 1.0 if k == "kernel" else 0.0
    if f in share or depth > 30:
        return share.get(f, 0.0)
    share[f] = 0.0
    total = sum(c for _, c in callers[f])
    share[f] = sum(c * kernel_share(g, depth + 1) for g, c in callers[f]) / total if total else 0.0
    return share[f]

GROUPS = [
    ("malloc/free, new/delete", MALLOC),
    ("caching allocator, Storage", re.compile(r"allocat|Storage|pthread_mutex|deallocate")),
    ("autograd: recording, backward", re.compile(r"backward|record|Node|grad|autograd|Edge|std::function")),
    ("optimizer bookkeeping", re.compile(r"tiny::optim|_Rb_tree|std::map|basic_string|memcmp")),
    ("shapes, strides, views", re.compile(r"shape|stride|view|permute|select|coalesce|broadcast|wrap_dim|expand|reshape|squeeze|transpose|Tensor::T|contiguous")),
    ("dispatcher, op table, dtypes", re.compile(r"tiny::detail::run|dispatch|op_table|promot|autocast|Call|result_type|Scalar")),
]
total = sum(self_cost.values())
kernel = sum(c * kernel_share(f) for f, c in self_cost.items())
groups = collections.Counter()
for f, c in self_cost.items():
    rest = c * (1 - kernel_share(f))
    if rest:
        groups[next((g for g, r in GROUPS if r.search(head(f))), "other (Tensor handles, ops' glue)")] += rest
steps = calls.get(next((f for f in calls if f.startswith(LOOP + "(")), ""), 0)
print(f"bench_router under callgrind: {total:,} instructions in {LOOP}"
      + (f" ({steps} calls)" if steps else ""))
print(f"  inside the kernels   {kernel:15,.0f}  {kernel / total:6.1%}")
print(f"  outside the kernels  {total - kernel:15,.0f}  {(total - kernel) / total:6.1%}"
      "   (issue's bar: under 10%)")
for g, c in groups.most_common():
    print(f"    {g:34s} {c / total:6.1%}")
print("top 10 functions by self cost:")
for f, c in self_cost.most_common(10):
    k = kernel_share(f)
    tag = "kernel" if k == 1 else "outside" if k == 0 else f"{k:.0%} kernel"
    print(f"  {c / total:6.2%}  {calls[f]:>10,} calls  [{tag}]  {f[:110]}")
EOF
