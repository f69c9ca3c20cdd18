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
