"""Tidy frames and tables with fixed schemas, read from a run folder: what notebooks and widgets show.

Every function takes a run folder (or an open :class:`~tsevo.store.RunStore`) and returns a pandas
DataFrame whose columns are listed in its docstring (and in the ``*_COLUMNS`` constants, which tests
check), or a JSON-friendly summary. Runs are read only through :class:`~tsevo.store.RunLayout`.
Nothing here answers questions, changes a run or plots (figures live in :mod:`tsevo.widgets`).

* runs: :func:`rounds_in`, :func:`load_records`, :func:`run_suite`
* per question: :func:`flips_df`, :func:`changed_flips`
* the library: :func:`tools_df`, :func:`chain_table`, :func:`measurements_df`
* a round's steps: :func:`funnel_df`, :func:`base_pass_table`, :func:`failures_df`,
  :func:`buckets_table`, :func:`contracts_table`, :func:`attempts_table`, :func:`candidate_source`,
  :func:`calibration_table`, :func:`repairs_table`
* question kinds and composite tools: :func:`kinds_table` (each kind recovered from the wording
  and what the planner did with it), :func:`branch_effects` (what each branch read on a split and
  what its stage made of it, :func:`stage_effect`); before any round, a suite's kinds and the
  concept words they hit: :func:`suite_kinds`, :func:`suite_kinds_summary`
* the gate: :func:`gate_df`, :func:`paired_table`, :func:`paired_rows`, :func:`prune_df`
* the report-only test and summaries: :func:`test_deltas`, :func:`run_summary`,
  :func:`summary_text` (a composite in brief: :func:`brief_measurement`), :func:`run_text`,
  :func:`run_metrics`, :func:`suite_metrics`
* the synthetic suite's ceiling: :func:`solver_table`
* Mara chains: :func:`chain_nodes_df`, :func:`chain_scores_df` (and chain rows in
  :func:`funnel_df`); for inspection :func:`chains_df`, :func:`chain_lineage_df`,
  :func:`chain_records_df`, :func:`chain_diffs_df`, :func:`chain_depth`; the report-only
  optimism probe of batch-selected winners :func:`selection_optimism_df`
* the paired chain study (discard vs chain vs discard with K + d attempts):
  :func:`group_admissions`, :func:`chain_arm_params`, :func:`chain_arm_row`, :func:`chain_arms_df`,
  :func:`chain_arms_summary`, :func:`chain_recoveries_df`
* failure taxonomies: :func:`codes_df`, :func:`firings_df`, :func:`agreement_df`, :func:`gate_phases_df`,
  :func:`versions_df`, :func:`gaps_df`, :func:`trace_flips_df`, :func:`taxonomy_metrics`
* the paired taxonomy study (arms differing only in the consumers): :func:`taxonomy_arm_params`,
  :func:`taxonomy_arm_row`, :func:`taxonomy_answer_rows`, :func:`taxonomy_arms_df`,
  :func:`taxonomy_buckets_df`
"""

from ._runs import load_records, rounds_in, run_suite
from .chain_arms import (
    ADMISSION_KEYS,
    CHAIN_ARM_KEYS,
    CHAIN_ARMS,
    CHAIN_ARMS_COLUMNS,
    CHAIN_RECOVERIES_COLUMNS,
    chain_arm_params,
    chain_arm_row,
    chain_arms_df,
    chain_arms_summary,
    chain_recoveries_df,
    group_admissions,
)
from .failures import (
    BASE_PASS_COLUMNS,
    BUCKETS_COLUMNS,
    FAILURES_COLUMNS,
    REPAIRS_COLUMNS,
    base_pass_table,
    buckets_table,
    failures_df,
    repairs_table,
)
from .flips import CHANGED_FLIPS_COLUMNS, FLIP_CLASSES, FLIPS_COLUMNS, changed_flips, flips_df
from .funnel import FUNNEL_COLUMNS, FUNNEL_ORDER, funnel_df
from .gate import (
    GATE_COLUMNS,
    PAIRED_TABLE_COLUMNS,
    PRUNE_COLUMNS,
    gate_df,
    paired_rows,
    paired_table,
    prune_df,
)
from .kinds import (
    BRANCH_EFFECTS_COLUMNS,
    KINDS_COLUMNS,
    branch_effects,
    kinds_table,
    stage_effect,
)
from .marachain import (
    CHAIN_DIFFS_COLUMNS,
    CHAIN_FUNNEL_ORDER,
    CHAIN_LINEAGE_COLUMNS,
    CHAIN_NODES_COLUMNS,
    CHAIN_RECORDS_COLUMNS,
    CHAIN_SCORES_COLUMNS,
    CHAINS_COLUMNS,
    SELECTION_OPTIMISM_COLUMNS,
    chain_depth,
    chain_diffs_df,
    chain_lineage_df,
    chain_nodes_df,
    chain_records_df,
    chain_scores_df,
    chains_df,
    selection_optimism_df,
)
from .measurements import MEASUREMENTS_COLUMNS, measurements_df
from .suite_kinds import SUITE_KINDS_COLUMNS, suite_kinds, suite_kinds_summary
from .summary import (
    brief_measurement,
    run_metrics,
    run_summary,
    run_text,
    suite_metrics,
    summary_text,
)
from .tables import (
    CALIBRATION_COLUMNS,
    CONTRACTS_COLUMNS,
    TEST_DELTAS_COLUMNS,
    attempts_table,
    calibration_table,
    candidate_source,
    contracts_table,
    solver_table,
    test_deltas,
)
from .taxonomy import (
    AGREEMENT_COLUMNS,
    CODES_COLUMNS,
    FIRINGS_COLUMNS,
    GAPS_COLUMNS,
    PHASES_COLUMNS,
    VERSIONS_COLUMNS,
    agreement_df,
    codes_df,
    firings_df,
    gaps_df,
    gate_phases_df,
    taxonomy_metrics,
    trace_flips_df,
    versions_df,
)
from .taxonomy_arms import (
    TAXONOMY_ARM_KEYS,
    TAXONOMY_ARMS,
    TAXONOMY_ARMS_COLUMNS,
    TAXONOMY_BUCKETS_COLUMNS,
    arm_label,
    taxonomy_answer_rows,
    taxonomy_arm_params,
    taxonomy_arm_row,
    taxonomy_arms_df,
    taxonomy_buckets_df,
)
from .tools import CHAIN_COLUMNS, TOOLS_COLUMNS, chain_table, tools_df

__all__ = [
    "ADMISSION_KEYS",
    "AGREEMENT_COLUMNS",
    "BASE_PASS_COLUMNS",
    "BRANCH_EFFECTS_COLUMNS",
    "BUCKETS_COLUMNS",
    "CALIBRATION_COLUMNS",
    "CHAINS_COLUMNS",
    "CHAIN_ARMS",
    "CHAIN_ARMS_COLUMNS",
    "CHAIN_ARM_KEYS",
    "CHAIN_COLUMNS",
    "CHAIN_DIFFS_COLUMNS",
    "CHAIN_FUNNEL_ORDER",
    "CHAIN_LINEAGE_COLUMNS",
    "CHAIN_NODES_COLUMNS",
    "CHAIN_RECORDS_COLUMNS",
    "CHAIN_RECOVERIES_COLUMNS",
    "CHAIN_SCORES_COLUMNS",
    "CHANGED_FLIPS_COLUMNS",
    "CODES_COLUMNS",
    "CONTRACTS_COLUMNS",
    "FAILURES_COLUMNS",
    "FIRINGS_COLUMNS",
    "FLIPS_COLUMNS",
    "FLIP_CLASSES",
    "FUNNEL_COLUMNS",
    "FUNNEL_ORDER",
    "GAPS_COLUMNS",
    "GATE_COLUMNS",
    "KINDS_COLUMNS",
    "MEASUREMENTS_COLUMNS",
    "PAIRED_TABLE_COLUMNS",
    "PHASES_COLUMNS",
    "PRUNE_COLUMNS",
    "REPAIRS_COLUMNS",
    "SELECTION_OPTIMISM_COLUMNS",
    "SUITE_KINDS_COLUMNS",
    "TAXONOMY_ARMS",
    "TAXONOMY_ARMS_COLUMNS",
    "TAXONOMY_ARM_KEYS",
    "TAXONOMY_BUCKETS_COLUMNS",
    "TEST_DELTAS_COLUMNS",
    "TOOLS_COLUMNS",
    "VERSIONS_COLUMNS",
    "agreement_df",
    "arm_label",
    "attempts_table",
    "base_pass_table",
    "branch_effects",
    "brief_measurement",
    "buckets_table",
    "calibration_table",
    "candidate_source",
    "chain_arm_params",
    "chain_arm_row",
    "chain_arms_df",
    "chain_arms_summary",
    "chain_depth",
    "chain_diffs_df",
    "chain_lineage_df",
    "chain_nodes_df",
    "chain_records_df",
    "chain_recoveries_df",
    "chain_scores_df",
    "chain_table",
    "chains_df",
    "changed_flips",
    "codes_df",
    "contracts_table",
    "failures_df",
    "firings_df",
    "flips_df",
    "funnel_df",
    "gaps_df",
    "gate_df",
    "gate_phases_df",
    "group_admissions",
    "kinds_table",
    "load_records",
    "measurements_df",
    "paired_rows",
    "paired_table",
    "prune_df",
    "repairs_table",
    "rounds_in",
    "run_metrics",
    "run_suite",
    "run_summary",
    "run_text",
    "selection_optimism_df",
    "solver_table",
    "stage_effect",
    "suite_kinds",
    "suite_kinds_summary",
    "suite_metrics",
    "summary_text",
    "taxonomy_answer_rows",
    "taxonomy_arm_params",
    "taxonomy_arm_row",
    "taxonomy_arms_df",
    "taxonomy_buckets_df",
    "taxonomy_metrics",
    "test_deltas",
    "tools_df",
    "trace_flips_df",
    "versions_df",
]
