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
