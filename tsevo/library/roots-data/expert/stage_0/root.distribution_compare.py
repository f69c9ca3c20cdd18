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
