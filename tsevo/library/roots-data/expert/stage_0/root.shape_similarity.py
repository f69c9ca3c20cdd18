def shape_similarity():
    names = ctx.candidate_names()
    if len(names) < 2:
        return None
    ref = ctx.primary()
    out = {}
    for c in names:
        d = P.shape_distance(ref, ctx.series(c))
        if d is not None:
            out["corr_" + c] = float(d["corr"])
    if len(out) < 2:
        return None
    return out
