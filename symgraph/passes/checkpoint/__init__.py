"""Checkpointing (rematerialization): choose which forward values the backward sweep keeps.

Reverse mode keeps every forward value its backward sweep reads (the
residuals). This pass trades memory for recomputation on a joint
forward+backward graph. Each strategy only *chooses the saved set* (plus, for
the nested Revolve schedule, which recomputed copy serves which backward
step); one shared rewrite (`rematerialize`) then duplicates the unsaved
forward values into the backward region as recomputed nodes, tagged
("remat", k) so CSE never merges them back, with role "recomputed". The
memory-aware `schedule` places each recomputed value right before its first
backward reader, which is what lowers the planned peak.

Strategies (`apply_checkpoint(graph, strategy)`): None/"none", "sqrt",
"revolve" (or `Revolve(snapshots=s)`, ("revolve", s)), "mincut", a byte
budget (int), or a policy predicate. User regions: `checkpoint(fn, policy)`
with JAX-style policies and `checkpoint_name`.

The package, one job per module (lowest first):
- `api`: the user annotations and policies (`checkpoint`, `checkpoint_name`,
  `save_only_these_names`, `nothing_saveable`, ..., `names_of`);
- `analysis`: reading a joint graph: markers stripped and remembered, the
  forward/backward split and the chain structure the planners work on;
- `plan`: `Plan`, what a planner chooses, and the planners "none", policy
  and "sqrt" (Chen et al.'s segments);
- `revolve`: Griewank & Walther's binomial schedule and its planner;
- `mincut`: the minimum-bytes cut planner;
- `remat`: `rematerialize`, the shared rewrite every plan goes through;
- `budget`: the byte-budget planner (the cheapest candidate plan that fits);
- `apply`: `apply_checkpoint`, the pass (strategy -> planner -> rewrite);
- `report`: `saved_residuals`, `print_saved_residuals`, `checkpoint_stats`.

References:
    Chen, Xu, Zhang, Guestrin, "Training Deep Nets with Sublinear Memory Cost",
    arXiv:1604.06174 (2016).
    Griewank & Walther, "Algorithm 799: Revolve", ACM TOMS 26(1) (2000).
    PyTorch AOTAutograd min-cut rematerialization partitioner
    (torch/_functorch/partitioners.py), design post dev-discuss #467.
    JAX `jax.checkpoint` policies (docs.jax.dev, gradient-checkpointing).
"""

from ..cost import node_flops as flops
from .analysis import _analyze, _strip_markers  # noqa: F401  (private names the tests read)
from .api import (
    checkpoint,
    checkpoint_name,
    dots_saveable,
    dots_with_no_batch_dims_saveable,
    everything_saveable,
    names_of,
    nothing_saveable,
    save_any_names_but_these,
    save_from_both_policies,
    save_only_these_names,
)
from .apply import apply_checkpoint
from .mincut import _plan_mincut  # noqa: F401  (read by the tests)
from .plan import Plan, _segment_starts  # noqa: F401  (_segment_starts: read by the tests)
from .remat import rematerialize
from .report import _residual_list, checkpoint_stats, print_saved_residuals, saved_residuals  # noqa: F401
from .revolve import Revolve, revolve_extra_steps, revolve_schedule

__all__ = [
    "Plan",
    "Revolve",
    "apply_checkpoint",
    "checkpoint",
    "checkpoint_name",
    "checkpoint_stats",
    "dots_saveable",
    "dots_with_no_batch_dims_saveable",
    "everything_saveable",
    "flops",
    "names_of",
    "nothing_saveable",
    "print_saved_residuals",
    "rematerialize",
    "revolve_extra_steps",
    "revolve_schedule",
    "save_any_names_but_these",
    "save_from_both_policies",
    "save_only_these_names",
    "saved_residuals",
]
