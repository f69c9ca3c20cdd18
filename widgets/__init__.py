"""Inspectors for tsevo runs, imported as ``tsevo.widgets``.

Widgets and figures are built only from the tidy frames in :mod:`tsevo.analysis` (plus the run's
series for plots); they compute nothing. Each widget (:class:`FlipExplorer`, :class:`LibraryBrowser`,
:class:`GateView`, :class:`ChainView`, :class:`TaxonomyBrowser`) has a ``from_run(run_dir)``
constructor, a composed ``view``, plain
``_repr_html_``/``__repr__`` fallbacks, and a kernel-free ``static_view`` used by the offline HTML
export (:func:`export_html`). The notebooks' figures (:func:`accuracy_figure`,
:func:`deltas_figure`, :func:`examples_figure`, :func:`comparison_figure`, displayed with
:func:`show`) and the paper studies' figures (:mod:`widgets.studies`: :func:`main_table_figure`,
:func:`transfer_figure`, :func:`ablation_figure`, :func:`gate_calibration_figure`,
:func:`rounds_figure`, :func:`funnel_figure`, picked by notebook with :func:`study_figure`) are
matplotlib figures not attached to pyplot.
"""

from ._render import (
    calibration_figure,
    calibration_tree_html,
    calibration_tree_text,
    draw_calibration_tree,
)
from .chains import ChainView
from .export import build_page, export_html
from .figures import (
    accuracy_figure,
    comparison_figure,
    deltas_figure,
    example_questions,
    examples_figure,
    show,
    show_sources,
)
from .flips import FLIP_CLASSES, FlipExplorer, filter_flips
from .gate import GateView, gate_figure
from .library import LibraryBrowser, filter_tools
from .studies import (
    STUDY_FIGURES,
    ablation_figure,
    funnel_figure,
    gate_calibration_figure,
    main_table_figure,
    rounds_figure,
    study_figure,
    transfer_figure,
)
from .taxonomy import TaxonomyBrowser, traces_explorer

__all__ = [
    "FLIP_CLASSES",
    "STUDY_FIGURES",
    "ChainView",
    "FlipExplorer",
    "GateView",
    "LibraryBrowser",
    "TaxonomyBrowser",
    "ablation_figure",
    "accuracy_figure",
    "build_page",
    "calibration_figure",
    "calibration_tree_html",
    "calibration_tree_text",
    "comparison_figure",
    "deltas_figure",
    "draw_calibration_tree",
    "example_questions",
    "examples_figure",
    "export_html",
    "filter_flips",
    "filter_tools",
    "funnel_figure",
    "gate_calibration_figure",
    "gate_figure",
    "main_table_figure",
    "rounds_figure",
    "show",
    "show_sources",
    "study_figure",
    "traces_explorer",
    "transfer_figure",
]
