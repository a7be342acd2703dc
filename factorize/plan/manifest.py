"""What every plan kind writes and reads alike: the manifest's domain, noise and guarantee
sections (:func:`domain_manifest`, :func:`noise_manifest`, :func:`guarantee_text`) and the
interval multipliers of a release (:func:`ci_method`, :func:`ci_multiplier`: the two-sided
normal quantile at α₂ = 0.049 for Gaussian noise, Chebyshev's ``1/√α₂`` otherwise — with the
n bound's 10⁻³ the union bound gives ≥ 95% coverage; :data:`Z_95` for the local model's CLT
intervals). Nothing here imports a builder or a solver."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # typed values only
    from factorize.privacy import Guarantee, NoiseSpec
    from workloads import Domain


#: Noise share of the 5% failure probability of the 95% intervals (the n bound takes 10⁻³).
NOISE_ALPHA = 0.049
#: The two-sided normal quantile at NOISE_ALPHA: Φ⁻¹(1 − 0.0245).
Z_NOISE = 1.9685916691865948
#: Chebyshev at NOISE_ALPHA: P(|X| ≥ sd/√α) ≤ α, valid for any distribution with that variance.
CHEBYSHEV_NOISE = math.sqrt(1.0 / NOISE_ALPHA)
#: The two-sided 95% normal quantile Φ⁻¹(0.975): the local model's CLT intervals, whose 5%
#: is not shared with an n bound.
Z_95 = 1.959963984540054

#: The post-processing methods a plan may state (``postprocess``).
POSTPROCESS_METHODS = ("nonneg", "integer", "least_squares")


def guarantee_text(g: Guarantee) -> str:
    """A guarantee in short form: ``(ε=1, δ=1e-06)-DP``, ``ρ=0.5-zCDP``, ``ε=1 pure DP``."""
    from factorize.privacy import ZCDP, ApproxDP

    if isinstance(g, ApproxDP):
        return f"(ε={g.epsilon:g}, δ={g.delta:g})-DP"
    if isinstance(g, ZCDP):
        return f"ρ={g.rho:g}-zCDP"
    return f"ε={g.epsilon:g} pure DP"


def domain_manifest(domain: Domain) -> dict[str, Any]:
    """A domain as it is written into a plan's manifest (with its public schema, when it has
    one: ``docs/schema.md``)."""
    out: dict[str, Any] = {"attributes": list(domain.attributes), "sizes": [int(s) for s in domain.sizes]}
    if domain.schema is not None:
        out["schema"] = domain.schema.to_dict()
    return out


#: What a plan's manifest says of a floating-point sampler.
FLOAT_NOISE_WARNING = ("floating-point noise (Mironov 2012): not an exact sampler; "
                       "`factorize run` refuses it unless --allow-float-noise")


def noise_manifest(noise: NoiseSpec, **extra: Any) -> dict[str, Any]:
    """A noise spec as it is written into a plan's manifest: ``NoiseSpec.to_dict()``, the
    ``extra`` fields that are not None, and a warning for a float sampler (for people reading
    the file; a reader parses the spec's own fields and ignores the rest)."""
    out = noise.to_dict()
    out.update({k: v for k, v in extra.items() if v is not None})
    if noise.sampler == "float":
        out["warning"] = FLOAT_NOISE_WARNING
    return out


def ci_method(noise: NoiseSpec) -> str:
    """The intervals' quantile: ``normal`` for Gaussian noise, else ``chebyshev`` (any noise)."""
    return "normal" if noise.family == "gaussian" else "chebyshev"


def ci_multiplier(noise: NoiseSpec) -> float:
    """The multiplier c of ``estimate ± c·se``: :data:`Z_NOISE` or :data:`CHEBYSHEV_NOISE`."""
    return Z_NOISE if ci_method(noise) == "normal" else CHEBYSHEV_NOISE
