def volatility():
    y = ctx.primary()
    n = len(y)
    if n < 16:
        return None
    idx = sorted(int(x) for x in ctx.question_numbers() if x == int(x) and 0 < x < n)
    split = n // 2
    if len(idx) == 1 and 0.1 * n < idx[0] < 0.9 * n:
        split = idx[0]
    d = np.diff(y)
    d1 = d[: split - 1]
    d2 = d[split:]
    if len(d1) < 4 or len(d2) < 4:
        return None
    v1 = float(np.var(d1))
    v2 = float(np.var(d2))
    if v1 <= 0 or v2 <= 0:
        return None
    w = P.window_compare(y, a=0, b=split, c=split, d=n)
    out = {"vol_log_ratio": math.log(v2 / v1), "split": split, "vol_first": math.sqrt(v1)}
    out["vol_second"] = math.sqrt(v2)
    if w is not None:
        out["levene_p"] = float(w["levene_p"])
        out["level_log_var_ratio"] = float(w["log_var_ratio"])
    return out
