"""GateView: the paired gate's counts, δ and δ_lb, which path decided, and the prune steps.

Built from :func:`tsevo.analysis.gate_df` (every gate decision: the first gate, the prune retest,
the final gate) and :func:`tsevo.analysis.prune_df` (per update ``h_u``/``m_u`` and why it was kept
or removed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ipywidgets as ipw

from tsevo.analysis import gate_df, prune_df

from ._render import esc, figure_png, img_tag, kv_table, table_html

__all__ = ["GateView", "gate_figure", "gate_round_html"]


def gate_figure(gate: Any) -> Any:
    """Helped/harmed bars per decision and δ with its lower bound δ_lb, for one round's rows.

    Args:
        gate: The rows of :func:`tsevo.analysis.gate_df` for one round.

    Returns:
        A matplotlib figure (not attached to pyplot).
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 2.4))
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.2, top=0.85, wspace=0.35)
    ax1, ax2 = fig.subplots(1, 2)
    names = [str(d) for d in gate["decision"]]
    x = list(range(len(names)))
    ax1.bar([i - 0.2 for i in x], list(gate["h"]), width=0.4, color="#2e7d32", label="helped h")
    ax1.bar([i + 0.2 for i in x], list(gate["m"]), width=0.4, color="#c62828", label="harmed m")
    ax1.set_xticks(x, names)
    ax1.set_title("paired flips on validation", fontsize=9)
    ax1.legend(fontsize=7, frameon=False)
    for i, (d, lb) in enumerate(zip(gate["delta"], gate["delta_lb"], strict=True)):
        ax2.plot([i, i], [lb, d], color="#555", lw=2)
        ax2.plot([i], [d], "o", color="C0", label="δ" if i == 0 else None)
        ax2.plot([i], [lb], "v", color="C1", label="δ_lb" if i == 0 else None)
    ax2.axhline(0, color="#999", lw=1, ls="--")
    ax2.set_xticks(x, names)
    ax2.set_xlim(-0.6, max(len(names) - 0.4, 0.6))
    ax2.set_title("δ = (h − m)/n and δ_lb", fontsize=9)
    if names:
        ax2.legend(fontsize=7, frameon=False)
    return fig


def gate_round_html(gate: Any, prune: Any | None = None) -> str:
    """One round's gate decisions (counts, δ, δ_lb, path, reasons) and its prune steps as HTML."""
    if len(gate) == 0:
        return "<i>no gate decision in this round</i>"
    cols = ["decision", "path", "passed", "invalid", "h", "m", "n", "n_attempted", "delta"]
    parts = [table_html(gate.to_dict("records"), [*cols, "delta_lb", "error_rate"])]
    last = gate.to_dict("records")[-1]
    parts.append(
        kv_table(
            [
                ("decided by", f"{last['decision']} gate, path {last['path']}"),
                ("admitted", "yes" if last["passed"] and not last["invalid"] else "no"),
            ]
        )
    )
    for row in gate.to_dict("records"):
        reasons = "".join(f"<li>{esc(r)}</li>" for r in str(row["reasons"]).split("\n") if r)
        parts.append(
            f"<div><b>{esc(row['decision'])}</b> decision path:<ol style='margin:2px 0;"
            f"font-size:12px'>{reasons}</ol></div>"
        )
    if prune is not None and len(prune):
        first = prune.to_dict("records")[0]
        parts.append(
            f"<div><b>prune</b>: {esc(first['outcome'])} "
            f"(pruned library deployed: {'yes' if first['accepted'] else 'no'})</div>"
        )
        parts.append(
            table_html(
                prune.to_dict("records"),
                ["update", "helped", "harmed", "harmful", "removed", "reason"],
            )
        )
    else:
        parts.append("<div><b>prune</b>: not run (the first gate passed)</div>")
    return "".join(parts)


class GateView:
    """Every gate decision of a run, one round at a time, with a small figure.

    Args:
        gate: A frame from :func:`tsevo.analysis.gate_df`.
        prune: A frame from :func:`tsevo.analysis.prune_df` (or None).
        title: Heading.

    Attributes:
        round: Round selector.
        summary: HTML of the round's decisions, decision path and prune steps.
        plot: PNG of :func:`gate_figure`.
        view: The composed widget.
    """

    def __init__(self, gate: Any, prune: Any | None = None, *, title: str = "") -> None:
        self.gate = gate.reset_index(drop=True)
        self.prune = prune
        self.title = title
        rounds = sorted({int(r) for r in self.gate["round"]})
        self.round = ipw.Dropdown(
            options=rounds, value=rounds[-1] if rounds else None, description="round"
        )
        self.summary = ipw.HTML()
        self.plot = ipw.Image(format="png", layout=ipw.Layout(max_width="640px"))
        header = ipw.HTML(f"<b>{esc(title)}</b>") if title else ipw.HTML()
        self.view = ipw.VBox([header, self.round, self.plot, self.summary])
        self.round.observe(self._show, names="value")
        self._show()

    @classmethod
    def from_run(cls, run: str | Path) -> GateView:
        """Build from a run folder (``gate_df(run)`` and ``prune_df(run)``)."""
        return cls(gate_df(run), prune_df(run), title="gate decisions")

    def rows(self, round_: int) -> tuple[Any, Any | None]:
        """The gate rows and prune rows of one round."""
        g = self.gate[self.gate["round"] == round_]
        p = None if self.prune is None else self.prune[self.prune["round"] == round_]
        return g, p

    def panel_html(self, round_: int) -> str:
        """HTML of one round (see :func:`gate_round_html`)."""
        g, p = self.rows(round_)
        return f"<h4 style='margin:4px 0'>round {round_}</h4>" + gate_round_html(g, p)

    def plot_png(self, round_: int) -> bytes:
        """PNG of :func:`gate_figure` for one round."""
        g, _ = self.rows(round_)
        return figure_png(gate_figure(g), tight=False)

    def _show(self, _: Any = None) -> None:
        r = self.round.value
        if r is None:
            self.summary.value = "<i>no finished round</i>"
            self.plot.value = b""
            return
        self.summary.value = self.panel_html(int(r))
        self.plot.value = self.plot_png(int(r))

    # ------------------------------------------------------------------ static export
    def static_view(self) -> tuple[ipw.Widget, list[Any]]:
        """A kernel-free version: the round dropdown drives pre-rendered panels."""
        rounds = list(self.round.options)
        panels = [
            ipw.HTML(img_tag(self.plot_png(r), f"gate round {r}") + self.panel_html(r))
            for r in rounds
        ]
        dd = ipw.Dropdown(options=[f"round {r}" for r in rounds], description="round")
        stack = ipw.Stack(panels, selected_index=len(panels) - 1 if panels else None)
        if panels:
            dd.index = len(panels) - 1
        link = ipw.jslink((dd, "index"), (stack, "selected_index"))
        head = ipw.HTML(f"<b>{esc(self.title)}</b>")
        return ipw.VBox([head, dd, stack]), [link]

    # ------------------------------------------------------------------ display
    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.view._repr_mimebundle_(**kwargs)

    def _repr_html_(self) -> str:
        cols = ["round", "decision", "path", "passed", "h", "m", "n", "delta", "delta_lb"]
        return f"<div><b>GateView</b> {esc(self.title)}</div>" + table_html(
            self.gate.to_dict("records"), cols
        )

    def __repr__(self) -> str:
        if len(self.gate) == 0:
            return "GateView(no gate decision)"
        last = self.gate.to_dict("records")[-1]
        return (
            f"GateView({len(self.gate)} decision(s); last: round {last['round']} "
            f"{last['decision']} via {last['path']}, passed={bool(last['passed'])}, "
            f"h={last['h']} m={last['m']} n={last['n']} δ={last['delta']:+.4f} "
            f"δ_lb={last['delta_lb']:+.4f})"
        )
