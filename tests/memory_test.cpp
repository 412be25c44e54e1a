// memory_test.cpp: memory accounting by category, the timeline, the saved-tensor log and
// activation checkpointing. The expected bytes are counted independently, from the tensors the
// test itself holds (each distinct storage once); PyTorch's own saved tensors for the same
// models are in tests/fixtures/ch07_pytorch.txt (written by ch07_pytorch.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "cpu/cpu.h"
#include "test_util.h"
#include "tiny/tiny.h"

using namespace tiny;
using tiny::testing::throws_with;
using tiny::testing::uniform_int;

namespace {

constexpr int kCats = kMemoryCategories;
int idx(MemoryCategory c) { return static_cast<int>(c); }

// The allocator's counters relative to a starting point (other tests' tensors, the caches).
struct Counts {
  int64_t allocated[kCats] = {};
  int64_t requested[kCats] = {};
};
Counts now_minus(const MemoryStats& base) {
  const MemoryStats s = memory_stats();
  Counts c;
  for (int k = 0; k < kCats; ++k) {
    c.allocated[k] = s.category_allocated[k] - base.category_allocated[k];
    c.requested[k] = s.category_requested[k] - base.category_requested[k];
  }
  return c;
}

// What the accounting should say for `held`: each distinct storage once, in the category the
// test itself assigns (`role`, from how it made the tensor; activations for a temporary that a
// live graph saved), rounded up to 512 bytes as PyTorch's allocator rounds ("requested" is not
// rounded).
Counts expected_for(const std::vector<Tensor>& held,
                    const std::map<const Storage*, MemoryCategory>& role,
                    const std::set<const Storage*>& saved) {
  Counts c;
  std::set<const Storage*> seen;
  for (const Tensor& t : held) {
    const Storage* s = t.storage().get();
    if (!seen.insert(s).second) continue;
    auto it = role.find(s);
    MemoryCategory cat = it == role.end() ? MemoryCategory::temporaries : it->second;
    if (cat == MemoryCategory::temporaries && saved.count(s)) cat = MemoryCategory::activations;
    const int64_t n = static_cast<int64_t>(s->nbytes());
    c.allocated[idx(cat)] += (n + 511) / 512 * 512;
    c.requested[idx(cat)] += n;
  }
  return c;
}

void expect_equal(const Counts& got, const Counts& want, const std::string& where) {
  for (int k = 0; k < kCats; ++k) {
    EXPECT_EQ(got.allocated[k], want.allocated[k])
        << where << ": " << memory_category_name(static_cast<MemoryCategory>(k));
    EXPECT_EQ(got.requested[k], want.requested[k])
        << where << ": " << memory_category_name(static_cast<MemoryCategory>(k));
  }
}

int64_t rounded(int64_t n) { return (n + 511) / 512 * 512; }

}  // namespace

TEST(Memory, CategoriesNameThemselves) {
  EXPECT_STREQ(memory_category_name(MemoryCategory::weights), "weights");
  EXPECT_STREQ(memory_category_name(MemoryCategory::optimizer_state), "optimizer state");
  EXPECT_TRUE(throws_with<ValueError>([] { memory_category_name(static_cast<MemoryCategory>(9)); },
                                      "unknown memory category 9"));
  Tensor t = zeros({4});
  EXPECT_TRUE(throws_with<ValueError>(
      [&] { t.storage()->set_role(MemoryCategory::activations); }, "not a role"));
}

// A new tensor is a temporary; a parameter is a weight; a view adds no bytes; the gradient of a
// leaf and an optimizer's state land in their categories; freeing gives the bytes back.
TEST(Memory, EachRoleIsCountedWhereItBelongs) {
  const MemoryStats base = memory_stats();
  Tensor w = nn::Parameter(randn({30, 50}));  // 6000 bytes: 6144 after rounding
  Tensor x = randn({7, 30});                  // 840 bytes
  Counts c = now_minus(base);
  EXPECT_EQ(c.requested[idx(MemoryCategory::weights)], 6000);
  EXPECT_EQ(c.allocated[idx(MemoryCategory::weights)], 6144);
  EXPECT_EQ(c.requested[idx(MemoryCategory::temporaries)], 840);
  Tensor view = w.T().slice(0, 1, 20);  // a view: no new storage
  Tensor reshaped = x.view({30, 7});
  c = now_minus(base);
  EXPECT_EQ(c.requested[idx(MemoryCategory::weights)], 6000);
  EXPECT_EQ(c.requested[idx(MemoryCategory::temporaries)], 840);

  Tensor y = matmul(x, w);  // saves x for w's gradient: x is an activation while the graph lives
  c = now_minus(base);
  EXPECT_EQ(c.requested[idx(MemoryCategory::activations)], 840);
  EXPECT_EQ(c.requested[idx(MemoryCategory::temporaries)], 7 * 50 * 4);
  y.sum().backward();  // the graph is freed: x is a temporary again; w.grad is a gradient
  c = now_minus(base);
  EXPECT_EQ(c.requested[idx(MemoryCategory::activations)], 0);
  EXPECT_EQ(c.requested[idx(MemoryCategory::gradients)], 6000);

  optim::AdamW opt({w}, {});
  opt.step();  // m and v (6000 bytes each) and a 4-byte step counter
  c = now_minus(base);
  EXPECT_EQ(c.requested[idx(MemoryCategory::optimizer_state)], 12004);
  EXPECT_EQ(c.allocated[idx(MemoryCategory::optimizer_state)], 2 * 6144 + 512);
  opt.zero_grad();
  c = now_minus(base);
  EXPECT_EQ(c.requested[idx(MemoryCategory::gradients)], 0);
  // Everything the test holds, counted from the tensors themselves.
  expect_equal(now_minus(base),
               expected_for({w, x, view, reshaped, y, opt.state(w)["exp_avg"],
                             opt.state(w)["exp_avg_sq"], opt.state(w)["step"]},
                            {{w.storage().get(), MemoryCategory::weights},
                             {opt.state(w)["exp_avg"].storage().get(), MemoryCategory::optimizer_state},
                             {opt.state(w)["exp_avg_sq"].storage().get(), MemoryCategory::optimizer_state},
                             {opt.state(w)["step"].storage().get(), MemoryCategory::optimizer_state}},
                            {}),
               "after zero_grad");
}

// Random sequences of ops, views, saved graphs, backward passes, frees and reuse from the
// cache: after every step the counters equal what the test itself holds, category by category.
TEST(Memory, AccountingFollowsRandomSequences) {
  TINY_SEEDED(rng);
  const MemoryStats base = memory_stats();
  std::map<const Storage*, MemoryCategory> role;  // the test's own record of each storage's role
  auto made = [&](Tensor t, MemoryCategory r) {
    role[t.storage().get()] = r;
    return t;
  };
  // A graph out = exp(t * p) keeps t (for p's gradient), p (when t needs a gradient too) and its
  // own result (exp's derivative is its result).
  struct Graph {
    Tensor out;
    std::vector<Tensor> saved;
  };
  std::vector<Tensor> alive;
  std::vector<Graph> graphs;
  auto pick = [&](auto& v) { return static_cast<size_t>(uniform_int(rng, 0, v.size() - 1)); };
  for (int step = 0; step < 400; ++step) {
    const int what = static_cast<int>(uniform_int(rng, 0, 7));
    const Shape shape = {uniform_int(rng, 1, 40), uniform_int(rng, 1, 40)};
    if (what == 0 || alive.empty()) {
      alive.push_back(made(randn(shape), MemoryCategory::temporaries));
    } else if (what == 1) {
      alive.push_back(made(nn::Parameter(randn(shape)), MemoryCategory::weights));
    } else if (what == 2) {  // a view (transpose) or a reshape, which may copy
      const Tensor& t = alive[pick(alive)];
      Tensor v = t.dim() == 2 ? t.T().reshape({-1}) : t.view({-1});
      if (v.storage() != t.storage()) made(v, MemoryCategory::temporaries);
      alive.push_back(v);
    } else if (what == 3) {
      const Tensor t = alive[pick(alive)];
      Tensor p = made(nn::Parameter(randn(t.shape())), MemoryCategory::weights);
      alive.push_back(p);
      Graph g{made(exp(mul(t, p)), MemoryCategory::temporaries), {t}};
      if (t.requires_grad()) g.saved.push_back(p);
      g.saved.push_back(g.out);
      graphs.push_back(std::move(g));
    } else if (what == 4 && !graphs.empty()) {  // backward frees what the graph saved
      const size_t i = pick(graphs);
      graphs[i].out.sum().backward();
      graphs.erase(graphs.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (what == 5 && !graphs.empty()) {  // a graph dropped unused
      graphs.erase(graphs.begin() + static_cast<std::ptrdiff_t>(pick(graphs)));
    } else if (what == 6) {
      alive.erase(alive.begin() + static_cast<std::ptrdiff_t>(pick(alive)));
    } else {
      for (Tensor& t : alive)
        if (t.is_leaf() && t.requires_grad() && uniform_int(rng, 0, 1)) t.set_grad(Tensor());
    }
    std::vector<Tensor> held = alive;
    std::set<const Storage*> saved;
    for (const Graph& g : graphs) {
      held.push_back(g.out);
      for (const Tensor& t : g.saved) {
        held.push_back(t);
        saved.insert(t.storage().get());
      }
    }
    // A view keeps its base alive, as PyTorch's `_base` does, and with it the base's .grad.
    for (size_t k = 0, n = held.size(); k < n; ++k)
      if (held[k].is_view()) held.push_back(held[k].autograd_meta()->view_base);
    // Every .grad of a tensor the test holds (a graph holds its inputs' handles too) is a
    // gradient.
    for (size_t k = 0, n = held.size(); k < n; ++k)
      if (const Tensor g = held[k].grad(); g.defined()) {
        role[g.storage().get()] = MemoryCategory::gradients;
        held.push_back(g);
      }
    const Counts want = expected_for(held, role, saved);
    const Counts got = now_minus(base);
    for (int k = 0; k < kCats; ++k) {
      ASSERT_EQ(got.requested[k], want.requested[k])
          << "step " << step << ", " << memory_category_name(static_cast<MemoryCategory>(k));
      ASSERT_EQ(got.allocated[k], want.allocated[k])
          << "step " << step << ", " << memory_category_name(static_cast<MemoryCategory>(k));
    }
  }
}

// The peak is the peak: the largest total reached, also between the points a test looks at,
// and reset_peak_memory_stats() starts a new one at the current total, per category as well.
TEST(Memory, PeakIsTheHighestPointAndResets) {
  TINY_SEEDED(rng);
  const int64_t start = memory_allocated();
  reset_peak_memory_stats();
  std::vector<Tensor> held;
  int64_t total = start, peak = start;
  for (int i = 0; i < 200; ++i) {
    if (held.empty() || uniform_int(rng, 0, 2) != 0) {
      const int64_t n = uniform_int(rng, 1, 5000);
      held.push_back(empty({n}, kBool));
      total += rounded(n);
    } else {
      const size_t k = static_cast<size_t>(uniform_int(rng, 0, held.size() - 1));
      total -= rounded(held[k].nbytes());
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
    }
    peak = std::max(peak, total);
    ASSERT_EQ(memory_allocated(), total);
    ASSERT_EQ(max_memory_allocated(), peak);
  }
  const int64_t temporaries_peak = max_memory_allocated(MemoryCategory::temporaries);
  EXPECT_GE(temporaries_peak, peak - start);
  held.clear();
  reset_peak_memory_stats();
  EXPECT_EQ(max_memory_allocated(), memory_allocated());
  EXPECT_EQ(max_memory_allocated(MemoryCategory::temporaries),
            memory_allocated(MemoryCategory::temporaries));
}

TEST(Memory, CachedBlocksAreReusedAndCountedOnce) {
  empty_cache();
  const MemoryStats before = memory_stats();
  { Tensor a = empty({100000}); }
  { Tensor b = empty({100000}); }  // the same size class: from the cache
  const MemoryStats after = memory_stats();
  EXPECT_EQ(after.cache_hits - before.cache_hits, 1);
  EXPECT_EQ(after.allocated, before.allocated);
  EXPECT_EQ(after.category_allocated[idx(MemoryCategory::temporaries)],
            before.category_allocated[idx(MemoryCategory::temporaries)]);
}

// Under AddressSanitizer the cache must not hide a read of a freed tensor's memory or one past
// a tensor's end within its rounded-up block: each is reported as malloc'd memory would be.
#if defined(__SANITIZE_ADDRESS__)
#define TINY_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TINY_TEST_ASAN 1
#endif
#endif

// Reads one float through a volatile pointer, so the compiler cannot drop or move the read.
float read_float(const float* p) { return *static_cast<const volatile float*>(p); }

TEST(Memory, AddressSanitizerSeesThroughTheCache) {
#ifndef TINY_TEST_ASAN
  GTEST_SKIP() << "meaningful only in a build with AddressSanitizer (make sanitize)";
#else
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        const float* p = nullptr;
        {
          Tensor t = ones({10});
          p = t.data<float>();
        }  // the block goes back to the cache
        read_float(p);
      },
      "AddressSanitizer: use-after-poison");
  // 10 floats are 40 bytes of a 64-byte block: the 24 after them are not the tensor's.
  EXPECT_DEATH(
      {
        Tensor t = ones({10});
        read_float(t.data<float>() + 10);
      },
      "AddressSanitizer: use-after-poison");
  // A block handed out again is the new tensor's, all of it, and only that.
  const float* first = nullptr;
  { Tensor a = ones({10}); first = a.data<float>(); }
  Tensor b = full({16}, 2.0);
  EXPECT_EQ(b.data<float>(), first);  // the same cached block
  EXPECT_EQ(read_float(b.data<float>() + 15), 2.0f);
#endif
}

// The flags the kernel keeps for the mapping that holds `address` (the VmFlags line of
// /proc/self/smaps: "hg" marks memory offered for transparent huge pages), or "" if none does.
std::string mapping_flags(const void* address) {
  const auto a = reinterpret_cast<uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(':') > line.find(' ')) {
      inside = lo <= a && a < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line.substr(8) + " ";
    }
  }
  return "";
}

// TINY_HUGE_PAGES=1 (set_huge_pages here): blocks of 2 MiB or more start on a 2 MiB boundary and
// are offered to the kernel for transparent huge pages; whether it grants them is the machine's
// business, so only the request is checked. Smaller blocks, and every block without the switch,
// are left alone.
TEST(Memory, LargeBlocksAskForHugePagesWhenSwitchedOn) {
  struct Restore {
    bool saved = detail::cpu::set_huge_pages(false);
    ~Restore() {
      detail::cpu::set_huge_pages(saved);
      empty_cache();
    }
  } restore;
  const bool kernel_has_thp = std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled").good();
  empty_cache();  // every block below comes fresh from the system
  const int64_t floats = (int64_t(3) << 20) / 4 + 5;  // 3 MiB and a little: an odd size class
  {
    Tensor plain = empty({floats});
    EXPECT_EQ(mapping_flags(plain.data_ptr()).find(" hg "), std::string::npos);
  }
  empty_cache();
  detail::cpu::set_huge_pages(true);
  Tensor big = empty({floats});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data_ptr()) % (uintptr_t(2) << 20), 0u);
  if (kernel_has_thp) {
    EXPECT_NE(mapping_flags(big.data_ptr()).find(" hg "), std::string::npos);
  }
  Tensor small = empty({1000});  // 4000 bytes: an ordinary block
  EXPECT_EQ(mapping_flags(small.data_ptr()).find(" hg "), std::string::npos);
  // The memory is ordinary memory in every other way.
  big.fill_(1.5);
  EXPECT_EQ(big.sum().item<double>(), 1.5 * double(floats));
}

// The fixture's step_memory model (1024 -> 4096 -> ReLU -> 1024, AdamW, batch 64): the four
// lines' numbers from the tensors and from the allocator, and the five tensors PyTorch 2.x
// saves, in its order (a matmul with a bias keeps its input before the weight).
TEST(Memory, StepMemoryModelMatchesPyTorch) {
  std::ifstream in(std::string(TINY_SOURCE_DIR) + "/tests/fixtures/ch07_pytorch.txt");
  ASSERT_TRUE(in) << "tests/fixtures/ch07_pytorch.txt is missing";
  std::vector<std::string> torch_saved;
  int64_t torch_unique = 0, torch_params = 0, torch_count = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string key;
    f >> key;
    if (key == "saved") {
      std::string i, shape, dtype, bytes, param, same;
      f >> i >> shape >> dtype >> bytes >> param >> same;
      torch_saved.push_back(shape + " " + bytes + " " + param + " " + same);
    } else if (key == "saved_unique_nonparam_bytes") f >> torch_unique;
    else if (key == "params") f >> torch_params;
    else if (key == "saved_total_count") f >> torch_count;
  }
  ASSERT_EQ(torch_params, 8393728);

  manual_seed(0);
  const MemoryStats base = memory_stats();
  nn::Sequential model({std::make_shared<nn::Linear>(1024, 4096), std::make_shared<nn::ReLU>(),
                        std::make_shared<nn::Linear>(4096, 1024)});
  optim::AdamW opt(model.parameters());  // lr 1e-3, as the document
  const Tensor x = randn({64, 1024});
  Tensor loss;
  std::vector<std::string> ours;
  int64_t ours_unique = 0;
  {
    SavedTensorLog log;
    loss = model(x).pow(2).mean();
    for (const auto& r : log.records()) {
      std::ostringstream line;  // as the fixture writes it: shape=[64,1024] bytes=262144 param=0
      line << "shape=[";
      for (size_t d = 0; d < r.shape.size(); ++d) line << (d ? "," : "") << r.shape[d];
      line << "] bytes=" << r.nbytes << " param=" << (r.category == MemoryCategory::weights)
           << " same_storage_as=" << r.shares_storage_with;
      ours.push_back(line.str());
    }
    ours_unique = log.bytes();
    EXPECT_EQ(static_cast<int64_t>(log.records().size()), torch_count);
    // While the graph lives, exactly those bytes are activations.
    EXPECT_EQ(now_minus(base).requested[idx(MemoryCategory::activations)], ours_unique);
  }
  EXPECT_EQ(ours, torch_saved);
  EXPECT_EQ(ours_unique, torch_unique);
  loss.backward();
  opt.step();
  const Counts c = now_minus(base);
  const int64_t n = torch_params;
  EXPECT_EQ(c.requested[idx(MemoryCategory::weights)], 4 * n);
  EXPECT_EQ(c.requested[idx(MemoryCategory::gradients)], 4 * n);
  EXPECT_EQ(c.requested[idx(MemoryCategory::optimizer_state)], 8 * n + 4 * 4);  // + 4 step counters
  EXPECT_EQ(c.requested[idx(MemoryCategory::activations)], 0);
}

// The fixture's lines that begin with `key`, each without it (ch07_pytorch.txt, PyTorch 2.15).
static std::vector<std::string> ch07_fixture(const std::string& key) {
  std::ifstream in(std::string(TINY_SOURCE_DIR) + "/tests/fixtures/ch07_pytorch.txt");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key + " ", 0) == 0) out.push_back(line.substr(key.size() + 1));
  return out;
}

// A saved-tensor record as the fixture writes it, without the index and dtype.
static std::string saved_line(const SavedTensorRecord& r) {
  std::ostringstream line;
  line << "shape=[";
  for (size_t d = 0; d < r.shape.size(); ++d) line << (d ? "," : "") << r.shape[d];
  line << "] bytes=" << r.nbytes << " param=" << (r.category == MemoryCategory::weights)
       << " same_storage_as=" << r.shares_storage_with;
  return line.str();
}

// The fixture's deep linear model without biases (D = 4, two square layers and a head, batch
// 2): PyTorch 2.x's matmul without a bias keeps the weight before the input, and the first
// layer, whose input needs no gradient, keeps only that input.
TEST(Memory, DeepLinearModelSavesWhatPyTorchSaves) {
  std::vector<std::string> torch_saved;
  for (const std::string& rest : ch07_fixture("cruncher_saved")) {
    std::istringstream f(rest);
    std::string i, shape, dtype, bytes, param, same;
    f >> i >> shape >> dtype >> bytes >> param >> same;
    torch_saved.push_back(shape + " " + bytes + " " + param + " " + same);
  }
  ASSERT_EQ(torch_saved.size(), 5u);
  nn::Linear l0(4, 4, false), l1(4, 4, false), head(4, 1, false);
  std::vector<std::string> ours;
  {
    SavedTensorLog log;
    Tensor y = head(l1(l0(randn({2, 4})))).squeeze(-1).mean();
    for (const SavedTensorRecord& r : log.records()) ours.push_back(saved_line(r));
  }
  EXPECT_EQ(ours, torch_saved);
}

// The fixture's sections on non-reentrant checkpointing. A block Linear(8, 8) -> ReLU ->
// dropout(0.5) keeps four tensors (384 bytes besides the weight); checkpointed, an outer hook
// sees one, the block's input (128 bytes), as PyTorch 2.x saves it. And deeper MLPs of
// Linear(256, 256) + ReLU blocks, every block checkpointed: the outer hook sees each block's
// input and pow's, as many bytes as without checkpointing, where the blocks keep their insides
// out of its sight.
TEST(Memory, OuterHookSeesACheckpointsInputsAsInPyTorch2) {
  auto value = [](const std::string& key) {
    const auto lines = ch07_fixture(key);
    return lines.empty() ? int64_t{-1} : std::stoll(lines.front());
  };
  manual_seed(0);
  nn::Linear lin(8, 8);
  const Tensor x0 = randn({4, 8});
  auto block = [&lin](const Tensor& h) {
    Tensor y = relu(lin(h));
    // dropout(p = 0.5) as PyTorch's CPU kernel computes it: the input times a scaled mask.
    return y * ((rand(y.shape()) > 0.5).to(y.dtype()) * 2.0);
  };
  for (const bool ckpt : {false, true}) {
    SavedTensorLog log;
    Tensor x = x0.clone().requires_grad_(true);
    Tensor out = ckpt ? checkpoint(block, x) : block(x);
    const std::string how = ckpt ? "ckpt" : "plain";
    EXPECT_EQ(static_cast<int64_t>(log.records().size()), value("ckpt saved_count_" + how));
    EXPECT_EQ(log.bytes(), value("ckpt saved_bytes_" + how));
  }

  const auto mlp_lines = ch07_fixture("mlp");
  ASSERT_EQ(mlp_lines.size(), 9u);
  for (const int depth : {2, 4, 8}) {
    std::vector<std::shared_ptr<nn::Module>> blocks;
    for (int i = 0; i < depth; ++i)
      blocks.push_back(std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
          std::make_shared<nn::Linear>(256, 256), std::make_shared<nn::ReLU>()}));
    const Tensor x = randn({32, 256});
    int64_t bytes[2] = {0, 0};
    for (const bool ckpt : {false, true}) {
      SavedTensorLog log;
      Tensor h = x;
      for (const auto& b : blocks) {
        auto run = [&b](const Tensor& in) { return (*b)(in); };
        h = ckpt ? checkpoint(run, h) : run(h);
      }
      Tensor loss = h.pow(2).mean();
      bytes[ckpt] = log.bytes();
    }
    std::ostringstream line;
    line << "L=" << depth << " saved_bytes_plain=" << bytes[0] << " saved_bytes_ckpt=" << bytes[1];
    EXPECT_NE(std::find(mlp_lines.begin(), mlp_lines.end(), line.str()), mlp_lines.end())
        << line.str();
  }
}

// Phases arrive in the order of a step; every sample's categories add up to its total; the
// peak seen is the allocator's peak; the CSV has one row per sample.
TEST(Memory, TimelineFollowsAStep) {
  manual_seed(1);
  nn::Sequential model({std::make_shared<nn::Linear>(16, 32), std::make_shared<nn::ReLU>(),
                        std::make_shared<nn::Linear>(32, 4)});
  optim::AdamW opt(model.parameters(), {});
  const Tensor x = randn({8, 16});
  reset_peak_memory_stats();
  MemoryTimeline timeline;
  Tensor loss = model(x).pow(2).mean();
  loss.backward();
  opt.step();
  opt.zero_grad();
  timeline.mark("end");
  const auto& s = timeline.samples();
  ASSERT_GT(s.size(), 10u);
  EXPECT_EQ(s.front().op, "start");
  EXPECT_EQ(s.back().op, "end");
  std::vector<std::string> phases;
  for (const MemorySample& m : s) {
    if (phases.empty() || phases.back() != m.phase) phases.push_back(m.phase);
    int64_t sum = 0;
    for (int64_t b : m.bytes) sum += b;
    EXPECT_EQ(sum, m.allocated) << m.index;
    EXPECT_GE(m.peak, m.allocated) << m.index;
  }
  const std::vector<std::string> order = {"forward", "backward", "optimizer step", "zero_grad",
                                          "forward"};
  EXPECT_EQ(phases, order);
  EXPECT_EQ(timeline.peak(), max_memory_allocated());
  // The forward samples are named as PyTorch names the ops; backward ones as its nodes.
  std::set<std::string> ops;
  for (const MemorySample& m : s) ops.insert(m.op);
  for (const char* op : {"addmm", "relu", "pow", "mean", "AddmmBackward0", "AdamW", "zero_grad"})
    EXPECT_TRUE(ops.count(op)) << op;
  // Activations rise through the forward pass and are all gone after backward.
  const MemorySample* last_forward = nullptr;
  for (const MemorySample& m : s)
    if (m.phase == "forward" && m.op == "mean") last_forward = &m;
  ASSERT_NE(last_forward, nullptr);
  EXPECT_GT(last_forward->bytes[idx(MemoryCategory::activations)], 0);
  EXPECT_EQ(s.back().bytes[idx(MemoryCategory::activations)], 0);

  tiny::testing::TempDir dir;
  timeline.write_csv(dir.path().string(), "timeline.csv");
  std::ifstream csv(dir.path() / "timeline.csv");
  std::string header;
  std::getline(csv, header);
  EXPECT_EQ(header,
            "index,phase,op,weights,gradients,optimizer_state,activations,temporaries,allocated,"
            "peak");
  size_t rows = 0;
  for (std::string line; std::getline(csv, line);) ++rows;
  EXPECT_EQ(rows, s.size());
}

// A block with randomness (a dropout-like mask drawn from the default generator) run plainly
// and checkpointed from the same seed: the same output, the same gradients, bit for bit, and
// the random stream where it would have been.
TEST(Memory, CheckpointGivesTheSameGradientsBitwise) {
  TINY_SEEDED(rng);
  const uint64_t seed = rng();
  auto block = [](const nn::Linear& lin) {
    return [&lin](const Tensor& h) {
      Tensor y = relu(const_cast<nn::Linear&>(lin).forward(h));
      const Tensor keep = (rand(y.shape()) > 0.5).to(y.dtype());
      return y * keep * 2.0;
    };
  };
  struct Run {
    Tensor out, gx, gw, gb;
    double next;
  };
  auto run = [&](bool ckpt) {
    manual_seed(seed);
    nn::Linear lin(24, 24);
    Tensor x = randn({6, 24}).requires_grad_(true);
    Tensor h = x;
    for (int layer = 0; layer < 3; ++layer) h = ckpt ? checkpoint(block(lin), h) : block(lin)(h);
    Tensor out = h;
    mul(out, arange(144.0).view({6, 24})).sum().backward();
    Run r{out.detach(), x.grad(), lin.weight.grad(), lin.bias.grad(), 0};
    r.next = rand({1}).item<float>();
    return r;
  };
  const Run plain = run(false), ckpt = run(true);
  EXPECT_TRUE(equal(plain.out, ckpt.out));
  EXPECT_TRUE(equal(plain.gx, ckpt.gx));
  EXPECT_TRUE(equal(plain.gw, ckpt.gw));
  EXPECT_TRUE(equal(plain.gb, ckpt.gb));
  EXPECT_EQ(plain.next, ckpt.next);
}

// A checkpointed region keeps only its inputs while the graph lives; during backward its saved
// tensors come back for a moment and leave again.
TEST(Memory, CheckpointKeepsOnlyTheInputs) {
  manual_seed(3);
  std::vector<std::shared_ptr<nn::Linear>> layers;
  for (int i = 0; i < 4; ++i) layers.push_back(std::make_shared<nn::Linear>(64, 64));
  auto region = [&](const Tensor& h) {
    Tensor y = h;
    for (auto& l : layers) y = relu(l->forward(y));
    return y;
  };
  const Tensor x = randn({32, 64});
  const MemoryStats base = memory_stats();
  Tensor plain = region(x);
  const int64_t plain_saved = now_minus(base).requested[idx(MemoryCategory::activations)];
  EXPECT_EQ(plain_saved, 32 * 64 * 4 * 5);  // x and four ReLU results
  plain = Tensor();
  const MemoryStats base2 = memory_stats();
  Tensor ck = checkpoint(region, x);
  EXPECT_EQ(now_minus(base2).requested[idx(MemoryCategory::activations)], 32 * 64 * 4);  // x
  {
    // An outer hook sees the region's input and nothing of its insides (as PyTorch 2.x).
    SavedTensorLog outer;
    Tensor again = checkpoint(region, x);
    ASSERT_EQ(outer.records().size(), 1u);
    EXPECT_EQ(outer.records()[0].shape, x.shape());
    EXPECT_EQ(outer.bytes(), 32 * 64 * 4);
  }
  {
    // The region runs again inside backward, in its own phase, with its ops named as forward.
    MemoryTimeline timeline;
    ck.sum().backward();
    std::vector<std::string> phases;
    for (const MemorySample& m : timeline.samples())
      if (phases.empty() || phases.back() != m.phase) phases.push_back(m.phase);
    EXPECT_EQ(phases, (std::vector<std::string>{"forward", "backward", "recompute", "backward"}));
    bool relu_recomputed = false;
    for (const MemorySample& m : timeline.samples())
      relu_recomputed |= m.phase == "recompute" && m.op == "relu";
    EXPECT_TRUE(relu_recomputed);
  }
  EXPECT_EQ(now_minus(base2).requested[idx(MemoryCategory::activations)], 0);
  for (auto& l : layers) EXPECT_TRUE(l->weight.grad().defined());
}

// Under autocast the region runs in bfloat16; backward (outside the autocast scope, as training
// loops run it) must recompute it in bfloat16 too, or the recomputed tensors would be float32
// and the gradients different.
TEST(Memory, CheckpointRecomputesUnderTheFirstRunsAutocast) {
  TINY_SEEDED(rng);
  const uint64_t seed = rng();
  auto run = [&](bool ckpt) {
    manual_seed(seed);
    nn::Linear a(32, 32), b(32, 32);
    auto region = [&](const Tensor& h) { return relu(b.forward(relu(a.forward(h)))); };
    const Tensor x = randn({8, 32});
    Tensor loss;
    {
      AutocastGuard autocast(Device::Type::CPU, kBFloat16);
      // The matmuls run in bfloat16 and save bfloat16 casts; a recomputation in float32 would
      // save float32 tensors instead, and checkpoint would refuse them.
      Tensor y = ckpt ? checkpoint(region, x) : region(x);
      loss = y.to(kFloat32).pow(2).mean();
    }
    loss.backward();
    return std::vector<Tensor>{a.weight.grad(), a.bias.grad(), b.weight.grad(), b.bias.grad()};
  };
  const auto plain = run(false), ckpt = run(true);
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(ckpt[i].dtype(), kFloat32);  // the gradients land in the weights' float32
    EXPECT_TRUE(equal(plain[i], ckpt[i])) << i;
  }
}

TEST(Memory, CheckpointRefusesARegionThatChanges) {
  manual_seed(4);
  nn::Linear lin(8, 8);
  int calls = 0;
  auto region = [&](const Tensor& h) {
    // Saves two tensors the first time (addmm its operands) and three the second.
    Tensor y = lin.forward(h);
    if (calls++ > 0) y = y.exp();
    return y;
  };
  Tensor x = randn({2, 8}).requires_grad_(true);
  Tensor out = checkpoint(region, x);
  EXPECT_TRUE(throws_with<CheckpointError>(
      [&] { out.sum().backward(); },
      "A different number of tensors was saved during the original forward and "
      "recomputation.\nNumber of tensors saved during forward: 2\nNumber of tensors saved during "
      "recomputation: 3."));
  // The same number of tensors, one of another dtype: PyTorch 2.x's text names each position.
  int runs = 0;
  Tensor z =
      checkpoint([&](const Tensor& h) { return runs++ > 0 ? h.to(kFloat64).exp() : h.exp(); }, x);
  EXPECT_TRUE(throws_with<CheckpointError>(
      [&] { z.sum().backward(); },
      "torch.utils.checkpoint: Recomputed values for the following tensors have different "
      "metadata than during the forward pass.\ntensor at position 0:\nsaved metadata: "
      "{'shape': torch.Size([2, 8]), 'dtype': torch.float32, 'device': device(type='cpu')}\n"
      "recomputed metadata: {'shape': torch.Size([2, 8]), 'dtype': torch.float64, 'device': "
      "device(type='cpu')}\n."));
  EXPECT_TRUE(throws_with<ValueError>(
      [] { checkpoint(std::function<Tensor(const Tensor&)>(), Tensor()); }, "empty"));
}

// On a GPU each device keeps its own counters: the same step, on CUDA, puts its weights,
// gradients, optimizer state and activations in the CUDA allocator's categories, to the byte,
// and leaves the CPU's untouched (but for the step counters, which live on the CPU as in
// PyTorch).
TEST(Memory, StepOnTheGpuIsCountedOnTheGpu) {
  if (!cuda::available()) GTEST_SKIP() << "no CUDA device: " << cuda::unavailable_reason();
  const Device gpu = Device::cuda(0);
  auto requested_on = [](Device d, MemoryCategory c) {
    return memory_stats(d).category_requested[idx(c)];
  };
  manual_seed(0);
  nn::Sequential model({std::make_shared<nn::Linear>(64, 256), std::make_shared<nn::ReLU>(),
                        std::make_shared<nn::Linear>(256, 32)});
  const int64_t n = 64 * 256 + 256 + 256 * 32 + 32;
  const MemoryStats gpu_base = memory_stats(gpu), cpu_base = memory_stats();
  model.to(gpu);
  optim::AdamW opt(model.parameters());
  const Tensor x = randn({16, 64}).to(gpu);
  Tensor loss;
  {
    SavedTensorLog log;
    loss = model(x).pow(2).mean();
    EXPECT_EQ(requested_on(gpu, MemoryCategory::activations) -
                  gpu_base.category_requested[idx(MemoryCategory::activations)],
              log.bytes());
  }
  loss.backward();
  opt.step();
  auto grew = [&](Device d, const MemoryStats& base, MemoryCategory c) {
    return requested_on(d, c) - base.category_requested[idx(c)];
  };
  EXPECT_EQ(grew(gpu, gpu_base, MemoryCategory::weights), 4 * n);
  EXPECT_EQ(grew(gpu, gpu_base, MemoryCategory::gradients), 4 * n);
  EXPECT_EQ(grew(gpu, gpu_base, MemoryCategory::optimizer_state), 8 * n);
  EXPECT_EQ(grew(Device::cpu(), cpu_base, MemoryCategory::optimizer_state), 4 * 4);  // steps
  const MemoryStats s = memory_stats(gpu);
  int64_t sum = 0;
  for (int64_t b : s.category_allocated) sum += b;
  EXPECT_EQ(sum, s.allocated);
  EXPECT_EQ(s.allocated, memory_allocated(gpu));
}

// A leaf keeps the gradient backward made for it when nothing else holds that tensor (as
// PyTorch's AccumulateGrad), so a Linear layer's weight gradient costs its own bytes once, not
// twice; a gradient that is shared, or that the caller passed in, is copied.
TEST(Memory, ALeafKeepsItsGradientWithoutACopyWhenItCan) {
  manual_seed(5);
  nn::Linear layer(1000, 1000, /*bias=*/false);  // 4,000,000 bytes of weight
  const Tensor x = randn({1, 1000});
  Tensor y = layer.forward(x).sum();
  const int64_t before = memory_allocated();
  reset_peak_memory_stats();
  y.backward();
  EXPECT_TRUE(layer.weight.grad().is_contiguous());
  // The weight's gradient (4,000,256 bytes in 512-byte blocks), and a few small temporaries;
  // a copy would need 4,000,256 more.
  EXPECT_LT(max_memory_allocated() - before, 4000256 + 100000);
  EXPECT_EQ(memory_allocated(MemoryCategory::gradients), 4000256);

  // a + b gives both leaves the same gradient tensor: one of them must get a copy.
  Tensor a = randn({3}).requires_grad_(true), b = randn({3}).requires_grad_(true);
  (a + b).sum().backward();
  EXPECT_NE(a.grad().storage(), b.grad().storage());
  // A gradient the caller passes in stays the caller's.
  Tensor w = randn({4}).requires_grad_(true);
  const Tensor seed = ones({4});
  w.backward(seed);
  EXPECT_NE(w.grad().storage(), seed.storage());
}
