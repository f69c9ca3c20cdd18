"""F5 anomalies on a noisy seasonal background: type, location third, and number of spikes.

* ``type`` — a single spike, a flat-lined segment (stuck sensor) or a burst of high noise.
  Measurements: longest run of zero first differences (flatness), and the largest local spread of
  median-filter residuals once each window's single largest point is left out (burstiness); reading
  rule ``label``.
* ``location`` — one spike in the beginning, middle or end third. Measurement: position of the
  largest robust residual; reading rule ``label``.
* ``count`` — 1-4 spikes. Measurement: number of separated robust residual peaks above a cut;
  reading rule ``nearest_number``.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from tsevo.data.question import Question

from ._base import (
    Family,
    FloatArray,
    Phrasebook,
    check_difficulty,
    diff_sigma,
    nearest_option_log,
    option_index,
    pick,
    resample,
    subtask_for,
)

NAME = "anomaly"
TASK = "synthetic/anomaly"
SUBTASKS = ("type", "location", "count")
TYPES = ("a single spike", "a flat-lined segment", "a burst of high noise")
LOCATION = ("at the beginning", "in the middle", "at the end")
COUNTS = ("1", "2", "3", "4")

PHRASINGS: dict[str, tuple[str, ...]] = {
    "type": (
        "What kind of anomaly does this series contain?",
        "The series contains one anomalous event. Which type of anomaly is it?",
        "Which description matches the unusual behaviour in this series?",
    ),
    "location": (
        "Where in the series is the anomaly located?",
        "The series has one anomalous point. In which part of the series is it?",
        "In which part of the recording does the anomaly occur?",
    ),
    "count": (
        "How many spikes (isolated anomalous points) does this series contain?",
        "Count the sudden one-point spikes in this series. How many are there?",
        "How many isolated outliers can be seen in this series?",
    ),
}
BOOK = Phrasebook(NAME, TASK, PHRASINGS)

_FLAT_RUN = 5
_BURST_CUT = 2.0
_BURST_WINDOW = 15
_SPIKE_CUT = 5.0
_SPIKE_SEP = 4


def robust_residual_z(y: FloatArray) -> FloatArray:
    """Median-filter (width 5, edges repeated) residual over the robust noise level of the diffs."""
    med = np.median(sliding_window_view(np.pad(y, 2, mode="edge"), 5), axis=1)
    r = y - med
    out: FloatArray = r / diff_sigma(y)
    return out


def longest_flat_run(y: FloatArray) -> int:
    """Length of the longest run of exactly zero first differences."""
    z = np.r_[0, (np.diff(y) == 0).astype(np.int8), 0]
    edges = np.flatnonzero(np.diff(z))
    if edges.size == 0:
        return 0
    return int((edges[1::2] - edges[0::2]).max())


def burstiness(y: FloatArray) -> float:
    """Largest windowed RMS of robust residuals, leaving out each window's largest point."""
    z = robust_residual_z(y) ** 2
    w = sliding_window_view(z, _BURST_WINDOW)
    trimmed = (w.sum(axis=1) - w.max(axis=1)) / (_BURST_WINDOW - 1)
    return float(np.sqrt(trimmed.max()))


def spike_peaks(y: FloatArray, cut: float = _SPIKE_CUT) -> tuple[list[int], float]:
    """Indices of separated robust-residual peaks above ``cut`` and the largest remaining |z|."""
    z = np.abs(robust_residual_z(y))
    order = np.argsort(-z, kind="stable")
    taken: list[int] = []
    blocked = np.zeros(z.size, dtype=bool)
    rest = 0.0
    for i in order:
        if blocked[i]:
            continue
        if z[i] < cut:
            rest = float(z[i])
            break
        taken.append(int(i))
        blocked[max(0, i - _SPIKE_SEP) : i + _SPIKE_SEP + 1] = True
    return sorted(taken), rest


def anomaly_features(y: FloatArray) -> tuple[int, float, float]:
    """(longest flat run, burstiness, largest robust |z|)."""
    return longest_flat_run(y), burstiness(y), float(np.abs(robust_residual_z(y)).max())


def _classify_type(f: tuple[int, float, float], margin: float) -> str | None:
    run, burst, peak = f
    if run >= _FLAT_RUN:
        return "a flat-lined segment"
    if burst >= _BURST_CUT + margin:
        return "a burst of high noise"
    if burst <= _BURST_CUT - margin and peak >= _SPIKE_CUT + margin:
        return "a single spike"
    if margin == 0.0:
        return "a single spike"
    return None


def _classify_location(y: FloatArray, margin: float) -> str | None:
    z = np.abs(robust_residual_z(y))
    pos = int(np.argmax(z)) / y.size
    if min(abs(pos - 1 / 3), abs(pos - 2 / 3)) < margin:
        return None
    return LOCATION[min(int(pos * 3), 2)]


def _background(rng: np.random.Generator, n: int, hard: bool) -> FloatArray:
    t = np.arange(n, dtype=np.float64)
    amp = rng.uniform(1.5, 3.0)
    y = amp * np.sin(2 * np.pi * t / rng.uniform(16, 40) + rng.uniform(0, 2 * np.pi))
    y += rng.uniform(-3, 3) * t / n
    out: FloatArray = y + rng.standard_normal(n)
    return out


def _scale(rng: np.random.Generator, y: FloatArray) -> tuple[FloatArray, float]:
    scale = float(np.exp(rng.uniform(np.log(0.5), np.log(20))))
    return np.round(rng.uniform(-50, 50) + scale * y, 4), scale


def _gen(rng: np.random.Generator, sub: str, hard: bool, difficulty: str, index: int) -> Question:
    n = 192
    labels: tuple[str, ...]
    if sub == "type":
        labels, label = TYPES, pick(rng, TYPES)
    elif sub == "location":
        labels, label = LOCATION, pick(rng, LOCATION)
    else:
        labels, label = COUNTS, pick(rng, COUNTS)

    def spike_size() -> float:
        mag = rng.uniform(6.0, 8.0) if hard else rng.uniform(8.0, 12.0)
        return float(mag * pick(rng, (-1.0, 1.0)))

    def attempt() -> tuple[FloatArray, dict[str, object]] | None:
        y = _background(rng, n, hard)
        latent: dict[str, object] = {"n": n}
        if sub == "type":
            if label == "a single spike":
                i = int(rng.integers(10, n - 10))
                y[i] += spike_size()
                latent.update(start=i, length=1)
            elif label == "a flat-lined segment":
                length = int(rng.integers(8, 13)) if hard else int(rng.integers(15, 26))
                s = int(rng.integers(10, n - length - 10))
                y[s : s + length] = y[s]
                latent.update(start=s, length=length)
            else:
                length = int(rng.integers(10, 16)) if hard else int(rng.integers(15, 26))
                s = int(rng.integers(10, n - length - 10))
                f = rng.uniform(2.5, 3.2) if hard else rng.uniform(4.0, 5.0)
                y[s : s + length] += np.sqrt(f * f - 1) * rng.standard_normal(length)
                latent.update(start=s, length=length, factor=f)
        elif sub == "location":
            third = LOCATION.index(label)
            lo, hi = max(third / 3 + 0.05, 0.04), min((third + 1) / 3 - 0.05, 0.96)
            i = int(rng.uniform(lo, hi) * n)
            y[i] += spike_size()
            latent.update(index=i)
        else:
            k = int(label)
            idx = np.sort(rng.choice(np.arange(5, n - 5), size=k, replace=False))
            if k > 1 and np.diff(idx).min() < 10:
                return None
            for i in idx:
                y[i] += spike_size()
            latent.update(indices=idx.tolist())
        y, scale = _scale(rng, y)
        latent["scale"] = scale
        if sub == "type":
            feats = anomaly_features(y)
            ok = _classify_type(feats, 0.25 if hard else 0.4) == label
            if label != "a flat-lined segment":
                ok = ok and feats[0] < _FLAT_RUN - 2
            latent["features"] = list(feats)
        elif sub == "location":
            ok = _classify_location(y, 0.03 if hard else 0.05) == label
        else:
            peaks, rest = spike_peaks(y)
            lo_peak = min(float(np.abs(robust_residual_z(y))[i]) for i in peaks) if peaks else 0.0
            ok = len(peaks) == int(label) and lo_peak >= _SPIKE_CUT + 0.8 and rest <= 4.2
        return (y, latent) if ok else None

    (y, latent), tries = resample(attempt, f"anomaly/{sub}")
    return BOOK.labelled(rng, index, difficulty, sub, labels, label, {"series": y}, latent, tries)


def generate(rng: np.random.Generator, difficulty: str, index: int) -> Question:
    """Generate one anomaly question (subtask chosen round-robin from ``index``)."""
    hard = check_difficulty(difficulty)
    return _gen(rng, subtask_for(SUBTASKS, index), hard, difficulty, index)


def oracle(q: Question) -> int:
    """Answer from the series alone."""
    y = np.asarray(q.series[q.primary[0]])
    if q.subtask == "type":
        return option_index(q, _classify_type(anomaly_features(y), 0.0) or TYPES[0])
    if q.subtask == "location":
        return option_index(q, _classify_location(y, 0.0) or LOCATION[1])
    return nearest_option_log(q, float(max(len(spike_peaks(y)[0]), 1)))


FAMILY = Family(
    name=NAME,
    task=TASK,
    subtasks=SUBTASKS,
    generate=generate,
    oracle=oracle,
    phrasings=PHRASINGS,
    description="anomaly type (spike/flat-line/noise burst), location third, number of spikes",
    oracle_measurement="flat run length + local residual spread (type); largest robust residual location (third); peak count",
)
