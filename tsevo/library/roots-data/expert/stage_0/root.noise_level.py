def noise_level():
    y = ctx.primary()
    if len(y) < 8:
        return None
    d = np.diff(y)
    diff_sigma = float(np.std(d)) / math.sqrt(2.0)
    if ctx.question_mentions("white noise"):
        value = float(np.std(y))
    else:
        value = diff_sigma
    out = {"noise_sigma": value, "diff_sigma": diff_sigma, "std": float(np.std(y))}
    s = P.snr(y)
    if s is not None:
        out["snr_db"] = float(s["snr_db"])
    return out
