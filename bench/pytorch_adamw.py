#!/usr/bin/python3
"""torch.optim.AdamW on the size bench_optim.cpp times: 8,393,728 float32 parameters, as one
tensor and as 1024 tensors, with foreach=False (PyTorch 1.13's default on the CPU: one chain of
tensor ops per parameter) and foreach=True (the _foreach_ ops over all parameters at once).
Memory is reused: the parameters, gradients and state exist before the timed steps (the first
steps create the state), and the two temporaries of 32 MiB that each step of the single tensor
allocates (exp_avg_sq.sqrt() and its quotient) would each be a fresh mmap from glibc (above its
32 MiB mmap threshold), 8192 page faults apiece at ~11 us a page (docs: DESIGN.md "Speed"), so
the script first tells glibc to keep freed memory in its heap (mallopt: no mmap, no trimming);
--fresh-memory leaves glibc as it is, to show what a default PyTorch process pays. Prints the
median milliseconds per step over REPEATS runs of STEPS steps, for one thread, for the default
thread count, and for every core, where those differ.

    /usr/bin/python3 bench/pytorch_adamw.py [--fresh-memory]     (PyTorch 1.13, CPU)
"""
import ctypes
import os
import sys
import statistics
import time

import torch

TOTAL = 8_393_728  # 2048 * 4096 + 2048 * 2
WARMUP, STEPS, REPEATS = 3, 10, 5


def params_for(count):
    """`count` parameters holding TOTAL elements in all (the first takes the remainder)."""
    g = torch.Generator().manual_seed(0)
    each = TOTAL // count
    sizes = [each + (TOTAL - each * count if k == 0 else 0) for k in range(count)]
    params = [torch.randn(n, generator=g).requires_grad_() for n in sizes]
    for p in params:
        p.grad = torch.randn(p.shape, generator=g) * 1e-2
    return params


def ms_per_step(count, foreach):
    params = params_for(count)
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=1e-2, foreach=foreach)
    for _ in range(WARMUP):
        opt.step()
    runs = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(STEPS):
            opt.step()
        runs.append((time.perf_counter() - start) / STEPS * 1e3)
    return statistics.median(runs)


def reuse_freed_memory():
    """mallopt(M_MMAP_MAX, 0) and mallopt(M_TRIM_THRESHOLD, 1 GiB): glibc serves every block from
    its heap and keeps what is freed, so a step's temporaries reuse the last step's pages."""
    libc = ctypes.CDLL("libc.so.6")
    M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4
    if not (libc.mallopt(M_MMAP_MAX, 0) and libc.mallopt(M_TRIM_THRESHOLD, 1 << 30)):
        raise SystemExit("mallopt failed")


def main():
    fresh = "--fresh-memory" in sys.argv[1:]
    if not fresh:
        reuse_freed_memory()
    default_threads = torch.get_num_threads()
    thread_counts = sorted({1, default_threads, os.cpu_count() or 1})
    print(f"torch {torch.__version__}, CPU capability "
          f"{torch.backends.cpu.get_cpu_capability() if hasattr(torch.backends, 'cpu') else '?'}, "
          f"default threads {default_threads}, cores {os.cpu_count()}")
    print(f"AdamW step on {TOTAL:,} float32 parameters, median of {REPEATS} x {STEPS} steps, "
          f"{'fresh memory (glibc defaults)' if fresh else 'memory reused'}")
    print(f"{'threads':>7s} {'tensors':>7s} {'foreach':>7s} {'ms/step':>8s}")
    for threads in thread_counts:
        torch.set_num_threads(threads)
        for count in (1, 1024):
            for foreach in (False, True):
                print(f"{threads:7d} {count:7d} {str(foreach):>7s} "
                      f"{ms_per_step(count, foreach):8.2f}", flush=True)


if __name__ == "__main__":
    main()
