"""Benchmarks (``python -m tests.bench``): numbers and ratios, each figure written as JSON."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def git_commit(*, short: bool = True) -> str:
    """The checkout's commit a benchmark's JSON records (``""`` outside a git checkout)."""
    args = ["git", "rev-parse", *(["--short"] if short else []), "HEAD"]
    return subprocess.run(
        args, cwd=REPO, capture_output=True, text=True, check=False
    ).stdout.strip()
