def summary_stats():
    y = ctx.primary()
    n = len(y)
    idx = [int(x) for x in ctx.question_numbers() if x == int(x) and 0 <= x <= n]
    a = 0
    b = n
    if len(idx) >= 2 and idx[1] > idx[0] + 1:
        a = idx[0]
        b = idx[1]
    w = y[a:b]
    if len(w) < 2:
        return None
    if (
        ctx.question_mentions("maximum")
        or ctx.question_mentions("max")
        or ctx.question_mentions("highest")
        or ctx.question_mentions("largest")
        or ctx.question_mentions("peak")
    ):
        v = np.max(w)
    elif (
        ctx.question_mentions("minimum")
        or ctx.question_mentions("min")
        or ctx.question_mentions("lowest")
        or ctx.question_mentions("smallest")
    ):
        v = np.min(w)
    elif ctx.question_mentions("median"):
        v = np.median(w)
    elif (
        ctx.question_mentions("standard deviation")
        or ctx.question_mentions("std")
        or ctx.question_mentions("spread")
    ):
        v = np.std(w)
    elif ctx.question_mentions("variance"):
        v = np.var(w)
    elif ctx.question_mentions("range"):
        v = np.max(w) - np.min(w)
    elif ctx.question_mentions("sum") or ctx.question_mentions("total"):
        v = np.sum(w)
    elif ctx.question_mentions("mean") or ctx.question_mentions("average"):
        v = np.mean(w)
    else:
        return None
    return {
        "value": float(v),
        "mean": float(np.mean(w)),
        "std": float(np.std(w)),
        "window_start": a,
        "window_end": b,
    }
