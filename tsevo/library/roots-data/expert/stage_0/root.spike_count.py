def spike_count():
    y = ctx.primary()
    s = P.spikes(y)
    if s is None:
        return None
    return {
        "n_spikes": s["n_spikes"],
        "max_abs_z": float(s["max_abs_z"]),
        "max_index_frac": float(s["max_index_frac"]),
    }
