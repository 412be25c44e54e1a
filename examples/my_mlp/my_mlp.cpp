// my_mlp.cpp: a program of one's own, built against the library (CMakeLists.txt here says how;
// the top-level README's "Your own program" gives all three ways).
//
// A two-layer perceptron learns a function no straight line fits, y = x^2 on [-1, 1], with
// the pieces chapters 02, 03 and 06 build: tensors, the autograd tape, nn::Sequential and AdamW.
// It prints the loss as it falls and exits with status 1 if the network did not learn.
#include <cmath>
#include <cstdio>
#include <memory>

#include "tiny/tiny.h"

using namespace tiny;

int main() {
  manual_seed(0);
  // 256 points of the curve, as a column: (256, 1) inputs and targets.
  const int64_t n = 256;
  Tensor x = (arange(-n / 2, n / 2, 1, kFloat32) / double(n / 2)).reshape({n, 1});
  Tensor y = square(x);

  // 1 -> 32 -> 1 with a ReLU between: the hidden layer bends the line in up to 32 places.
  nn::Sequential model({std::make_shared<nn::Linear>(1, 32), std::make_shared<nn::ReLU>(),
                        std::make_shared<nn::Linear>(32, 1)});
  optim::AdamW optimizer(model.parameters(), {.lr = 0.01});

  double first = 0, last = 0;
  for (int step = 0; step <= 2000; ++step) {
    Tensor loss = mse_loss(model(x), y);
    loss.backward();
    optimizer.step();
    optimizer.zero_grad();
    last = loss.item();
    if (step == 0) first = last;
    if (step % 500 == 0) std::printf("step %4d  loss %.5f\n", step, last);
  }
  // The best straight line, all a network without its ReLU can be, is the constant 1/3 and leaves
  // a mean squared error of 4/45 = 0.089; the bent one should do far better.
  const bool learned = std::isfinite(last) && last < 0.01 && last < first / 10;
  std::printf("%s: mean squared error %.5f after 2000 steps (%.3f at the start)\n",
              learned ? "learned" : "did not learn", last, first);
  return learned ? 0 : 1;
}
