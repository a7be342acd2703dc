"""Client randomizers of the local model (docs/math.md §9.6; Edmonds, Nikolov & Ullman 2020, Lemma 9 / Thm 10).

User j with record x holds the strategy column ``a = a_x ∈ R^m`` (the local plan normalises
``‖a_x‖₂ ≤ 1`` for every x) and sends ONE message Y with ``E[Y] = a``. The server releases
``R · Σ_j Y_j``. Two randomizers:

* :class:`L2Randomizer` -- pure ε-LDP, the ℓ2 randomizer of Duchi, Jordan & Wainwright 2018
  (DJW18) in the variant used by Blasiok, Bun, Nikolov & Steinke 2019 (BBNS19) and Edmonds, Nikolov & Ullman 2020,
  Lemma 9: ``‖Y‖ = B`` deterministic, ``Y − a`` is O(1/ε)-subgaussian.
* :class:`GaussianLocalRandomizer` -- (ε, δ)-LDP, ``Y = a + N(0, σ²I)`` with σ from the
  project's analytic Gaussian calibration (Balle & Wang 2018) for ℓ2 sensitivity 2 (any two
  inputs of the unit ball), or the exact diameter of the strategy's columns
  (:meth:`GaussianLocalRandomizer.from_strategy`).

ℓ2 randomizer: the mechanism
----------------------------
Let ``u = a/‖a‖`` (``u = e₁`` when a = 0; any fixed vector works there), ``q = ½ + ‖a‖/2`` and
``p = e^ε/(e^ε+1)``.

1. Sign step: ``ã = +u`` with probability q, ``ã = −u`` with probability 1 − q. Then
   ``E[ã] = (2q − 1)u = ‖a‖u = a`` -- the sign step alone is unbiased for a.
2. Hemisphere step: with probability p draw Z uniform on the hemisphere ``{z ∈ S^{m−1}:
   ⟨z, ã⟩ ≥ 0}``, otherwise uniform on the opposite hemisphere.
3. Output ``Y = B·Z``.

Derivation of B. Let ``c_m = E|⟨θ, Z₀⟩|`` for Z₀ uniform on ``S^{m−1}`` and any unit θ. The
marginal ``t = ⟨θ, Z₀⟩`` has density ∝ ``(1 − t²)^{(m−3)/2}`` on [−1, 1], so

    c_m = ∫₀¹ t (1−t²)^{(m−3)/2} dt / ∫₀¹ (1−t²)^{(m−3)/2} dt
        = [1/(m−1)] / [½ B(½, (m−1)/2)]  =  Γ(m/2) / (√π · Γ((m+1)/2))

(m = 1: Z₀ = ±1, c₁ = 1; m = 2: 2/π; m = 3: ½). By symmetry under reflections fixing ã, Z
uniform on the ã-hemisphere has mean ``c_m ã``, and on the opposite one ``−c_m ã``. Hence
``E[Z | ã] = (2p − 1) c_m ã`` and, with step 1, ``E[Y] = B (2p − 1) c_m a``. Unbiasedness
``E[Y] = a`` for every a in the unit ball therefore holds iff

    B = 1 / ((2p − 1) c_m) = (e^ε + 1)/(e^ε − 1) · √π · Γ((m+1)/2) / Γ(m/2).

m = 1 gives ``B = (e^ε+1)/(e^ε−1)``, randomized response on ±1. Since
``Γ((m+1)/2)/Γ(m/2) ≤ √(m/2)`` (Wendel/Gautschi) and → √(m/2), ``B ≤ coth(ε/2)·√(πm/2)``,
≈ √(2πm)/ε for small ε. (Some statements of the DJW18 randomizer print the constant
``√π·m·Γ((m−1)/2+1)/Γ(m/2+1) = 2√π Γ((m+1)/2)/Γ(m/2)``, twice the value above; with the
probabilities used here that constant gives ``E[Y] = 2a``. The value above is the one this
module uses and the tests pin by Monte Carlo and quadrature.) The Γ ratio is computed as
``exp(lgamma((m+1)/2) − lgamma(m/2))`` (``math.lgamma``) for m < 64 and by the asymptotic series
``log Γ(x+½) − log Γ(x) = ½ log x − 1/(8x) + 1/(192x³) − 1/(640x⁵) + 17/(14336x⁷)`` (x = m/2)
for m ≥ 64; both are within ~1e-14 relative for every m (checked against mpmath up to 10⁷).

Implementation as a sign flip. Draw a Gaussian vector g, ``Z₀ = g/‖g‖`` uniform on the sphere,
``W = g·(B/‖g‖) = B·Z₀``, and output ``Y = c·T·σ(g)·W`` with independent signs ``c = ±1``
(P(+) = q), ``T = ±1`` (P(+) = p) and ``σ(g) = +1`` if ``⟨g, a⟩ ≥ 0`` else −1 (u = e₁ if a = 0).
``σ·W`` is uniform on the u-hemisphere, ``c·σ·W`` uniform on the ã-hemisphere (ã = c·u), and T
keeps it there or moves it to the opposite hemisphere -- exactly steps 1-3.

Privacy (pure ε-LDP). Let ``π_a = P(cT = +1) = q p + (1−q)(1−p)``, a convex combination of p
and 1 − p. The direction ``Y/B`` has density, w.r.t. the uniform probability on the sphere,
``g_a(z) = 2π_a`` on ``{⟨z,u⟩ > 0}`` and ``2(1 − π_a)`` on ``{⟨z,u⟩ < 0}`` (the boundary is a null
set for m ≥ 2; for m = 1 the "sphere" is {±1} with weights ½ and there is no boundary). For
each fixed ã the hemisphere density takes only the values 2p and 2(1−p); the output law is the
mixture over ã, so g_a(z) ∈ [2(1−p), 2p] for every input a and every z, and for any inputs a, a'

    g_a(z) / g_{a'}(z) ≤ 2p / (2(1−p)) = e^ε.

The bound is attained for antipodal unit inputs ``a = u, a' = −u`` at every z with ⟨z,u⟩ > 0.

Privacy in floating point (what the code actually does). ``W = g·(B/‖g‖)`` is computed from g
alone and the output is ``Y = s·W`` with ``s = c·T·σ_a(g) ∈ {±1}``; float negation is exact, so
``Y ∈ {W, −W}``. g is independent of the input and of (c, T), and given g,
``P(s = +1 | g, a) = P(cT = σ_a(g))`` is π_a or 1 − π_a -- in [1 − p', p'] either way, whatever
the float sign function σ_a computes (no property of the rounded dot product is used). For any
float vector y ≠ 0 and inputs a, a',

    P(Y = y | a) = Σ_g P(g)·( [W(g) = y]·P(s=+1 | g, a) + [W(g) = −y]·P(s=−1 | g, a) ),

and every term is at most ``p'/(1−p')`` times the same term for a'. So the float mechanism is
exactly ε'-LDP, ``ε' = log(p'/(1−p'))``, p' the realised probability of T -- whatever the law
of g, and even conditionally on g. The code draws T as ``(word >> 11) < K`` from a 64-bit word
of ``rng``, so ``p' = K/2⁵³`` exactly, and chooses the integer K with ``K/(2⁵³ − K) ≤ e^ε``
certified in exact integer arithmetic (a 200-bit lower bound of e^ε from its Taylor series):
``effective_epsilon ≤ epsilon`` always. The gap is the granularity of K, ≲ (e^ε + 1)·2⁻⁵³
(~1e-15 at ε = 1, ~5e-8 at ε = 20), and ε' saturates at ln(2⁵³ − 1) ≈ 36.7 (larger ε buys
nothing: B → 1/c_m already). B is computed from the same p' (``2p' − 1 = (2K − 2⁵³)/2⁵³``
exactly), so the estimator stays unbiased for the mechanism actually run. The coin c uses a
53-bit uniform ``U < q``; its realised probability differs from q by ≤ 2⁻⁵³ (a bias ≤ B·2⁻⁵³
in E[Y], no effect on privacy: any q gives the bound). ε so small that ``K ≤ 2⁵²``
(ε ≲ 4e-16) is rejected.

Randomness. Privacy rests only on c and T, which are drawn from ``rng.words`` (SecureRandom =
os.urandom in production, TestRandom in tests). The direction Z₀ comes from a numpy
``Generator(PCG64(seed))`` whose 256-bit seed is taken from 4 words of ``rng`` (never a fixed
seed): standard normals (ziggurat) normalised to unit length. This is acceptable because, by
the floating-point argument above, privacy holds conditionally on g -- an adversary who knew
the PRNG state and every g would still see only the ε-LDP choice of sign; the quality of g
matters for unbiasedness (symmetry of the normal sampler), not for privacy. The batch path
and the single path run the same code (:meth:`L2Randomizer.randomize` is a batch of one), so
they agree in distribution by construction.

Moments. ``‖Y‖ = B`` deterministically (up to float rounding of the normalisation, ≲ 1e-15
relative; exactly ±B for m = 1). ``E[Y Yᵀ] = B² E[Z₀Z₀ᵀ] = (B²/m) I`` (the sign choices do
not change ``Z Zᵀ``), so ``Cov(Y) = (B²/m) I − a aᵀ``, per-coordinate variance
``B²/m − a_i² ≤ B²/m`` and ``tr Cov(Y) = E‖Y − a‖² = B² − ‖a‖²``.

Subgaussian constant (the definition of Edmonds, Nikolov & Ullman 2020, §3.1: X is σ-subgaussian if ``E exp(X²/σ²) ≤ 2``; a
vector if every unit projection is). For Z₀ uniform on the sphere, ``(1 + ⟨θ,Z₀⟩)/2`` is
Beta((m−1)/2, (m−1)/2), which is strictly subgaussian (Marchal & Arbel 2017): ``E e^{λ⟨θ,Z₀⟩}
≤ e^{λ²/(2m)}``. So ``X = B⟨θ,Z₀⟩`` has variance proxy ``s² = B²/m`` and, by the Gaussian
trick ``E e^{X²/t²} = E_G E e^{√2 G X/t} ≤ (1 − 2s²/t²)^{−1/2}``, ``E_unif e^{X²/t²} ≤ 3/2`` for
``t² = 3.6 s²``. The output density w.r.t. the uniform law is ≤ 2p' ≤ 2, so
``E_Y[e^{X²/t²} − 1] ≤ 2·(3/2 − 1)`` and ``E_Y e^{X²/t²} ≤ 2``: ``⟨θ, Y⟩`` is √3.6·B/√m-
subgaussian. The ψ₂ (Luxemburg) norm is a norm and a constant c is |c|/√(ln 2)-subgaussian,
so ``Y − a`` is ``σ = √3.6·B/√m + 1/√ln 2 ≤ 2.38·coth(ε/2) + 1.21 = O(1/ε)``-subgaussian.
Also ``|⟨θ, Y − a⟩| ≤ B + 1`` gives ``(B + 1)/√ln 2``; :meth:`L2Randomizer.subgaussian_constant`
returns the smaller of the two.

Gaussian randomizer. ``Y = a + σ·N(0, I)``; any two inputs of the unit ball differ by ≤ 2 in
ℓ2, so ``σ = analytic_gaussian_sigma(ε, δ, 2)`` gives (ε, δ)-LDP; ``from_strategy`` uses the
exact diameter ``max_{x,y} ‖a_x − a_y‖`` of the strategy's columns (rounded up by a rigorous
floating-point error bound). Normals: Box–Muller on 53-bit uniforms drawn directly from
``rng.words`` (2 words per pair of normals, ``U₁ = (k+1)/2⁵³ ∈ (0,1]``, ``U₂ = k'/2⁵³``), in
both paths -- here privacy does depend on the noise, so it is drawn from the secure source
itself. It is floating-point noise (truncated at ≈ 8.6σ, on a float grid): subject to the
Mironov 2012 caveat of docs/math.md §6.5 like the project's "float" sampler; the ℓ2 randomizer has no
such caveat (its privacy argument above is exact in floating point).
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import Any

import numpy as np

from factorize.kinds.local.errors import LocalError
from factorize.numerics import gamma
from factorize.privacy.calibration import analytic_gaussian_sigma
from factorize.privacy.guarantees import PrivacyError
from factorize.privacy.sampling import RandomSourceError, SecureRandom, TestRandom

__all__ = [
    "NORM_TOLERANCE",
    "GaussianLocalRandomizer",
    "L2Randomizer",
    "hemisphere_threshold",
    "l2_scale",
    "sphere_mean_abs",
    "strategy_diameter",
]

NORM_TOLERANCE = 1e-12
"""Inputs may have ‖a‖ ≤ 1 + NORM_TOLERANCE (float rounding of a normalised column); the
check is certified (``_inputs``), so the exact norm of an accepted input is ≤ 1 + NORM_TOLERANCE."""

#: ℓ2 diameter of the accepted inputs, rounded up: any two differ by at most 2(1 + tolerance).
UNIT_BALL_DIAMETER = math.nextafter(2.0 * (1.0 + 2.0 * NORM_TOLERANCE), math.inf)

_TWO53 = 1 << 53
_SHIFT = np.uint64(11)
_INV53 = 2.0**-53
_CHUNK_VALUES = 1 << 21  # floats per temporary block in the batch paths (16 MB)


# ============================================================================================
# validation


def _epsilon(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise PrivacyError(f"epsilon must be a real number, got {v!r}")
    x = float(v)
    if not math.isfinite(x) or not x > 0:
        raise PrivacyError(f"epsilon must be finite and > 0, got {v!r}")
    return x


def _dim(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or int(v) < 1:
        raise LocalError(f"dim must be an integer >= 1, got {v!r}")
    return int(v)


def _check_rng(rng: Any) -> Any:
    if rng is None:
        return SecureRandom()
    if not isinstance(rng, (SecureRandom, TestRandom)):
        raise RandomSourceError("rng must be a SecureRandom or TestRandom instance, "
                                f"got {type(rng).__name__}")
    return rng


def _inputs(x: Any, dim: int, batch: bool) -> tuple[np.ndarray, np.ndarray]:
    """Validated float64 rows (n×m) and their norms; LocalError on shape, NaN/inf, ‖a‖ > 1."""
    arr = np.asarray(x, dtype=np.float64)
    if batch:
        if arr.ndim != 2 or arr.shape[1] != dim:
            raise LocalError(f"expected an (n, {dim}) array of inputs, got shape {arr.shape}")
    else:
        if arr.shape != (dim,):
            raise LocalError(f"expected an input vector of shape ({dim},), got shape {arr.shape}")
        arr = arr.reshape(1, dim)
    if not np.all(np.isfinite(arr)):
        raise LocalError("inputs must be finite")
    norms = np.sqrt(np.einsum("ij,ij->i", arr, arr))
    # certified: |computed − exact| ≤ γ_m·exact (+ underflowed squares, < 2^-1000 in all)
    m = arr.shape[1]
    slack = gamma(m + 4)  # Higham γ_{m+4}
    if norms.size and not float(norms.max()) * (1.0 + slack) + 2.0 ** -500 <= 1.0 + NORM_TOLERANCE:
        raise LocalError(f"inputs must have ‖a‖₂ ≤ 1 (the plan normalises its columns), "
                         f"got max ‖a‖ = {float(norms.max())!r}")
    return arr, norms


def _uniform53(words: np.ndarray) -> np.ndarray:
    """The integers ``word >> 11`` ∈ [0, 2⁵³) (exactly representable as float64)."""
    return np.asarray(words, dtype=np.uint64) >> _SHIFT


def _generator(rng: Any) -> np.random.Generator:
    """numpy PCG64 generator seeded from 256 bits of ``rng`` (never a fixed seed)."""
    seed = int.from_bytes(np.ascontiguousarray(rng.words(4)).tobytes(), "little")
    return np.random.Generator(np.random.PCG64(seed))


# ============================================================================================
# the constants of the ℓ2 randomizer


def _log_gamma_half_ratio(m: int) -> float:
    """``log Γ((m+1)/2) − log Γ(m/2)``, accurate to ~1e-14 relative in the ratio for every m
    (``math.lgamma`` below 64, tested against mpmath: no scipy on the local run path)."""
    if m < 64:
        return math.lgamma((m + 1) / 2.0) - math.lgamma(m / 2.0)
    x = m / 2.0
    x2 = x * x
    return 0.5 * math.log(x) + (-1.0 / (8.0 * x) + 1.0 / (192.0 * x * x2)
                                - 1.0 / (640.0 * x * x2 * x2) + 17.0 / (14336.0 * x * x2**3))


def sphere_mean_abs(dim: int) -> float:
    """``c_m = E|⟨θ, Z⟩| = Γ(m/2)/(√π Γ((m+1)/2))``, Z uniform on ``S^{m−1}``, θ a unit vector."""
    m = _dim(dim)
    return math.exp(-0.5 * math.log(math.pi) - _log_gamma_half_ratio(m))


def _exp_lower_fixed(x: float, bits: int = 200) -> int:
    """An integer L with ``L / 2^bits ≤ e^x`` (x ≥ 0), within ~1e-57 relative for x ≤ 40.

    Taylor series of e^{x'} with x' = floor(x·2^bits)/2^bits ≤ x, every term rounded down, so the
    partial sum is a lower bound; x is capped at 40 (a lower bound of e^x is all we need).
    """
    f = Fraction(min(float(x), 40.0))
    xf = (f.numerator << bits) // f.denominator
    total = term = 1 << bits
    j = 1
    while term:
        term = ((term * xf) >> bits) // j
        total += term
        j += 1
    return total


def hemisphere_threshold(epsilon: float) -> int:
    """The integer K of the hemisphere coin ``T = [(word >> 11) < K]``, P(T) = p' = K/2⁵³.

    The largest K (up to a few units) with ``K/(2⁵³ − K) ≤ e^ε`` certified in exact integer
    arithmetic, so the mechanism is ε'-LDP with ε' = log(K/(2⁵³−K)) ≤ ε. PrivacyError if
    ε is too small for any K > 2⁵² (ε ≲ 4e-16).
    """
    eps = _epsilon(epsilon)
    bits = 200
    lower = _exp_lower_fixed(eps, bits)
    p = 1.0 / (1.0 + math.exp(-eps))  # in [0.5, 1]: p·2⁵³ is an integer
    k = min(int(p * _TWO53) + 8, _TWO53 - 1)
    while k > _TWO53 // 2 and (k << bits) > (_TWO53 - k) * lower:
        k -= 1
    if 2 * k <= _TWO53:
        raise PrivacyError(f"epsilon={epsilon!r} is too small for the 53-bit hemisphere coin "
                           "(p would round to 1/2)")
    return k


def l2_scale(epsilon: float, dim: int) -> float:
    """B of the ℓ2 randomizer: ``1/((2p' − 1)·c_m)`` with ``p' = K/2⁵³`` (module docstring);
    equals ``(e^ε+1)/(e^ε−1)·√π·Γ((m+1)/2)/Γ(m/2)`` up to ~1e-15 relative."""
    k = hemisphere_threshold(epsilon)
    m = _dim(dim)
    log_b = (math.log(_TWO53) - math.log(2 * k - _TWO53)
             + 0.5 * math.log(math.pi) + _log_gamma_half_ratio(m))
    return math.exp(log_b)


# ============================================================================================
# ℓ2 randomizer


class L2Randomizer:
    """Pure ε-LDP ℓ2 randomizer (DJW18 / BBNS19; module docstring): ``‖Y‖ = B``, ``E[Y] = a``.

    ``epsilon``: the nominal ε; the mechanism run is ``effective_epsilon``-LDP,
    ``effective_epsilon ≤ epsilon`` (certified). ``dim``: m. Attributes: ``scale`` (B), ``p``
    (realised hemisphere probability K/2⁵³), ``mean_abs`` (c_m).
    """

    def __init__(self, epsilon: float, dim: int) -> None:
        self.epsilon = _epsilon(epsilon)
        self.dim = _dim(dim)
        self._k = hemisphere_threshold(self.epsilon)
        self.p = self._k / _TWO53
        self.effective_epsilon = math.log1p((2 * self._k - _TWO53) / (_TWO53 - self._k))
        self.mean_abs = sphere_mean_abs(self.dim)
        self.scale = l2_scale(self.epsilon, self.dim)

    def __repr__(self) -> str:
        return f"L2Randomizer(epsilon={self.epsilon!r}, dim={self.dim}, scale={self.scale:.6g})"

    # ---------------------------------------------------------------- sampling

    def randomize(self, a: Any, rng: Any = None) -> np.ndarray:
        """One message for input ``a`` (shape (m,), ‖a‖ ≤ 1). ``rng``: SecureRandom (default)
        or TestRandom. Same code as :meth:`randomize_batch` with one row."""
        X, _ = _inputs(a, self.dim, False)
        return self.randomize_batch(X, rng)[0]

    def randomize_batch(self, inputs: Any, rng: Any = None) -> np.ndarray:
        """One independent message per row of ``inputs`` (n×m, every row ‖a‖ ≤ 1); returns n×m.

        Randomness: 4 words of ``rng`` seed the direction generator, then 2 words per row for the
        coins c and T (module docstring); vectorised in blocks of ~2²¹ values.
        """
        rng = _check_rng(rng)
        X, norms = _inputs(inputs, self.dim, True)
        n, m = X.shape
        out = np.empty((n, m), dtype=np.float64)
        if n == 0:
            return out
        gen = _generator(rng)
        words = rng.words(2 * n)
        # c = +1 w.p. q = ½ + ‖a‖/2 (53-bit uniform U < q); T = +1 w.p. K/2⁵³ (exact integers).
        q = np.minimum(0.5 + 0.5 * norms, 1.0)
        c_pos = _uniform53(words[:n]).astype(np.float64) * _INV53 < q
        t_pos = _uniform53(words[n:]) < np.uint64(self._k)
        sign = np.where(c_pos == t_pos, 1.0, -1.0)  # c·T
        zero = norms == 0.0
        rows = max(1, _CHUNK_VALUES // m)
        for s in range(0, n, rows):
            e = min(n, s + rows)
            g = out[s:e]  # the Gaussian vectors are drawn in place and scaled in place
            gen.standard_normal(out=g)
            nrm = np.sqrt(np.einsum("ij,ij->i", g, g))
            while True:  # a zero Gaussian vector has probability ~0; redraw it if it occurs
                bad = np.nonzero(nrm == 0.0)[0]
                if bad.size == 0:
                    break
                g[bad] = gen.standard_normal((bad.size, m))
                nrm[bad] = np.sqrt(np.einsum("ij,ij->i", g[bad], g[bad]))
            # σ: sign of ⟨g, a⟩ (u = e₁ when a = 0); any function of (g, a) keeps the privacy proof
            d = np.einsum("ij,ij->i", g, X[s:e])
            d[zero[s:e]] = g[zero[s:e], 0]
            sgn = np.where(d >= 0.0, 1.0, -1.0) * sign[s:e]  # c·T·σ
            if m == 1:  # Z₀ = ±1 exactly: randomized response on ±B
                g[:, 0] = np.where(g[:, 0] >= 0.0, self.scale, -self.scale) * sgn
            else:  # Y = ±W, W = g·(B/‖g‖) = B·Z₀ (float negation is exact)
                g *= (sgn * (self.scale / nrm))[:, None]
        return out

    # ---------------------------------------------------------------- properties

    def density_ratio_bound(self) -> float:
        """``max_{a,a',y} g_a(y)/g_{a'}(y) = p'/(1−p') = e^{effective_epsilon} ≤ e^ε`` (tight)."""
        return self._k / (_TWO53 - self._k)

    def output_density(self, y: Any, a: Any) -> np.ndarray:
        """Density of the output direction ``y/‖y‖`` (rows of y, shape (..., m)) for input a,
        w.r.t. the uniform probability on the sphere of radius B (m = 1: the two points ±B,
        weight ½ each). ``2π_a`` on ``⟨y,u⟩ ≥ 0``, ``2(1−π_a)`` on ``⟨y,u⟩ < 0``; u = a/‖a‖ (e₁ if
        a = 0). The hemisphere boundary (a null set for m ≥ 2) gets the "+" value, as sampled."""
        X, norms = _inputs(a, self.dim, False)
        u = X[0] if norms[0] > 0 else np.eye(self.dim)[0]
        q = min(0.5 + 0.5 * float(norms[0]), 1.0)
        pi = q * self.p + (1.0 - q) * (1.0 - self.p)
        Y = np.asarray(y, dtype=np.float64)
        if Y.shape[-1] != self.dim:
            raise LocalError(f"outputs must have last dimension {self.dim}")
        return np.where(Y @ u >= 0.0, 2.0 * pi, 2.0 * (1.0 - pi))

    def noise_covariance(self, a: Any) -> np.ndarray:
        """``Cov(Y) = (B²/m) I − a aᵀ``."""
        X, _ = _inputs(a, self.dim, False)
        return (self.scale**2 / self.dim) * np.eye(self.dim) - np.outer(X[0], X[0])

    def noise_covariance_trace(self, a: Any) -> float:
        """``E‖Y − a‖² = B² − ‖a‖²``."""
        _, norms = _inputs(a, self.dim, False)
        return self.scale**2 - float(norms[0]) ** 2

    @property
    def coordinate_variance_bound(self) -> float:
        """``B²/m ≥ Var(Y_i) = B²/m − a_i²`` for every input."""
        return self.scale**2 / self.dim

    def subgaussian_constant(self) -> float:
        """σ with ``E exp(⟨θ, Y−a⟩²/σ²) ≤ 2`` for all unit θ and inputs (module docstring):
        ``min(√3.6·B/√m + 1/√ln2, (B + 1)/√ln2)``."""
        inv = 1.0 / math.sqrt(math.log(2.0))
        spread = math.sqrt(3.6) * self.scale / math.sqrt(self.dim) + inv
        return min(spread, (self.scale + 1.0) * inv)


# ============================================================================================
# Gaussian randomizer


def _box_muller(rng: Any, count: int) -> np.ndarray:
    """``count`` standard normals by Box–Muller on 53-bit uniforms from ``rng.words``."""
    k = (count + 1) // 2
    w = rng.words(2 * k)
    u1 = (_uniform53(w[:k]).astype(np.float64) + 1.0) * _INV53  # (0, 1]
    u2 = _uniform53(w[k:]).astype(np.float64) * _INV53  # [0, 1)
    r = np.sqrt(-2.0 * np.log(u1))
    theta = (2.0 * math.pi) * u2
    return np.concatenate((r * np.cos(theta), r * np.sin(theta)))[:count]


def strategy_diameter(A: Any) -> float:
    """A certified upper bound on ``max_{x,y} ‖a_x − a_y‖₂`` over the columns of ``A`` (m×N):
    the L2 replace sensitivity of A (``privacy.sensitivity.replace_sensitivity``: scaled by a
    power of two, Gram identity with a rigorous rounding allowance — never an underestimate,
    even for entries whose squares would underflow in float64)."""
    from factorize.privacy.sensitivity import replace_sensitivity

    M = np.asarray(A, dtype=np.float64)
    if M.ndim != 2 or M.shape[1] == 0:
        raise LocalError(f"A must be an m×N matrix with N ≥ 1 columns, got shape {M.shape}")
    if not np.all(np.isfinite(M)):
        raise LocalError("A must be finite")
    if M.shape[1] == 1:
        return 0.0
    return float(replace_sensitivity(M, "l2").value)


class GaussianLocalRandomizer:
    """(ε, δ)-LDP Gaussian randomizer ``Y = a + N(0, σ²I)`` (module docstring).

    ``sensitivity``: ℓ2 diameter of the input set; 2(1 + NORM_TOLERANCE) rounded up for the
    accepted inputs (default: the unit ball with the tolerance), or the exact
    diameter of the strategy's columns (:meth:`from_strategy`). Inputs must satisfy ‖a‖ ≤ 1
    (the plan's normalisation); with a sensitivity below 2 the caller also guarantees that the
    inputs are columns of the strategy it was computed from. ``sigma`` (= ``scale``) is
    ``analytic_gaussian_sigma(ε, δ, sensitivity)``.
    """

    def __init__(self, epsilon: float, delta: float, dim: int,
                 sensitivity: float = UNIT_BALL_DIAMETER) -> None:
        self.epsilon = _epsilon(epsilon)
        if (isinstance(delta, bool) or not isinstance(delta, numbers.Real)
                or not 0.0 < float(delta) < 1.0):
            raise PrivacyError(f"delta must satisfy 0 < delta < 1, got {delta!r}")
        self.delta: float = float(delta)
        self.dim: int = _dim(dim)
        if (isinstance(sensitivity, bool) or not isinstance(sensitivity, numbers.Real)
                or not math.isfinite(float(sensitivity)) or not float(sensitivity) > 0):
            raise PrivacyError(f"sensitivity must be finite and > 0, got {sensitivity!r}")
        self.sensitivity: float = float(sensitivity)
        self.sigma: float = analytic_gaussian_sigma(self.epsilon, self.delta, self.sensitivity)
        self.scale: float = self.sigma

    @classmethod
    def from_strategy(cls, epsilon: float, delta: float, A: Any) -> GaussianLocalRandomizer:
        """Calibrated to the diameter of the columns of ``A`` (m×N, every ‖a_x‖ ≤ 1)."""
        M = np.asarray(A, dtype=np.float64)
        if M.ndim != 2:
            raise LocalError("A must be an m×N matrix")
        _inputs(M.T, M.shape[0], True)  # finite, columns in the unit ball
        diam = strategy_diameter(M)
        if not diam > 0:
            raise LocalError("the strategy's columns are all zero: nothing to calibrate")
        return cls(epsilon, delta, M.shape[0], sensitivity=diam)

    def __repr__(self) -> str:
        return (f"GaussianLocalRandomizer(epsilon={self.epsilon!r}, delta={self.delta!r}, "
                f"dim={self.dim}, sensitivity={self.sensitivity!r}, sigma={self.sigma:.6g})")

    def randomize(self, a: Any, rng: Any = None) -> np.ndarray:
        """One message ``a + σ·N(0, I)`` (Box–Muller on words of ``rng``; default SecureRandom)."""
        rng = _check_rng(rng)
        X, _ = _inputs(a, self.dim, False)
        return X[0] + self.sigma * _box_muller(rng, self.dim)

    def randomize_batch(self, inputs: Any, rng: Any = None) -> np.ndarray:
        """One independent message per row of ``inputs`` (n×m), same sampler as ``randomize``."""
        rng = _check_rng(rng)
        X, _ = _inputs(inputs, self.dim, True)
        n, m = X.shape
        out = np.empty((n, m), dtype=np.float64)
        rows = max(1, _CHUNK_VALUES // m)
        for s in range(0, n, rows):
            e = min(n, s + rows)
            z = _box_muller(rng, (e - s) * m).reshape(e - s, m)
            np.add(X[s:e], self.sigma * z, out=out[s:e])
        return out

    def noise_covariance_trace(self, a: Any = None) -> float:
        """``E‖Y − a‖² = m σ²`` (any input)."""
        if a is not None:
            _inputs(a, self.dim, False)
        return self.dim * self.sigma**2

    @property
    def coordinate_variance_bound(self) -> float:
        """``Var(Y_i) = σ²``."""
        return self.sigma**2
