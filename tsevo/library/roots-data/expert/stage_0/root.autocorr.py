def autocorr():
    y = ctx.primary()
    n = len(y)
    lag = 1
    if ctx.question_mentions("lag"):
        for x in ctx.question_numbers():
            if x == int(x) and 1 <= x <= n // 4:
                lag = int(x)
                break
    r = P.acf(y, lag=lag)
    if r is None:
        return None
    return {
        "acf": float(r["acf_lag"]),
        "lag": lag,
        "acf1": float(r["acf1"]),
        "n_significant": r["n_significant"],
    }
