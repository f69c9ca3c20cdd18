def random_walk():
    y = ctx.primary()
    if len(y) < 24:
        return None
    a = P.adf(y)
    d = P.acf(np.diff(y), lag=1)
    if a is None or d is None:
        return None
    votes = 0
    if a["p"] > 0.10:
        votes = votes + 1
    if abs(d["acf1"]) < 0.2:
        votes = votes + 1
    return {"rw_votes": votes, "adf_p": float(a["p"]), "diff_acf1": float(d["acf1"])}
