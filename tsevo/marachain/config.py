"""The Mara chain's settings: one frozen config, to be nested in the protocol config.

``MaraConfig()`` is the chain switched off (``depth = 0``): a round runs exactly as published
TimeEvo synthesis (design §1.3). The ``marachain`` preset (:data:`MARA_PRESETS`) is the Mara Chain
paper's setting, depth 5 and a pool of 3. Every field is declared with :func:`knob` (documentation
and bounds in the field metadata) and validated by :func:`check_knobs` in ``__post_init__``, the
same mechanism as the protocol's (:mod:`tsevo.knobs`, in the bottom layer so that both use it).

Nesting (done by the engine, not here): ``ProtocolConfig.marachain: MaraConfig`` with
``MaraConfig()`` as its default; ``to_dict`` drops the key while :attr:`MaraConfig.is_default`,
so a chain-off run's ``config.json`` keeps its bytes; ``from_params`` takes the
``marachain.<knob>`` and ``marachain`` keys out through :func:`mara_params`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from tsevo.knobs import NestedKnobs, check_knobs, knob

__all__ = [
    "MARA_PRESETS",
    "Caps",
    "MaraConfig",
    "check_knobs",
    "knob",
    "mara_params",
    "mara_preset",
]

_OWNER = "ProtocolConfig.marachain"


@dataclass(frozen=True)
class Caps:
    """Budget caps on the four ledger axes (one scope: a round or a run)."""

    steps: int
    rollouts: int
    calls: int
    tokens: int

    def to_dict(self) -> dict[str, int]:
        """JSON-friendly dict (axis -> cap)."""
        return {
            "steps": self.steps,
            "rollouts": self.rollouts,
            "calls": self.calls,
            "tokens": self.tokens,
        }


@dataclass(frozen=True, kw_only=True)
class MaraConfig(NestedKnobs):
    """How rejected synthesis candidates are refined along Mara chains (depth 0: off).

    Each field's documentation is in its metadata (``doc``), as for the protocol's knobs.
    Construction validates types, bounds, choices and the cross-field rules (polish steps and
    further chains need a chain, ``depth > 0``) and raises ``ValueError``/``TypeError`` naming
    the field. JSON form, strict construction and rows come from :class:`~tsevo.knobs.NestedKnobs`.
    """

    OWNER: ClassVar[str] = _OWNER

    depth: int = knob(
        0,
        "Chain steps (nodes after v0, as in AntOmniEvo's release) per chain. 0 switches chains off: "
        "synthesis is the published K-attempt loop byte for byte. The 'marachain' preset uses 5.",
        lo=0,
        hi=16,
    )
    start: str = knob(
        "strongest",
        "The rejected direct attempt a chain starts from (v0): 'strongest' (by the strength key "
        "(repairs - harm, repairs, -errors, -local_seq)) or 'last' (the Mara paper's choice).",
        choices=("strongest", "last"),
    )
    acceptance: str = knob(
        "paper",
        "Acceptance variant, recorded on chains, gate records and frames: 'paper' (a node is "
        "accepted iff it clears the prefilter bar of a direct attempt; the winner is the best "
        "strength key among passing nodes) or 'code' (AntOmniEvo's release: the node's raw batch "
        "sum beats the parent library's by 1e-8, or every row is right; the winner is the best "
        "raw sum, the earlier node on ties).",
        choices=("paper", "code"),
    )
    pool_size: int = knob(
        3,
        "N of the Pareto-filtered top-N pool: members kept after the weak-dominance filter, by "
        "mean credited score, depth and local sequence.",
        lo=1,
        hi=32,
    )
    sampler: str = knob(
        "leadership",
        "How the pool picks the start of chains 2.. and of polish steps: 'leadership' "
        "(informative rows only, +1 on every weight, credited vectors), 'leadership_raw' (exact "
        "Mara leadership counts) or 'lexicase'.",
        choices=("leadership", "leadership_raw", "lexicase"),
    )
    chains_per_group: int = knob(
        1, "Chains per work group and round (chains 2.. start from a pool draw).", lo=1, hi=8
    )
    polish_steps: int = knob(
        0,
        "Steps refining passing, not-yet-strong nodes drawn from the pool (needs depth > 0).",
        lo=0,
        hi=16,
    )
    max_steps_round: int = knob(60, "Chain steps (at most) per round, all groups.", lo=0)
    max_rollouts_round: int = knob(
        4000, "Batch questions answered by chain nodes (at most) per round.", lo=0
    )
    max_llm_calls_round: int = knob(150, "Chain-role LLM calls (at most) per round.", lo=0)
    max_tokens_round: int = knob(1_500_000, "Chain-role LLM tokens (at most) per round.", lo=0)
    max_steps_run: int = knob(60, "Chain steps (at most) over the whole run.", lo=0)
    max_rollouts_run: int = knob(4000, "Chain rollouts (at most) over the whole run.", lo=0)
    max_llm_calls_run: int = knob(150, "Chain-role LLM calls (at most) over the whole run.", lo=0)
    max_tokens_run: int = knob(1_500_000, "Chain-role LLM tokens (at most) over the run.", lo=0)
    context_chars: int = knob(
        32_000,
        "Characters (at most) of the deterministic context of an LLM chain step; the contract, "
        "lineage and score table are never cut.",
        lo=2_000,
        hi=400_000,
    )
    seed: int = knob(
        0,
        "Seed of the pool's draws, mixed with the protocol seed, round, group and event "
        "(random.Random(sha256(...)) per draw; no global RNG, no dependence on scheduling).",
        lo=0,
    )

    def __post_init__(self) -> None:
        check_knobs(self, _OWNER)
        if self.depth == 0 and self.polish_steps:
            raise ValueError(f"{_OWNER}.polish_steps: polish steps need a chain (depth > 0)")
        if self.depth == 0 and self.chains_per_group > 1:
            raise ValueError(f"{_OWNER}.chains_per_group: more chains need depth > 0")

    @property
    def enabled(self) -> bool:
        """Whether chains run at all (``depth > 0``)."""
        return self.depth > 0

    @property
    def is_default(self) -> bool:
        """Whether this is the default config (chains off, every setting at its default)."""
        return self == MaraConfig()

    def draw_seed(self, protocol_seed: int) -> str:
        """The seed of the pool's draws in a run with ``protocol_seed`` (both seeds mixed)."""
        return f"{protocol_seed}.{self.seed}"

    def round_caps(self) -> Caps:
        """The per-round caps on steps, rollouts, LLM calls and tokens."""
        return Caps(
            self.max_steps_round,
            self.max_rollouts_round,
            self.max_llm_calls_round,
            self.max_tokens_round,
        )

    def run_caps(self) -> Caps:
        """The per-run caps on steps, rollouts, LLM calls and tokens."""
        return Caps(
            self.max_steps_run, self.max_rollouts_run, self.max_llm_calls_run, self.max_tokens_run
        )

    def bound_per_group(self, batch_size: int) -> dict[str, int]:
        """The analytic per-group cost bound reported beside the actuals (design §6).

        Rollouts ``chains * (depth + polish) * |B|`` and LLM calls ``chains * (depth + polish) * 6``
        (two calls per step, each with at most two JSON retries).
        """
        steps = self.chains_per_group * self.depth + self.polish_steps
        return {"steps": steps, "rollouts": steps * batch_size, "calls": steps * 6}


#: Named settings: ``off`` (the TimeEvo protocol) and ``marachain`` (the paper's d = 5, N = 3).
MARA_PRESETS: dict[str, dict[str, Any]] = {
    "off": {},
    "marachain": {"depth": 5, "pool_size": 3},
}


def mara_preset(name: str) -> MaraConfig:
    """The config of a named preset (case ignored).

    Raises:
        ValueError: For a name that is not one of :data:`MARA_PRESETS`.
    """
    for known, settings in MARA_PRESETS.items():
        if known == name.strip().lower():
            return MaraConfig.from_dict(settings)
    raise ValueError(f"unknown marachain preset {name!r}; one of {list(MARA_PRESETS)}")


def mara_params(
    lowered: dict[str, Any], start: Mapping[str, Any]
) -> tuple[dict[str, Any], MaraConfig | None]:
    """Take the ``marachain.<knob>`` and ``marachain`` keys out of loose protocol parameters.

    ``marachain`` may be a preset's name, a dict of knobs or a :class:`MaraConfig`;
    ``marachain.<knob>`` keys apply on top. Returns the remaining parameters and the resulting
    config (``None`` when no key named it and ``start`` has none), as
    :func:`tsevo.evolve.baseline.answer_params` does for ``answer``.
    """
    return MaraConfig.take_params(lowered, start, mara_preset)
