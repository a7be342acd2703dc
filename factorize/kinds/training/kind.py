"""The training kind (a long-horizon Toeplitz strategy for DP training, Denisov et al. 2022;
Choquette-Choo et al. 2023): ``KIND``, its :class:`PlanKind` (``kinds.protocol``) — the plan
class (``.plan``), file (``.codec``), verifier (``.verify``), builder (``.build``, imported only
by :meth:`TrainingKind.build`) and its release, the noise stream of ``.stream.open_stream``.

The protocol's release halves read a data file once; a training plan's release is a stream of
correlated noise drawn step by step inside the user's training loop, over gradients the
package never sees. So :meth:`TrainingKind.measure` refuses — before anything is read or
charged — and says to open the stream from Python instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from factorize.executor.session import ExecutionError
from factorize.kinds.protocol import Measurement, PlanKind
from factorize.plan.files import PlanBytes

from .plan import TrainingPlan

if TYPE_CHECKING:
    from factorize.executor.linear_release import Release
    from factorize.plan.check_record import PlanCheck
    from factorize.privacy import Guarantee
    from workloads import Workload

    from .options import TrainingOptions

#: What ``factorize run`` says of a training plan.
NOT_A_DATA_PASS = ("a training plan is not run over a data file: its release is a stream of "
                   "correlated noise added to the clipped gradient sums inside your training "
                   "loop. Open it in Python with factorize.kinds.training.stream.open_stream("
                   "PLAN, d, ledger=LEDGER, dataset=NAME) (verified, charged once) and add "
                   "np.asarray(step) to step t's gradient sum")


class TrainingKind:
    """Training plans (module docstring)."""

    name = "training"
    central = True

    def load(self, source: str | Path | PlanBytes) -> TrainingPlan:
        from .codec import load_training_plan

        return load_training_plan(source)

    def save(self, plan: TrainingPlan, path: str | Path) -> None:
        from .codec import save_training_plan

        save_training_plan(plan, path)

    def verify(self, plan: TrainingPlan, *, certificate: bool = True,
               allow_weak_guarantee: bool = False, workload: Workload | None = None) -> PlanCheck:
        from .verify import verify_training_plan  # no certificate and no workload matrix

        return verify_training_plan(plan, allow_weak_guarantee=allow_weak_guarantee)

    def guarantee(self, plan: TrainingPlan) -> Guarantee:
        return plan.guarantee

    def relation(self, plan: TrainingPlan) -> str:
        return "add_remove"

    def sampler(self, plan: TrainingPlan) -> str:
        """No data-pass sampler: a training plan's noise is drawn by the stream a training loop
        opens (``kinds.training.stream.open_stream``: ChaCha20 polar Gaussians, float). The
        pipeline asks for the sampler before it reads any data, so ``run`` refuses here first,
        with the pointer to that API (not with the float-noise refusal)."""
        raise ExecutionError(NOT_A_DATA_PASS)

    def summary(self, plan: TrainingPlan) -> list[str]:
        return plan.summary_lines()

    def measure(self, plan: TrainingPlan, check: PlanCheck, data_path: str, *, engine: str,
                allow_extra_columns: bool) -> Measurement:
        raise ExecutionError(NOT_A_DATA_PASS)

    def release(self, plan: TrainingPlan, check: PlanCheck, measurement: Measurement, rng: Any, *,
                allow_float_noise: bool, metadata: dict[str, Any], deadline: float) -> Release:
        raise ExecutionError(NOT_A_DATA_PASS)

    def build(self, options: TrainingOptions) -> TrainingPlan:
        from .build import build

        return build(options)


KIND: PlanKind[TrainingPlan, TrainingOptions] = TrainingKind()
