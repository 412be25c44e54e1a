#!/usr/bin/env python3
"""Fits the polynomials of fused_math.inc and checks them against the file.

Each polynomial is a weighted minimax fit: the weight turns the polynomial's error into the
relative error of the function it serves (exp, erf, tanh or log; for GELU the absolute error of
Phi), so the maximum printed is in
units of 2^-24 of the final result, before the float arithmetic adds its own rounding. The fit is
Lawson's algorithm (iteratively reweighted least squares) on Chebyshev points, with the
references computed by mpmath at 40 digits. The coefficients are then rounded to float one at a
time, lowest power first, each rounding followed by a refit of the higher powers so that they
absorb it.

    pip install numpy mpmath
    python3 common/src/fusion/fit_fused_math.py          # prints the polynomials
    python3 common/src/fusion/fit_fused_math.py --check  # and fails unless the .inc has them

The printed calls (Horner's rule; tiny_poly15 for degree 15) are the ones in fused_math.inc,
letter for letter apart from whitespace. The accuracy of the finished functions is measured by tests/fused_math_test.cpp.
"""
import os
import re
import sys

import mpmath as mp
import numpy as np

mp.mp.dps = 40
UNIT = 2.0**-24

# erf's far branch maps a in [0.875, 3.92] onto v in [-1, 1] as v = a * scale + shift, one fused
# multiply-add with both constants rounded to float; its polynomial starts from erf(0.875).
ERF_V_SCALE = float(np.float32(2 / (3.92 - 0.875)))
ERF_V_SHIFT = float(np.float32(-(3.92 + 0.875) / 2 * ERF_V_SCALE))
ERF_AT_0875 = float(np.float32(float(mp.erf(mp.mpf(0.875)))))
# GELU's polynomial maps t = x^2 in [0, GELU_X^2] onto u in [-1, 1] as u = t * scale - 1; beyond
# |x| = GELU_X, 1 - Phi(|x|) < 2^-25.
GELU_X = 5.42
GELU_U_SCALE = float(np.float32(2 / GELU_X**2))


def chebyshev_points(lo, hi, n=4000):
    return lo + (np.cos(np.linspace(0.0, np.pi, n)) + 1.0) / 2.0 * (hi - lo)


def lawson(basis, target, weight, iterations=400):
    """Coefficients minimising max |weight * (basis @ c - target)|, and that maximum."""
    lam = np.full(basis.shape[0], 1.0 / basis.shape[0])
    best = None
    for _ in range(iterations):
        sw = np.sqrt(lam) * weight
        c, *_ = np.linalg.lstsq(basis * sw[:, None], target * sw, rcond=None)
        err = np.abs(weight * (basis @ c - target))
        if best is None or err.max() < best[0]:
            best = (err.max(), c)
        lam = lam * err
        lam /= lam.sum()
    return best[1]


def fit_float(basis, target, weight):
    """A minimax fit whose coefficients are floats, and its maximum weighted error."""
    fixed = []
    rest = target.copy()
    for j in range(basis.shape[1]):
        c = lawson(basis[:, j:], rest, weight)
        cj = float(np.float32(c[0]))
        fixed.append(cj)
        rest = rest - cj * basis[:, j]
    err = np.abs(weight * (basis @ np.array(fixed) - target)).max()
    return fixed, err


def float_literal(v):
    """A float as a C++ hexadecimal literal with six hex digits: 0x1.555492p-3f."""
    m = re.fullmatch(r"(-?)0x1\.([0-9a-f]*)p([+-]\d+)", float(v).hex())
    sign, digits, exp = m.groups()
    return f"{sign}0x1.{(digits + '0' * 6)[:6]}p{exp}f"


def poly_call(var, coeffs):
    """tiny_poly(v, c0, c1, ..., cn), the call fused_math.inc makes: Horner's rule, or for
    degree 15 tiny_poly15, whose top eight terms go by Estrin's scheme."""
    name = "tiny_poly15" if len(coeffs) == 16 else "tiny_poly"
    return f"{name}({var}, " + ", ".join(float_literal(c) for c in coeffs) + ")"


def powers(x, degree):
    return np.stack([x**k for k in range(degree + 1)], axis=1)


def mpvec(f, xs):
    return np.array([float(f(mp.mpf(float(v)))) for v in xs])


def fits():
    """(name, variable, coefficients, maximum weighted error) for each polynomial."""
    out = []
    # exp: e^r = 1 + r + r^2 q(r) on |r| <= 0.3467 (ln2/2 and the rounding of x/ln2).
    r = chebyshev_points(-0.3467, 0.3467)
    e = mpvec(mp.exp, r)
    out.append(("expf q", "r", *fit_float(powers(r, 4) * (r * r)[:, None], e - 1 - r, 1 / e)))
    # erf, a < 0.875: erf(a) = a + a q(a^2).
    a = chebyshev_points(1e-4, 0.875)
    erf = mpvec(mp.erf, a)
    out.append(("erff q", "t", *fit_float(powers(a * a, 6) * a[:, None], erf - a, 1 / erf)))
    # erf, 0.875 <= a <= 3.92: erf(a) = erf(0.875) + u P(v), u = a - 0.875 and v the same a mapped
    # onto [-1, 1] by one fused multiply-add (ERF_V_SCALE, ERF_V_SHIFT), P of degree 14 in v.
    # The weight makes the error relative to erf, which lies in [0.78, 1] here.
    a = chebyshev_points(0.875, 3.92, 5000)
    erf = mpvec(mp.erf, a)
    v = a * ERF_V_SCALE + ERF_V_SHIFT
    out.append(("erff P", "v", *fit_float(powers(v, 14) * (a - 0.875)[:, None], erf - ERF_AT_0875,
                                         1 / erf)))
    # GELU: Phi(x) - 1/2 = x P(u), u = x^2 * GELU_U_SCALE - 1 (x^2 rounded to float, as computed),
    # for x in [0, GELU_X]; the error is absolute in Phi, which is what the result needs (for
    # x > 0 the result is x Phi with Phi in [1/2, 1]; for x < 0 the error is absolute anyway).
    x = chebyshev_points(0, GELU_X, 5000)
    phi = mpvec(lambda v: mp.ncdf(v) - mp.mpf(0.5), x)
    u = (x * x).astype(np.float32).astype(np.float64) * GELU_U_SCALE - 1
    out.append(("geluf P", "u", *fit_float(powers(u, 15) * x[:, None], phi, np.ones_like(x))))
    # tanh, a < 0.875: tanh(a) = a + a^3 p(a^2).
    a = chebyshev_points(1e-4, 0.875)
    th = mpvec(mp.tanh, a)
    out.append(("tanhf p", "t", *fit_float(powers(a * a, 7) * (a**3)[:, None], th - a, 1 / th)))
    # log: log(1 + f) = f - f^2/2 + f^3 p(f) on [sqrt(1/2) - 1, sqrt(2) - 1].
    f = chebyshev_points(np.sqrt(0.5) - 1, np.sqrt(2) - 1)
    f = f[np.abs(f) > 1e-5]
    lg = mpvec(mp.log1p, f)
    basis = powers(f, 8) * (f**3)[:, None]
    out.append(("logf p", "f", *fit_float(basis, lg - f + f * f / 2, 1 / lg)))
    return out


def main():
    check = "--check" in sys.argv[1:]
    here = os.path.dirname(os.path.abspath(__file__))
    source = re.sub(r"\s+", "", open(os.path.join(here, "fused_math.inc")).read())
    missing = 0
    for name, var, coeffs, err in fits():
        text = poly_call(var, coeffs)
        # The call as fused_math.inc makes it.
        found = re.sub(r"\s+", "", text) in source
        missing += not found
        note = "" if found else "  (NOT in fused_math.inc)"
        print(f"{name}: max error {err / UNIT:.4f} x 2^-24{note}")
        print(f"  {text}")
    # The constants of the range reductions: 1/ln2, and ln2 split into ln2_hi (15 significant
    # bits, so that k * ln2_hi is exact for the exponents used) and ln2_lo, the float nearest
    # ln2 - ln2_hi.
    ln2_hi = float.fromhex("0x1.62e4p-1")
    for name, value in (("1/ln2", 1 / mp.log(2)), ("ln2_lo", mp.log(2) - ln2_hi),
                        ("erf's v scale", ERF_V_SCALE), ("erf's v shift", ERF_V_SHIFT),
                        ("erf(0.875)", ERF_AT_0875), ("GELU's u scale", GELU_U_SCALE)):
        text = float_literal(float(np.float32(float(value))))
        found = text in source
        missing += not found
        print(f"{name}: {text}{'' if found else '  (NOT in fused_math.inc)'}")
    if check and missing:
        sys.exit(f"{missing} polynomial(s) differ from fused_math.inc")


if __name__ == "__main__":
    main()
