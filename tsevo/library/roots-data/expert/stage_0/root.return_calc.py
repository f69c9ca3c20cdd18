def return_calc():
    y = ctx.primary()
    n = len(y)
    idx = [int(x) for x in ctx.question_numbers() if x == int(x) and 0 <= x < n]
    a = 0
    b = n - 1
    if len(idx) >= 2 and idx[0] != idx[1]:
        a = idx[0]
        b = idx[1]
    va = float(y[a])
    vb = float(y[b])
    out = {"abs_change": vb - va, "start_value": va, "end_value": vb}
    pct_words = ctx.question_mentions("percent") or ctx.question_mentions("percentage")
    pct_words = pct_words or ctx.question_mentions("return") or ctx.question_mentions("%")
    if va != 0:
        out["pct_change"] = 100.0 * (vb - va) / abs(va)
    if pct_words:
        if va == 0:
            return out
        out["value"] = out["pct_change"]
    else:
        out["value"] = vb - va
    return out
