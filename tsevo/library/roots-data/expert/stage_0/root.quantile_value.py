def quantile_value():
    y = ctx.primary()
    q = None
    if ctx.question_mentions("upper quartile") or ctx.question_mentions("third quartile"):
        q = 75.0
    elif ctx.question_mentions("lower quartile") or ctx.question_mentions("first quartile"):
        q = 25.0
    else:
        for x in ctx.question_numbers():
            if 0 < x < 1 and ctx.question_mentions("quantile"):
                q = 100.0 * x
                break
            if 1 <= x <= 99:
                q = float(x)
                break
    if q is None:
        return None
    return {"value": float(np.percentile(y, q)), "q": q, "median": float(np.median(y))}
