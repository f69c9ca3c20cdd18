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
