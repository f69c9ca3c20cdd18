def noise_compare():
    if ctx.n_primary() < 2:
        return None
    a = np.diff(ctx.primary(0))
    b = np.diff(ctx.primary(1))
    sa = float(np.std(a))
    sb = float(np.std(b))
    if sa <= 0 or sb <= 0:
        return None
    return {"noise_log_ratio": math.log(sb / sa), "noise_1": sa, "noise_2": sb}
