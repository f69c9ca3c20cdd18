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
