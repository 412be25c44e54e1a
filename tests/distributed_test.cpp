// Chapter 10's library, run as it is meant to run: CTest starts this program under mpirun with
// 1 to 4 processes (tests/CMakeLists.txt), every rank runs every test, and each test checks
// what its rank holds against a reference every rank computes alone, in float64 loops or with
// one process's training on the global batch.
//
// `--scenario NAME` runs instead one of the failures a group must survive without hanging
// (a mismatched call, a rank that never joins, a rank that fails); CTest checks their output
// and that they end (tests/run_mpi.cmake).
#include <chrono>
#include <cstring>
#include <thread>

#include "test_util.h"

using namespace tiny;
using namespace tiny::testing;

namespace {

int rank() { return dist::get_rank(); }
int world() { return dist::get_world_size(); }

// One seed for every rank: rank 0's fresh seed (or TINY_TEST_SEED), broadcast.
uint64_t shared_seed() {
  Tensor s = tensor({static_cast<int64_t>(test_seed() & 0x7fffffffffffffff)}, kInt64);
  dist::broadcast(s, 0);
  return static_cast<uint64_t>(s.data<int64_t>()[0]);
}

#define SHARED_SEEDED(rng)               \
  const uint64_t seed_ = shared_seed();  \
  std::mt19937_64 rng(seed_);            \
  SCOPED_TRACE("replay with TINY_TEST_SEED=" + std::to_string(seed_))

// The input rank r hands a collective in a test: random values the same on every rank, so that
// each rank can compute what the collective must return. Integers (and the 16-bit floats: small
// integers, whose sums are exact) for the exact checks.
Tensor rank_input(uint64_t seed, int r, int64_t n, DType dtype) {
  std::mt19937_64 rng(seed + 7919 * static_cast<uint64_t>(r));
  Tensor t = empty({n}, kFloat64);
  double* p = t.data<double>();
  const bool small_ints = !is_floating(dtype) || dtype == kFloat16 || dtype == kBFloat16;
  for (int64_t i = 0; i < n; ++i)
    p[i] = small_ints ? static_cast<double>(uniform_int(rng, -20, 20))
                      : std::uniform_real_distribution<double>(-2, 2)(rng);
  return t.to(dtype);
}

// The float64 sum of every rank's input.
std::vector<double> sum_of_inputs(uint64_t seed, int64_t n, DType dtype) {
  std::vector<double> sum(static_cast<size_t>(n), 0.0);
  for (int r = 0; r < world(); ++r) {
    const Tensor x = rank_input(seed, r, n, dtype).to(kFloat64);
    for (int64_t i = 0; i < n; ++i) sum[static_cast<size_t>(i)] += x.data<double>()[i];
  }
  return sum;
}

void expect_values(const Tensor& t, const std::vector<double>& want, double rel,
                   const std::string& what) {
  const Tensor got = t.to(kFloat64).contiguous();
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = got.data<double>()[i], w = want[i];
    ASSERT_LE(std::abs(g - w), rel * std::max(1.0, std::abs(w)))
        << what << " element " << i << ": " << g << ", expected " << w << " (rank " << rank()
        << " of " << world() << ")";
  }
}

const DType kDTypes[] = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64};

double tolerance(DType dtype) {
  return dtype == kFloat32 ? 1e-6 : dtype == kFloat64 ? 1e-14 : 0.0;
}

}  // namespace

// ---- the collectives against their definitions --------------------------------------------------

TEST(Collectives, AllReduceIsTheSumOverRanks) {
  SHARED_SEEDED(rng);
  for (DType dtype : kDTypes) {
    const int64_t n = uniform_int(rng, 1, 3000);
    const uint64_t seed = rng();
    Tensor x = rank_input(seed, rank(), n, dtype);
    dist::all_reduce(x);
    expect_values(x, sum_of_inputs(seed, n, dtype), tolerance(dtype),
                  std::string("all_reduce SUM ") + dtype_name(dtype));
  }
}

TEST(Collectives, AllReduceAverageDividesTheSumByTheWorldSize) {
  SHARED_SEEDED(rng);
  for (DType dtype : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    const int64_t n = uniform_int(rng, 1, 2000);
    const uint64_t seed = rng();
    Tensor x = rank_input(seed, rank(), n, dtype);
    dist::all_reduce(x, dist::ReduceOp::AVG);
    std::vector<double> want = sum_of_inputs(seed, n, dtype);
    for (double& v : want) v /= world();
    // The 16-bit averages round once, to their 8 or 11 significant bits.
    const double rel = dtype == kFloat16 ? 1e-3 : dtype == kBFloat16 ? 8e-3 : tolerance(dtype);
    expect_values(x, want, rel, std::string("all_reduce AVG ") + dtype_name(dtype));
  }
}

TEST(Collectives, EveryRankGetsTheSameBits) {
  SHARED_SEEDED(rng);
  const int64_t n = uniform_int(rng, 1000, 5000);
  Tensor x = rank_input(rng(), rank(), n, kFloat32);
  dist::all_reduce(x);
  // Rank 0's result, sent to everyone, must be this rank's bit for bit.
  Tensor from0 = x.clone();
  dist::broadcast(from0, 0);
  EXPECT_EQ(std::memcmp(x.data_ptr(), from0.data_ptr(), static_cast<size_t>(x.nbytes())), 0);
}

TEST(Collectives, BroadcastCopiesTheSourceRank) {
  SHARED_SEEDED(rng);
  for (int src = 0; src < world(); ++src)
    for (DType dtype : {kFloat32, kBFloat16, kInt64, kBool}) {
      const int64_t n = uniform_int(rng, 1, 500);
      const uint64_t seed = rng();
      Tensor x = dtype == kBool ? (rank_input(seed, rank(), n, kFloat32) > 0)
                                : rank_input(seed, rank(), n, dtype);
      const Tensor want = dtype == kBool ? (rank_input(seed, src, n, kFloat32) > 0)
                                         : rank_input(seed, src, n, dtype);
      dist::broadcast(x, src);
      EXPECT_EQ(std::memcmp(x.data_ptr(), want.data_ptr(), static_cast<size_t>(x.nbytes())), 0)
          << "src " << src << " " << dtype_name(dtype);
    }
}

TEST(Collectives, AllGatherConcatenatesInRankOrder) {
  SHARED_SEEDED(rng);
  for (DType dtype : kDTypes) {
    const int64_t n = uniform_int(rng, 1, 700);
    const uint64_t seed = rng();
    const Tensor x = rank_input(seed, rank(), n, dtype);
    Tensor out = empty({world() * n}, dtype);
    dist::all_gather_into_tensor(out, x);
    for (int r = 0; r < world(); ++r) {
      const Tensor want = rank_input(seed, r, n, dtype);
      EXPECT_EQ(std::memcmp(out.narrow(0, r * n, n).data_ptr(), want.data_ptr(),
                            static_cast<size_t>(want.nbytes())),
                0)
          << "rank " << r << "'s part, " << dtype_name(dtype);
    }
  }
}

TEST(Collectives, ReduceScatterLeavesEachRankItsSliceOfTheSum) {
  SHARED_SEEDED(rng);
  for (DType dtype : kDTypes) {
    const int64_t chunk = uniform_int(rng, 1, 600);
    const uint64_t seed = rng();
    const Tensor x = rank_input(seed, rank(), chunk * world(), dtype);
    Tensor out = empty({chunk}, dtype);
    dist::reduce_scatter_tensor(out, x);
    const std::vector<double> sum = sum_of_inputs(seed, chunk * world(), dtype);
    const std::vector<double> mine(sum.begin() + rank() * chunk,
                                   sum.begin() + (rank() + 1) * chunk);
    expect_values(out, mine, tolerance(dtype),
                  std::string("reduce_scatter SUM ") + dtype_name(dtype));
  }
}

TEST(Collectives, AsyncCallsCompleteInOrderAndWaitReturnsTheResult) {
  SHARED_SEEDED(rng);
  std::vector<Tensor> xs;
  std::vector<dist::Work> works;
  std::vector<uint64_t> seeds;
  for (int k = 0; k < 6; ++k) {
    seeds.push_back(rng());
    xs.push_back(rank_input(seeds.back(), rank(), 1000 + k, kInt64));
    works.push_back(dist::all_reduce(xs.back(), dist::ReduceOp::SUM, /*async_op=*/true));
  }
  for (size_t k = 0; k < xs.size(); ++k) {
    works[k].wait();
    EXPECT_TRUE(works[k].is_completed());
    expect_values(xs[k], sum_of_inputs(seeds[k], 1000 + static_cast<int64_t>(k), kInt64), 0,
                  "async all_reduce " + std::to_string(k));
  }
}

TEST(Collectives, BarrierAndCountersWork) {
  dist::reset_comm_stats();
  dist::barrier();
  Tensor x = ones({256});
  dist::all_reduce(x);
  const dist::CommStats s = dist::comm_stats();
  EXPECT_EQ(s.calls, 2);
  EXPECT_EQ(s.bytes, 1024);
  EXPECT_FLOAT_EQ(x.data<float>()[255], static_cast<float>(world()));
}

TEST(Collectives, BadArgumentsRaiseBeforeAnythingIsSent) {
  const std::string me = "[rank " + std::to_string(rank()) + "] ";
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Tensor m = zeros({4, 6});
  EXPECT_EQ(message([&] { dist::all_reduce(m.t()); }),
            me + "all_reduce: Tensors must be contiguous");
  EXPECT_EQ(message([&] { dist::all_reduce(zeros({3}, kInt64), dist::ReduceOp::AVG); }),
            me + "all_reduce: ReduceOp.AVG needs a floating-point tensor, got int64");
  EXPECT_EQ(message([&] { dist::all_reduce(zeros({3}, kBool)); }),
            me + "all_reduce: bool tensors cannot be reduced with ReduceOp.SUM");
  EXPECT_EQ(message([&] { dist::broadcast(m, world()); }),
            me + "broadcast: src " + std::to_string(world()) + " is not a rank of this group of " +
                std::to_string(world()));
  EXPECT_EQ(message([&] { dist::all_gather_into_tensor(zeros({world() * 3 + 1}), zeros({3})); }),
            me + "all_gather_into_tensor: output tensor size must be equal to world_size times "
                 "input tensor size (" + std::to_string(world() * 3 + 1) + " != " +
                std::to_string(world()) + " x 3)");
  EXPECT_EQ(message([&] { dist::reduce_scatter_tensor(zeros({2}), zeros({world() * 2 + 1})); }),
            me + "reduce_scatter_tensor: input tensor must be the same size as output size "
                 "times world size (" + std::to_string(world() * 2 + 1) + " != " +
                std::to_string(world()) + " x 2)");
  EXPECT_EQ(message([&] { dist::all_reduce(Tensor()); }),
            me + "all_reduce: the input tensor is undefined");
  EXPECT_EQ(message([&] { dist::init_process_group(); }),
            "trying to initialize the default process group twice!");
  // None of these reached the other ranks: the group still works.
  Tensor x = ones({5});
  dist::all_reduce(x);
  EXPECT_FLOAT_EQ(x.data<float>()[0], static_cast<float>(world()));
}

TEST(Collectives, RingBytesAndBatchShards) {
  EXPECT_EQ(dist::ring_all_reduce_bytes(1, 1000), 0.0);
  EXPECT_EQ(dist::ring_all_reduce_bytes(2, 1000), 1000.0);
  EXPECT_EQ(dist::ring_all_reduce_bytes(4, 1000), 1500.0);
  EXPECT_DOUBLE_EQ(dist::ring_all_reduce_bytes(1024, 4e9), 2.0 * 1023 / 1024 * 4e9);
  EXPECT_THROW(dist::ring_all_reduce_bytes(0, 1), ValueError);
  // Every row once, in order, the sizes differing by at most one.
  for (int n = 1; n <= 5; ++n)
    for (int64_t batch : {0, 1, 7, 12, 13}) {
      int64_t next = 0;
      for (int r = 0; r < n; ++r) {
        const auto [b, e] = dist::shard_range(batch, r, n);
        EXPECT_EQ(b, next);
        EXPECT_LE(e - b, batch / n + 1);
        EXPECT_GE(e - b, batch / n);
        next = e;
      }
      EXPECT_EQ(next, batch);
    }
  EXPECT_THROW(dist::shard_range(4, 2, 2), ValueError);
}

// ---- data parallelism --------------------------------------------------------------------------

namespace {

std::shared_ptr<nn::Sequential> small_model() {
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(8, 16), std::make_shared<nn::GELU>(),
      std::make_shared<nn::Linear>(16, 16), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(16, 4)});
}

struct Batch {
  Tensor x, y;
};

// A global batch of 12 rows (divisible by 1, 2, 3 and 4), the same on every rank.
Batch global_batch(uint64_t seed) {
  Generator gen(seed);
  return {randn({12, 8}, kFloat32, gen), randn({12, 4}, kFloat32, gen)};
}

Batch my_rows(const Batch& b) {
  const auto [begin, end] = dist::shard_range(b.x.size(0), rank(), world());
  return {b.x.narrow(0, begin, end - begin), b.y.narrow(0, begin, end - begin)};
}

void expect_close(const std::vector<Tensor>& got, const std::vector<Tensor>& want, double rel,
                  const std::string& what, bool bitwise = false) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].defined()) << what << " " << i;
    const Tensor g = got[i].to(kFloat64).contiguous(), w = want[i].to(kFloat64).contiguous();
    ASSERT_EQ(g.shape(), w.shape());
    for (int64_t k = 0; k < g.numel(); ++k) {
      const double a = g.data<double>()[k], b = w.data<double>()[k];
      if (bitwise) {
        ASSERT_EQ(a, b) << what << " tensor " << i << " element " << k;
      } else {
        ASSERT_LE(std::abs(a - b), rel * std::max(1.0, std::abs(b)))
            << what << " tensor " << i << " element " << k << ": " << a << " vs " << b;
      }
    }
  }
}

std::vector<Tensor> grads(nn::Module& m) {
  std::vector<Tensor> out;
  for (const Tensor& p : m.parameters()) out.push_back(p.grad());
  return out;
}

}  // namespace

TEST(DistributedDataParallel, GradientsEqualOneProcessOnTheGlobalBatch) {
  SHARED_SEEDED(rng);
  const uint64_t seed = rng();
  const Batch batch = global_batch(seed ^ 1);
  // One process, the whole batch.
  manual_seed(seed);
  auto reference = small_model();
  mse_loss((*reference)(batch.x), batch.y).backward();
  for (bool overlap : {true, false})
    for (int64_t cap : {int64_t{1} << 20, int64_t{300}}) {
      // A different seed on each rank: DDP's broadcast must make the copies rank 0's.
      manual_seed(rank() == 0 ? seed : seed + 1 + static_cast<uint64_t>(rank()));
      auto model = small_model();
      dist::DistributedDataParallel ddp(model, {.bucket_cap_bytes = cap, .overlap = overlap});
      if (cap == 300) {
        EXPECT_GT(ddp.buckets().size(), 2u);
      }
      // The buckets hold the parameters last to first.
      EXPECT_EQ(ddp.buckets().front().front(), model->parameters().size() - 1);
      const Batch mine = my_rows(batch);
      mse_loss(ddp(mine.x), mine.y).backward();
      const std::string what = std::string("DDP gradients, overlap ") + (overlap ? "on" : "off") +
                               ", bucket cap " + std::to_string(cap);
      // One process: the same arithmetic, the same bits.
      expect_close(grads(*model), grads(*reference), 2e-6, what, world() == 1);
    }
}

TEST(DistributedDataParallel, TrainingKeepsEveryRanksCopyIdentical) {
  SHARED_SEEDED(rng);
  manual_seed(rng() + static_cast<uint64_t>(rank()));
  auto model = small_model();
  dist::DistributedDataParallel ddp(model, {.bucket_cap_bytes = 600});
  optim::AdamW opt(model->parameters(), {.lr = 0.01});
  for (int step = 0; step < 4; ++step) {
    const Batch mine = my_rows(global_batch(rng()));
    opt.zero_grad();
    mse_loss(ddp(mine.x), mine.y).backward();
    opt.step();
  }
  for (const Tensor& p : model->parameters()) {
    Tensor from0 = p.detach().clone();
    dist::broadcast(from0, 0);
    EXPECT_EQ(std::memcmp(p.data_ptr(), from0.data_ptr(), static_cast<size_t>(p.nbytes())), 0);
  }
}

TEST(DistributedDataParallel, AnUnusedParameterIsReportedAtTheNextForward) {
  manual_seed(3);
  auto model = small_model();
  dist::DistributedDataParallel ddp(model);
  ddp(ones({2, 8}));
  // A loss that uses only the first layer: the others never receive a gradient.
  auto& first = dynamic_cast<nn::Linear&>(*model->named_children()[0].second);
  first(ones({2, 8})).sum().backward();
  try {
    ddp(ones({2, 8}));
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("Expected to have finished reduction in the prior "
                                         "iteration before starting a new one."),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find(": 2, 3, 4, 5"), std::string::npos) << e.what();
  }
}

TEST(PostAccumulateGradHook, RunsAfterEachAccumulationWithTheGradient) {
  Tensor w = ones({3}).requires_grad_();
  std::vector<float> seen;
  w.register_post_accumulate_grad_hook([&](const Tensor& g) { seen.push_back(g.data<float>()[0]); });
  (w * 2).sum().backward();
  (w * 3).sum().backward();
  EXPECT_EQ(seen, (std::vector<float>{2, 5}));
  EXPECT_THROW(ones({2}).register_post_accumulate_grad_hook([](const Tensor&) {}), RuntimeError);
  EXPECT_THROW((w * 2).register_post_accumulate_grad_hook([](const Tensor&) {}), RuntimeError);
}

// ---- ZeRO --------------------------------------------------------------------------------------

namespace {

struct TrainingRun {
  std::vector<Tensor> params;
  optim::OptimizerState state;
  int64_t optimizer_bytes = 0;
};

// Three AdamW steps on the global batches, with ZeRO at `stage` (0: one process, plain AdamW).
TrainingRun train(int stage, uint64_t seed) {
  manual_seed(seed);
  auto model = small_model();
  const int64_t before = memory_stats().category_requested[static_cast<int>(
      MemoryCategory::optimizer_state)];
  std::unique_ptr<optim::AdamW> plain;
  std::unique_ptr<dist::ZeroAdamW> zero;
  const optim::AdamWOptions options{.lr = 0.01, .weight_decay = 0.1};
  if (stage == 0) {
    plain = std::make_unique<optim::AdamW>(model->parameters(), options);
  } else {
    zero = std::make_unique<dist::ZeroAdamW>(model->parameters(), options, stage);
  }
  TrainingRun run;
  for (int step = 0; step < 3; ++step) {
    const Batch b = global_batch(seed + 100 + static_cast<uint64_t>(step));
    const Batch mine = stage == 0 ? b : my_rows(b);
    mse_loss((*model)(mine.x), mine.y).backward();
    if (stage == 0) {
      plain->step();
      plain->zero_grad();
    } else {
      zero->step();
      if (step == 0) {
        run.optimizer_bytes = memory_stats().category_requested[static_cast<int>(
                                  MemoryCategory::optimizer_state)] - before;
        if (stage == 2) {
          for (const Tensor& p : model->parameters()) EXPECT_FALSE(p.grad().defined());
        }
      }
      zero->zero_grad();
    }
  }
  for (const Tensor& p : model->parameters()) run.params.push_back(p.detach().clone());
  run.state = stage == 0 ? plain->state_dict() : zero->consolidated_state_dict();
  return run;
}

std::vector<Tensor> state_tensors(const optim::OptimizerState& s) {
  std::vector<Tensor> out;
  for (const auto& [index, entry] : s.state)
    for (const auto& [key, t] : entry) out.push_back(t);
  return out;
}

}  // namespace

TEST(ZeroAdamW, BothStagesMatchOneProcessAndShardTheState) {
  SHARED_SEEDED(rng);
  const uint64_t seed = rng() % 100000;
  const TrainingRun reference = train(0, seed);
  const int64_t params = [] {
    manual_seed(0);
    int64_t n = 0;
    for (const Tensor& p : small_model()->parameters()) n += p.numel();
    return n;
  }();
  for (int stage : {1, 2}) {
    const TrainingRun run = train(stage, seed);
    const std::string what = "ZeRO stage " + std::to_string(stage);
    expect_close(run.params, reference.params, 1e-5, what + " parameters", world() == 1);
    expect_close(state_tensors(run.state), state_tensors(reference.state), 1e-5,
                 what + " consolidated state", world() == 1);
    // The consolidated state loads into a plain AdamW over whole parameters, unchanged.
    auto fresh = small_model();
    optim::AdamW plain(fresh->parameters(), {.lr = 0.01, .weight_decay = 0.1});
    plain.load_state_dict(run.state);
    expect_close(state_tensors(plain.state_dict()), state_tensors(run.state), 0,
                 what + " state loaded into AdamW", true);
    // m and v for this rank's chunks (at most ceil(numel / N) of each of the 6 parameters),
    // and AdamW's 4-byte step counter per parameter.
    EXPECT_LE(run.optimizer_bytes, 8 * (params / world() + 6) + 4 * 6) << what;
    EXPECT_GE(run.optimizer_bytes, 8 * (params / world() - 6)) << what;
  }
}

TEST(ZeroAdamW, TheChunksCoverEveryElementOnce) {
  manual_seed(1);
  auto model = small_model();
  dist::ZeroAdamW opt(model->parameters(), {}, 1);
  for (size_t i = 0; i < model->parameters().size(); ++i) {
    const auto [b, e] = opt.chunk(i);
    Tensor count = tensor({static_cast<int64_t>(e - b)}, kInt64);
    dist::all_reduce(count);
    EXPECT_EQ(count.data<int64_t>()[0], model->parameters()[i].numel());
  }
  EXPECT_THROW(dist::ZeroAdamW(model->parameters(), {}, 3), ValueError);
}

// ---- sharded checkpoints at another world size ------------------------------------------------

namespace {

const std::string kCheckpointDir = std::string(TINY_BINARY_DIR) + "/distributed_checkpoint";

void zero_steps(nn::Module& model, dist::ZeroAdamW& opt, int first, int count) {
  for (int step = first; step < first + count; ++step) {
    const Batch mine = my_rows(global_batch(500 + static_cast<uint64_t>(step)));
    mse_loss(model(mine.x), mine.y).backward();
    opt.step();
    opt.zero_grad();
  }
}

}  // namespace

// Run by CTest with 3 processes: three steps, a checkpoint, two more steps, and what the
// continuing run must reach.
TEST(Checkpoint, Save) {
  if (rank() == 0) std::filesystem::remove_all(kCheckpointDir);
  dist::barrier();
  manual_seed(11);
  auto model = small_model();
  dist::ZeroAdamW opt(model->parameters(), {.lr = 0.01}, 2);
  zero_steps(*model, opt, 0, 3);
  dist::save_sharded_checkpoint(kCheckpointDir, *model, opt);
  const optim::OptimizerState saved = opt.consolidated_state_dict();
  zero_steps(*model, opt, 3, 2);
  if (rank() == 0) {
    NamedTensors expected;
    for (const auto& [index, entry] : saved.state)
      for (const auto& [key, t] : entry)
        expected.emplace_back("saved." + std::to_string(index) + "." + key, t);
    for (const auto& [name, p] : model->state_dict()) expected.emplace_back("after." + name, p);
    save_safetensors(kCheckpointDir + "/expected.safetensors", expected);
  }
  dist::barrier();
  EXPECT_TRUE(std::filesystem::exists(kCheckpointDir + "/optim-rank2-of-3.safetensors"));
}

// Run by CTest with 1, 2 and 4 processes after Checkpoint.Save.
TEST(Checkpoint, LoadsAtAnotherWorldSize) {
  const TensorFile expected = load_safetensors(kCheckpointDir + "/expected.safetensors");
  manual_seed(99);  // other weights: the checkpoint must replace them
  auto model = small_model();
  dist::ZeroAdamW opt(model->parameters(), {.lr = 0.01}, world() % 2 + 1);
  dist::load_sharded_checkpoint(kCheckpointDir, *model, opt);
  // Re-cut for this world size, the state is the saving run's, bit for bit.
  const optim::OptimizerState state = opt.consolidated_state_dict();
  for (const auto& [index, entry] : state.state)
    for (const auto& [key, t] : entry)
      expect_close({t}, {expected.at("saved." + std::to_string(index) + "." + key)}, 0,
                   "state " + std::to_string(index) + "." + key, true);
  // Two more steps reach the saving run's weights (to rounding: the ranks sum the gradients in
  // another order).
  zero_steps(*model, opt, 3, 2);
  for (const auto& [name, p] : model->state_dict())
    expect_close({p}, {expected.at("after." + name)}, 1e-5, name);
  // A checkpoint of other sizes is refused with the parameter's name.
  auto other = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(8, 15)});
  dist::ZeroAdamW wrong(other->parameters(), {}, 1);
  EXPECT_THROW(wrong.load(kCheckpointDir), RuntimeError);
}

// ---- NCCL: CUDA tensors (run by make gpu-check with TINY_DIST_BACKEND=nccl) -------------------

TEST(NcclCollectives, CudaTensorsGiveTheCpuResults) {
  if (dist::get_backend() != "nccl")
    GTEST_SKIP() << "the group runs on MPI alone (TINY_DIST_BACKEND=nccl on a GPU machine runs "
                    "this)";
  SHARED_SEEDED(rng);
  const Device gpu = Device::cuda(dist::get_rank() % cuda::device_count());
  for (DType dtype : kDTypes) {
    const int64_t chunk = uniform_int(rng, 1, 3000);
    const uint64_t seed = rng();
    const Tensor x = rank_input(seed, rank(), chunk * world(), dtype);
    Tensor reduced = x.to(gpu);
    dist::all_reduce(reduced);
    expect_values(reduced.to(Device::cpu()), sum_of_inputs(seed, chunk * world(), dtype),
                  tolerance(dtype), std::string("NCCL all_reduce ") + dtype_name(dtype));
    Tensor scattered = empty({chunk}, dtype, gpu);
    dist::reduce_scatter_tensor(scattered, x.to(gpu));
    const std::vector<double> sum = sum_of_inputs(seed, chunk * world(), dtype);
    expect_values(scattered.to(Device::cpu()),
                  std::vector<double>(sum.begin() + rank() * chunk,
                                      sum.begin() + (rank() + 1) * chunk),
                  tolerance(dtype), std::string("NCCL reduce_scatter ") + dtype_name(dtype));
    Tensor gathered = empty({chunk * world() * world()}, dtype, gpu);
    dist::all_gather_into_tensor(gathered, x.to(gpu));
    for (int r = 0; r < world(); ++r) {
      const Tensor want = rank_input(seed, r, chunk * world(), dtype);
      const Tensor got = gathered.narrow(0, r * chunk * world(), chunk * world()).to(Device::cpu());
      EXPECT_EQ(std::memcmp(got.data_ptr(), want.data_ptr(), static_cast<size_t>(want.nbytes())), 0)
          << "NCCL all_gather " << dtype_name(dtype);
    }
  }
  // DDP on the GPU gives the one-process gradients.
  const Batch batch = global_batch(rng());
  manual_seed(5);
  auto reference = small_model();
  mse_loss((*reference)(batch.x), batch.y).backward();
  manual_seed(5);
  auto model = small_model();
  model->to(gpu);
  dist::DistributedDataParallel ddp(model, {.bucket_cap_bytes = 300});
  const Batch mine = my_rows(batch);
  mse_loss(ddp(mine.x.to(gpu)), mine.y.to(gpu)).backward();
  std::vector<Tensor> got;
  for (const Tensor& g : grads(*model)) got.push_back(g.to(Device::cpu()));
  expect_close(got, grads(*reference), 1e-5, "DDP gradients on the GPU");
}

// ---- scenarios: failures that must end the job, not hang it ------------------------------------

namespace {

int scenario(const std::string& name) {
  if (name == "mismatch") {
    // Rank 0 sends 12 numbers, the others 10: every rank must refuse, naming both sides.
    Tensor x = ones({rank() == 0 ? 12 : 10});
    try {
      dist::all_reduce(x);
    } catch (const RuntimeError& e) {
      std::printf("%s\n", e.what());
      std::fflush(stdout);
      return 3;
    }
    std::printf("[rank %d] no error\n", rank());
    return 0;
  }
  if (name == "skip") {
    // Rank 1 never joins the all-reduce: rank 0 must time out.
    if (rank() == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(20));
      return 0;
    }
    Tensor x = ones({4});
    dist::all_reduce(x);
    return 0;
  }
  if (name == "fail") {
    // Rank 1 raises before the all-reduce; rank 0, waiting with the default 300 s deadline,
    // must be stopped by mpirun well before that.
    if (rank() == 1) throw RuntimeError("[rank 1] injected failure before the all-reduce");
    Tensor x = ones({4});
    dist::all_reduce(x);
    return 0;
  }
  if (name == "exit_in_flight") {
    // Rank 0 leaves with an async all-reduce that rank 1 never joins; its exit must not wait for
    // the 300 s deadline, and mpirun then stops rank 1.
    if (rank() == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(60));
      return 0;
    }
    Tensor x = ones({4});
    dist::Work work = dist::all_reduce(x, dist::ReduceOp::SUM, /*async_op=*/true);
    std::printf("[rank 0] leaving with a collective in flight\n");
    std::fflush(stdout);
    return 5;
  }
  if (name == "reinit") {
    // MPI cannot start twice in one process; the second start must say so.
    dist::destroy_process_group();
    try {
      dist::init_process_group();
    } catch (const RuntimeError& e) {
      std::printf("error: %s\n", e.what());
      return 4;
    }
    return 0;
  }
  std::fprintf(stderr, "unknown scenario '%s'\n", name.c_str());
  return 2;
}

}  // namespace

// On ranks other than 0, each failed assertion, with the rank.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::printf("[rank %d] %s:%d: failure\n%s\n", rank(), r.file_name() ? r.file_name() : "?",
                  r.line_number(), r.message());
  }
};

int main(int argc, char** argv) {
  std::string scenario_name;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--scenario") == 0) scenario_name = argv[i + 1];
  bool listing = false;
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--gtest_list_tests", 18) == 0) listing = true;
  if (listing) {
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
  }
  if (!dist::is_mpi_available()) {
    std::printf("built without MPI: nothing to test\n");
    return 0;
  }
  // TINY_DIST_BACKEND=nccl: CUDA tensors through NCCL too (CTest's distributed.nccl_*, which
  // skip, exit status 77, without a GPU).
  const char* backend = std::getenv("TINY_DIST_BACKEND");
  if (backend && std::string(backend) == "nccl" && !cuda::available()) {
    std::printf("skipped: NCCL needs a GPU: %s\n", cuda::unavailable_reason().c_str());
    return 77;
  }
  try {
    dist::init_process_group(backend ? backend : "mpi");
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  if (!scenario_name.empty()) {
    try {
      const int rc = scenario(scenario_name);
      if (rc == 0 && dist::is_initialized()) dist::destroy_process_group();
      return rc;
    } catch (const std::exception& e) {
      std::printf("error: %s\n", e.what());
      std::fflush(stdout);
      return 1;
    }
  }
  ::testing::InitGoogleTest(&argc, argv);
  // Every rank runs every test; only rank 0 prints GoogleTest's report, the others their
  // failures (each message says its rank).
  if (dist::get_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter);
  }
  const int rc = RUN_ALL_TESTS();
  // A rank whose tests failed still ends the group properly; mpirun reports its status.
  dist::destroy_process_group();
  return rc;
}
