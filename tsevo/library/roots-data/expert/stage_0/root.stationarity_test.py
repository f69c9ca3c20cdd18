def stationarity_test():
    y = ctx.primary()
    if (
        ctx.question_mentions("differencing")
        or ctx.question_mentions("differenced")
        or ctx.question_mentions("difference")
    ):
        y = np.diff(y)
    a = P.adf(y)
    k = P.kpss(y)
    if a is None or k is None:
        return None
    votes = 0
    if a["p"] < 0.05:
        votes = votes + 1
    if k["p"] > 0.05:
        votes = votes + 1
    return {"stationary_votes": votes, "adf_p": float(a["p"]), "kpss_p": float(k["p"])}
