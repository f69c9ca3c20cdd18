"""catch22: the 22 CAnonical Time-series CHaracteristics (group ``canonical``), via pycatch22.

Lubba, Sethi, Knaute, Schultz, Fulcher and Jones (2019), "catch22: CAnonical Time-series
CHaracteristics", Data Mining and Knowledge Discovery 33: a subset of hctsa's 7700 features chosen
for classification performance and low redundancy. The C implementation (pycatch22) z-scores the
series itself, so every feature is invariant to positive affine changes of y.
"""

from __future__ import annotations

from typing import Any

import pycatch22

from ._common import Result, as_series, finish, guarded, is_flat
from ._registry import primitive

__all__ = ["CATCH22_NAMES", "catch22"]

#: pycatch22's short names, in its order (long names in the docstring of :func:`catch22`).
CATCH22_NAMES = (
    "mode_5",
    "mode_10",
    "outlier_timing_pos",
    "outlier_timing_neg",
    "acf_timescale",
    "acf_first_min",
    "low_freq_power",
    "median_freq",
    "forecast_error",
    "whiten_timescale",
    "high_fluctuation",
    "stretch_high",
    "stretch_decreasing",
    "entropy_pairs",
    "ami2",
    "trev",
    "ami_timescale",
    "transition_variance",
    "periodicity",
    "embedding_dist",
    "rs_range",
    "dfa",
)


@primitive(group="canonical", outputs=CATCH22_NAMES)
@guarded
def catch22(y: Any) -> Result:
    """The 22 catch22 features (Lubba et al. 2019) by their short names; unitless or in samples.

    Distribution: ``mode_5``/``mode_10`` (DN_HistogramMode), ``outlier_timing_pos``/``_neg``
    (DN_OutlierInclude: when extreme values occur, as a median relative position in [-1, 1]).
    Linear autocorrelation: ``acf_timescale`` (first 1/e crossing, samples), ``acf_first_min``,
    ``low_freq_power`` (SP_Summaries: power in the lowest fifth of frequencies), ``median_freq``
    (centroid, radians), ``forecast_error`` (mean-3 forecast error), ``whiten_timescale``.
    Successive differences: ``high_fluctuation`` (proportion of large successive changes),
    ``stretch_decreasing``, ``entropy_pairs`` (SB_MotifThree), ``transition_variance``.
    Nonlinear autocorrelation: ``ami2`` (automutual information at lag 2), ``trev`` (time
    reversibility), ``ami_timescale``. Symbolic and scaling: ``stretch_high`` (longest stretch above
    the mean), ``periodicity`` (PD_PeriodicityWang, samples; 0 when none), ``embedding_dist``,
    ``rs_range`` and ``dfa`` (fluctuation-analysis timescale proportions).

    Args:
        y: Series (at least 20 samples; a constant series abstains).
    """
    x = as_series(y, 20)
    if x is None or is_flat(x):
        return None
    res = pycatch22.catch22_all(x.tolist(), catch24=False, short_names=True)
    vals = dict(zip(res["short_names"], res["values"], strict=True))
    return finish({k: vals[k] for k in CATCH22_NAMES})
