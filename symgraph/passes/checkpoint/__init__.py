"""Checkpointing (rematerialization): choose which forward values the backward sweep keeps.

The whole pass is in `analysis` (moved from symgraph/passes/checkpoint.py)
until it is split by concern; this package re-exports its public names and
the private ones the tests read.
"""

from .analysis import (
    Plan,
    Revolve,
    _analyze,
    _plan_mincut,
    _residual_list,
    _segment_starts,
    _strip_markers,
    apply_checkpoint,
    checkpoint,
    checkpoint_name,
    checkpoint_stats,
    dots_saveable,
    dots_with_no_batch_dims_saveable,
    everything_saveable,
    flops,
    names_of,
    nothing_saveable,
    print_saved_residuals,
    rematerialize,
    revolve_extra_steps,
    revolve_schedule,
    save_any_names_but_these,
    save_from_both_policies,
    save_only_these_names,
    saved_residuals,
)

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
