"""Writes pytorch_gradients.h: PyTorch's own gradients for chapter 03's networks, which the chapter
compares its 55-line tape with (as the document's check_autograd.py compares with PyTorch).

The XOR step is the document's worked example. The 200 random networks are drawn from a
torch.Generator seeded with 0, in the order the chapter draws them from tiny's Generator(0),
which gives the same numbers (x, W, b, v, then the labels, per network); so the C++ program
rebuilds the same inputs, and only PyTorch's answers need to be shipped.

Run from the repository root with a PyTorch (Debian's python3-torch gives 1.13):
    /usr/bin/python3 chapters/ch03_autograd/pytorch_gradients.py
"""
import os

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
f64 = torch.float64


def leaf(values):
    return torch.tensor(values, dtype=f64, requires_grad=True)


def literal(v):
    return float(v).hex()


def row(t):
    return "{" + ", ".join(literal(v) for v in t.detach().reshape(-1).tolist()) + "}"


# The worked step: one XOR input through the 2-2-1 network.
x, y = torch.tensor([[1.0, 0.0]], dtype=f64), torch.tensor([[1.0]], dtype=f64)
params = [leaf([[0.5, -0.4], [0.3, 0.8]]), leaf([0.0, 0.1]), leaf([[0.7], [-0.6]]), leaf([0.1])]
h = torch.relu(x @ params[0] + params[1])
loss = F.binary_cross_entropy_with_logits(h @ params[2] + params[3], y)
loss.backward()

# 200 random networks: z = relu(relu(x W + b) W) v, W used by both layers, b broadcast from (1, 5).
gen = torch.Generator()
gen.manual_seed(0)
random_rows = []
for _ in range(200):
    rx = torch.randn(8, 5, dtype=f64, generator=gen)
    W = torch.randn(5, 5, dtype=f64, generator=gen).requires_grad_()
    b = torch.randn(1, 5, dtype=f64, generator=gen).requires_grad_()
    v = torch.randn(5, 1, dtype=f64, generator=gen).requires_grad_()
    ry = (torch.rand(8, 1, dtype=f64, generator=gen) > 0.5).to(f64)
    z = torch.relu(torch.relu(rx @ W + b) @ W) @ v
    F.binary_cross_entropy_with_logits(z, ry).backward()
    random_rows.append(row(torch.cat([W.grad.reshape(-1), b.grad.reshape(-1), v.grad.reshape(-1)])))

with open(os.path.join(HERE, "pytorch_gradients.h"), "w") as out:
    out.write("// PyTorch's gradients for chapter 03's networks, written by pytorch_gradients.py with\n"
              "// torch %s (hexadecimal floats: every bit of PyTorch's float64 answer). Do not edit.\n"
              "#pragma once\n\nnamespace pytorch {\n\n" % torch.__version__)
    out.write("// The XOR step: the loss, then dL/dW1 (2x2), dL/db1 (2), dL/dw2 (2x1), dL/db2 (1).\n")
    out.write("constexpr double kXorLoss = %s;\n" % literal(loss.item()))
    out.write("constexpr double kXorW1[] = %s;\n" % row(params[0].grad))
    out.write("constexpr double kXorB1[] = %s;\n" % row(params[1].grad))
    out.write("constexpr double kXorW2[] = %s;\n" % row(params[2].grad))
    out.write("constexpr double kXorB2[] = %s;\n\n" % row(params[3].grad))
    out.write("// The 200 random networks, one row each: dL/dW (5x5), dL/db (1x5), dL/dv (5x1).\n")
    out.write("constexpr double kRandom[200][35] = {\n")
    for r in random_rows:
        out.write("    " + r + ",\n")
    out.write("};\n\n}  // namespace pytorch\n")
print("wrote", os.path.join(HERE, "pytorch_gradients.h"))
