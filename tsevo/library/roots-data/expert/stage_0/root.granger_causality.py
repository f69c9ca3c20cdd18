def granger_causality():
    if ctx.n_primary() < 2:
        return None
    a = ctx.primary(0)
    b = ctx.primary(1)
    g = P.granger(a, b, lag=2)
    if g is None:
        return None
    return {
        "p_1_to_2": float(g["p_a_to_b"]),
        "p_2_to_1": float(g["p_b_to_a"]),
        "log_f_ratio": float(g["log_f_ratio"]),
    }
