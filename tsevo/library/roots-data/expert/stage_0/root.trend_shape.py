def trend_shape():
    y = ctx.primary()
    s = P.trend_shape(y)
    if s is None:
        return None
    return {
        "shape_code": s["best_shape"],
        "r2_linear": float(s["r2_linear"]),
        "r2_log": float(s["r2_log"]),
        "r2_exp": float(s["r2_exp"]),
        "r2_quadratic": float(s["r2_quadratic"]),
        "curvature_sigma": float(s["curvature_sigma"]),
    }
