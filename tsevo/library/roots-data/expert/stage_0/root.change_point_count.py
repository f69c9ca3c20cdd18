def change_point_count():
    y = ctx.primary()
    c = P.change_points(y)
    if c is None:
        return None
    return {
        "n_regimes": c["n_changes"] + 1,
        "n_changes": c["n_changes"],
        "largest_loc_frac": float(c["largest_loc_frac"]),
        "largest_mean_shift_sigma": float(c["largest_mean_shift_sigma"]),
    }
