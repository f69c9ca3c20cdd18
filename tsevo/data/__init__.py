"""Questions, suites, the synthetic suite and public-source loaders.

* :class:`Question` (``question``), validated field by field (``validation``); a bad record raises
  :class:`RecordError`, a lenient load lists them in a :class:`LoadReport` (``report``).
* :class:`Suite` (``suite``), its deterministic splits by group (``splitting``) and its files
  (``suite_files``): :func:`load_suite` reads what :meth:`Suite.save` writes.
* :class:`QuestionView` (``view``): what a role may see of a question, under an opaque per-run id.
* ``tsevo.data.synthetic`` (the embedded default suite) and ``tsevo.data.sources`` (public-source
  loaders) are subpackages, imported on their own.
"""

from .question import Question
from .report import LoadReport, RecordError
from .splitting import SPLITS
from .suite import Suite, load_suite
from .view import QuestionView, opaque_id

__all__ = [
    "SPLITS",
    "LoadReport",
    "Question",
    "QuestionView",
    "RecordError",
    "Suite",
    "load_suite",
    "opaque_id",
]
