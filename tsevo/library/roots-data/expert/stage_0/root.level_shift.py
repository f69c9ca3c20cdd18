def level_shift():
    y = ctx.primary()
    n = len(y)
    if n < 16:
        return None
    idx = [int(x) for x in ctx.question_numbers() if x == int(x) and 0.1 * n < x < 0.9 * n]
    if idx:
        split = idx[0]
        w = P.window_compare(y, a=0, b=split, c=split, d=n)
    else:
        split = n // 2
        w = P.window_compare(y)
    if w is None:
        return None
    r = P.rolling_profile(y)
    out = {"abs_gap_sigma": abs(float(w["level_gap_sigma"])), "split": split}
    out["level_gap_sigma"] = float(w["level_gap_sigma"])
    out["mw_p"] = float(w["mw_p"])
    if r is not None:
        out["max_jump_sigma"] = float(r["max_jump_sigma"])
        out["jump_loc_frac"] = float(r["jump_loc_frac"])
    return out
