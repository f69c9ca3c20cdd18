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
