"""The only modules tsevo imports inside functions: heavy or optional dependencies.

Everything else (tsevo's own modules, the standard library, numpy, pandas, scipy, scikit-learn,
openai, pydantic) is imported at the top of the module that uses it, so the import graph that
import-linter and ``tests/test_architecture.py`` check is the whole graph. A module listed here is
imported where it is needed, inside the function that needs it, because importing it costs seconds
(torch, chronos, transformers, the Jupyter stack, plotting), or because it is installed only for an
opt-in tier (playwright, dask, llama-cpp). ``import tsevo`` never imports any of them.

Later issues that add such a dependency add it here, and nowhere else.
"""

from __future__ import annotations

__all__ = ["LAZY_IMPORTS"]

#: Top-level names of the packages that may be imported inside a function.
LAZY_IMPORTS: frozenset[str] = frozenset(
    {
        # forecasting models (seconds to import; weights only where present)
        "torch",
        "chronos",
        "transformers",
        "accelerate",
        "huggingface_hub",
        "safetensors",
        # the Jupyter stack (notebooks, widgets, papermill, kernels)
        "IPython",
        "ipykernel",
        "ipywidgets",
        "anywidget",
        "jupyter_client",
        "jupyter_core",
        "nbclient",
        "nbconvert",
        "nbformat",
        "papermill",
        "tqdm",
        # plotting (figures live in tsevo.widgets)
        "matplotlib",
        "seaborn",
        "pygments",
        # opt-in tiers
        "playwright",
        "dask",
        "distributed",
        "llama_cpp",
    }
)
