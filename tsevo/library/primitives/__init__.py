"""The primitives catalog ``P``: deterministic numpy/scipy measurements that tools may call.

Every module in this package registers its functions in :data:`CATALOG` on import; importing the
package imports them all.
"""

from __future__ import annotations

import importlib
import pkgutil

from ._registry import CATALOG, PrimitiveSpec, primitive

for _m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if not _m.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_m.name}")

__all__ = ["CATALOG", "PrimitiveSpec", "primitive"]
