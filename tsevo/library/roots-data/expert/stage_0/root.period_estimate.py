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
