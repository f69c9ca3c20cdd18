"""Shared machinery of the synthetic families.

The :class:`Family` record, question building, deterministic option shuffling, rejection sampling
and small numpy statistics used by the oracles.

Nothing here imports ``tsevo.library``: the oracles compute their identifying statistics with their
own numpy/scipy code so that the suite certifies itself independently of the primitives catalog.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from tsevo.data.question import Question

__all__ = [
    "DIFFICULTIES",
    "Family",
    "GenerationError",
    "Phrasebook",
    "build_question",
    "family_key",
    "nearest_option_log",
    "numbers",
    "option_index",
    "option_number",
    "resample",
]

FloatArray = npt.NDArray[np.float64]
T = TypeVar("T")

DIFFICULTIES = ("easy", "hard")
SOURCE = "synthetic"
DECIMALS = 4
MAX_TRIES = 400
_NUM = re.compile(r"(?<![A-Za-z_])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")

GenerateFn = Callable[[np.random.Generator, str, int], Question]
OracleFn = Callable[[Question], int]


class GenerationError(RuntimeError):
    """A generator could not produce an unambiguous item within its resampling budget."""


@dataclass(frozen=True)
class Family:
    """One synthetic family: a generator, its oracle and its question templates.

    Attributes:
        name: Short family name (``"trend"``); also the key in ``FAMILIES``.
        task: The ``Question.task`` string (``"synthetic/trend"``).
        subtasks: The question kinds this family emits (``Question.subtask``).
        generate: ``generate(rng, difficulty, index) -> Question``; gold by construction.
        oracle: ``oracle(question) -> option index``; reads only series, text and options.
        phrasings: Question templates per subtask (at least three each).
        description: One line for summaries.
        oracle_measurement: What the oracle computes to certify gold (for "planner vs oracle" reports).
    """

    name: str
    task: str
    subtasks: tuple[str, ...]
    generate: GenerateFn
    oracle: OracleFn
    phrasings: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    description: str = ""
    oracle_measurement: str = ""


def family_key(name: str) -> int:
    """Stable integer key of a family name (for seeding; never Python's salted ``hash``)."""
    return zlib.crc32(name.encode("utf-8"))


def check_difficulty(difficulty: str) -> bool:
    """Return True for ``"hard"``, False for ``"easy"``; raise on anything else."""
    if difficulty not in DIFFICULTIES:
        raise ValueError(f"difficulty must be one of {DIFFICULTIES}, got {difficulty!r}")
    return difficulty == "hard"


def subtask_for(subtasks: Sequence[str], index: int) -> str:
    """Round-robin subtask choice that covers every subtask at both difficulties."""
    return subtasks[(index // 2) % len(subtasks)]


def clean(x: Any) -> FloatArray:
    """Round a series to a fixed number of decimals (stable bytes) and drop negative zeros."""
    arr = np.asarray(x, dtype=np.float64)
    out: FloatArray = np.asarray(np.round(arr, DECIMALS) + 0.0, dtype=np.float64)
    return out


def resample(attempt: Callable[[], T | None], what: str) -> tuple[T, int]:
    """Call ``attempt`` until it returns an item (not None); return it with the number of tries.

    Raises:
        GenerationError: after ``MAX_TRIES`` rejected attempts.
    """
    for k in range(1, MAX_TRIES + 1):
        out = attempt()
        if out is not None:
            return out, k
    raise GenerationError(f"{what}: no unambiguous item after {MAX_TRIES} attempts")


def pick(rng: np.random.Generator, seq: Sequence[T]) -> T:
    """Choose one element of ``seq`` with ``rng``."""
    return seq[int(rng.integers(len(seq)))]


def _round_latent(v: Any) -> Any:
    if isinstance(v, bool | str) or v is None:
        return v
    if isinstance(v, int | np.integer):
        return int(v)
    if isinstance(v, float | np.floating):
        return float(f"{float(v):.6g}")
    if isinstance(v, Mapping):
        return {str(k): _round_latent(x) for k, x in v.items()}
    if isinstance(v, list | tuple | np.ndarray):
        return [_round_latent(x) for x in v]
    raise TypeError(f"latent value of type {type(v).__name__} is not JSON-friendly")


def build_question(
    *,
    rng: np.random.Generator,
    family: str,
    task: str,
    index: int,
    difficulty: str,
    subtask: str,
    template: int,
    text: str,
    labels: Sequence[str],
    gold_label: str,
    series: Mapping[str, Any],
    primary: Sequence[str],
    covariates: Sequence[str] = (),
    candidates: Sequence[str] = (),
    latent: Mapping[str, Any] | None = None,
    attempts: int = 1,
) -> Question:
    """Shuffle the options deterministically and assemble a validated :class:`Question`.

    Args:
        rng: The item's generator (its next draw fixes the option order).
        family: Family name (goes to metadata, never shown to agents).
        task: The ``Question.task`` string.
        index: Item index within the family (part of the id).
        difficulty: ``"easy"`` or ``"hard"``.
        subtask: Template kind (``Question.subtask``).
        template: Index of the phrasing used (metadata).
        text: The question text.
        labels: Option texts in canonical order.
        gold_label: The correct option text (must be in ``labels``).
        series: Named series (already cleaned).
        primary: Primary series names.
        covariates: Covariate names (the text must mention them).
        candidates: Candidate names.
        latent: Latent generator parameters (metadata only).
        attempts: Rejection-sampling attempts it took (metadata; a sanity metric).
    """
    if gold_label not in labels:
        raise ValueError(f"gold label {gold_label!r} not among {list(labels)}")
    perm = rng.permutation(len(labels))
    options = [labels[int(i)] for i in perm]
    qid = f"syn-{family}-{index:05d}"
    meta = {
        "family": family,
        "difficulty": difficulty,
        "template": int(template),
        "attempts": int(attempts),
        "latent": _round_latent(dict(latent or {})),
    }
    return Question(
        id=qid,
        source=SOURCE,
        task=task,
        subtask=subtask,
        question=text,
        options=tuple(options),
        series={k: clean(v) for k, v in series.items()},
        primary=tuple(primary),
        covariates=tuple(covariates),
        candidates=tuple(candidates),
        gold=options.index(gold_label),
        group=qid,
        metadata=meta,
    )


@dataclass(frozen=True)
class Phrasebook:
    """A family's question templates, and how a finished item becomes a :class:`Question`.

    Attributes:
        family: Family name (metadata).
        task: The ``Question.task`` string.
        phrasings: Question templates per subtask.
    """

    family: str
    task: str
    phrasings: Mapping[str, Sequence[str]]

    def question(
        self,
        rng: np.random.Generator,
        index: int,
        difficulty: str,
        subtask: str,
        *,
        labels: Sequence[str],
        gold_label: str,
        series: Mapping[str, Any],
        primary: Sequence[str] | None = None,
        covariates: Sequence[str] = (),
        candidates: Sequence[str] = (),
        latent: Mapping[str, Any] | None = None,
        attempts: int = 1,
        slots: Mapping[str, Any] | None = None,
    ) -> Question:
        """Draw a phrasing of ``subtask``, fill its ``slots`` and build the question.

        The phrasing is the item's next draw, the option order the one after it
        (:func:`build_question`). ``primary`` defaults to the first series. The other arguments
        are those of :func:`build_question`.
        """
        templates = self.phrasings[subtask]
        tpl = int(rng.integers(len(templates)))
        text = templates[tpl] if slots is None else templates[tpl].format(**slots)
        return build_question(
            rng=rng,
            family=self.family,
            task=self.task,
            index=index,
            difficulty=difficulty,
            subtask=subtask,
            template=tpl,
            text=text,
            labels=labels,
            gold_label=gold_label,
            series=series,
            primary=tuple(series)[:1] if primary is None else primary,
            covariates=covariates,
            candidates=candidates,
            latent=latent,
            attempts=attempts,
        )

    def labelled(
        self,
        rng: np.random.Generator,
        index: int,
        difficulty: str,
        subtask: str,
        labels: Sequence[str],
        label: str,
        series: Mapping[str, Any],
        latent: Mapping[str, Any],
        attempts: int,
        *,
        slots: Mapping[str, Any] | None = None,
        primary: Sequence[str] | None = None,
    ) -> Question:
        """:meth:`question` whose gold is ``label``, also recorded first in the latent parameters."""
        return self.question(
            rng,
            index,
            difficulty,
            subtask,
            labels=labels,
            gold_label=label,
            series=series,
            primary=primary,
            latent={"label": label, **latent},
            attempts=attempts,
            slots=slots,
        )


# ---------------------------------------------------------------------- reading questions
def numbers(text: str) -> list[float]:
    """Numbers written in ``text``, in order."""
    return [float(m.group()) for m in _NUM.finditer(text)]


def option_index(q: Question, label: str) -> int:
    """Index of the option whose text is ``label`` (the first option when absent)."""
    try:
        return q.options.index(label)
    except ValueError:
        return 0


def option_number(option: str) -> float | None:
    """The first number in an option text, or None."""
    nums = numbers(option)
    return nums[0] if nums else None


def nearest_option_log(q: Question, value: float) -> int:
    """Index of the numeric option nearest ``value`` on a log scale (linear if any is <= 0)."""
    vals = [option_number(o) for o in q.options]
    finite = [v for v in vals if v is not None]
    use_log = value > 0 and all(v > 0 for v in finite)
    best, best_d = 0, np.inf
    for i, v in enumerate(vals):
        if v is None:
            continue
        d = abs(np.log(v) - np.log(value)) if use_log else abs(v - value)
        if d < best_d:
            best, best_d = i, float(d)
    return best


def log_margin(values: Sequence[float], truth: float, estimate: float) -> float:
    """How safely ``estimate`` picks ``truth`` among ``values`` (log distances).

    Returns the log-distance to the second-nearest value minus that to ``truth``; negative when
    another value is nearer than ``truth``.
    """
    le = np.log(max(estimate, 1e-12))
    d_true = abs(le - np.log(truth))
    others = [abs(le - np.log(v)) for v in values if v != truth]
    return float(min(others) - d_true)


def numeric_distractors(
    rng: np.random.Generator,
    truth: float,
    k: int,
    lo: float,
    hi: float,
    min_ratio: float,
    *,
    integer: bool = True,
) -> list[float] | None:
    """Draw ``k`` distractors in ``[lo, hi]`` at least ``min_ratio`` apart (log) from all others.

    Returns None when the draw fails (the caller resamples).
    """
    chosen = [truth]
    for _ in range(200):
        if len(chosen) == k + 1:
            break
        v = float(np.exp(rng.uniform(np.log(lo), np.log(hi))))
        if integer:
            v = float(round(v))
        if all(abs(np.log(v) - np.log(c)) >= np.log(min_ratio) for c in chosen):
            chosen.append(v)
    if len(chosen) < k + 1:
        return None
    return chosen[1:]


# ---------------------------------------------------------------------- small statistics
def ols(y: FloatArray) -> tuple[float, float, float]:
    """OLS line on ``t = 0..n-1``: slope, intercept and residual standard deviation."""
    n = y.size
    t = np.arange(n, dtype=np.float64)
    tm = t.mean()
    ym = y.mean()
    sxx = float(((t - tm) ** 2).sum())
    slope = float(((t - tm) * (y - ym)).sum() / sxx) if sxx > 0 else 0.0
    intercept = float(ym - slope * tm)
    resid = y - (intercept + slope * t)
    return slope, intercept, float(resid.std())


def detrend(y: FloatArray) -> FloatArray:
    """Remove the OLS line."""
    slope, intercept, _ = ols(y)
    out: FloatArray = y - (intercept + slope * np.arange(y.size))
    return out


def mad_sigma(x: FloatArray) -> float:
    """Robust standard deviation (1.4826 x MAD) with a floor."""
    med = float(np.median(x))
    return max(1.4826 * float(np.median(np.abs(x - med))), 1e-12)


def diff_sigma(y: FloatArray) -> float:
    """Robust noise level from first differences (MAD of diffs / sqrt 2)."""
    return mad_sigma(np.diff(y)) / np.sqrt(2.0)


def ar_noise(rng: np.random.Generator, n: int, phi: float) -> FloatArray:
    """Unit-variance AR(1) noise (white noise when ``phi == 0``)."""
    e = rng.standard_normal(n)
    if phi == 0.0:
        return e
    out = np.empty(n)
    out[0] = e[0]
    s = np.sqrt(1.0 - phi * phi)
    for i in range(1, n):
        out[i] = phi * out[i - 1] + s * e[i]
    return out


def dominant_period(y: FloatArray, min_period: float = 2.0, pad: int = 16) -> float:
    """Period (in samples) of the highest zero-padded periodogram peak of the detrended series."""
    x = detrend(y)
    n = x.size
    nfft = pad * n
    power = np.abs(np.fft.rfft(x, nfft)) ** 2
    freqs = np.fft.rfftfreq(nfft)
    ok = (freqs >= 1.0 / (n / 2.0)) & (freqs <= 1.0 / min_period)
    f = float(freqs[ok][int(np.argmax(power[ok]))])
    return 1.0 / f
