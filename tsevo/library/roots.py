"""Library roots ``L_0``: ``empty`` (the default), ``chronos`` and ``expert`` (ablations and baselines).

* ``empty`` holds no tool: the agent is the bare base answerer.
* ``chronos`` holds one forecasting wrapper tool around ``P.forecast`` (the Chronos backend when
  ``$TSEVO_CHRONOS_MODEL`` names a local model, the statistical fallback otherwise) that reports
  forecast-versus-history evidence for questions about the future.
* ``expert`` is a hand-written library in the spirit of TimeART's 21 tools (numerical operators,
  pattern detectors, correlation analysers, forecast/anomaly; see ``research/ts_qa_sources.md``),
  written over the primitives catalog. Its scopes are keyword matchers over question words, and its
  reading rules carry thresholds set by judgement (textbook cut-offs such as p < 0.05 or
  |r| > 0.3), never fitted on any data. Like any human-written library it will help on some
  question kinds and hurt or stay silent on others: its option vocabulary (``"upward"``,
  ``"increase"``, ``"yes"``...) and its assumptions (series 1 is the cause in a Granger question)
  are an expert's guesses, which is exactly the human–agent tool misalignment the method studies.
  It is never the default root.

Every root tool has the id ``root.<slug>`` (stable, never reused for other content), round 0 and
provenance ``action="root", author="human"``. Each source is one zero-argument function that the
sandbox gate accepts (no imports, no ``while``, no ``_`` names).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from .library import Library, library_from_tools
from .tool import Arity, Contract, Guidance, Matcher, Provenance, ReadingRule, Scope, Tool

__all__ = ["ROOT_NAMES", "chronos_tools", "expert_tools", "make_root"]

ROOT_NAMES: tuple[str, ...] = ("empty", "chronos", "expert")
"""Names accepted by :func:`make_root`."""

_PROVENANCE = Provenance(bucket="", attempt=0, parent="", action="root", author="human")


def _any_of(
    words: Sequence[str],
    *,
    k: int = 1,
    require: Sequence[str] = (),
    forbid: Sequence[str] = (),
) -> Matcher:
    """A matcher that fires when at least ``k`` of ``words`` appear (plus require/forbid tokens)."""
    terms = {w: 1.0 for w in words}
    return Matcher(terms, threshold=k / len(terms), require=tuple(require), forbid=tuple(forbid))


def _tool(
    slug: str,
    source: str,
    *,
    description: str,
    scope: Scope,
    measurement: str,
    signature: tuple[str, ...] = ("primary",),
    success: str,
    text: str,
    rule: ReadingRule | None,
    outputs: tuple[str, ...],
    params: dict[str, object] | None = None,
) -> Tool:
    m = re.match(r"def ([a-z_]+)\(\):", source)
    if m is None:
        raise ValueError(f"root tool {slug!r}: source must start with a zero-argument def")
    return Tool(
        id=f"root.{slug}",
        kind="tool",
        name=m.group(1),
        description=description,
        source=source,
        round=0,
        scope=scope,
        contract=Contract(
            measurement=measurement,
            signature=signature,
            success_criterion=success,
            params=dict(params or {}),
        ),
        guidance=Guidance(text=text, rule=rule),
        outputs=outputs,
        provenance=_PROVENANCE,
    )


# ------------------------------------------------------------------------------------- forecast

_FORECAST_WORDS = (
    "next",
    "future",
    "forecast",
    "forecasted",
    "upcoming",
    "coming",
    "horizon",
    "predict",
    "predicted",
    "ahead",
    "will",
)

_FORECAST_SRC = """\
def forecast_evidence():
    y = ctx.primary()
    n = len(y)
    h = 16
    if (
        ctx.question_mentions("next")
        or ctx.question_mentions("horizon")
        or ctx.question_mentions("steps")
        or ctx.question_mentions("ahead")
    ):
        for x in ctx.question_numbers():
            if x == int(x) and 1 <= x <= 256 and x <= n // 2:
                h = int(x)
                break
    f = P.forecast(y, h=h)
    if f is None:
        return None
    keys = [
        "delta_sigma",
        "end_delta_sigma",
        "delta_noise",
        "spread_ratio",
        "frac_above_level",
        "width_mean",
        "delta",
        "level",
        "scale",
        "point_mean",
    ]
    out = {k: float(f[k]) for k in keys}
    out["h"] = h
    out["chronos"] = bool(f["chronos"])
    return out
"""

_FORECAST_OUTPUTS = (
    "delta_sigma",
    "end_delta_sigma",
    "delta_noise",
    "spread_ratio",
    "frac_above_level",
    "width_mean",
    "delta",
    "level",
    "scale",
    "point_mean",
    "h",
    "chronos",
)

_FORECAST_RULE = ReadingRule(
    "label",
    key="delta_sigma",
    bins=(-0.5, 0.5),
    labels=("lower", "similar", "higher"),
    margin=0.1,
    confidence=0.6,
)


def chronos_tools() -> list[Tool]:
    """The ``chronos`` root: one forecasting wrapper tool.

    Returns:
        A one-element list holding ``root.chronos_forecast``.
    """
    return [
        _tool(
            "chronos_forecast",
            _FORECAST_SRC,
            description="forecast the next h steps (Chronos or the stat fallback) vs recent history",
            scope=Scope(
                evidence=("forecast_vs_history",),
                arity="any",
                matcher=_any_of(_FORECAST_WORDS),
            ),
            measurement="forecast.delta_sigma",
            success="questions about the coming values are answered from a forecast",
            text=(
                "delta_sigma is the forecast mean minus the recent level, in robust sigma of the "
                "history: below -0.5 the series is expected to be lower, above +0.5 higher, "
                "otherwise similar. spread_ratio > 1 means the forecast band is wider than the "
                "historical noise (more uncertain / volatile future). h is the horizon used (the "
                "question's number when it states one, else 16)."
            ),
            rule=_FORECAST_RULE,
            outputs=_FORECAST_OUTPUTS,
            params={"h_default": 16},
        )
    ]


# ----------------------------------------------------------------------------- expert sources
# Numerical operators

_SUMMARY_STATS = """\
def summary_stats():
    y = ctx.primary()
    n = len(y)
    idx = [int(x) for x in ctx.question_numbers() if x == int(x) and 0 <= x <= n]
    a = 0
    b = n
    if len(idx) >= 2 and idx[1] > idx[0] + 1:
        a = idx[0]
        b = idx[1]
    w = y[a:b]
    if len(w) < 2:
        return None
    if (
        ctx.question_mentions("maximum")
        or ctx.question_mentions("max")
        or ctx.question_mentions("highest")
        or ctx.question_mentions("largest")
        or ctx.question_mentions("peak")
    ):
        v = np.max(w)
    elif (
        ctx.question_mentions("minimum")
        or ctx.question_mentions("min")
        or ctx.question_mentions("lowest")
        or ctx.question_mentions("smallest")
    ):
        v = np.min(w)
    elif ctx.question_mentions("median"):
        v = np.median(w)
    elif (
        ctx.question_mentions("standard deviation")
        or ctx.question_mentions("std")
        or ctx.question_mentions("spread")
    ):
        v = np.std(w)
    elif ctx.question_mentions("variance"):
        v = np.var(w)
    elif ctx.question_mentions("range"):
        v = np.max(w) - np.min(w)
    elif ctx.question_mentions("sum") or ctx.question_mentions("total"):
        v = np.sum(w)
    elif ctx.question_mentions("mean") or ctx.question_mentions("average"):
        v = np.mean(w)
    else:
        return None
    return {
        "value": float(v),
        "mean": float(np.mean(w)),
        "std": float(np.std(w)),
        "window_start": a,
        "window_end": b,
    }
"""

_DATAPOINT_VALUE = """\
def datapoint_value():
    y = ctx.primary()
    n = len(y)
    idx = [int(x) for x in ctx.question_numbers() if x == int(x) and 0 <= x < n]
    if not idx:
        return None
    i = idx[0]
    s = float(np.std(y))
    z = (float(y[i]) - float(np.mean(y))) / s if s > 0 else 0.0
    return {"value": float(y[i]), "index": i, "value_z": z}
"""

_RETURN_CALC = """\
def return_calc():
    y = ctx.primary()
    n = len(y)
    idx = [int(x) for x in ctx.question_numbers() if x == int(x) and 0 <= x < n]
    a = 0
    b = n - 1
    if len(idx) >= 2 and idx[0] != idx[1]:
        a = idx[0]
        b = idx[1]
    va = float(y[a])
    vb = float(y[b])
    out = {"abs_change": vb - va, "start_value": va, "end_value": vb}
    pct_words = ctx.question_mentions("percent") or ctx.question_mentions("percentage")
    pct_words = pct_words or ctx.question_mentions("return") or ctx.question_mentions("%")
    if va != 0:
        out["pct_change"] = 100.0 * (vb - va) / abs(va)
    if pct_words:
        if va == 0:
            return out
        out["value"] = out["pct_change"]
    else:
        out["value"] = vb - va
    return out
"""

_QUANTILE_VALUE = """\
def quantile_value():
    y = ctx.primary()
    q = None
    if ctx.question_mentions("upper quartile") or ctx.question_mentions("third quartile"):
        q = 75.0
    elif ctx.question_mentions("lower quartile") or ctx.question_mentions("first quartile"):
        q = 25.0
    else:
        for x in ctx.question_numbers():
            if 0 < x < 1 and ctx.question_mentions("quantile"):
                q = 100.0 * x
                break
            if 1 <= x <= 99:
                q = float(x)
                break
    if q is None:
        return None
    return {"value": float(np.percentile(y, q)), "q": q, "median": float(np.median(y))}
"""

_AUTOCORR = """\
def autocorr():
    y = ctx.primary()
    n = len(y)
    lag = 1
    if ctx.question_mentions("lag"):
        for x in ctx.question_numbers():
            if x == int(x) and 1 <= x <= n // 4:
                lag = int(x)
                break
    r = P.acf(y, lag=lag)
    if r is None:
        return None
    return {
        "acf": float(r["acf_lag"]),
        "lag": lag,
        "acf1": float(r["acf1"]),
        "n_significant": r["n_significant"],
    }
"""

_VOLATILITY = """\
def volatility():
    y = ctx.primary()
    n = len(y)
    if n < 16:
        return None
    idx = sorted(int(x) for x in ctx.question_numbers() if x == int(x) and 0 < x < n)
    split = n // 2
    if len(idx) == 1 and 0.1 * n < idx[0] < 0.9 * n:
        split = idx[0]
    d = np.diff(y)
    d1 = d[: split - 1]
    d2 = d[split:]
    if len(d1) < 4 or len(d2) < 4:
        return None
    v1 = float(np.var(d1))
    v2 = float(np.var(d2))
    if v1 <= 0 or v2 <= 0:
        return None
    w = P.window_compare(y, a=0, b=split, c=split, d=n)
    out = {"vol_log_ratio": math.log(v2 / v1), "split": split, "vol_first": math.sqrt(v1)}
    out["vol_second"] = math.sqrt(v2)
    if w is not None:
        out["levene_p"] = float(w["levene_p"])
        out["level_log_var_ratio"] = float(w["log_var_ratio"])
    return out
"""

_LEVEL_SHIFT = """\
def level_shift():
    y = ctx.primary()
    n = len(y)
    if n < 16:
        return None
    idx = [int(x) for x in ctx.question_numbers() if x == int(x) and 0.1 * n < x < 0.9 * n]
    if idx:
        split = idx[0]
        w = P.window_compare(y, a=0, b=split, c=split, d=n)
    else:
        split = n // 2
        w = P.window_compare(y)
    if w is None:
        return None
    r = P.rolling_profile(y)
    out = {"abs_gap_sigma": abs(float(w["level_gap_sigma"])), "split": split}
    out["level_gap_sigma"] = float(w["level_gap_sigma"])
    out["mw_p"] = float(w["mw_p"])
    if r is not None:
        out["max_jump_sigma"] = float(r["max_jump_sigma"])
        out["jump_loc_frac"] = float(r["jump_loc_frac"])
    return out
"""

_NOISE_LEVEL = """\
def noise_level():
    y = ctx.primary()
    if len(y) < 8:
        return None
    d = np.diff(y)
    diff_sigma = float(np.std(d)) / math.sqrt(2.0)
    if ctx.question_mentions("white noise"):
        value = float(np.std(y))
    else:
        value = diff_sigma
    out = {"noise_sigma": value, "diff_sigma": diff_sigma, "std": float(np.std(y))}
    s = P.snr(y)
    if s is not None:
        out["snr_db"] = float(s["snr_db"])
    return out
"""

# Pattern detectors

_TREND_CLASSIFIER = """\
def trend_classifier():
    y = ctx.primary()
    t = P.trend(y)
    if t is None:
        return None
    m = P.monotonicity(y)
    out = {
        "slope_sigma": float(t["slope_sigma_per_window"]),
        "mk_p": float(t["mk_p"]),
        "kendall_tau": float(t["kendall_tau"]),
        "slope": float(t["slope"]),
    }
    if m is not None:
        out["frac_up"] = float(m["frac_up"])
    return out
"""

_TREND_SHAPE = """\
def trend_shape():
    y = ctx.primary()
    s = P.trend_shape(y)
    if s is None:
        return None
    return {
        "shape_code": s["best_shape"],
        "r2_linear": float(s["r2_linear"]),
        "r2_log": float(s["r2_log"]),
        "r2_exp": float(s["r2_exp"]),
        "r2_quadratic": float(s["r2_quadratic"]),
        "curvature_sigma": float(s["curvature_sigma"]),
    }
"""

_SEASONALITY_DETECTOR = """\
def seasonality_detector():
    y = ctx.primary()
    sp = P.spectrum(y)
    if sp is None:
        return None
    out = {
        "dominant_period": float(sp["dominant_period"]),
        "power_share": float(sp["power_share"]),
        "fisher_p": float(sp["fisher_p"]),
    }
    st = P.seasonal_strength(y)
    if st is None:
        out["strength"] = 0.0
    else:
        out["strength"] = float(st["strength"])
    return out
"""

_PERIOD_ESTIMATE = """\
def period_estimate():
    y = ctx.primary()
    sp = P.spectrum(y)
    if sp is None:
        return None
    out = {"period": float(sp["dominant_period"]), "power_share": float(sp["power_share"])}
    a = P.acf_period(y)
    if a is not None:
        out["acf_period"] = float(a["period"])
    return out
"""

_AMPLITUDE_ESTIMATE = """\
def amplitude_estimate():
    y = ctx.primary()
    n = len(y)
    if n < 8:
        return None
    t = np.arange(n)
    coef = np.polyfit(t, y, 1)
    r = y - np.polyval(coef, t)
    lo = float(np.percentile(r, 2))
    hi = float(np.percentile(r, 98))
    return {
        "amplitude": (hi - lo) / 2.0,
        "sine_amplitude": math.sqrt(2.0) * float(np.std(r)),
        "half_range": float(np.max(y) - np.min(y)) / 2.0,
    }
"""

_AMPLITUDE_CHANGE = """\
def amplitude_change():
    y = ctx.primary()
    n = len(y)
    if n < 24:
        return None
    t = np.arange(n)
    coef = np.polyfit(t, y, 1)
    r = y - np.polyval(coef, t)
    k = n // 3
    first = r[:k]
    last = r[n - k:]
    a1 = float(np.percentile(first, 95) - np.percentile(first, 5))
    a2 = float(np.percentile(last, 95) - np.percentile(last, 5))
    if a1 <= 0 or a2 <= 0:
        return None
    out = {"amp_log_ratio": math.log(a2 / a1), "amp_first": a1, "amp_last": a2}
    c = P.cycle_stats(y)
    if c is not None:
        out["amplitude_trend"] = float(c["amplitude_trend"])
        out["period_trend"] = float(c["period_trend"])
    return out
"""

_CHANGE_POINT_COUNT = """\
def change_point_count():
    y = ctx.primary()
    c = P.change_points(y)
    if c is None:
        return None
    return {
        "n_regimes": c["n_changes"] + 1,
        "n_changes": c["n_changes"],
        "largest_loc_frac": float(c["largest_loc_frac"]),
        "largest_mean_shift_sigma": float(c["largest_mean_shift_sigma"]),
    }
"""

_REGIME_SWITCH = """\
def regime_switch():
    y = ctx.primary()
    c = P.change_points(y)
    if c is None:
        return None
    out = {"n_changes": c["n_changes"], "largest_gain": float(c["largest_gain"])}
    u = P.cusum(y)
    if u is not None:
        out["cusum_p"] = float(u["p"])
    return out
"""

_NOISE_PROFILE = """\
def noise_profile():
    y = ctx.primary()
    c = P.noise_color(y)
    if c is None:
        return None
    out = {
        "spectral_beta": float(c["spectral_beta"]),
        "ar1_phi": float(c["ar1_phi"]),
        "dfa_alpha": float(c["dfa_alpha"]),
    }
    lb = P.ljung_box(y)
    if lb is not None:
        out["ljung_box_p"] = float(lb["p"])
    return out
"""

_STATIONARITY_TEST = """\
def stationarity_test():
    y = ctx.primary()
    if (
        ctx.question_mentions("differencing")
        or ctx.question_mentions("differenced")
        or ctx.question_mentions("difference")
    ):
        y = np.diff(y)
    a = P.adf(y)
    k = P.kpss(y)
    if a is None or k is None:
        return None
    votes = 0
    if a["p"] < 0.05:
        votes = votes + 1
    if k["p"] > 0.05:
        votes = votes + 1
    return {"stationary_votes": votes, "adf_p": float(a["p"]), "kpss_p": float(k["p"])}
"""

_RANDOM_WALK = """\
def random_walk():
    y = ctx.primary()
    if len(y) < 24:
        return None
    a = P.adf(y)
    d = P.acf(np.diff(y), lag=1)
    if a is None or d is None:
        return None
    votes = 0
    if a["p"] > 0.10:
        votes = votes + 1
    if abs(d["acf1"]) < 0.2:
        votes = votes + 1
    return {"rw_votes": votes, "adf_p": float(a["p"]), "diff_acf1": float(d["acf1"])}
"""

_SPIKE_COUNT = """\
def spike_count():
    y = ctx.primary()
    s = P.spikes(y)
    if s is None:
        return None
    return {
        "n_spikes": s["n_spikes"],
        "max_abs_z": float(s["max_abs_z"]),
        "max_index_frac": float(s["max_index_frac"]),
    }
"""

_ANOMALY_LOCATION = """\
def anomaly_location():
    y = ctx.primary()
    p = P.local_anomaly_profile(y)
    s = P.spikes(y)
    if p is None and s is None:
        return None
    out = {}
    loc = None
    if p is not None:
        out["profile_score"] = float(p["anomaly_score"])
        out["profile_frac"] = float(p["argmax_frac"])
        loc = float(p["argmax_frac"])
    if s is not None:
        out["spike_z"] = float(s["max_abs_z"])
        out["spike_frac"] = float(s["max_index_frac"])
        if loc is None or s["max_abs_z"] >= 6.0:
            loc = float(s["max_index_frac"])
    out["location_frac"] = loc
    return out
"""

# Correlation analysers

_CHANNEL_CORRELATION = """\
def channel_correlation():
    if ctx.n_primary() < 2:
        return None
    a = ctx.primary(0)
    b = ctx.primary(1)
    c = P.correlation(a, b)
    if c is None:
        return None
    return {
        "pearson": float(c["pearson"]),
        "spearman": float(c["spearman"]),
        "diff_pearson": float(c["diff_pearson"]),
    }
"""

_CROSS_CORRELATION = """\
def cross_correlation():
    if ctx.n_primary() < 2:
        return None
    a = ctx.primary(0)
    b = ctx.primary(1)
    x = P.xcorr(a, b, diff=True)
    if x is None:
        return None
    return {
        "abs_best_lag": abs(x["best_lag"]),
        "best_lag": x["best_lag"],
        "peak_corr": float(x["peak_corr"]),
        "corr_at_zero": float(x["corr_at_zero"]),
    }
"""

_GRANGER = """\
def granger_causality():
    if ctx.n_primary() < 2:
        return None
    a = ctx.primary(0)
    b = ctx.primary(1)
    g = P.granger(a, b, lag=2)
    if g is None:
        return None
    return {
        "p_1_to_2": float(g["p_a_to_b"]),
        "p_2_to_1": float(g["p_b_to_a"]),
        "log_f_ratio": float(g["log_f_ratio"]),
    }
"""

_DISTRIBUTION_COMPARE = """\
def distribution_compare():
    if ctx.n_primary() < 2:
        return None
    a = ctx.primary(0)
    b = ctx.primary(1)
    d = P.distribution_compare(a, b)
    if d is None:
        return None
    return {
        "ks_p": float(d["ks_p"]),
        "ks_stat": float(d["ks_stat"]),
        "wasserstein_sigma": float(d["wasserstein_sigma"]),
        "log_var_ratio": float(d["log_var_ratio"]),
    }
"""

_NOISE_COMPARE = """\
def noise_compare():
    if ctx.n_primary() < 2:
        return None
    a = np.diff(ctx.primary(0))
    b = np.diff(ctx.primary(1))
    sa = float(np.std(a))
    sb = float(np.std(b))
    if sa <= 0 or sb <= 0:
        return None
    return {"noise_log_ratio": math.log(sb / sa), "noise_1": sa, "noise_2": sb}
"""

_DTW_DISTANCE = """\
def dtw_distance():
    names = ctx.candidate_names()
    if len(names) < 2:
        return None
    ref = ctx.primary()
    out = {}
    for c in names:
        d = P.shape_distance(ref, ctx.series(c))
        if d is not None:
            out["dtw_" + c] = float(d["dtw"])
    if len(out) < 2:
        return None
    return out
"""

_SHAPE_SIMILARITY = """\
def shape_similarity():
    names = ctx.candidate_names()
    if len(names) < 2:
        return None
    ref = ctx.primary()
    out = {}
    for c in names:
        d = P.shape_distance(ref, ctx.series(c))
        if d is not None:
            out["corr_" + c] = float(d["corr"])
    if len(out) < 2:
        return None
    return out
"""


_YES_NO = ("no", "yes")


def expert_tools() -> list[Tool]:
    """The ``expert`` root: a hand-written library of ~25 tools over the primitives.

    Thresholds are set by judgement (textbook cut-offs), not fitted; see the module docstring.

    Returns:
        The tools in catalog order (ids ``root.<slug>``).
    """
    single: Arity = "single"
    dual: Arity = "dual"
    tools = [
        # ---------------------------------------------------------------- numerical operators
        _tool(
            "summary_stats",
            _SUMMARY_STATS,
            description="the statistic the question names (mean, max, min, median, std, ...) "
            "over the whole series or the window [a, b) it states",
            scope=Scope(
                evidence=("summary_statistic",),
                arity=single,
                options_kind="numeric",
                matcher=_any_of(
                    (
                        "mean",
                        "average",
                        "maximum",
                        "minimum",
                        "median",
                        "highest",
                        "lowest",
                        "deviation",
                        "variance",
                        "range",
                        "sum",
                        "total",
                    )
                ),
            ),
            measurement="summary.value",
            success="numeric questions about a summary statistic pick the computed value",
            text="value is the statistic the question asks for, in series units; choose the "
            "option closest to it.",
            rule=ReadingRule("nearest_number", key="value", margin=0.05, confidence=0.7),
            outputs=("value", "mean", "std", "window_start", "window_end"),
        ),
        _tool(
            "datapoint_value",
            _DATAPOINT_VALUE,
            description="the series value at the index the question states",
            scope=Scope(
                evidence=("point_value",),
                arity=single,
                options_kind="numeric",
                matcher=_any_of(
                    ("index", "step", "timestamp", "position", "time", "point"),
                    require=("value",),
                    forbid=("mean", "average", "maximum", "minimum", "change", "percentile"),
                ),
            ),
            measurement="datapoint.value",
            success="the value at a stated time index is read exactly",
            text="value is y[index] for the first index written in the question.",
            rule=ReadingRule("nearest_number", key="value", margin=0.02, confidence=0.75),
            outputs=("value", "index", "value_z"),
        ),
        _tool(
            "return_calc",
            _RETURN_CALC,
            description="absolute or percent change between two stated indices (default: "
            "first and last value)",
            scope=Scope(
                evidence=("point_change",),
                arity=single,
                options_kind="numeric",
                matcher=_any_of(
                    ("change", "return", "percent", "percentage", "difference", "growth"),
                    forbid=("many", "regimes", "points"),
                ),
            ),
            measurement="return.value",
            success="numeric change questions pick the computed change",
            text="value is the percent change when the question asks for a percentage or return, "
            "else the absolute change end - start, in series units.",
            rule=ReadingRule("nearest_number", key="value", margin=0.05, confidence=0.65),
            outputs=("value", "abs_change", "pct_change", "start_value", "end_value"),
        ),
        _tool(
            "quantile_value",
            _QUANTILE_VALUE,
            description="the empirical quantile / percentile the question names",
            scope=Scope(
                evidence=("quantile",),
                arity=single,
                options_kind="numeric",
                matcher=_any_of(("percentile", "quantile", "quartile")),
            ),
            measurement="quantile.value",
            success="percentile questions pick the empirical percentile",
            text="value is the empirical percentile of the whole series (linear interpolation).",
            rule=ReadingRule("nearest_number", key="value", margin=0.05, confidence=0.7),
            outputs=("value", "q", "median"),
        ),
        _tool(
            "autocorr",
            _AUTOCORR,
            description="sample autocorrelation at the lag the question states (default 1)",
            scope=Scope(
                evidence=("autocorrelation",),
                arity=single,
                options_kind="label",
                matcher=_any_of(("autocorrelation", "autocorrelated", "correlation", "lag")),
            ),
            measurement="acf.acf_lag",
            success="the sign and size of the autocorrelation is read from the ACF",
            text="acf below -0.2 is negative autocorrelation, between -0.2 and 0.2 none, above "
            "0.2 positive (above 0.6 high positive).",
            rule=ReadingRule(
                "label",
                key="acf",
                bins=(-0.2, 0.2),
                labels=("negative", "no", "positive"),
                margin=0.03,
                confidence=0.65,
            ),
            outputs=("acf", "lag", "acf1", "n_significant"),
        ),
        _tool(
            "volatility",
            _VOLATILITY,
            description="change in volatility (std of first differences) after the split the "
            "question states (default: halves)",
            scope=Scope(
                evidence=("volatility_change",),
                arity=single,
                options_kind="label",
                matcher=_any_of(
                    (
                        "volatility",
                        "volatile",
                        "variability",
                        "fluctuation",
                        "fluctuations",
                        "variance",
                    )
                ),
            ),
            measurement="volatility.vol_log_ratio",
            success="questions about volatility increasing or decreasing read the variance ratio",
            text="vol_log_ratio = log(var of differences after / before the split): above 0.5 "
            "volatility increased, below -0.5 decreased, otherwise about the same.",
            rule=ReadingRule(
                "label",
                key="vol_log_ratio",
                bins=(-0.5, 0.5),
                labels=("decrease", "same", "increase"),
                margin=0.1,
                confidence=0.6,
            ),
            outputs=(
                "vol_log_ratio",
                "split",
                "vol_first",
                "vol_second",
                "levene_p",
                "level_log_var_ratio",
            ),
        ),
        _tool(
            "level_shift",
            _LEVEL_SHIFT,
            description="standardized level gap across the time the question states "
            "(default: halves) and the largest rolling-mean jump",
            scope=Scope(
                evidence=("level_gap",),
                arity=single,
                options_kind="label",
                matcher=_any_of(
                    ("shift", "jump", "level", "sudden", "break", "shifted"),
                    forbid=("noise", "forecast", "next", "future"),
                ),
            ),
            measurement="window_compare.level_gap_sigma",
            success="level-shift questions read the standardized gap",
            text="abs_gap_sigma >= 1 (means one pooled sigma apart) is a level shift: yes; "
            "below, no.",
            rule=ReadingRule(
                "label",
                key="abs_gap_sigma",
                bins=(1.0,),
                labels=_YES_NO,
                margin=0.15,
                confidence=0.6,
            ),
            outputs=(
                "abs_gap_sigma",
                "split",
                "level_gap_sigma",
                "mw_p",
                "max_jump_sigma",
                "jump_loc_frac",
            ),
        ),
        _tool(
            "noise_level",
            _NOISE_LEVEL,
            description="noise standard deviation (difference-based; the series std for a "
            "white-noise process)",
            scope=Scope(
                evidence=("noise_level",),
                arity=single,
                options_kind="numeric",
                matcher=_any_of(
                    ("level", "magnitude", "std", "deviation", "sigma", "amount"),
                    require=("noise",),
                ),
            ),
            measurement="noise.noise_sigma",
            success="numeric noise-level questions pick the estimated sigma",
            text="noise_sigma is std(diff(y))/sqrt(2) (robust to smooth signal), or std(y) when "
            "the question says the series is white noise.",
            rule=ReadingRule("nearest_number", key="noise_sigma", margin=0.05, confidence=0.65),
            outputs=("noise_sigma", "diff_sigma", "std", "snr_db"),
        ),
        # ---------------------------------------------------------------- pattern detectors
        _tool(
            "trend_classifier",
            _TREND_CLASSIFIER,
            description="trend direction: Theil-Sen slope in robust sigma per series length and "
            "Mann-Kendall p",
            scope=Scope(
                evidence=("trend_direction",),
                arity=single,
                options_kind="label",
                matcher=_any_of(
                    (
                        "trend",
                        "trending",
                        "upward",
                        "downward",
                        "increasing",
                        "decreasing",
                        "direction",
                    )
                ),
                anti_matcher=_any_of(("future", "next", "forecast")),
            ),
            measurement="trend.slope_sigma_per_window",
            success="trend-direction questions read the robust slope",
            text="slope_sigma above 0.5 is an upward trend, below -0.5 downward, otherwise no "
            "clear trend (mk_p < 0.05 confirms a monotonic trend).",
            rule=ReadingRule(
                "label",
                key="slope_sigma",
                bins=(-0.5, 0.5),
                labels=("downward", "no", "upward"),
                margin=0.1,
                confidence=0.6,
            ),
            outputs=("slope_sigma", "mk_p", "kendall_tau", "slope", "frac_up"),
        ),
        _tool(
            "trend_shape",
            _TREND_SHAPE,
            description="functional form of the trend: linear / log / exponential / quadratic by "
            "BIC",
            scope=Scope(
                evidence=("trend_shape",),
                arity=single,
                options_kind="label",
                matcher=_any_of(
                    (
                        "linear",
                        "exponential",
                        "logarithmic",
                        "quadratic",
                        "shape",
                        "functional",
                        "form",
                        "curve",
                    )
                ),
            ),
            measurement="trend_shape.best_shape",
            success="trend-shape questions read the best-fitting form",
            text="shape_code 0 linear, 1 logarithmic, 2 exponential, 3 quadratic (lowest BIC); "
            "compare the r2_* values when they are close.",
            rule=ReadingRule(
                "label",
                key="shape_code",
                bins=(0.5, 1.5, 2.5),
                labels=("linear", "log", "exponential", "quadratic"),
                margin=0.0,
                confidence=0.55,
            ),
            outputs=(
                "shape_code",
                "r2_linear",
                "r2_log",
                "r2_exp",
                "r2_quadratic",
                "curvature_sigma",
            ),
        ),
        _tool(
            "seasonality_detector",
            _SEASONALITY_DETECTOR,
            description="is there seasonality: seasonal strength, dominant period and Fisher's g",
            scope=Scope(
                evidence=("seasonality_presence",),
                arity=single,
                options_kind="label",
                matcher=_any_of(
                    (
                        "seasonal",
                        "seasonality",
                        "periodic",
                        "periodicity",
                        "cyclical",
                        "cyclic",
                        "repeating",
                    )
                ),
            ),
            measurement="seasonal_strength.strength",
            success="seasonality yes/no questions read the seasonal strength",
            text="strength >= 0.4 means clear seasonality (yes); below, no. fisher_p < 0.05 "
            "supports a real periodic component.",
            rule=ReadingRule(
                "label", key="strength", bins=(0.4,), labels=_YES_NO, margin=0.05, confidence=0.6
            ),
            outputs=("dominant_period", "power_share", "fisher_p", "strength"),
        ),
        _tool(
            "period_estimate",
            _PERIOD_ESTIMATE,
            description="dominant period in samples (periodogram peak; ACF period as a check)",
            scope=Scope(
                evidence=("period",),
                arity=single,
                options_kind="numeric",
                matcher=_any_of(
                    ("period", "periodicity", "cycle", "seasonal", "frequency", "wavelength")
                ),
            ),
            measurement="spectrum.dominant_period",
            success="numeric period questions pick the periodogram period",
            text="period is the periodogram's dominant period in samples; acf_period is an "
            "independent estimate.",
            rule=ReadingRule("nearest_number", key="period", margin=0.05, confidence=0.65),
            outputs=("period", "power_share", "acf_period"),
        ),
        _tool(
            "amplitude_estimate",
            _AMPLITUDE_ESTIMATE,
            description="oscillation amplitude: half the 2-98 percentile range after removing a "
            "line",
            scope=Scope(
                evidence=("amplitude",),
                arity=single,
                options_kind="numeric",
                matcher=_any_of(("amplitude",)),
            ),
            measurement="amplitude.amplitude",
            success="numeric amplitude questions pick the estimated amplitude",
            text="amplitude is half the 2-98 percentile range of the detrended series; "
            "sine_amplitude = sqrt(2)*std is the estimate for a pure sine.",
            rule=ReadingRule("nearest_number", key="amplitude", margin=0.05, confidence=0.65),
            outputs=("amplitude", "sine_amplitude", "half_range"),
        ),
        _tool(
            "amplitude_change",
            _AMPLITUDE_CHANGE,
            description="change of oscillation amplitude from the first to the last third",
            scope=Scope(
                evidence=("amplitude_change",),
                arity=single,
                options_kind="label",
                matcher=_any_of(
                    ("over", "time", "change", "vary", "varies", "evolve"), require=("amplitude",)
                ),
            ),
            measurement="amplitude_change.amp_log_ratio",
            success="amplitude-change questions read the first-vs-last amplitude ratio",
            text="amp_log_ratio = log(amplitude last third / first third): above 0.2 increase, "
            "below -0.2 decrease, otherwise the same.",
            rule=ReadingRule(
                "label",
                key="amp_log_ratio",
                bins=(-0.2, 0.2),
                labels=("decrease", "same", "increase"),
                margin=0.05,
                confidence=0.6,
            ),
            outputs=("amp_log_ratio", "amp_first", "amp_last", "amplitude_trend", "period_trend"),
        ),
        _tool(
            "change_point_count",
            _CHANGE_POINT_COUNT,
            description="number of regimes (change points + 1) by binary segmentation",
            scope=Scope(
                evidence=("regime_count",),
                arity=single,
                options_kind="numeric",
                matcher=_any_of(
                    ("regimes", "regime", "segments", "changepoints", "breaks", "change")
                ),
            ),
            measurement="change_points.n_changes",
            success="regime-count questions pick changes + 1",
            text="n_regimes = number of mean/variance change points + 1.",
            rule=ReadingRule("nearest_number", key="n_regimes", margin=0.0, confidence=0.6),
            outputs=("n_regimes", "n_changes", "largest_loc_frac", "largest_mean_shift_sigma"),
        ),
        _tool(
            "regime_switch",
            _REGIME_SWITCH,
            description="does the series switch regime: change points and CUSUM",
            scope=Scope(
                evidence=("regime_presence",),
                arity=single,
                options_kind="label",
                matcher=_any_of(
                    ("regime", "regimes", "switching", "structural", "changepoint", "break")
                ),
            ),
            measurement="change_points.n_changes",
            success="regime yes/no questions read the change-point count",
            text="n_changes >= 1 means a regime switch (yes); 0 means no. cusum_p < 0.05 supports "
            "a mean shift.",
            rule=ReadingRule(
                "label", key="n_changes", bins=(0.5,), labels=_YES_NO, margin=0.0, confidence=0.55
            ),
            outputs=("n_changes", "largest_gain", "cusum_p"),
        ),
        _tool(
            "noise_profile",
            _NOISE_PROFILE,
            description="noise colour: log-log periodogram slope, AR(1) phi, DFA alpha, Ljung-Box",
            scope=Scope(
                evidence=("noise_color",),
                arity=single,
                options_kind="label",
                matcher=_any_of(
                    ("white", "red", "pink", "brown", "colour", "color", "type"), require=("noise",)
                ),
            ),
            measurement="noise_color.spectral_beta",
            success="noise-type questions read the spectral slope",
            text="spectral_beta near 0 is white noise, near 1 pink, near 2 red/brown; cuts at 0.5 "
            "and 1.5.",
            rule=ReadingRule(
                "label",
                key="spectral_beta",
                bins=(0.5, 1.5),
                labels=("white", "pink", "red"),
                margin=0.1,
                confidence=0.6,
            ),
            outputs=("spectral_beta", "ar1_phi", "dfa_alpha", "ljung_box_p"),
        ),
        _tool(
            "stationarity_test",
            _STATIONARITY_TEST,
            description="ADF and KPSS stationarity votes (on the differenced series when the "
            "question says so)",
            scope=Scope(
                evidence=("stationarity",),
                arity=single,
                options_kind="label",
                matcher=_any_of(("stationary", "stationarity", "unit", "root", "nonstationary")),
            ),
            measurement="adf.p+kpss.p",
            success="stationarity yes/no questions read the two tests",
            text="stationary_votes counts ADF p < 0.05 and KPSS p > 0.05: 2 means stationary (yes), "
            "0 non-stationary (no), 1 inconclusive.",
            rule=ReadingRule(
                "label",
                key="stationary_votes",
                bins=(1.0,),
                labels=_YES_NO,
                margin=0.5,
                confidence=0.6,
            ),
            outputs=("stationary_votes", "adf_p", "kpss_p"),
        ),
        _tool(
            "random_walk",
            _RANDOM_WALK,
            description="random-walk check: ADF does not reject a unit root and the differences "
            "are uncorrelated",
            scope=Scope(
                evidence=("random_walk",),
                arity=single,
                options_kind="label",
                matcher=_any_of(("random", "walk"), k=2),
            ),
            measurement="adf.p+acf(diff).acf1",
            success="random-walk yes/no questions read the unit-root and difference tests",
            text="rw_votes counts ADF p > 0.10 and |acf1 of differences| < 0.2: 2 means a random "
            "walk (yes), 0 no, 1 inconclusive.",
            rule=ReadingRule(
                "label", key="rw_votes", bins=(1.0,), labels=_YES_NO, margin=0.5, confidence=0.6
            ),
            outputs=("rw_votes", "adf_p", "diff_acf1"),
        ),
        _tool(
            "spike_count",
            _SPIKE_COUNT,
            description="number of spikes (robust z >= 4 from a running median)",
            scope=Scope(
                evidence=("spike_count",),
                arity=single,
                options_kind="numeric",
                matcher=_any_of(("spikes", "spike", "outliers", "outlier", "anomalies", "peaks")),
            ),
            measurement="spikes.n_spikes",
            success="spike-count questions pick the detected count",
            text="n_spikes counts residual excursions beyond 4 robust sigma.",
            rule=ReadingRule("nearest_number", key="n_spikes", margin=0.0, confidence=0.6),
            outputs=("n_spikes", "max_abs_z", "max_index_frac"),
        ),
        # ---------------------------------------------------------------- anomaly / forecast
        _tool(
            "anomaly_location",
            _ANOMALY_LOCATION,
            description="where the most anomalous stretch is (fraction of the length)",
            scope=Scope(
                evidence=("anomaly_location",),
                arity=single,
                options_kind="label",
                matcher=_any_of(
                    (
                        "anomaly",
                        "anomalies",
                        "anomalous",
                        "outlier",
                        "spike",
                        "unusual",
                        "where",
                        "part",
                        "location",
                        "located",
                        "occur",
                        "occurs",
                        "portion",
                    ),
                    k=2,
                ),
            ),
            measurement="local_anomaly_profile.argmax_frac",
            success="anomaly-location questions read where the anomaly is",
            text="location_frac below 1/3 is the beginning, above 2/3 the end, otherwise the "
            "middle (the largest spike wins when it is beyond 6 robust sigma).",
            rule=ReadingRule(
                "label",
                key="location_frac",
                bins=(1.0 / 3.0, 2.0 / 3.0),
                labels=("beginning", "middle", "end"),
                margin=0.02,
                confidence=0.6,
            ),
            outputs=("location_frac", "profile_score", "profile_frac", "spike_z", "spike_frac"),
        ),
        # ---------------------------------------------------------------- correlation analysers
        _tool(
            "channel_correlation",
            _CHANNEL_CORRELATION,
            description="Pearson / Spearman correlation between the two series",
            scope=Scope(
                evidence=("pair_correlation",),
                arity=dual,
                options_kind="label",
                matcher=_any_of(
                    ("correlated", "correlation", "related", "relationship", "together")
                ),
            ),
            measurement="correlation.pearson",
            success="two-series correlation questions read Pearson r",
            text="pearson above 0.3 positive correlation, below -0.3 negative, otherwise no "
            "correlation.",
            rule=ReadingRule(
                "label",
                key="pearson",
                bins=(-0.3, 0.3),
                labels=("negative", "no", "positive"),
                margin=0.05,
                confidence=0.6,
            ),
            outputs=("pearson", "spearman", "diff_pearson"),
            signature=("primary", "primary"),
        ),
        _tool(
            "cross_correlation",
            _CROSS_CORRELATION,
            description="lag (samples) maximizing the cross-correlation of the differenced series",
            scope=Scope(
                evidence=("pair_lag",),
                arity=dual,
                options_kind="numeric",
                matcher=_any_of(
                    ("lag", "lags", "lagged", "delay", "delayed", "behind", "leads", "shifted")
                ),
            ),
            measurement="xcorr.best_lag",
            success="numeric lag questions pick the cross-correlation lag",
            text="abs_best_lag is the lag in samples; best_lag > 0 means series 2 follows series 1.",
            rule=ReadingRule("nearest_number", key="abs_best_lag", margin=0.0, confidence=0.65),
            outputs=("abs_best_lag", "best_lag", "peak_corr", "corr_at_zero"),
            signature=("primary", "primary"),
        ),
        _tool(
            "granger_causality",
            _GRANGER,
            description="Granger F tests (2 lags) from series 1 to series 2 and back",
            scope=Scope(
                evidence=("granger",),
                arity=dual,
                options_kind="label",
                matcher=_any_of(("granger", "cause", "causes", "causality", "causal")),
            ),
            measurement="granger.p_a_to_b",
            success="Granger yes/no questions read the 1 -> 2 p-value",
            text="p_1_to_2 < 0.05: series 1 Granger-causes series 2 (yes); otherwise no. The "
            "question is assumed to ask about series 1 -> series 2.",
            rule=ReadingRule(
                "label",
                key="p_1_to_2",
                bins=(0.05,),
                labels=("yes", "no"),
                margin=0.0,
                confidence=0.55,
            ),
            outputs=("p_1_to_2", "p_2_to_1", "log_f_ratio"),
            signature=("primary", "primary"),
        ),
        _tool(
            "distribution_compare",
            _DISTRIBUTION_COMPARE,
            description="do the two series share a distribution: two-sample KS test",
            scope=Scope(
                evidence=("distribution_compare",),
                arity=dual,
                options_kind="label",
                matcher=_any_of(("distribution", "distributed", "distributions")),
            ),
            measurement="distribution_compare.ks_p",
            success="same-distribution questions read the KS p-value",
            text="ks_p < 0.05: different distributions; otherwise the same.",
            rule=ReadingRule(
                "label",
                key="ks_p",
                bins=(0.05,),
                labels=("different", "same"),
                margin=0.0,
                confidence=0.6,
            ),
            outputs=("ks_p", "ks_stat", "wasserstein_sigma", "log_var_ratio"),
            signature=("primary", "primary"),
        ),
        _tool(
            "noise_compare",
            _NOISE_COMPARE,
            description="which of the two series is noisier (std of first differences)",
            scope=Scope(
                evidence=("noise_compare",),
                arity=dual,
                matcher=_any_of(
                    ("noise", "noisier", "noisy", "volatile", "volatility", "fluctuates"),
                    require=("which",),
                ),
            ),
            measurement="noise_compare.noise_log_ratio",
            success="which-is-noisier questions read the difference-noise ratio",
            text="noise_log_ratio = log(noise of series 2 / series 1): positive means time series "
            "2 is noisier, negative time series 1.",
            rule=ReadingRule(
                "label",
                key="noise_log_ratio",
                bins=(0.0,),
                labels=("time series 1", "time series 2"),
                margin=0.1,
                confidence=0.6,
            ),
            outputs=("noise_log_ratio", "noise_1", "noise_2"),
            signature=("primary", "primary"),
        ),
        _tool(
            "dtw_distance",
            _DTW_DISTANCE,
            description="banded DTW distance of each z-normalized candidate to the reference",
            scope=Scope(evidence=("shape_distance",), arity="candidates"),
            measurement="shape_distance.dtw",
            signature=("reference", "candidates"),
            success="matching questions pick the candidate nearest the reference",
            text="dtw_<candidate> is the shape distance to the reference; the smallest is the "
            "best match.",
            rule=ReadingRule("extremum", prefix="dtw_", mode="min", margin=0.05, confidence=0.65),
            outputs=("dtw_<candidate>",),
        ),
        _tool(
            "shape_similarity",
            _SHAPE_SIMILARITY,
            description="zero-lag Pearson correlation of each candidate with the reference",
            scope=Scope(evidence=("shape_similarity",), arity="candidates"),
            measurement="shape_distance.corr",
            signature=("reference", "candidates"),
            success="matching questions pick the candidate most correlated with the reference",
            text="corr_<candidate> is the zero-lag correlation with the reference; the largest is "
            "the most similar shape.",
            rule=ReadingRule("extremum", prefix="corr_", mode="max", margin=0.05, confidence=0.6),
            outputs=("corr_<candidate>",),
        ),
        _tool(
            "forecaster",
            _FORECAST_SRC,
            description="forecast the next h steps and compare with the recent level",
            scope=Scope(
                evidence=("forecast_vs_history",),
                arity=single,
                matcher=_any_of(_FORECAST_WORDS),
            ),
            measurement="forecast.delta_sigma",
            success="questions about coming values are answered from a forecast",
            text="delta_sigma = forecast mean minus recent level in robust sigma: below -0.5 lower, "
            "above 0.5 higher, otherwise similar; spread_ratio > 1 means a more volatile future.",
            rule=_FORECAST_RULE,
            outputs=_FORECAST_OUTPUTS,
            params={"h_default": 16},
        ),
    ]
    return tools


_BUILDERS: dict[str, Callable[[], list[Tool]]] = {
    "empty": list,
    "chronos": chronos_tools,
    "expert": expert_tools,
}


def make_root(name: str = "empty") -> Library:
    """Build a root library ``L_0`` by name.

    Args:
        name: ``"empty"`` (default: no tools), ``"chronos"`` (one forecasting wrapper tool) or
            ``"expert"`` (the hand-written baseline library).

    Returns:
        A :class:`~tsevo.library.library.Library` whose only stage is the root (round 0).

    Raises:
        ValueError: For an unknown root name (the message lists the known names).
    """
    if name not in _BUILDERS:
        raise ValueError(f"unknown root {name!r}; known roots: {', '.join(ROOT_NAMES)}")
    return library_from_tools(name, _BUILDERS[name]())
