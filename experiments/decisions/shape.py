"""The reference distribution of the skew-robust paired t (`--shape skewed`), by simulation.

A one-sided t test on n per-seed differences rejects more often than its level when the
differences are skewed toward its tail: the samples that miss the long tail have both a small
mean and a small spread. How much more depends on the shape, not on the skewness alone (at
skewness 0.71, n = 12 and a = 0.001: 3.5x for a gamma, 4.3x for a Weibull; `--ratios`). So the critical
values are read off the worst of five unimodal families with that skewness (gamma, lognormal,
inverse Gaussian, skew-normal, Weibull): for each n, the most extreme lower quantile of t among
them, at each level. Written to fineprune_cli/analysis/decide/shape_reference.json, which
`analysis.decide.shape` reads (`make shape-reference`, about 20 minutes on one loaded core).

    python experiments/decisions/shape.py                 # the shipped table
    python experiments/decisions/shape.py --reps 200000   # a quick look, not for shipping
    python experiments/decisions/shape.py --ratios        # results/decisions/shape.md: why
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from scipy import optimize
from scipy import stats as sps

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "fineprune_cli" / "analysis" / "decide" / "shape_reference.json"
SKEW = 0.71  # the skewness of the differences toward a test's tail that its level is to hold for
SIZES = (*range(2, 17), 18, 20, 24, 30, 40, 50, 70, 100)  # seeds per comparison; between: interpolated
LEVELS = tuple(float(x) for x in np.logspace(-5, math.log10(0.5), 46))
CHUNK = 250_000


def families(skew: float) -> dict:
    """name -> (draw(rng, shape), mean): right-skewed by `skew`, each from numpy's generators."""
    k = (2 / skew) ** 2
    s = optimize.brentq(lambda s: (math.exp(s * s) + 2) * math.sqrt(math.exp(s * s) - 1) - skew, 1e-4, 3)
    c = optimize.brentq(lambda c: float(sps.weibull_min(c).stats(moments="s")) - skew, 1.0, 3.6)
    mu = (skew / 3) ** 2  # inverse Gaussian, scale 1: skewness 3 sqrt(mu)
    a = optimize.brentq(lambda a: float(sps.skewnorm(a).stats(moments="s")) - skew, 0.01, 1e3)
    d = a / math.sqrt(1 + a * a)

    def skewnormal(rng, shape):
        return d * np.abs(rng.standard_normal(shape)) + math.sqrt(1 - d * d) * rng.standard_normal(shape)

    return {
        "gamma": (lambda rng, shape: rng.standard_gamma(k, shape), k),
        "lognormal": (lambda rng, shape: rng.lognormal(0.0, s, shape), math.exp(s * s / 2)),
        "inverse Gaussian": (lambda rng, shape: rng.wald(mu, 1.0, shape), mu),
        "skew-normal": (skewnormal, d * math.sqrt(2 / math.pi)),
        "Weibull": (lambda rng, shape: rng.weibull(c, shape), math.gamma(1 + 1 / c)),
    }


def t_values(draw, mean: float, n: int, reps: int, rng) -> np.ndarray:
    out = []
    for start in range(0, reps, CHUNK):
        x = draw(rng, (min(CHUNK, reps - start), n))
        out.append((x.mean(1) - mean) / (x.std(1, ddof=1) / math.sqrt(n)))
    return np.concatenate(out)


RATIO_SIZES = (5, 8, 12)
RATIO_LEVELS = (1e-4, 1e-3, 1e-2)


def _others(skew: float) -> dict:
    """Shapes outside the reference's families, or mixed with a normal arm, at the same skewness."""
    p = 0.3  # a jump in 30% of the seeds: a two-point mixture plus normal noise
    jump = optimize.brentq(
        lambda j: j**3 * p * (1 - p) * (1 - 2 * p) / (j * j * p * (1 - p) + 1) ** 1.5 - skew, 0.1, 50
    )
    arm = skew * 2**1.5  # an arm this skewed less an equally noisy normal arm: differences of `skew`
    k = (2 / arm) ** 2

    def less_normal(rng, shape):
        return (rng.standard_gamma(k, shape) - k) / math.sqrt(k) + rng.standard_normal(shape)

    def two_point(rng, shape):
        return jump * (rng.random(shape) < p) + rng.standard_normal(shape)

    return {
        "a gamma arm less a normal one": (less_normal, 0.0),
        "a jump in 30% of seeds (two-point)": (two_point, jump * p),
    }


def ratios(reps: int) -> str:
    """How often a lower-tail Student t test rejects a true null on right-skewed differences, over
    its level, per shape, seed count and level; and the same for the reference and for Hall's
    transformation fed the true skewness."""
    rng = np.random.default_rng(56)
    shapes = {**families(SKEW), **_others(SKEW)}
    header = ["shape (skewness 0.71)"] + [f"{n} seeds, {a:g}" for n in RATIO_SIZES for a in RATIO_LEVELS]
    rows = []
    for name, (draw, mean) in shapes.items():
        cells = []
        for n in RATIO_SIZES:
            t = t_values(draw, mean, n, reps, rng)
            for a in RATIO_LEVELS:
                cells.append(f"{np.mean(t < sps.t.ppf(a, n - 1)) / a:.2f}")
            hall = t + SKEW / (3 * math.sqrt(n)) * t**2 + SKEW**2 / (27 * n) * t**3 + SKEW / (6 * math.sqrt(n))
            if name == "gamma":
                hall_cells = [f"{np.mean(hall < sps.t.ppf(a, n - 1)) / a:.2f}" for a in RATIO_LEVELS]
                rows.append(("Hall's transformation of a gamma's t, fed the true skewness", n, hall_cells))
        rows.append((name, None, cells))
    body = [f"| {name} | " + " | ".join(cells) + " |" for name, n, cells in rows if n is None]
    hall_row = " | ".join(c for name, n, cells in rows if n is not None for c in cells)
    lines = [
        "# Student's t on skewed differences: rejections of a true null over the level",
        "",
        f"Made by `python experiments/decisions/shape.py --ratios` ({reps:,} samples of t per shape and seed "
        "count): a lower-tail test at each level on right-skewed differences (skewness 0.71); 1.00 holds "
        "the level, 2.00 rejects twice as often.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + " --- |" * len(header),
        *body,
        f"| Hall's transformation of a gamma's t, fed the true skewness | {hall_row} |",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=8_000_000, help="samples of t per family and n")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--ratios", action="store_true", help="write results/decisions/shape.md instead")
    args = parser.parse_args()
    if args.ratios:
        page = ROOT / "results" / "decisions" / "shape.md"
        page.write_text(ratios(min(args.reps, 2_000_000)))
        print(page.read_text())
        return
    start = time.time()
    rng = np.random.default_rng(20261202)
    found = families(SKEW)
    quantiles, worst = [], []
    for n in SIZES:
        per = {
            name: np.quantile(t_values(draw, mean, n, args.reps, rng), LEVELS) for name, (draw, mean) in found.items()
        }
        table = np.vstack(list(per.values()))
        quantiles.append([round(float(q), 5) for q in table.min(0)])
        worst.append([list(per)[i] for i in table.argmin(0)])
        student = sps.t.ppf(1e-3, n - 1)
        print(
            f"n {n}: at 0.001 Student {student:.3f}, worst {np.interp(-3, np.log10(LEVELS), table.min(0)):.3f}",
            file=sys.stderr,
            flush=True,
        )
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True, cwd=ROOT)
    page = {
        "about": "lower quantiles of the one-sample t statistic over n draws, the most extreme of five "
        "right-skewed families at each level (experiments/decisions/shape.py)",
        "skew": SKEW,
        "families": list(found),
        "reps": args.reps,
        "commit": commit.stdout.strip(),
        "seconds": round(time.time() - start),
        "levels": [float(f"{x:.6g}") for x in LEVELS],
        "sizes": list(SIZES),
        "quantiles": quantiles,
        "worst": [max(set(w), key=w.count) for w in worst],
    }
    args.out.write_text(json.dumps(page, indent=0) + "\n")
    print(f"wrote {args.out} in {time.time() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
