def noise_profile():
    y = ctx.primary()
    c = P.noise_color(y)
    if c is None:
        return None
    out = {
        "spectral_beta": float(c["spectral_beta"]),
        "ar1_phi": float(c["ar1_phi"]),
        "dfa_alpha": float(c["dfa_alpha"]),
    }
    lb = P.ljung_box(y)
    if lb is not None:
        out["ljung_box_p"] = float(lb["p"])
    return out
