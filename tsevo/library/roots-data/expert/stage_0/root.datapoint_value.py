def datapoint_value():
    y = ctx.primary()
    n = len(y)
    idx = [int(x) for x in ctx.question_numbers() if x == int(x) and 0 <= x < n]
    if not idx:
        return None
    i = idx[0]
    s = float(np.std(y))
    z = (float(y[i]) - float(np.mean(y))) / s if s > 0 else 0.0
    return {"value": float(y[i]), "index": i, "value_z": z}
