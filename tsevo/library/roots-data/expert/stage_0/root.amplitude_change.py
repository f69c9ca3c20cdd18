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
