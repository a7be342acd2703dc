"""jax_privacy's side of ``python -m benchmarks --suite training``: a standalone script.

Run with the Python of jax_privacy's own environment (``jax-privacy==2.0.0``; this script never
imports factorize, so the two programs share only the strategy files it writes)::

    /work/jaxp-venv/bin/python benchmarks/external/jax_privacy_runner.py --n 256 --epochs 4 --out DIR
    /work/jaxp-venv/bin/python benchmarks/external/jax_privacy_runner.py --n 256 --bands 32 --out DIR

It runs ``jax_privacy.matrix_factorization.dense.optimize`` on the prefix-sum workload in 64-bit
arithmetic: ``epochs=K`` is the fixed-epoch-order program of Choquette-Choo et al. (ICML 2023;
columns of one pattern orthogonal, Σ of a pattern's squared column norms ≤ 1); ``--bands B``
with ``equal_norm=True`` is its min-separation form (X banded to |i − j| < B, so every pattern of
steps at least B apart has orthogonal columns). It writes ``DIR/strategy.npy`` (the
lower-triangular strategy C it returns) and ``DIR/result.json`` (``seconds``: wall time of the
optimisation, jit compilation included). The objective is computed by the caller from C alone.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--bands", type=int, default=None)
    parser.add_argument("--max-steps", type=int, default=10000)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    import jax

    jax.config.update("jax_enable_x64", True)
    import numpy as np
    from jax_privacy.matrix_factorization import dense

    start = time.perf_counter()
    if args.bands is None:
        C = dense.optimize(args.n, epochs=args.epochs, max_optimizer_steps=args.max_steps)
    else:
        C = dense.optimize(args.n, bands=args.bands, equal_norm=True, max_optimizer_steps=args.max_steps)
    C = np.asarray(C, dtype=np.float64)
    seconds = time.perf_counter() - start
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "strategy.npy", C)
    (out / "result.json").write_text(json.dumps({"seconds": seconds, "n": args.n, "epochs": args.epochs,
                                                 "bands": args.bands, "jax": jax.__version__}))


if __name__ == "__main__":
    main()
