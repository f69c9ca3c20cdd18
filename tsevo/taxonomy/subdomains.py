"""Subdomains of the train questions (the C axis' domain feature), fitted by TF-IDF and k-means."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np
from sklearn.cluster import KMeans
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics import silhouette_score
from threadpoolctl import threadpool_limits

__all__ = ["subdomains"]


def subdomains(texts: Mapping[str, str], seed: int = 0, k_max: int = 8) -> dict[str, str]:
    """Subdomains of the train questions, each named by its two top terms (``sd2_period_steps``).

    TF-IDF of the question text (numbers masked) and k-means, k in 2..k_max by silhouette.

    Clusters are numbered by their first member in key order, so the names do not depend on
    k-means' label order; one thread keeps the sums (and the result) identical across machines.
    """
    keys = sorted(texts)
    if len(keys) < 4:
        return {k: "sd1_all" for k in keys}
    docs = [re.sub(r"\d+(\.\d+)?", " ", texts[k].lower()) for k in keys]
    vec = TfidfVectorizer(token_pattern=r"[a-z]{3,}", stop_words="english", min_df=2)
    try:
        x = vec.fit_transform(docs)
    except ValueError:  # no term appears twice
        return {k: "sd1_all" for k in keys}
    terms = np.array(vec.get_feature_names_out())
    best: tuple[float, Any] | None = None
    with threadpool_limits(1):
        for k in range(2, min(k_max, len(set(docs)) - 1, len(keys) - 1) + 1):
            km = KMeans(n_clusters=k, n_init=4, random_state=seed).fit(x)
            if len(set(km.labels_)) < 2:
                continue
            score = float(
                silhouette_score(x, km.labels_, sample_size=min(len(keys), 1000), random_state=seed)
            )
            if best is None or round(score, 9) > round(best[0], 9):
                best = (score, km)
    if best is None:
        return {k: "sd1_all" for k in keys}
    km = best[1]
    order: dict[int, int] = {}
    for lab in km.labels_:
        order.setdefault(int(lab), len(order) + 1)
    names = {}
    for lab, n in order.items():
        top = np.argsort(-km.cluster_centers_[lab], kind="stable")[:2]
        names[lab] = f"sd{n}_" + "_".join(terms[top])
    return {k: names[int(lab)] for k, lab in zip(keys, km.labels_, strict=True)}
