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
