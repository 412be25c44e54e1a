// dispatch_instructions.cpp: instructions per tiny op, a measure of the dispatcher's overhead that
// a busy machine cannot disturb (timings on a shared 2-core VM swing by 40%). Run each case under
// callgrind with two counts and take the difference, so that start-up cancels:
//   for n in 2000 12000; do
//     valgrind --tool=callgrind --callgrind-out-file=/dev/null
//       build/bench/dispatch_instructions add $n 2>&1 | grep Collected; done  (one line)
// (instructions per op = difference / 10000). Cases: add (1 x 8 + 1 x 8), mulnum (1 x 8 times a
// number), addout, addinplace, addcmul_ (the out= and in-place forms), recorded (an op on the
// tape), backward (recorded, then backward).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tiny/tiny.h"

using namespace tiny;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: dispatch_instructions CASE COUNT\n");
    return 2;
  }
  const std::string what = argv[1];
  const int n = std::atoi(argv[2]);
  const Tensor a = ones({1, 8}), b = full({1, 8}, 1e-9), out = empty({1, 8});
  Tensor v = ones({1, 8});
  if (what == "add")
    for (int i = 0; i < n; ++i) (void)add(a, b);
  if (what == "mulnum")
    for (int i = 0; i < n; ++i) (void)(a * 1.0001);
  if (what == "addout")
    for (int i = 0; i < n; ++i) (void)add_out(out, a, b);
  if (what == "addinplace")
    for (int i = 0; i < n; ++i) v.add_(b);
  if (what == "addcmul_")
    for (int i = 0; i < n; ++i) v.addcmul_(b, b, 0.001);
  if (what == "recorded" || what == "backward") {
    Tensor x = ones({4}).requires_grad_();
    for (int r = 0; r < n / 100; ++r) {
      Tensor y = x;
      for (int i = 0; i < 100; ++i) y = y * 1.0001;
      if (what == "backward") {
        y.sum().backward();
        x.set_grad(Tensor());
      }
    }
  }
  return 0;
}
