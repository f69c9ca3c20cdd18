"""tsevo: failure-driven self-evolution of a time-series question-answering agent.

``import tsevo`` stays light: it never imports torch, chronos or Jupyter. Heavy pieces load lazily
where they are used.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
