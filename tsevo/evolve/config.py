"""The frozen protocol config: every number of the method in one object (the paper's Table 3).

A run saves its :class:`ProtocolConfig` as ``config.json`` before the first evaluation and never
changes it. Every knob carries its documentation in the field metadata (``doc``), plus its bounds
or allowed choices, so :meth:`ProtocolConfig.describe` can print the table and loading a config
file validates every value.

Besides the paper's numbers, the config records the *decided gaps* of ``DESIGN.md`` §2 (places
where the paper leaves a choice open) as named choices, e.g. ``single_round_rule``; a run reports
which was used through :meth:`ProtocolConfig.decided_gaps`.

Numbers are compared with decimal semantics where the protocol has an exact edge (``0.02`` means
exactly two percent): see :func:`exact`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from tsevo.knobs import NestedKnobs, check_knobs, coerce, exact, knob
from tsevo.marachain.config import MaraConfig, mara_params
from tsevo.taxonomy.config import TAXONOMY_DOC, TaxonomyConfig, check_judge, taxonomy_params

from .ablation import AblationConfig, ablation_name, paper_ablation
from .baseline import AnswerConfig, answer_params
from .support import SUPPORT_DOC, SupportConfig, support_params

__all__ = ["AblationConfig", "AnswerConfig", "MaraConfig", "ProtocolConfig", "exact"]

_knob = knob
_NESTED = tuple(
    (c.OWNER.rsplit(".", 1)[1], c)
    for c in (AnswerConfig, MaraConfig, TaxonomyConfig, SupportConfig)
)


@dataclass(frozen=True, kw_only=True)
class ProtocolConfig:
    """Every fixed number of the evolution protocol (the paper's Table 3), frozen and saved.

    Each field's documentation is in ``dataclasses.fields(ProtocolConfig)[i].metadata["doc"]``
    (see :meth:`describe`). Construction validates types, bounds and choices and raises
    ``ValueError``/``TypeError`` naming the field.
    """

    # ---- shape of a run -------------------------------------------------------------------
    rounds: int = _knob(
        1,
        "Evolution rounds in the run. The frozen protocol is a single round; each accepted round "
        "appends one stage to the chain.",
        lo=1,
    )
    root: str = _knob(
        "empty",
        "Root library L_0 of the chain: 'empty' (the protocol), or the 'chronos' / 'expert' "
        "ablation roots.",
        choices=("empty", "chronos", "expert"),
    )
    seed: int = _knob(0, "Seed of every deterministic sampler and split in the run.", lo=0)
    max_synthesis_attempts: int = _knob(
        3, "Sequential synthesis attempts per work group (the strongest kept apart).", lo=1
    )

    # ---- failure clustering ---------------------------------------------------------------
    define_sample: int = _knob(
        150, "Errors sampled (at most) for the define step of clustering.", lo=1
    )
    max_categories: int = _knob(8, "Categories (at most) the define step may create.", lo=1)
    define_retries: int = _knob(2, "Retries of the define step after an invalid reply.", lo=0)
    assign_batch: int = _knob(32, "Errors per assign batch (strict JSON covering every id).", lo=1)
    assign_retries: int = _knob(2, "Retries per assign batch after an invalid reply.", lo=0)
    assign_passes: int = _knob(
        3, "Assign passes (at most) over still-unassigned errors before they are dropped.", lo=1
    )
    resplit_above: int = _knob(
        64, "A bucket with more members than this is split (once, see resplit_times).", lo=1
    )
    resplit_times: int = _knob(1, "How many times an oversized bucket may be split.", lo=0)
    resplit_part: int = _knob(
        16,
        "Decided gap (the paper does not say into how many parts): an oversized bucket is split once "
        "into ceil(members / resplit_part) parts, at most max_categories, by re-running define on it.",
        lo=2,
        gap=True,
    )
    min_bucket: int = _knob(
        2, "Buckets with fewer members than this are dropped (with unassigned errors).", lo=1
    )

    # ---- planning -------------------------------------------------------------------------
    planner_support: int = _knob(
        12, "Support examples (at most) in a bucket's planner dossier.", lo=0
    )
    planner_background: int = _knob(
        48, "Background examples (at most) in a planner dossier; see support.background.", lo=0
    )
    global_planner_attempts: int = _knob(
        2,
        "Global planner attempts; after this many failures the local plans go on as singletons.",
        lo=1,
    )

    # ---- synthesis ------------------------------------------------------------------------
    repairs_per_violation: int = _knob(
        1, "Targeted repairs (at most) for one contract violation of a synthesis attempt.", lo=0
    )
    replan_after_zero_repair: int = _knob(
        2,
        "Consecutive zero-repair attempts that trigger a replan (which may change the artifact "
        "kind, e.g. tool -> usage guidance).",
        lo=1,
    )
    calibration_model: str = _knob(
        "binary_decision_tree_v1",
        "Calibration model compiled into a tool's source when the contract requests it.",
        choices=("binary_decision_tree_v1",),
    )
    calibration_min_per_class: int = _knob(
        16, "Train rows per class (at least) before a calibration tree may be fitted.", lo=1
    )
    calibration_holdout: float = _knob(
        0.2,
        "Internal holdout fraction of the calibration split (grouped by input fingerprint).",
        lo=0.0,
        hi=1.0,
    )
    calibration_min_bal_acc: float = _knob(
        0.55, "Holdout balanced accuracy (at least) to accept a calibration tree.", lo=0.0, hi=1.0
    )

    # ---- prefilter ------------------------------------------------------------------------
    prefilter_errors: int = _knob(
        32,
        "Held-out errors (at most) of the candidate's bucket run by the prefilter; also the cap "
        "on a bucket's held-out rows.",
        lo=1,
    )
    prefilter_min_repairs: int = _knob(
        1, "Attributable repairs (at least) a candidate needs to survive the prefilter.", lo=0
    )
    prefilter_early_stop: float = _knob(
        0.40, "Repair rate at which the synthesis search stops early.", lo=0.0, hi=1.0
    )
    prefilter_harm_probe: int = _knob(
        32,
        "In-scope train questions (at most) the current library gets right, answered by the "
        "prefilter to probe harm (disjoint from support rows).",
        lo=0,
    )
    prefilter_harm_cap_abs: int = _knob(
        2, "Harm cap of the prefilter probe: harmed <= max(this, frac * probe).", lo=0
    )
    prefilter_harm_cap_frac: float = _knob(
        0.10, "Harm cap of the prefilter probe as a fraction of the probe size.", lo=0.0, hi=1.0
    )
    prefilter_exec_error_cap: float = _knob(
        0.05, "Execution errors (at most) as a fraction of prefilter runs.", lo=0.0, hi=1.0
    )

    # ---- whole-library gate ---------------------------------------------------------------
    gate_z: float = _knob(
        1.96, "Z of the gate's lower bound: delta_lb = delta - z*sqrt(max(h+m,1))/n.", lo=0.0
    )
    single_round_net_floor: int = _knob(
        3, "Single-round rule: net repair h - m must be at least max(this, ceil(frac*n)).", lo=0
    )
    single_round_net_frac: float = _knob(
        0.02, "Single-round rule: the fraction of n in the net-repair floor.", lo=0.0, hi=1.0
    )
    single_round_harm_cap: float = _knob(
        0.10, "Single-round rule: harm rate m/n must be at most this.", lo=0.0, hi=1.0
    )
    invalid_error_rate: float = _knob(
        0.02,
        "Execution error rate (1 - n/N) above which a paired measurement is invalid (a rollback "
        "as measurement-invalid, distinct from a rejection).",
        lo=0.0,
        hi=1.0,
    )

    # ---- prune ----------------------------------------------------------------------------
    prune_min_harm: int = _knob(
        2, "Clearly harmful update: m_u at least this (and m_u > ratio * h_u).", lo=1
    )
    prune_harm_ratio: float = _knob(
        2.0, "Clearly harmful update: m_u strictly above this times h_u.", lo=0.0
    )
    auto_prune: bool = _knob(
        False,
        "AUTO_PRUNE. Off: at most one bounded prune per round, retested once; repeated "
        "pruning would fit the library to validation. tsevo implements only the off setting.",
    )

    # ---- answering ------------------------------------------------------------------------
    max_tools_per_question: int = _knob(
        3, "Tools (at most) run for one question over the whole chain.", lo=1
    )

    # ---- reporting ------------------------------------------------------------------------
    test_rejected_candidate: bool = _knob(
        True,
        "TEST_REJECTED_CANDIDATE. On: a rolled-back round's best candidate gets one diagnostic "
        "test run that takes part in no decision.",
    )

    # ---- decided gaps (DESIGN.md §2) ------------------------------------------------------
    completion_rule: str = _knob(
        "final_answer",
        "An arm completes a question when it returns a final answer; a tool error inside the "
        "residual chain still completes (it falls back). n counts questions both arms "
        "completed; the execution error rate is 1 - n/N; tool errors are a diagnostic.",
        choices=("final_answer",),
        gap=True,
    )
    single_round_rule: str = _knob(
        "only_when_rounds_is_1",
        "When the single-round admission rule applies: 'only_when_rounds_is_1' (the protocol; "
        "multi-round runs admit through the strict path alone), 'always' or 'never' "
        "(ablations).",
        choices=("only_when_rounds_is_1", "always", "never"),
        gap=True,
    )
    bucket_split: str = _knob(
        "disjoint_support_heldout",
        "Each bucket's members split deterministically into support rows (planner, synthesis, "
        "calibration) and <= prefilter_errors held-out rows (prefilter only); never overlapping.",
        choices=("disjoint_support_heldout",),
        gap=True,
    )
    prefilter_harm_rule: str = _knob(
        "train_probe",
        "The prefilter measures harm on a probe of in-scope train questions the current "
        "library answers right (prefilter_harm_probe), capped by prefilter_harm_cap_*.",
        choices=("train_probe",),
        gap=True,
    )
    lifecycle_rule: str = _knob(
        "append_only_overrides",
        "Earlier stages are never edited: refine adds guidance, rescope a scope override, "
        "retire a tombstone, all in the new stage and attributed through their own traces.",
        choices=("append_only_overrides",),
        gap=True,
    )
    harmful_rule: str = _knob(
        "min_harm_and_ratio",
        "Clearly harmful: m_u >= prune_min_harm and m_u > prune_harm_ratio * h_u on validation; "
        "thin or mixed evidence is left alone.",
        choices=("min_harm_and_ratio",),
        gap=True,
    )
    dependents_rule: str = _knob(
        "targets_and_group_measurement",
        "An update's dependents: updates that target it (refine, rescope) and members of its "
        "merged work group sharing its measurement; removed with it, transitively.",
        choices=("targets_and_group_measurement",),
        gap=True,
    )
    failed_final_gate: str = _knob(
        "write_passed_library",
        "If the scope-reconciled library fails the final gate, the reconciliation edit is "
        "discarded and the library that already passed is written.",
        choices=("write_passed_library",),
        gap=True,
    )

    # ---- ablations (the paper's §4; all on = the protocol) --------------------------------
    ablation: AblationConfig = _knob(  # noqa: RUF009 - a frozen (immutable) default
        AblationConfig(),
        "Ablation switches (tsevo.evolve.ablation): calibration, gate, scope, residual_chain, "
        "all on in the protocol; ProtocolConfig.ablated(name) applies one of the paper's named "
        "ablations ('w/o cali.', 'w/o gate', 'w/o scope', 'w/ chronos', 'w/ expert', "
        "'w/o residual chain'). Saved with the run; a run resumes only under the same switches.",
    )
    answer: AnswerConfig = _knob(  # noqa: RUF009 - a frozen (immutable) default
        AnswerConfig(),
        "How the base answerer answers (tsevo.evolve.baseline): selection (single | majority "
        "over samples), refine (one reflection pass), shots (train examples with gold): the "
        "paper's answering baselines, LLM backend only. Saved only when not the default; a run "
        "resumes only under the same settings.",
    )
    marachain: MaraConfig = _knob(  # noqa: RUF009 - a frozen (immutable) default
        MaraConfig(),
        "Mara chains (tsevo.marachain, marachain.<knob>): rejected candidates refined along chains; "
        "depth 0 (the default) is the published K-attempt loop. Saved only when not the default.",
    )
    taxonomy: TaxonomyConfig = _knob(TaxonomyConfig(), TAXONOMY_DOC)  # noqa: RUF009 - frozen
    support: SupportConfig = _knob(SupportConfig(), SUPPORT_DOC)  # noqa: RUF009 - frozen

    def __post_init__(self) -> None:
        for name, kind in (("ablation", AblationConfig), *_NESTED):  # dicts from config.json
            if isinstance(getattr(self, name), Mapping):
                object.__setattr__(self, name, kind.from_dict(getattr(self, name)))
        check_knobs(self, "ProtocolConfig")
        if self.auto_prune:
            raise ValueError(
                "ProtocolConfig.auto_prune: tsevo implements only AUTO_PRUNE off (one bounded "
                "prune per round, retested once); auto_prune=True is not supported"
            )
        check_judge(self.answer.selection, self.taxonomy)

    # ---- (de)serialization -----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Return every knob as a JSON-friendly dict (field order; ``ablation`` as a nested dict)."""
        skip = {n for n, _ in _NESTED if getattr(self, n).is_default}  # config.json as before them
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip}
        return {k: v.to_dict() if isinstance(v, NestedKnobs) else v for k, v in d.items()}

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """Return the names of every knob in declaration order."""
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProtocolConfig:
        """Build a config from a dict such as :meth:`to_dict` returns.

        Missing keys take their defaults; values must already have the right type (an int is
        accepted for a float knob).

        Args:
            data: Knob name -> value.

        Returns:
            The validated config.

        Raises:
            TypeError: On unknown keys (all named) or a value of the wrong type.
            ValueError: On a value out of bounds or not among the allowed choices.
        """
        _check_known(data.keys(), "from_dict")
        return cls(**dict(data))

    @classmethod
    def from_params(
        cls, params: Mapping[str, Any], *, base: ProtocolConfig | None = None
    ) -> ProtocolConfig:
        """Build a config from loose parameters (papermill cells, CLI ``--set KEY=VALUE``).

        Keys are case-insensitive (``AUTO_PRUNE`` works as in Table 3). String values are
        coerced to the knob's type (``"false"``, ``"3"``, ``"0.4"``); other values must already
        have the right type. Ablation switches are ``ablation.<switch>`` keys, or ``ablation``
        with one of the paper's names (``"w/o gate"``, ``"w/ chronos"``, ...; it may set
        ``root``) or a dict of switches.

        Args:
            params: Knob name -> value overrides.
            base: Config the overrides apply to (defaults when ``None``).

        Returns:
            The validated config.

        Raises:
            TypeError: On unknown keys (all named), a key given twice in different case, or a
                value that cannot be coerced.
            ValueError: On a value out of bounds or not among the allowed choices.
        """
        kinds = {f.name: type(f.default) for f in fields(cls)}
        lowered: dict[str, Any] = {}
        for key, value in params.items():
            name = str(key).lower()
            if name in lowered:
                raise TypeError(f"ProtocolConfig.from_params: key {name!r} given more than once")
            lowered[name] = value
        switches = {
            k.split(".", 1)[1]: lowered.pop(k) for k in list(lowered) if k.startswith("ablation.")
        }
        named = lowered.pop("ablation", None)
        start = base.to_dict() if base is not None else {}
        nested = []
        for take in (answer_params, mara_params, taxonomy_params, support_params):
            lowered, got = take(lowered, start)
            nested.append(got)
        _check_known(lowered.keys(), "from_params")
        coerced = {k: coerce("ProtocolConfig", k, v, kinds[k]) for k, v in lowered.items()}
        ablation = dict(start.get("ablation", {}))
        if isinstance(named, str):
            changes = paper_ablation(named)
            if "root" in changes and coerced.get("root", changes["root"]) != changes["root"]:
                raise ValueError(
                    f"ablation {named!r} sets root={changes['root']!r}, not {coerced['root']!r}"
                )
            coerced.setdefault("root", changes.get("root", "empty"))
            ablation = dict(changes.get("ablation", {}))
        elif named is not None:
            ablation.update(named.to_dict() if isinstance(named, AblationConfig) else dict(named))
        ablation.update(AblationConfig.from_params(switches).to_dict() if switches else {})
        start.update(coerced)
        start["ablation"] = AblationConfig.from_params(ablation)
        start.update({n: v for (n, _), v in zip(_NESTED, nested, strict=True) if v})
        return cls(**start)

    def ablated(self, name: str) -> ProtocolConfig:
        """Return a copy under one of the paper's named ablations (``"full"``: every switch on).

        Args:
            name: ``full``, ``w/o cali.``, ``w/o gate``, ``w/o scope``, ``w/ chronos``,
                ``w/ expert`` or ``w/o residual chain`` (case and punctuation ignored).

        Raises:
            ValueError: For an unknown name.
        """
        changes = paper_ablation(name)
        return self.replace(
            root=changes.get("root", "empty"),
            ablation=AblationConfig.from_dict(changes.get("ablation", {})),
        )

    @property
    def ablation_name(self) -> str:
        """The paper's name of this config's ablation (``full`` by default, ``custom`` when none)."""
        return ablation_name(self.root, self.ablation)

    def replace(self, **changes: Any) -> ProtocolConfig:
        """Return a copy with some knobs changed (validated like a new config).

        Raises:
            TypeError: On unknown knob names (all named).
        """
        _check_known(changes.keys(), "replace")
        return dataclasses.replace(self, **changes)

    def to_json(self) -> str:
        """Return the canonical JSON text of the config (sorted keys, indented)."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def save(self, path: str | Path) -> Path:
        """Write the config as JSON (creating parent folders) and return the path."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(self.to_json(), encoding="utf-8")
        return p

    @classmethod
    def load(cls, path: str | Path) -> ProtocolConfig:
        """Read a config saved by :meth:`save` (validated like :meth:`from_dict`)."""
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise TypeError(f"{path}: expected a JSON object, got {type(data).__name__}")
        return cls.from_dict(data)

    def fingerprint(self) -> str:
        """Return a 16-hex-digit content hash of the config (for manifests and resume checks)."""
        canon = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canon.encode("utf-8")).hexdigest()[:16]

    # ---- documentation ---------------------------------------------------------------------
    @classmethod
    def doc(cls, name: str) -> str:
        """Return the documentation of one knob.

        Raises:
            KeyError: If ``name`` is not a knob.
        """
        for f in fields(cls):
            if f.name == name:
                return str(f.metadata["doc"])
        raise KeyError(f"ProtocolConfig has no knob {name!r}")

    def describe(self) -> list[dict[str, Any]]:
        """Return Table 3 as rows ``{"name", "value", "default", "doc", "decided_gap"}``."""
        values, defaults = self.to_dict(), ProtocolConfig().to_dict()
        for name, kind in _NESTED:
            values[name], defaults[name] = getattr(self, name).to_dict(), kind().to_dict()
        return [
            {
                "name": f.name,
                "value": values[f.name],
                "default": defaults[f.name],
                "doc": f.metadata["doc"],
                "decided_gap": bool(f.metadata["gap"]),
            }
            for f in fields(self)
        ]

    def decided_gaps(self) -> dict[str, Any]:
        """Return the decided-gap choices in use (knob name -> value) for reports."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.metadata["gap"]}

    def single_round_applies(self, rounds: int) -> bool:
        """Whether the single-round admission rule applies to a run of ``rounds`` (>= 1) rounds."""
        if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
            raise ValueError(f"rounds must be an int >= 1, got {rounds!r}")
        if self.single_round_rule == "always":
            return True
        if self.single_round_rule == "never":
            return False
        return rounds == 1


def _check_known(keys: Any, where: str) -> None:
    unknown = sorted(set(keys) - set(ProtocolConfig.field_names()))
    if unknown:
        raise TypeError(f"ProtocolConfig.{where}: unknown knob(s) {unknown}")
