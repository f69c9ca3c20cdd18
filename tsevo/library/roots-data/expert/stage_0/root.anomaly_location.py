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
