"""Inspectors for tsevo runs, imported as ``tsevo.widgets``.

Widgets are built only from the tidy frames in :mod:`tsevo.analysis`; they compute nothing.
"""

__all__: list[str] = []
