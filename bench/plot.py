"""One matplotlib PNG per workload: median time per system (log scale), min-max as error bars."""

from __future__ import annotations

import os
from typing import Sequence

from .harness import Table, WorkloadResult

__all__ = ["plot_workloads"]


def _label(t: Table, r) -> str:
    if t.key and t.key in r.extras:
        return f"{r.system} [{r.extras[t.key]}]"
    return r.system


def plot_workloads(results: Sequence[WorkloadResult], outdir: str, machine: dict | None = None) -> list[str]:
    """Write ``<outdir>/<wid>.png`` for each workload result.

    Each table becomes one panel: a horizontal bar per system that was timed
    (median, seconds, log axis) with min-max whiskers; systems that did not
    run are listed in the panel with their status. For merged tables with a
    numeric key (W3 (i)), the panel draws median time against the key instead.

    Returns:
        The paths written.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(outdir, exist_ok=True)
    paths = []
    for res in results:
        tables = [t for t in res.tables if t.timed]
        if not tables:
            continue
        heights = [max(2.2, 0.32 * (len(t.rows) if not _numeric_key(t) else 8) + 1.2) for t in tables]
        fig, axes = plt.subplots(len(tables), 1, figsize=(9, sum(heights)),
                                 gridspec_kw={"height_ratios": heights}, squeeze=False)
        for ax, t in zip(axes[:, 0], tables):
            if _numeric_key(t):
                _plot_lines(ax, t)
            else:
                _plot_bars(ax, t)
        title = f"{res.wid}: {res.title}"
        if machine:
            title += f"\n{machine.get('cpu', '')}, {machine.get('cores', '?')} cores"
        fig.suptitle(title, fontsize=9)
        fig.tight_layout()
        path = os.path.join(outdir, f"{res.wid.lower()}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
        paths.extend(_extra_plots(res, outdir))
    return paths


def _extra_plots(res: WorkloadResult, outdir: str) -> list[str]:
    """Workload-specific plots: the workload module's ``extra_plots(result, outdir)``, if it has one."""
    import importlib

    from . import WORKLOADS
    mod = importlib.import_module(WORKLOADS[res.wid]) if res.wid in WORKLOADS else None
    fn = getattr(mod, "extra_plots", None)
    return list(fn(res, outdir)) if fn is not None else []


def _numeric_key(t: Table) -> bool:
    return bool(t.key) and all(isinstance(r.extras.get(t.key), (int, float)) for r in t.rows)


def _plot_bars(ax, t: Table) -> None:
    ok = [r for r in t.rows if r.median is not None]
    other = [r for r in t.rows if r.median is None]
    labels = [_label(t, r) for r in ok]
    med = [r.median for r in ok]
    lo = [r.median - r.min for r in ok]
    hi = [r.max - r.median for r in ok]
    colors = ["tab:red" if r.system.startswith("symgraph") else "tab:blue" for r in ok]
    y = range(len(ok))
    if ok:
        ax.barh(list(y), med, xerr=[lo, hi], color=colors, alpha=0.8, capsize=2)
        ax.set_yticks(list(y))
        ax.set_yticklabels(labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlabel("seconds per call (median; whiskers min-max)", fontsize=8)
    if other:
        txt = "\n".join(f"{_label(t, r)}: {r.status}" for r in other)
        ax.text(1.01, 1.0, txt, transform=ax.transAxes, fontsize=6, va="top", ha="left")
    ax.set_title(t.name, fontsize=9)
    ax.tick_params(axis="x", labelsize=8)


def _plot_lines(ax, t: Table) -> None:
    systems = []
    for r in t.rows:
        if r.system not in systems:
            systems.append(r.system)
    for s in systems:
        pts = sorted((r.extras[t.key], r.median) for r in t.rows if r.system == s and r.median is not None)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=s,
                    linewidth=2.5 if s.startswith("symgraph") else 1.2)
    ax.set_yscale("log")
    ax.set_xlabel(t.key, fontsize=8)
    ax.set_ylabel("seconds per call (median)", fontsize=8)
    ax.legend(fontsize=7)
    ax.set_title(t.name, fontsize=9)
