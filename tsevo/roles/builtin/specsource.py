"""Real tool source for measurement specs: what the planner measured, computed in the sandbox.

:func:`spec_source` writes one zero-argument tool function computing the given specs' keys
(:mod:`.measure` computes the same values at planning time; tests pin the two together). Composite
tools (:mod:`.composite`) write their branches' measurements the same way.
"""

from __future__ import annotations

from typing import Any

from .measure import WINDOW_ARGS, Spec, number_is_float, per_source

__all__ = ["spec_source"]


def _lit(v: Any) -> str:
    return repr(v)


def spec_source(specs: list[tuple[Spec, list[str]]], name: str = "tool", doc: str = "") -> str:
    """Real tool source computing the given specs' keys (one zero-argument function).

    Args:
        specs: ``(spec, keys)`` pairs; for candidate modes, ``keys`` are base keys and the tool
            returns ``<key>_<candidate>`` for every candidate.
        name: Function name.
        doc: One-line docstring.
    """
    lines = [f"def {name}():"]
    if doc:
        lines.append(f'    """{doc}"""')
    lines.append("    out = {}")
    need_nums = any(
        s.mode in WINDOW_ARGS or s.mode == "qnum" or s.per is not None for s, _ in specs
    )
    modes = {s.mode for s, _ in specs}
    lines.append("    y = ctx.primary()")
    if need_nums:
        lines.append("    nums = ctx.question_numbers()")
    if modes & {"dual_diff", "resid", "pair"}:
        lines += ["    if ctx.n_primary() < 2:", "        return None", "    y2 = ctx.primary(1)"]
    if "covariate" in modes:
        lines += [
            "    cov = None",
            "    for c in ctx.covariate_names():",
            "        if cov is None and ctx.question_mentions(c):",
            "            cov = c",
            "    if cov is None:",
            "        return None",
            "    z = ctx.series(cov)",
        ]
    if modes & {"cand", "cand_diff"}:
        lines += [
            "    cands = ctx.candidate_names()",
            "    if len(cands) < 2:",
            "        return None",
        ]
    literal: list[tuple[str, str]] = []
    for i, (s, keys) in enumerate(specs):
        kw = ", ".join(f"{k}={_lit(v)}" for k, v in s.params)
        kws = f", {kw}" if kw else ""
        r = f"r{i}"
        if s.mode == "primary":
            lines.append(f"    {r} = P.{s.primitive}(y{kws})")
        elif s.mode == "qnum":
            bound = {
                k: (int(v[1:]), number_is_float(s.primitive, k))
                for k, v in s.params
                if isinstance(v, str) and v.startswith("#")
            }
            args = ", ".join(
                (
                    f"{k}=float(nums[{bound[k][0]}])"
                    if bound[k][1]
                    else f"{k}=int(nums[{bound[k][0]}])"
                )
                if k in bound
                else f"{k}={_lit(v)}"
                for k, v in s.params
            )
            lines += [
                f"    if len(nums) < {max(i for i, _ in bound.values()) + 1}:",
                "        return None",
            ]
            for i, flt in sorted(set(bound.values())):
                if flt:
                    lines += [f"    if not nums[{i}] >= 0:", "        return None"]
                else:
                    lines += [
                        f"    if nums[{i}] <= 0 or nums[{i}] != int(nums[{i}]):",
                        "        return None",
                    ]
            lines.append(f"    {r} = P.{s.primitive}(y, {args})")
        elif s.mode in WINDOW_ARGS:
            names = WINDOW_ARGS[s.mode]
            lines += [
                f"    if len(nums) < {len(names)}:",
                "        return None",
                f"    {', '.join(names)} = {', '.join(f'int(nums[{j}])' for j in range(len(names)))}",
                f"    {r} = P.{s.primitive}(y, {', '.join(f'{n}={n}' for n in names)}{kws})",
            ]
        elif s.mode == "dual_diff":
            lines += [
                f"    {r}a = P.{s.primitive}(y{kws})",
                f"    {r}b = P.{s.primitive}(y2{kws})",
                f"    if {r}a is None or {r}b is None:",
                "        return None",
            ]
            for j, k in enumerate(keys):
                lines.append(f"    v{i}_{j} = {r}b[{k!r}] - {r}a[{k!r}]")
                literal.append((k, f"v{i}_{j}"))
            continue
        elif s.mode == "resid":
            lines += ["    if len(y2) != len(y):", "        return None"]
            lines.append(f"    {r} = P.{s.primitive}(y2 - y{kws})")
        elif s.mode == "pair":
            lines.append(f"    {r} = P.{s.primitive}(y, y2{kws})")
        elif s.mode == "covariate":
            lines.append(f"    {r} = P.{s.primitive}(y, z{kws})")
        elif s.mode in ("cand", "cand_diff"):
            if s.mode == "cand_diff":
                lines += [
                    f"    {r}ref = P.{s.primitive}(y{kws})",
                    f"    if {r}ref is None:",
                    "        return None",
                ]
            lines.append("    for c in cands:")
            if s.mode == "cand":
                lines.append(f"        {r} = P.{s.primitive}(y, ctx.series(c){kws})")
            else:
                lines.append(f"        {r} = P.{s.primitive}(ctx.series(c){kws})")
            lines += [f"        if {r} is None:", "            return None"]
            for k in keys:
                if s.mode == "cand":
                    lines.append(f"        out[{k!r} + '_' + c] = {r}[{k!r}]")
                else:
                    lines.append(f"        out[{k!r} + '_' + c] = abs({r}[{k!r}] - {r}ref[{k!r}])")
            continue
        lines += [f"    if {r} is None:", "        return None"]
        scale = ""
        if s.per is not None:
            stated, scale = per_source(s)
            lines += [f"    if not ({stated}):", "        return None"]
        for j, k in enumerate(keys):
            lines.append(f"    v{i}_{j} = {r}[{k!r}]{scale}")
            literal.append((k, f"v{i}_{j}"))
    if not modes & {"cand", "cand_diff"}:
        body = ", ".join(f"{k!r}: {v}" for k, v in literal)
        lines.remove("    out = {}")
        lines.append(f"    return {{{body}}}")
        return "\n".join(lines) + "\n"
    for k, v in literal:
        lines.append(f"    out[{k!r}] = {v}")
    lines.append("    return out")
    return "\n".join(lines) + "\n"
