"""Failure taxonomies (AdaMAST in tsevo, issue 12): codes on three axes, gated by agreement.

A taxonomy is a compact vocabulary of named failure codes on three fixed axes (``A``
system-level, ``B`` role-specific, ``C`` domain-specific), induced from an agent's own train
traces and accepted only when independent annotators agree on it. This package holds its
foundation:

* :class:`Code`, :class:`Taxonomy`: immutable versions whose ids are identities (minted from a
  per-axis high-water mark, never reused; retired ids remembered), with a content
  :attr:`~Taxonomy.fingerprint` that every firing records (:mod:`.codes`, :mod:`.model`);
* edits (:class:`Add`, :class:`Relabel`, :class:`Retire`, :class:`Merge`, :class:`Split`) applied
  in batches by :func:`apply_edits`, each batch a :class:`LineageEntry` (:mod:`.edits`);
* ``taxonomy.json`` compatible with AdaMAST's public file (:func:`load_taxonomy`,
  :func:`save_taxonomy`; :mod:`.jsonio`);
* MAST's 14 modes as a ``baseline`` taxonomy (:func:`load_mast`; :mod:`.mast`);
* agreement statistics and the gate's status decision (:func:`agreement`, :func:`gate_status`;
  :mod:`.agreement`).

* the builtin, offline path (import the modules; this package's namespace stays light):
  train traces in AdaMAST's canonical JSONL with a feature registry (:mod:`.traces`) from a
  round's base pass and, opt-in, its train-side evolution arms (:mod:`.sources`), induction by
  support, lift, Fisher + Benjamini-Hochberg (:mod:`.induce`), the four-reader agreement gate
  (:mod:`.gate`), gated refinement after later rounds with pinned versions (:mod:`.refine`), a
  run's artifacts under ``taxonomy/`` (:mod:`.runs`) and ``tsevo taxonomy
  induce|gate|refine|show`` (:mod:`.command`);
* the LLM path: induction in 8 steps with strict JSON contracts (:mod:`.llm_induce`,
  :mod:`.llm_consolidate`, shared pieces in :mod:`.llm`, prompts in ``prompts/``) and four LLM
  annotators for the gate (:mod:`.llm_panel`);
* consumers: ``ProtocolConfig.taxonomy`` (:class:`~.config.TaxonomyConfig`: a pinned taxonomy,
  off by default), the judge behind ``answer.selection = "judge"`` (:mod:`.judge`), and in a
  round codes as triage categories and coded diagnoses for the planner and synthesizer
  (:mod:`.consumers`).

The package sits below :mod:`tsevo.evolve` and above :mod:`tsevo.agent` (DESIGN.md §3); of tsevo
it imports :mod:`tsevo.agent`, :mod:`tsevo.roles` (the LLM client and the selection protocol),
:mod:`tsevo.data`, :mod:`tsevo.store`, :mod:`tsevo.hashing`, :mod:`tsevo.knobs` and
:mod:`tsevo.fileio`.

Example:
    >>> from tsevo.taxonomy import Add, Code, Retire, Taxonomy, apply_edits
    >>> tax = Taxonomy.create([Code(id="", category="A", name="Tool_Timeout")])
    >>> tax.ids
    ('A.1',)
    >>> tax = apply_edits(tax, [Retire("A.1")], trigger="manual").taxonomy
    >>> new = Code(id="", category="A", name="Tool_Contract_Error")
    >>> apply_edits(tax, [Add(new)], trigger="manual").taxonomy.ids
    ('A.2',)
"""

from .agreement import (
    COVERAGE_FLOOR,
    KAPPA_TARGET,
    METRICS,
    AgreementResult,
    GateDecision,
    PairKappa,
    agreement,
    area_matrix,
    cohen_area,
    cohen_kappa,
    consolidate,
    coverage,
    fleiss_code_macro,
    fleiss_kappa,
    gate_status,
)
from .codes import AXES, MINTED_ID, ORIGINS, SEVERITIES, Code, TaxonomyError, area_of
from .edits import (
    Add,
    Edit,
    EditBatch,
    LineageEntry,
    Merge,
    Relabel,
    Retire,
    Split,
    apply_edits,
)
from .jsonio import (
    SCHEMA_VERSION,
    append_lineage,
    load_taxonomy,
    read_lineage,
    save_taxonomy,
    taxonomy_from_dict,
    taxonomy_to_dict,
)
from .mast import MAST_ALIASES, MAST_MODES, load_mast, mast_id
from .model import STATUSES, USABLE_STATUSES, Retired, Taxonomy, fingerprint, require_usable

__all__ = [
    "AXES",
    "COVERAGE_FLOOR",
    "KAPPA_TARGET",
    "MAST_ALIASES",
    "MAST_MODES",
    "METRICS",
    "MINTED_ID",
    "ORIGINS",
    "SCHEMA_VERSION",
    "SEVERITIES",
    "STATUSES",
    "USABLE_STATUSES",
    "Add",
    "AgreementResult",
    "Code",
    "Edit",
    "EditBatch",
    "GateDecision",
    "LineageEntry",
    "Merge",
    "PairKappa",
    "Relabel",
    "Retire",
    "Retired",
    "Split",
    "Taxonomy",
    "TaxonomyError",
    "agreement",
    "append_lineage",
    "apply_edits",
    "area_matrix",
    "area_of",
    "cohen_area",
    "cohen_kappa",
    "consolidate",
    "coverage",
    "fingerprint",
    "fleiss_code_macro",
    "fleiss_kappa",
    "gate_status",
    "load_mast",
    "load_taxonomy",
    "mast_id",
    "read_lineage",
    "require_usable",
    "save_taxonomy",
    "taxonomy_from_dict",
    "taxonomy_to_dict",
]
