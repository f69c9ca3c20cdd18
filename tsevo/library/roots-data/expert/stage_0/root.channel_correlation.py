def channel_correlation():
    if ctx.n_primary() < 2:
        return None
    a = ctx.primary(0)
    b = ctx.primary(1)
    c = P.correlation(a, b)
    if c is None:
        return None
    return {
        "pearson": float(c["pearson"]),
        "spearman": float(c["spearman"]),
        "diff_pearson": float(c["diff_pearson"]),
    }
