"""Dense factors W = R·A (``kinds.factorization.build``): the certified γ_F / γ₂ optimum of the dual solvers
under Gaussian noise, the pure-DP strategy search (``pure_dp``) under Laplace noise. It forms
the k×N workload, so it applies only where that is affordable."""

from __future__ import annotations

from typing import Any

from .base import Kind, PlanProblem

#: The dense family applies to a workload other than one Kronecker product (which it plans
#: factor by factor) when densifying W stores at most this many entries (k·N) ...
DENSE_MAX_ENTRIES = 50_000_000
#: ... and a histogram of at most this many cells;
DENSE_MAX_CELLS = 1 << 27
#: for a union of several Kronecker products under either noise, when the dense solvers'
#: work on the k×N matrix — SVDs, solves, pivoted QR and the products W·A⁺, O(k·N·min(k, N))
#: each — stays below this many multiply-adds (vstack(scale(3,kron(total:16,allrange:32)),
#: kron(allrange:16,allrange:32)), k = 72 336, N = 512: over a minute and a 300 MB plan dense;
#: a Laplace union with k = 48,960, N = 960 spent 79 s in the pure-DP candidates' W·A⁺);
DENSE_MAX_WORK = 1 << 31
#: and under Laplace noise, for a union of several Kronecker products, over at most this many
#: cells: the pure-DP search and its γ_F candidate (an N×N eigenproblem per dual iteration)
#: took over 20 minutes at N = 4,096 (vstack(kron(prefix:64,total:64),kron(total:64,prefix:64))).
DENSE_MAX_LAPLACE_UNION_CELLS = 2048
#: and under Gaussian noise, for a union of several Kronecker products, over at most this many
#: cells: the γ_F dual eigendecomposes the N×N Gram WᵀW every iteration (O(N³)) — a census-
#: shaped union over (2, 2, 24, 200), k = 133, N = 19,200, passed the k-side work test above
#: and ran over 10 minutes in 14 GB.
DENSE_MAX_GAUSSIAN_UNION_CELLS = 2048


#: Wall-clock budget of the dense family inside the strategy search when the user set no
#: ``--time-limit``: its dual iteration eigendecomposes the N×N Gram every step and can crawl
#: on a rank-deficient union — under Gaussian noise vstack(kron(prefix:2,prefix:32,total:16),
#: kron(identity:2,prefix:32,total:16),scale(3,kron(prefix:2,width:32:13,width:16:7))), N =
#: 1,024, rank 464: 42 iterations in 40 s, far from its gap, the search past 5 minutes; under
#: Laplace noise (its pure-DP candidates start from the same dual)
#: vstack(scale(3,kron(width:8:4,prefix:7,total:16)),kron(total:8,width:7:3,total:16),
#: kron(total:8,width:7:2,vstack(identity:16,total:16))), N = 896: over 10 minutes, 32 s with
#: the budget. Past it the family is recorded as stopped at the limit and the other families
#: plan; the dense plans of the HDMM suite take at most 7 s.
SEARCH_SECONDS = 30.0


class Dense:
    name = "dense"
    kind: Kind = "dense"

    def applies(self, problem: PlanProblem) -> str | None:
        k, N = problem.shape
        if N > DENSE_MAX_CELLS:
            return f"N = {N:,} cells (> {DENSE_MAX_CELLS:,})"
        blocks = problem.blocks()
        n_blocks = 0 if blocks is None else len(blocks)
        union = n_blocks > 1
        # one Kronecker product is planned factor by factor (``kinds.factorization.build``), never densified
        if (blocks is None or union) and k * N > DENSE_MAX_ENTRIES:
            return f"densifying W stores k·N = {k * N:,} entries (> {DENSE_MAX_ENTRIES:,})"
        if problem.noise == "gaussian" and problem.is_marginal_family():
            return ("a family of marginals under Gaussian noise: the residual family is the "
                    "certified optimum over all strategies")
        if union and problem.noise == "laplace" and N > DENSE_MAX_LAPLACE_UNION_CELLS:
            return (f"a union of {n_blocks} Kronecker products over N = {N:,} cells "
                    f"(> {DENSE_MAX_LAPLACE_UNION_CELLS:,}): the dense pure-DP search takes minutes")
        if union and problem.noise == "gaussian" and N > DENSE_MAX_GAUSSIAN_UNION_CELLS:
            return (f"a union of {n_blocks} Kronecker products over N = {N:,} cells "
                    f"(> {DENSE_MAX_GAUSSIAN_UNION_CELLS:,}): the γ_F dual eigendecomposes the "
                    "N×N Gram every iteration")
        if union and k * N * min(k, N) > DENSE_MAX_WORK:
            return (f"a union whose dense solves cost k·N·min(k,N) = {k * N * min(k, N):.3g} "
                    f"multiply-adds (> {DENSE_MAX_WORK:.3g})")
        return None

    def plan(self, problem: PlanProblem) -> Any:
        from factorize.kinds.factorization.kind import KIND
        from factorize.kinds.factorization.options import FactorizationOptions

        options = problem.options
        if options is None or options.time_limit is None:
            from dataclasses import replace

            from solvers.options import SolverOptions

            options = replace(options or SolverOptions(), time_limit=SEARCH_SECONDS)
        return KIND.build(FactorizationOptions(
            workload=problem.workload, guarantee=problem.guarantee, norm=problem.norm,
            relation=problem.relation.key, domain=problem.domain, noise_family=problem.noise,
            solver_options=options, gap_tol=problem.gap_tol,
            allow_weak_guarantee=problem.allow_weak_guarantee, search_seed=problem.seed))
