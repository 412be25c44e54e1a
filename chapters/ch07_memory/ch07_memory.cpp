// Chapter 07: what a training step keeps in memory.
//
// Every byte a step holds can be predicted on paper: weights, their gradients, the optimizer's
// state, and the activations the autograd graph keeps for backward. This program makes the
// prediction the documents make, then asks the allocator, which counts every live block in one
// of those categories, whether the prediction was right, and where it was not, why. It ends
// with the standard way to spend compute to save activation memory: checkpointing.
//
//   make ch07 && ./ch07_memory
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "tiny/tiny.h"

using namespace tiny;

// The bytes one category's tensors asked for (not rounded up to the allocator's blocks) that
// were added since `before` was taken.
static int64_t grown_since(const MemoryStats& before, MemoryCategory c) {
  const int k = static_cast<int>(c);
  return memory_stats().category_requested[k] - before.category_requested[k];
}

static double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// ---- 1. napkin math: how big a model fits ---------------------------------------------------

static void napkin() {
  std::printf("== How big a model fits: 8 GPUs x 80 GB, AdamW, everything in float32 ==\n");
  //! [napkin]
  const double memory = 8 * 80e9;  // bytes
  std::printf("memory: 8 x 80 GB = %.0f GB\n", memory / 1e9);
  // The beginner's answer counts the weights and nothing else.
  std::printf("weights alone, 4 bytes/param:                        %3.0f billion parameters\n",
              memory / 4 / 1e9);
  // Training also keeps a gradient per weight and Adam's two running averages.
  const double bytes_per_param = 4 + 4 + 8;  // weights, gradients, m and v
  std::printf("weights + gradients + Adam m and v, 16 bytes/param:  %3.0f billion parameters\n",
              memory / bytes_per_param / 1e9);
  //! [napkin]
  // Activations grow with the tokens of a step, not with the model. Take square layers of
  // width D (D*D parameters each) that keep one D-vector per token per layer for backward, the
  // rule of the deep linear model below, and ask how many layers fit.
  //! [napkin_activations]
  const double D = 8192;
  std::printf("with one step's activations (square layers, D = %.0f; 4 bytes x D kept per token "
              "per layer):\n",
              D);
  std::printf("  batch x seq   tokens/step   layers   parameters     activations\n");
  for (const int64_t batch : {0, 8, 64, 512}) {
    const int64_t seq = 2048;
    const double tokens = static_cast<double>(batch * seq);
    const double per_layer = bytes_per_param * D * D + 4 * tokens * D;
    const double layers = std::floor(memory / per_layer);
    const std::string shape = batch ? strprintf("%lld x %lld", static_cast<long long>(batch),
                                                static_cast<long long>(seq))
                                    : "(none)";
    std::printf("  %11s   %11s   %6.0f   %5.1f billion   %4.0f GB\n", shape.c_str(),
                with_commas(static_cast<int64_t>(tokens)).c_str(), layers, layers * D * D / 1e9,
                layers * 4 * tokens * D / 1e9);
  }
  //! [napkin_activations]
  std::printf("\n");
}

// ---- 2. the deep linear model: the formula against the allocator ------------------------------

static void deep_linear() {
  std::printf("== The deep linear model, on paper and measured (B = 2, D = 4, L = 2) ==\n");
  //! [formula]
  const int64_t B = 2, D = 4, L = 2;
  const int64_t params = D * D * L + D, activations = B * D * L;
  const int64_t gradients = params, optimizer_state = params;  // AdaGrad keeps one g2 per weight
  std::printf("on paper, 4 bytes per number:\n");
  std::printf("  parameters        D*D*L + D  %4lld\n", static_cast<long long>(params));
  std::printf("  activations       B*D*L      %4lld\n", static_cast<long long>(activations));
  std::printf("  gradients                    %4lld\n", static_cast<long long>(gradients));
  std::printf("  optimizer state (AdaGrad)    %4lld\n", static_cast<long long>(optimizer_state));
  std::printf("  total memory      4 x %lld    %4lld bytes\n",
              static_cast<long long>(params + activations + gradients + optimizer_state),
              static_cast<long long>(4 * (params + activations + gradients + optimizer_state)));
  std::printf("  FLOPs per step    6*B*params %4lld\n", static_cast<long long>(6 * B * params));
  //! [formula]

  //! [measured]
  manual_seed(0);
  const MemoryStats before = memory_stats();
  auto grown = [&](MemoryCategory c) { return grown_since(before, c); };
  nn::Cruncher model(D, L);
  optim::AdaGrad opt(model.parameters(), {.lr = 0.01});
  const Tensor x = randn({B, D});
  int64_t saved = 0;
  double forward_flops = 0, backward_flops = 0;
  {
    CostCounter forward;
    Tensor loss = model(x).mean();
    forward_flops = forward.flops();
    saved = grown(MemoryCategory::activations);  // what the graph keeps, before backward
    CostCounter backward;
    loss.backward();
    backward_flops = backward.flops();
  }
  opt.step();
  const int64_t total = grown(MemoryCategory::weights) + saved +
                        grown(MemoryCategory::gradients) +
                        grown(MemoryCategory::optimizer_state);
  std::printf("measured, the bytes of the tensors themselves:\n");
  std::printf("  weights           %4lld bytes\n",
              static_cast<long long>(grown(MemoryCategory::weights)));
  std::printf("  activations       %4lld bytes  = %lld numbers: the graph keeps each layer's "
              "input (x, h1, h2)\n",
              static_cast<long long>(saved), static_cast<long long>(saved / 4));
  std::printf("  gradients         %4lld bytes\n",
              static_cast<long long>(grown(MemoryCategory::gradients)));
  std::printf("  optimizer state   %4lld bytes\n",
              static_cast<long long>(grown(MemoryCategory::optimizer_state)));
  std::printf("  total             %4lld bytes  (the formula: %lld)\n",
              static_cast<long long>(total),
              static_cast<long long>(4 * (params + activations + gradients + optimizer_state)));
  std::printf("  FLOPs             %4.0f forward + %.0f backward = %.0f  (the formula: %lld)\n",
              forward_flops, backward_flops, forward_flops + backward_flops,
              static_cast<long long>(6 * B * params));
  // 6*B*params counts two backward products per layer; the first layer needs only one, since
  // nobody asked for the gradient of x.
  std::printf("    backward skips x's gradient (2*B*D*D = %lld FLOPs); the mean and its gradient "
              "add %.0f\n",
              static_cast<long long>(2 * B * D * D),
              forward_flops + backward_flops - double(6 * B * params - 2 * B * D * D));
  const int64_t held = memory_allocated() - before.allocated;
  std::printf("the allocator holds %lld bytes after the step: %lld blocks (weights, gradients, "
              "state and x), each rounded up to 512 as in PyTorch\n",
              static_cast<long long>(held), static_cast<long long>(held / 512));
  //! [measured]
  std::printf("\n");
}

// ---- 3. step_memory.py: bytes per parameter --------------------------------------------------

// The document's model: 1024 -> 4096 -> ReLU -> 1024, AdamW, a batch of 64, in float32.
static std::shared_ptr<nn::Sequential> step_memory_model() {
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(1024, 4096), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(4096, 1024)});
}

static int64_t size_of(const std::vector<Tensor>& ts) {
  int64_t n = 0;
  for (const Tensor& t : ts) n += t.numel() * static_cast<int64_t>(t.element_size());
  return n;
}

static void step_memory() {
  std::printf("== What a step keeps, per parameter (step_memory.py, float32) ==\n");
  //! [step_memory]
  manual_seed(0);
  const MemoryStats before = memory_stats();
  auto model = step_memory_model();
  optim::AdamW opt(model->parameters(), {.lr = 1e-3});
  const Tensor x = randn({64, 1024});
  Tensor loss = (*model)(x).pow(2).mean();
  loss.backward();
  opt.step();

  // Counted from the tensors, as the document counts them.
  const std::vector<Tensor> weights = model->parameters();
  std::vector<Tensor> grads, state;
  int64_t n = 0;
  for (const Tensor& p : weights) {
    n += p.numel();
    grads.push_back(p.grad());
    for (const auto& [key, t] : opt.state(p))
      if (t.dim() > 0) state.push_back(t);  // m and v; the 0-dim step counters are left out
  }
  const std::vector<std::pair<const char*, std::vector<Tensor>>> parts = {
      {"weights", weights}, {"gradients", grads}, {"Adam m and v", state}};
  int64_t total = 0;
  for (const auto& [name, ts] : parts) {
    std::printf("%-13s %4.1f bytes/param  (%s)\n", name, double(size_of(ts)) / double(n),
                dtype_name(ts[0].dtype()));
    total += size_of(ts);
  }
  std::printf("%-13s %4.1f bytes/param for %s parameters\n", "total", double(total) / double(n),
              with_commas(n).c_str());
  //! [step_memory]

  //! [step_memory_allocator]
  // The allocator's counters, by category: the same bytes, found without looking at a tensor.
  auto grown = [&](MemoryCategory c) { return grown_since(before, c); };
  std::printf("the allocator: weights %s bytes, gradients %s, optimizer state %s\n",
              with_commas(grown(MemoryCategory::weights)).c_str(),
              with_commas(grown(MemoryCategory::gradients)).c_str(),
              with_commas(grown(MemoryCategory::optimizer_state)).c_str());
  std::printf("  = %.1f + %.1f + %.1f bytes/param; the %lld extra bytes of state are AdamW's four "
              "step counters\n",
              double(grown(MemoryCategory::weights)) / double(n),
              double(grown(MemoryCategory::gradients)) / double(n),
              double(grown(MemoryCategory::optimizer_state)) / double(n),
              static_cast<long long>(grown(MemoryCategory::optimizer_state) - size_of(state)));
  //! [step_memory_allocator]
  std::printf("\n");
}

// ---- 4. what the graph saves ----------------------------------------------------------------

static void saved_tensors() {
  std::printf("== What the graph saves for backward, op by op ==\n");
  //! [saved]
  manual_seed(0);
  auto model = step_memory_model();
  const Tensor x = randn({64, 1024});
  SavedTensorLog log;  // a saved-tensor hook that notes each tensor and the node saving it
  Tensor loss = (*model)(x).pow(2).mean();
  std::printf("  #  node            shape              bytes  counted as\n");
  const auto& records = log.records();
  for (size_t i = 0; i < records.size(); ++i) {
    const SavedTensorRecord& r = records[i];
    std::string as = "activation";
    if (r.category == MemoryCategory::weights) as = "weights: in memory anyway";
    else if (r.shares_storage_with >= 0)
      as = "the same memory as #" + std::to_string(r.shares_storage_with);
    std::printf("  %lld  %-14s  %-12s  %11s  %s\n", static_cast<long long>(i), r.op.c_str(),
                format_tuple(r.shape).c_str(), with_commas(r.nbytes).c_str(), as.c_str());
  }
  std::printf("activations saved: %s bytes\n", with_commas(log.bytes()).c_str());
  //! [saved]
  // The rule of thumb of the deep linear model: one vector per sample for each layer's output.
  const int64_t rule = 64 * (4096 + 1024) * 4;
  std::printf("the rule of thumb, B x (4096 + 1024) numbers x 4 bytes: %s bytes, each layer's "
              "output;\n",
              with_commas(rule).c_str());
  std::printf("  the graph keeps each layer's input instead, and pow keeps the output: x's %s "
              "bytes more\n",
              with_commas(log.bytes() - rule).c_str());
  std::printf("\n");
}

// ---- 5. memory over one training step --------------------------------------------------------

static void timeline(const std::optional<std::string>& csv_dir) {
  std::printf("== Memory over one training step (MiB, the allocator's counters) ==\n");
  //! [timeline]
  manual_seed(0);
  auto model = step_memory_model();
  optim::AdamW opt(model->parameters(), {.lr = 1e-3});
  const Tensor x = randn({64, 1024});
  MemoryTimeline memory;  // samples the counters at every op, node, step and zero_grad
  Tensor loss = (*model)(x).pow(2).mean();
  loss.backward();
  opt.step();
  opt.zero_grad();
  //! [timeline]
  // One row per phase: the counters at its end, and the highest total reached during it.
  std::printf("%-15s %8s %10s %16s %12s %12s %10s %8s\n", "phase (at end)", "weights",
              "gradients", "optimizer state", "activations", "temporaries", "allocated", "peak");
  const auto& s = memory.samples();
  for (size_t i = 0; i < s.size(); ++i) {
    const bool last_of_phase = i + 1 == s.size() || s[i + 1].phase != s[i].phase;
    if (i != 0 && !last_of_phase) continue;
    int64_t peak = s[i].peak;
    for (size_t j = i; j > 0 && s[j - 1].phase == s[i].phase; --j) peak = std::max(peak, s[j - 1].peak);
    std::printf("%-15s %8.2f %10.2f %16.2f %12.2f %12.2f %10.2f %8.2f\n",
                i == 0 ? "start" : s[i].phase.c_str(), mib(s[i].bytes[0]), mib(s[i].bytes[1]),
                mib(s[i].bytes[2]), mib(s[i].bytes[3]), mib(s[i].bytes[4]), mib(s[i].allocated),
                mib(i == 0 ? s[i].allocated : peak));
  }
  std::printf("%zu samples; the highest point of the step: %.2f MiB\n", s.size(),
              mib(memory.peak()));
  if (csv_dir) memory.write_csv(*csv_dir, "ch07_timeline.csv");
  std::printf("\n");
}

// ---- 6. activation checkpointing -------------------------------------------------------------

// A ReLU MLP of `depth` layers of width 256, for a batch of 1024: wide enough a batch that the
// activations, B x 256 per layer, outweigh the weights and their gradients, 256 x 256 per layer.
struct Mlp {
  std::vector<std::shared_ptr<nn::Linear>> layers;
  explicit Mlp(int depth) {
    for (int i = 0; i < depth; ++i) layers.push_back(std::make_shared<nn::Linear>(256, 256));
  }
  // Layers [begin, end) of the model, as one region checkpoint() can run again.
  Tensor run(const Tensor& x, size_t begin, size_t end) const {
    Tensor h = x;
    for (size_t i = begin; i < end; ++i) h = relu(layers[i]->forward(h));
    return h;
  }
  std::vector<Tensor> parameters() const {
    std::vector<Tensor> out;
    for (const auto& l : layers) {
      out.push_back(l->weight);
      out.push_back(l->bias);
    }
    return out;
  }
};

struct StepCost {
  int64_t saved_peak = 0;  // the highest bytes of activations during the step
  int64_t peak = 0;        // the highest total during the step, above what was there before it
  double flops = 0, seconds = 0;
  std::vector<Tensor> grads;
};

//! [checkpoint]
// One forward and backward pass; with `segment` > 0, every `segment` layers are one
// checkpointed region, which keeps only its input and runs again during backward.
static StepCost train_step(const Mlp& mlp, const Tensor& x, size_t segment) {
  auto pass = [&] {
    Tensor h = x;
    const size_t n = mlp.layers.size();
    for (size_t begin = 0; begin < n; begin += segment ? segment : n) {
      const size_t end = segment ? std::min(n, begin + segment) : n;
      auto region = [&mlp, begin, end](const Tensor& in) { return mlp.run(in, begin, end); };
      h = segment ? checkpoint(region, h) : region(h);
    }
    h.pow(2).mean().backward();
  };
  for (const Tensor& p : mlp.parameters()) p.set_grad(Tensor());
  StepCost cost;
  reset_peak_memory_stats();
  const int64_t activations_before = memory_allocated(MemoryCategory::activations);
  const int64_t allocated_before = memory_allocated();
  {
    CostCounter counter;
    pass();
    cost.flops = counter.flops();
  }
  cost.saved_peak = max_memory_allocated(MemoryCategory::activations) - activations_before;
  cost.peak = max_memory_allocated() - allocated_before;
  for (const Tensor& p : mlp.parameters()) cost.grads.push_back(p.grad());
  cost.seconds = timed(
      [&] {
        for (const Tensor& p : mlp.parameters()) p.set_grad(Tensor());
        pass();
      },
      3);
  return cost;
}
//! [checkpoint]

static void checkpointing(const std::optional<std::string>& csv_dir) {
  std::printf("== Activation checkpointing: recompute instead of keeping (ReLU MLP, width 256, "
              "batch 1024) ==\n");
  std::printf("depth  segment    activations (MiB)    step peak (MiB)   FLOPs   time/step (ms)  "
              "gradients\n");
  std::printf("                  plain   checkpointed  plain     ckpt    extra   plain    ckpt\n");
  std::optional<CsvFile> csv;
  if (csv_dir)
    csv.emplace(*csv_dir, "ch07_checkpointing.csv",
                std::vector<std::string>{"depth", "segment", "plain_peak_mib", "ckpt_peak_mib",
                                         "plain_activations_mib", "ckpt_activations_mib"});
  for (int depth : {4, 8, 16, 32}) {
    manual_seed(0);
    const Mlp mlp(depth);
    const Tensor x = randn({1024, 256});
    // sqrt(depth) layers per segment keeps about 2 sqrt(depth) layers' activations at once:
    // depth / segment region inputs, plus one region's recomputed insides during backward.
    const auto segment = static_cast<size_t>(std::lround(std::sqrt(double(depth))));
    const StepCost plain = train_step(mlp, x, 0);
    const StepCost ckpt = train_step(mlp, x, segment);
    bool same = true;
    for (size_t i = 0; i < plain.grads.size(); ++i) same &= equal(plain.grads[i], ckpt.grads[i]);
    std::printf("%5d  %7zu  %7.2f  %12.2f  %7.2f  %7.2f  %+5.0f%%  %6.1f  %6.1f  %s\n", depth,
                segment, mib(plain.saved_peak), mib(ckpt.saved_peak), mib(plain.peak),
                mib(ckpt.peak), 100 * (ckpt.flops / plain.flops - 1), plain.seconds * 1e3,
                ckpt.seconds * 1e3, same ? "bitwise" : "NO");
    if (csv)
      csv->row(static_cast<int64_t>(depth), static_cast<int64_t>(segment), mib(plain.peak),
               mib(ckpt.peak), mib(plain.saved_peak), mib(ckpt.saved_peak));
  }
  std::printf("\n");
}

int main(int argc, char** argv) {
  return run_chapter(argc, argv, [](const std::optional<std::string>& csv_dir) {
    napkin();
    deep_linear();
    step_memory();
    saved_tensors();
    timeline(csv_dir);
    checkpointing(csv_dir);
    if (csv_dir)
      std::printf("wrote %s/ch07_timeline.csv and %s/ch07_checkpointing.csv\n", csv_dir->c_str(),
                  csv_dir->c_str());
  });
}
