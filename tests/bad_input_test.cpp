// The bad-input table: mistakes a student makes while following the chapters, each with the
// error the library raises for it. Every row is run here, in this process, so a row that
// crashed would take the whole test down with it; a row passes only when the call throws the
// named exception with exactly the message written. The same rows are the table in
// docs/bad_inputs.md (BadInput.ThePageIsTheTable checks that the page says what the rows say).
//
// The messages are PyTorch's wherever PyTorch has one for the same mistake: each was compared
// with what PyTorch 2.15 raises for the equivalent Python (tests/fixtures/bad_inputs_torch.py
// prints those; a row whose text is the library's own says so in its last column).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"
#include "tiny/tiny.h"

using namespace tiny;

namespace {

struct BadInput {
  const char* chapter;    // where the student meets the call
  const char* mistake;    // what they did, in words
  const char* code;       // the call, exactly as run
  const char* exception;  // the exception's PyTorch name
  const char* message;    // its what(), exactly
  bool pytorch_text;      // whether PyTorch 2.x raises this same text for the same call
  std::function<void()> run;
};

// BAD(chapter, mistake, exception, message, same_as_pytorch, code...): one row. The code is both
// run and shown, so the table cannot drift from what is tested.
#define BAD(ch, mistake, exc, msg, same, ...)                               \
  BadInput {                                                                \
    ch, mistake, #__VA_ARGS__, #exc, msg, same, [] { (void)(__VA_ARGS__); } \
  }

Tensor linear_3_to_2() {
  static nn::Linear layer(3, 2);
  return layer.weight;
}

const std::vector<BadInput>& table() {
  static const std::vector<BadInput> rows = {
      // ---- chapter 02: shapes, strides, views ------------------------------------------------
      BAD("ch02", "view to a shape with a different number of elements", RuntimeError,
          "shape '[4]' is invalid for input of size 6", true, ones({2, 3}).view({4})),
      BAD("ch02", "view a transposed (non-contiguous) tensor as flat", RuntimeError,
          "view size is not compatible with input tensor's size and stride (at least one "
          "dimension spans across two contiguous subspaces). Use .reshape(...) instead.",
          true, ones({2, 3}).t().view({6})),
      BAD("ch02", "two dimensions left for view to infer", RuntimeError,
          "only one dimension can be inferred", true, ones({2, 3}).view({-1, -1})),
      BAD("ch02", "a negative size other than -1 in view", RuntimeError,
          "invalid shape dimension -2 at index 0 of shape [-2, -3]", true,
          ones({2, 3}).view({-2, -3})),
      BAD("ch02", "reshape to sizes that cannot hold the elements", RuntimeError,
          "shape '[-1, 4]' is invalid for input of size 6", true, ones({2, 3}).reshape({-1, 4})),
      BAD("ch02", "infer a size from an empty tensor", RuntimeError,
          "cannot reshape tensor of 0 elements into shape [-1, 0] because the unspecified "
          "dimension size -1 can be any value and is ambiguous",
          true, zeros({0, 3}).reshape({-1, 0})),
      BAD("ch02", "transpose a dimension the tensor does not have", IndexError,
          "Dimension out of range (expected to be in range of [-2, 1], but got 2)", true,
          ones({2, 3}).transpose(0, 2)),
      BAD("ch02", "t() on a 3-D tensor", RuntimeError,
          "t() expects a tensor with <= 2 dimensions, but self is 3D", true, ones({2, 3, 4}).t()),
      BAD("ch02", "permute with too few dimensions", RuntimeError,
          "permute(sparse_coo): number of dimensions in the tensor input does not match the "
          "length of the desired ordering of dimensions i.e. input.dim() = 2 is not equal to "
          "len(dims) = 1",
          true, ones({2, 3}).permute({0})),
      BAD("ch02", "permute naming one dimension twice", RuntimeError,
          "permute(): duplicate dims are not allowed.", true, ones({2, 3}).permute({0, 0})),
      BAD("ch02", "expand a dimension that is not 1", RuntimeError,
          "The expanded size of the tensor (3) must match the existing size (2) at "
          "non-singleton dimension 0.  Target sizes: [3, 3].  Tensor sizes: [2, 3]",
          true, ones({2, 3}).expand({3, 3})),
      BAD("ch02", "expand to fewer dimensions than the tensor has", RuntimeError,
          "expand(torch.FloatTensor{[2, 3]}, size=[3]): the number of sizes provided (1) must "
          "be greater or equal to the number of dimensions in the tensor (2)",
          true, ones({2, 3}).expand({3})),
      BAD("ch02", "add tensors whose shapes do not broadcast", RuntimeError,
          "The size of tensor a (3) must match the size of tensor b (2) at non-singleton "
          "dimension 1",
          true, ones({2, 3}) + ones({3, 2})),
      BAD("ch02", "select an index past the end", IndexError,
          "select(): index 3 out of range for tensor of size [2, 3] at dimension 1", true,
          ones({2, 3}).select(1, 3)),
      BAD("ch02", "narrow past the end of a dimension", RuntimeError,
          "start (2) + length (2) exceeds dimension size (3).", true, ones({2, 3}).narrow(1, 2, 2)),
      BAD("ch02", "narrow with a negative length", RuntimeError,
          "narrow(): length must be non-negative.", true,
          ones({2, 3}).narrow(1, 0, -1)),
      BAD("ch02", "slice with step 0", ValueError, "slice step cannot be zero", true,
          ones({4}).slice(0, 0, 4, 0)),
      BAD("ch02", "slice with a negative step (Python lists allow it, tensors do not)", ValueError,
          "step must be greater than zero", true, ones({4}).slice(0, 3, 0, -1)),
      BAD("ch02", "read an element past the end", IndexError,
          "index 2 is out of bounds for dimension 0 with size 2", true, ones({2, 3}).at({2, 0})),
      BAD("ch02", "index t[0, 3] past the end of the second dimension", IndexError,
          "index 3 is out of bounds for dimension 1 with size 3", true, ones({2, 3}).index({0, 3})),
      BAD("ch02", "item() of a tensor with many elements", RuntimeError,
          "a Tensor with 6 elements cannot be converted to Scalar", true, ones({2, 3}).item()),
      BAD("ch02", "squeeze a dimension the tensor does not have", IndexError,
          "Dimension out of range (expected to be in range of [-2, 1], but got 2)", true,
          ones({2, 3}).squeeze(2)),
      BAD("ch02", "unsqueeze past the new last position", IndexError,
          "Dimension out of range (expected to be in range of [-3, 2], but got 3)", true,
          ones({2, 3}).unsqueeze(3)),
      BAD("ch02", "flatten with start after end", RuntimeError,
          "flatten() has invalid args: start_dim cannot come after end_dim", true,
          ones({2, 3, 4}).flatten(2, 1)),
      BAD("ch02", "a negative size in a factory", RuntimeError,
          "Trying to create tensor with negative dimension -1: [-1]", true, empty({-1})),
      BAD("ch02", "a ragged nested list", ValueError,
          "expected sequence of length 2 at dim 1 (got 1)", true, tensor({{1, 2}, {3}})),
      BAD("ch02", "sum over a dimension the tensor does not have", IndexError,
          "Dimension out of range (expected to be in range of [-2, 1], but got 2)", true,
          ones({2, 3}).sum({2})),
      BAD("ch02", "mean of an integer tensor", NotImplementedError,
          "mean(): could not infer output dtype. Input dtype must be either a floating point or "
          "complex dtype. Got: Long",
          true, ones({2}, kInt64).mean()),
      BAD("ch02", "max() of an empty tensor", RuntimeError,
          "max(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
          "reduction dim with the 'dim' argument.",
          true, zeros({0}).max()),
      BAD("ch02", "negate a bool mask", NotImplementedError,
          "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
          "invert a mask, use the `~` or `logical_not()` operator instead.",
          true, -ones({2}, kBool)),
      BAD("ch02", "add a float tensor into an integer one in place", RuntimeError,
          "result type Float can't be cast to the desired output type Long", true,
          ones({2}, kInt64).add_(ones({2}))),
      BAD("ch02", "an arange with step 0", RuntimeError, "step must be nonzero", true,
          arange(0, 10, 0)),
      BAD("ch02", "an arange whose step points away from its end", RuntimeError,
          "upper bound and lower bound inconsistent with step sign", true, arange(10, 0, 1)),
      BAD("ch02", "an eye with a negative size", RuntimeError,
          "n must be greater or equal to 0, got -1", true, eye(-1)),
      BAD("ch02", "where with a float condition", RuntimeError,
          "where expected condition to be a boolean tensor, but got a tensor with dtype Float",
          true, where(ones({2}), ones({2}), zeros({2}))),
      BAD("ch02", "a size too large for memory to address", RuntimeError,
          "Storage size calculation overflowed with sizes=[4611686018427387904]", true,
          ones({int64_t(1) << 62})),
      BAD("ch02", "sizes whose product overflows", RuntimeError,
          "Storage size calculation overflowed with sizes=[1099511627776, 1099511627776]", true,
          zeros({int64_t(1) << 40, int64_t(1) << 40})),
      BAD("ch02", "size(0) of a 0-dim tensor", IndexError,
          "Dimension specified as 0 but tensor has no dimensions", true,
          scalar_tensor(1.0).size(0)),
      BAD("ch02", "flatten a 0-dim tensor from a dimension it does not have", IndexError,
          "Dimension out of range (expected to be in range of [-1, 0], but got 3)", true,
          scalar_tensor(1.0).flatten(3, -5)),
      BAD("ch02", "narrow a 0-dim tensor", RuntimeError,
          "narrow() cannot be applied to a 0-dim tensor.", true,
          scalar_tensor(1.0).narrow(0, 0, 1)),
      BAD("ch02", "narrow with a length that overflows start + length", RuntimeError,
          "start (1) + length (9223372036854775807) exceeds dimension size (3).", true,
          ones({3}).narrow(0, 1, std::numeric_limits<int64_t>::max())),
      BAD("ch02", "an eye with a negative number of columns", RuntimeError,
          "m must be greater or equal to 0, got -2", true, eye(3, -2)),
      BAD("ch02", "an arange to infinity", RuntimeError, "unsupported range: 0 -> inf", true,
          arange(0, INFINITY)),
      BAD("ch02", "copy into an expanded tensor (many elements share one address)", RuntimeError,
          "unsupported operation: more than one element of the written-to tensor refers to a "
          "single memory location. Please clone() the tensor before performing the operation.",
          true, zeros({3}).expand({2, 3}).copy_(ones({2, 3}))),
      BAD("ch02", "add in place into an expanded tensor", RuntimeError,
          "unsupported operation: more than one element of the written-to tensor refers to a "
          "single memory location. Please clone() the tensor before performing the operation.",
          true, ones({3}).expand({2, 3}).add_(1)),
      BAD("ch02", "fill an integer tensor with NaN", RuntimeError,
          "value cannot be converted to type int64_t without overflow", true,
          full({2}, NAN, kInt64)),
      BAD("ch02", "fill an int32 tensor with a number past its range", RuntimeError,
          "value cannot be converted to type int without overflow", true,
          zeros({2}, kInt32).fill_(int64_t(1) << 40)),
      BAD("ch05", "fill a float16 tensor with -1e9 (a mask's \"minus infinity\")", RuntimeError,
          "value cannot be converted to type c10::Half without overflow", true,
          full({2}, -1e9, kFloat16)),
      BAD("ch02", "softmax over a dimension the tensor does not have", IndexError,
          "Dimension out of range (expected to be in range of [-1, 0], but got 2)", true,
          softmax(ones({2}), 2)),
      BAD("ch02", "max over a dimension the tensor does not have", IndexError,
          "Dimension out of range (expected to be in range of [-2, 1], but got 5)", true,
          max(ones({2, 3}), 5)),
      BAD("ch02", "clamp with neither bound", RuntimeError,
          "torch.clamp: At least one of 'min' or 'max' must not be None", true,
          clamp(ones({2}), std::nullopt, std::nullopt)),
      BAD("ch02", "pow with an exponent of another shape", RuntimeError,
          "The size of tensor a (2) must match the size of tensor b (3) at non-singleton "
          "dimension 0",
          true, pow(ones({2}), ones({3}))),
      BAD("ch02", "normal random numbers of an integer dtype", NotImplementedError,
          "\"normal_kernel_cpu\" not implemented for 'Long'", true, randn({2}, kInt64)),
      BAD("ch02", "random numbers of a negative size", RuntimeError,
          "Trying to create tensor with negative dimension -1: [-1]", true, rand({-1})),
      BAD("ch02", "zero threads", RuntimeError, "set_num_threads expects a positive integer", true,
          set_num_threads(0)),
      BAD("ch02", "einops: an axis on the right that the left does not have", EinopsError,
          " Error while processing rearrange-reduction pattern \"b c -> b c d\".\n Input tensor "
          "shape: torch.Size([2, 3]). Additional info: {}.\n Identifiers only on one side of "
          "expression (should be on both): {'d'}",
          true, rearrange(ones({2, 3}), "b c -> b c d")),
      BAD("ch02", "einops: a pattern with more axes than the tensor", EinopsError,
          " Error while processing rearrange-reduction pattern \"a b c -> c b a\".\n Input "
          "tensor shape: torch.Size([2, 3]). Additional info: {}.\n Wrong shape: expected 3 "
          "dims. Received 2-dim tensor.",
          true, rearrange(ones({2, 3}), "a b c -> c b a")),
      BAD("ch02", "einops: splitting an axis without saying how", EinopsError,
          " Error while processing rearrange-reduction pattern \"(b h) w -> b h w\".\n Input "
          "tensor shape: torch.Size([6, 3]). Additional info: {}.\n Could not infer sizes for "
          "{'b', 'h'}",
          true, rearrange(ones({6, 3}), "(b h) w -> b h w")),
      BAD("ch02", "copy a tensor's own transpose into it (x.copy_(x.t()))", RuntimeError,
          "unsupported operation: some elements of the input tensor and the written-to tensor "
          "refer to a single memory location. Please clone() the tensor before performing the "
          "operation.",
          true, [] {
            Tensor x = arange(9.0).reshape({3, 3});
            x.copy_(x.t());
          }()),

      // ---- chapter 05: float formats ---------------------------------------------------------
      BAD("ch05", "a float format without exponent bits", ValueError,
          "float format 'e0m3' (E0M3) needs 1 to 11 exponent bits (double's range holds its "
          "values)",
          false, FloatFormat{"e0m3", 0, 3, Specials::None}.decode(1)),
      BAD("ch05", "IEEE infinities and NaNs without a mantissa bit to tell them apart", ValueError,
          "float format 'e5m0' (E5M0) has IEEE specials but no mantissa bit to tell NaN from "
          "infinity",
          false, FloatFormat{"e5m0", 5, 0, Specials::IEEE}.encode(1.0f)),
      BAD("ch05", "decode a pattern wider than the format", ValueError,
          "float format 'float8_e4m3fn' has 8 bits; pattern 256 does not fit", false,
          kFormatE4M3.decode(256)),

      // ---- chapter 01 and 03: matmul and autograd ---------------------------------------------
      BAD("ch01", "matmul with inner sizes that differ", RuntimeError,
          "mm: mat1 and mat2 shapes cannot be multiplied (2x3 and 2x3)", true,
          ones({2, 3}).matmul(ones({2, 3}))),
      BAD("ch01", "dot two vectors of different lengths", RuntimeError,
          "inconsistent tensor size, expected tensor [3] and src [4] to have the same number of "
          "elements, but got 3 and 4 elements respectively",
          true, ones({3}).matmul(ones({4}))),
      BAD("ch01", "a matrix times a vector of the wrong length", RuntimeError,
          "size mismatch, got input (2), mat (2x3), vec (4)", true, ones({2, 3}).matmul(ones({4}))),
      BAD("ch01", "matmul with a 0-dim tensor", RuntimeError,
          "both arguments to matmul need to be at least 1D, but they are 0D and 2D", true,
          scalar_tensor(2.0).matmul(ones({2, 2}))),
      BAD("ch01", "matmul of float32 with float64", RuntimeError,
          "expected m1 and m2 to have the same dtype, but got: float != double", true,
          ones({2, 2}).matmul(ones({2, 2}, kFloat64))),
      BAD("ch03", "backward() from a tensor with many elements", RuntimeError,
          "grad can be implicitly created only for scalar outputs", true,
          (ones({2}).requires_grad_() * 2).backward()),
      BAD("ch03", "backward() from a tensor that needs no gradient", RuntimeError,
          "element 0 of tensors does not require grad and does not have a grad_fn", true,
          ones({2}).sum().backward()),
      BAD("ch03", "backward through the same graph twice", RuntimeError,
          "Trying to backward through the graph a second time (or directly access saved tensors "
          "after they have already been freed). Saved intermediate values of the graph are freed "
          "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
          "backward through the graph a second time or if you need to access saved tensors after "
          "calling backward.",
          true,
          [] {
            Tensor x = ones({2}).requires_grad_();
            Tensor y = (x * x).sum();
            y.backward();
            y.backward();
          }()),
      BAD("ch03", "a gradient of the wrong shape passed to backward", RuntimeError,
          "Mismatch in shape: grad_output[0] has a shape of torch.Size([3]) and output[0] has a "
          "shape of torch.Size([2]).",
          true, (ones({2}).requires_grad_() * 2).backward(ones({3}))),
      BAD("ch03", "write in place into a leaf that requires grad", RuntimeError,
          "a leaf Variable that requires grad is being used in an in-place operation.", true,
          ones({2}).requires_grad_().add_(1)),
      BAD("ch03", "ask an integer tensor for gradients", RuntimeError,
          "only Tensors of floating point dtype can require gradients", true,
          ones({2}, kInt64).requires_grad_()),
      BAD("ch03", "give a float32 tensor a float64 gradient", RuntimeError,
          "attempting to assign a gradient with dtype 'double' to a tensor with grad_dtype "
          "'Float'. The gradient must match the tensor's grad_dtype (defaults to the tensor's "
          "dtype). You can set the tensor's grad_dtype attribute with a specific dtype, or None "
          "to allow any dtype. Set grad_dtype with caution. Diverging the dtypes of a tensor and "
          "its gradient may break downstream systems that assume they match.",
          true, ones({3}).requires_grad_().set_grad(ones({3}, kFloat64))),

      // ---- chapter 06: modules, optimizers, losses, data ---------------------------------------
      BAD("ch06", "feed a Linear(3, 2) rows of 4 features", RuntimeError,
          "addmm: mat1 and mat2 shapes cannot be multiplied (5x4 and 3x2)", true,
          nn::Linear(3, 2)(ones({5, 4}))),
      BAD("ch06", "a Linear layer with a negative size", RuntimeError,
          "Trying to create tensor with negative dimension -1: [2, -1]", true, nn::Linear(-1, 2)),
      BAD("ch06", "load a state dict that lacks a parameter", RuntimeError,
          "Error(s) in loading state_dict for Linear:\n\tMissing key(s) in state_dict: \"bias\". ",
          true,
          [] {
            nn::Linear layer(3, 2);
            layer.load_state_dict({{"weight", zeros({2, 3})}});
          }()),
      BAD("ch06", "load a state dict whose shapes differ", RuntimeError,
          "Error(s) in loading state_dict for Linear:\n\tsize mismatch for weight: copying a "
          "param with shape torch.Size([3, 2]) from checkpoint, the shape in current model is "
          "torch.Size([2, 3]).",
          true,
          [] {
            nn::Linear layer(3, 2);
            layer.load_state_dict({{"weight", zeros({3, 2})}, {"bias", zeros({2})}});
          }()),
      BAD("ch06", "an optimizer with no parameters", ValueError,
          "optimizer got an empty parameter list", true,
          optim::SGD(std::vector<Tensor>{}, {.lr = 0.1})),
      BAD("ch06", "a negative learning rate", ValueError, "Invalid learning rate: -0.1", true,
          optim::SGD({linear_3_to_2()}, {.lr = -0.1})),
      BAD("ch06", "Nesterov without momentum", ValueError,
          "Nesterov momentum requires a momentum and zero dampening", true,
          optim::SGD({linear_3_to_2()}, {.lr = 0.1, .nesterov = true})),
      BAD("ch06", "Adam's beta1 of 1", ValueError, "Invalid beta parameter at index 0: 1.0", true,
          optim::Adam({linear_3_to_2()}, {.beta1 = 1.0})),
      BAD("ch06", "AdamW with a negative epsilon", ValueError, "Invalid epsilon value: -1e-08",
          true, optim::AdamW({linear_3_to_2()}, {.eps = -1e-8})),
      BAD("ch06", "a class index past the number of classes", IndexError,
          "Target 5 is out of bounds.", true, cross_entropy(zeros({2, 5}), tensor({0, 5}, kInt64))),
      BAD("ch06", "integer targets shaped like the logits (probabilities must be floats)",
          RuntimeError,
          "Expected floating point type for target with class probabilities, got Long", true,
          cross_entropy(zeros({2, 5}), zeros({2, 5}, kInt64))),
      BAD("ch06", "mse_loss of two shapes that do not broadcast (ones that do are warned about)",
          RuntimeError,
          "The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 1",
          true, mse_loss(zeros({2, 3}), zeros({2, 2}))),
      BAD("ch06", "randint with an empty range", RuntimeError,
          "random_ expects 'from' to be less than 'to', but got from=5 >= to=5", true,
          randint(5, 5, {3})),
      BAD("ch06", "windows longer than the token data", ValueError,
          "get_batch: sequence_length (10) must be shorter than the data (10 elements): start "
          "indices are drawn from [0, len(data) - sequence_length)",
          false, get_batch(arange(10), 2, 10)),
      BAD("ch06", "load a checkpoint that does not exist", RuntimeError,
          "load_safetensors: [Errno 2] No such file or directory: '/nonexistent/model.safetensors'",
          false, load_safetensors("/nonexistent/model.safetensors")),
      BAD("ch06", "replay a CPUGraph that captured nothing", RuntimeError,
          "Called CPUGraph::replay without a preceding successful capture.", false,
          CPUGraph().replay()),
      BAD("ch06", "item() inside a captured step", RuntimeError,
          "item() cannot run while a CPUGraph is capturing: the number would be read once, at "
          "capture, and never again at replay(). Read it after capture() or replay() returns",
          false, CPUGraph().capture([] { (void)(ones({2}) * 2).sum().item(); })),
      BAD("ch06", "initialise an expanded tensor with random numbers", RuntimeError,
          "unsupported operation: more than one element of the written-to tensor refers to a "
          "single memory location. Please clone() the tensor before performing the operation.",
          true, [] {
            Tensor w = zeros({1}).expand({3});
            normal_(w);
          }()),
      // ---- chapter 08: mixed precision -------------------------------------------------------
      BAD("ch08", "autocast to float32 (it only lowers precision)", ValueError,
          "autocast runs ops in float16 or bfloat16, not float32", false,
          AutocastGuard(Device::Type::CPU, kFloat32)),
      BAD("ch08", "unscale the same gradients twice", RuntimeError,
          "unscale_() has already been called on this optimizer since the last update().", true,
          [] {
            Tensor w = nn::Parameter(ones({2}));
            optim::SGD opt({w}, {.lr = 0.1});
            amp::GradScaler scaler(Device::Type::CPU);
            scaler.scale(w.sum()).backward();
            scaler.unscale_(opt);
            scaler.unscale_(opt);
          }()),
      BAD("ch10", "a collective before init_process_group", ValueError,
          "Default process group has not been initialized, please make sure to call "
          "init_process_group.",
          true, dist::all_reduce(ones({4}))),
      BAD("ch10", "gloo, PyTorch's CPU backend, which this library does not have", ValueError,
          "Invalid backend: 'gloo' (this library has \"mpi\" and \"nccl\")", false,
          dist::init_process_group("gloo")),
      BAD("ch10", "a ring of no ranks", ValueError,
          "ring_all_reduce_bytes: world_size must be at least 1, got 0", false,
          dist::ring_all_reduce_bytes(0, 4e9)),
      BAD("ch10", "the batch share of a rank the world does not have", ValueError,
          "shard_range: rank 2 is not in [0, 2)", false, dist::shard_range(64, 2, 2)),
      BAD("ch10", "a gradient hook on a computed tensor", RuntimeError,
          "post accumulate grad hooks cannot be registered on non-leaf tensors", true,
          (ones({2}).requires_grad_() * 2).register_post_accumulate_grad_hook([](const Tensor&) {})),
  };
  return rows;
}

class BadInputTest : public ::testing::TestWithParam<size_t> {};

TEST_P(BadInputTest, RaisesItsError) {
  const BadInput& row = table()[GetParam()];
  SCOPED_TRACE(row.code);
  try {
    row.run();
    ADD_FAILURE() << "no error raised";
  } catch (const Error& e) {
    EXPECT_EQ(tiny::testing::python_exception_name(e), row.exception);
    EXPECT_EQ(std::string(e.what()), row.message);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "a std::exception that is not the library's: " << e.what();
  }
}

// Test names say which row failed: "ch02_3" is the fourth row.
std::string row_name(const ::testing::TestParamInfo<size_t>& info) {
  return std::string(table()[info.param].chapter) + "_" + std::to_string(info.param);
}

INSTANTIATE_TEST_SUITE_P(Table, BadInputTest, ::testing::Range<size_t>(0, table().size()),
                         row_name);

// One table cell: '|' would end the cell, and a line break would end the row.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string render_page() {
  std::ostringstream page;
  page << "# Bad inputs and the errors they get\n\n"
          "Mistakes a student makes while following the chapters, and what the library says to "
          "each. Every row is a test (`tests/bad_input_test.cpp`, run by `make test`): the call "
          "must throw exactly this exception with exactly this message, and must not crash. The "
          "last column says whether PyTorch 2.x raises the same text for the same call in "
          "Python: `tests/fixtures/bad_inputs_torch.py` records what PyTorch 2.15 raises, and a "
          "test (BadInput.PyTorchsColumnIsPyTorchs) holds the column to that record. Where 1.13 "
          "said something else, the library follows 2.x (the README's \"How close to PyTorch\" "
          "lists the changes).\n\n"
          "This page is written from the test's table; after changing a row, run "
          "`TINY_WRITE_BAD_INPUTS=1 build/tests/bad_input_test` to rewrite it.\n\n"
          "| # | chapter | mistake | call | error | PyTorch's text |\n"
          "|---|---|---|---|---|---|\n";
  size_t i = 0;
  for (const BadInput& row : table()) {
    page << "| " << i++ << " | " << row.chapter << " | " << cell(row.mistake) << " | `"
         << cell(row.code) << "` | " << row.exception << ": " << cell(row.message) << " | "
         << (row.pytorch_text ? "same" : "the library's own") << " |\n";
  }
  return page.str();
}

TEST(BadInput, TheTableHasAtLeastSixtyRows) { EXPECT_GE(table().size(), 60u); }

// The table's last column against PyTorch itself: tests/fixtures/bad_inputs_torch.txt holds what
// PyTorch 2.15 raised for each row's mistake written in Python. A row marked "same" must raise
// exactly that class and text;
// a row marked as the library's own must not. Rows for the library's own functions (user float
// formats, the ring's cost model) have no Python call and are skipped.
TEST(BadInput, PyTorchsColumnIsPyTorchs) {
  std::ifstream in(std::filesystem::path(TINY_SOURCE_DIR) / "tests/fixtures/bad_inputs_torch.txt");
  ASSERT_TRUE(in) << "tests/fixtures/bad_inputs_torch.txt is missing";
  std::vector<std::string> pytorch;
  for (std::string line; std::getline(in, line);) pytorch.push_back(line);
  ASSERT_EQ(pytorch.size(), table().size()) << "rerun tests/fixtures/bad_inputs_torch.py";
  for (size_t i = 0; i < table().size(); ++i) {
    const BadInput& row = table()[i];
    std::string message = row.message;
    for (size_t at = 0; (at = message.find('\n', at)) != std::string::npos;)
      message.replace(at, 1, "\\n");
    const std::string ours = std::to_string(i) + ": " + row.exception + ": " + message;
    if (pytorch[i] == std::to_string(i) + ": (no PyTorch equivalent)") continue;
    // einops prints sets of names in Python's hash order; the library in a fixed one.
    const std::string theirs = tiny::testing::sorted_sets(pytorch[i]),
                      same = tiny::testing::sorted_sets(ours);
    if (row.pytorch_text) EXPECT_EQ(theirs, same) << "row " << i << " (" << row.mistake << ")";
    else EXPECT_NE(theirs, same) << "row " << i << " is marked as the library's own text";
  }
}

TEST(BadInput, ThePageIsTheTable) {
  const std::filesystem::path path = std::filesystem::path(TINY_SOURCE_DIR) / "docs/bad_inputs.md";
  const std::string expected = render_page();
  if (std::getenv("TINY_WRITE_BAD_INPUTS")) std::ofstream(path) << expected;
  std::ifstream in(path);
  std::stringstream actual;
  actual << in.rdbuf();
  EXPECT_EQ(actual.str(), expected)
      << path << " is out of date: run TINY_WRITE_BAD_INPUTS=1 build/tests/bad_input_test";
}

}  // namespace
