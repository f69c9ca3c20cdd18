"""The builtin triage role: TF-IDF over question text, option shape and trace facts, then k-means.

*Define* vectorizes a sample of errors (numbers masked; no task field exists to read), picks the
number of categories (up to the protocol's maximum) by silhouette, and labels each category by its
most telling terms. *How many at most* (:meth:`ClusterTriage.categories_for`, read on all of a
side's errors): when the errors' question kinds (templates recovered from wording, :mod:`.kinds`)
hold a handful of errors each, as on a public benchmark's many templates, a few large categories,
since each bucket's planner learns a kind only from the rows of it the bucket holds. *Assign* maps every error to the category whose centroid it is most similar to
(cosine over the same features), honouring the batch contract: every id gets an answer.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.cluster import KMeans
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics import silhouette_score

from ..protocols import Category, ErrorItem
from .kinds import median_kind_size

__all__ = ["ClusterTriage", "error_features"]

_WORD = re.compile(r"[a-z][a-z_]+")
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "in",
        "on",
        "at",
        "to",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "which",
        "what",
        "how",
        "does",
        "do",
        "did",
        "and",
        "or",
        "for",
        "with",
        "from",
        "by",
        "as",
        "than",
        "then",
        "there",
        "their",
        "series",
        "time",
        "value",
        "values",
        "data",
        "point",
        "points",
        "given",
        "following",
        "one",
    ]
)
_CENTROID_TERMS = 40


def error_features(e: ErrorItem) -> list[str]:
    """Feature tokens of one error: words of the question (numbers masked), option words and shape, trace facts."""
    toks = [w for w in _WORD.findall(e.text.lower()) if w not in _STOP]
    opt_words = {w for o in e.options for w in _WORD.findall(o.lower()) if w not in _STOP}
    toks += [f"opt:{w}" for w in sorted(opt_words)]
    numeric = all(re.search(r"\d", o) for o in e.options)
    toks.append("shape:numeric_options" if numeric else "shape:label_options")
    toks.append(f"shape:{len(e.options)}_options")
    toks.append("shape:dual" if e.n_primary > 1 else "shape:single")
    if e.n_candidates:
        toks.append("shape:candidates")
    if e.n_covariates:
        toks.append("shape:covariate")
    toks.append("trace:tool_fired" if e.tool_fired else "trace:no_tool")
    if e.decision:
        toks.append(f"trace:{e.decision}")
    toks += [f"trace:tool:{t}" for t in e.tools]
    return toks


def _cosine(weights: dict[str, float], toks: Sequence[str]) -> float:
    if not weights or not toks:
        return 0.0
    tf = Counter(toks)
    dot = sum(weights.get(t, 0.0) * c for t, c in tf.items())
    nw = math.sqrt(sum(w * w for w in weights.values()))
    nt = math.sqrt(sum(c * c for c in tf.values()))
    return dot / (nw * nt) if nw > 0 and nt > 0 else 0.0


@dataclass(frozen=True)
class _Wording:
    """An error's wording as :func:`~.kinds.median_kind_size` reads a question.

    The triage's view has no series names: none is masked, alike for every error.
    """

    id: str
    question: str
    options: tuple[str, ...]
    series: tuple[str, ...] = ()
    candidates: tuple[str, ...] = ()

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(f"{self.question}\x00{'|'.join(self.options)}".encode()).hexdigest()

    @classmethod
    def of(cls, e: ErrorItem) -> _Wording:
        return cls(e.qid, e.text.split("\n", 1)[0], tuple(e.options))


class ClusterTriage:
    """Deterministic clustering triage (scikit-learn TF-IDF + k-means, silhouette-chosen k).

    Args:
        seed: Seed of k-means.
        tolerance: The finest k whose silhouette is within this of the best k is chosen (finer
            buckets give planners more coherent rows).
        few_errors: Errors are in the few-examples regime when their question kinds hold at most
            this many of them (median over errors; ``mixed`` about 2, ``default`` about 10).
        few_categories: Most categories in that regime (``None``: no bound). On the development
            seeds of ``mixed`` (101-103, 108-111, 20011, the planner's ``max_branches`` at 200,
            ``runs/bench/mixed-dev8-categories-*.json``): 8 categories +4.8 +- 2.7 pp, harmed
            2.1%; 3 categories +6.1 +- 2.1, 3.2%; 2 categories +8.9 +- 4.0, 3.4%; 1 category +2.6
            +- 3.0 (five rounds rejected: one tool for every kind sinks or floats as one). The
            runs at 1, 3 and 8 also showed the planner 400 background and 400 support rows, which
            alone did not matter (8 categories as shipped before the bound: +5.8 +- 2.6).
    """

    name = "builtin-cluster-triage"

    def __init__(
        self,
        seed: int = 0,
        tolerance: float = 0.02,
        few_errors: float = 3.0,
        few_categories: int | None = 2,
    ) -> None:
        self.seed = seed
        self.tolerance = tolerance
        self.few_errors = few_errors
        self.few_categories = few_categories

    def categories_for(self, errors: Sequence[ErrorItem]) -> int | None:
        """``few_categories`` when the errors' question kinds hold a handful of them each, else None.

        Read on all of a side's errors (a define sample of 150 makes any suite's kinds look small).
        """
        if self.few_categories is None or len(errors) < 2:
            return None
        if median_kind_size(_Wording.of(e) for e in errors) > self.few_errors:
            return None
        return self.few_categories

    def define(self, errors: Sequence[ErrorItem], max_categories: int) -> list[Category]:
        """Return at most ``max_categories`` labelled categories for a sample of errors."""
        if not errors:
            return []
        docs = [error_features(e) for e in errors]
        vec = TfidfVectorizer(analyzer=lambda d: d, sublinear_tf=True, norm="l2")
        X = vec.fit_transform(docs)
        vocab = np.array(vec.get_feature_names_out())
        n = X.shape[0]
        distinct = len({tuple(sorted(d)) for d in docs})
        kmax = max(1, min(max_categories, n // 2, distinct))
        best_labels = np.zeros(n, dtype=int)
        scored: list[tuple[int, float, np.ndarray]] = []
        for k in range(2, kmax + 1):
            km = KMeans(n_clusters=k, n_init=10, random_state=self.seed)
            labels = km.fit_predict(X)
            if len(set(labels)) < 2:
                continue
            scored.append((k, float(silhouette_score(X, labels, metric="cosine")), labels))
        if scored:
            best_sil = max(sc for _, sc, _ in scored)
            # the finest clustering whose silhouette is within tolerance of the best one
            _, _, best_labels = max(
                (x for x in scored if x[1] >= best_sil - self.tolerance), key=lambda x: x[0]
            )
        # order categories by size (desc) then first member, so ids are stable
        order = sorted(
            set(best_labels.tolist()),
            key=lambda c: (-int((best_labels == c).sum()), int(np.argmax(best_labels == c))),
        )
        cats = []
        Xd = X.toarray()
        for i, c in enumerate(order, 1):
            members = Xd[best_labels == c]
            centroid = members.mean(axis=0)
            top = np.argsort(-centroid, kind="stable")[:_CENTROID_TERMS]
            weights = {str(vocab[j]): round(float(centroid[j]), 6) for j in top if centroid[j] > 0}
            words = [t for t in (str(vocab[j]) for j in top) if ":" not in t][:4]
            shape = [
                t.split(":", 1)[1] for t in (str(vocab[j]) for j in top) if t.startswith("shape:")
            ][:2]
            label = " / ".join(words[:3]) or "misc"
            criteria = (
                f"errors whose questions mention {', '.join(words) or 'no distinctive words'}"
                f" ({', '.join(shape) or 'any shape'}); {int(members.shape[0])} of {n} sampled"
            )
            cats.append(Category(f"c{i}", label, criteria, weights))
        return cats

    def assign(
        self, categories: Sequence[Category], batch: Sequence[ErrorItem]
    ) -> dict[str, str | None]:
        """Map every qid of the batch to its most similar category (None when nothing overlaps)."""
        out: dict[str, str | None] = {}
        for e in batch:
            toks = error_features(e)
            sims = [(_cosine(dict(c.centroid), toks), c.id) for c in categories]
            best = max(sims, key=lambda s: s[0], default=(0.0, None))
            out[e.qid] = best[1] if best[0] > 0 else None
        return out
