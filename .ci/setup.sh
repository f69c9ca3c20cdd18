#!/usr/bin/env bash
# Create the virtual environment and install tsevo into it (idempotent; called by `make setup`).
# Order matters: torch==2.13.0 goes in first so chronos-forecasting does not pull a CUDA build.
set -euo pipefail
PYTHON="${1:-python3}"
VENV="${2:-.venv}"
start=$(date +%s)
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" - <<'PY'
import sys
if sys.version_info < (3, 11):
    sys.exit(f"tsevo needs Python >= 3.11, found {sys.version.split()[0]}; set PYTHON=python3.11")
PY
  echo "setup: creating $VENV with $("$PYTHON" --version)"
  "$PYTHON" -m venv "$VENV"
fi
# libseccomp for the sandbox's OS layer (pyseccomp loads it with ctypes); Debian ships it as libseccomp2
if ! ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2' && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  echo "setup: installing libseccomp2"
  (apt-get update -qq && apt-get install -y -qq --no-install-recommends libseccomp2) || echo "setup: libseccomp2 unavailable"
fi
PIP=("$VENV/bin/pip" --disable-pip-version-check -q)
if ! "$VENV/bin/python" -c "import torch, sys; sys.exit(0 if torch.__version__.startswith('2.13.0') else 1)" 2>/dev/null; then
  echo "setup: installing torch==2.13.0"
  "${PIP[@]}" install "torch==2.13.0"
fi
echo "setup: installing tsevo (editable, dev extras)"
"${PIP[@]}" install -e ".[dev]"
"$VENV/bin/python" -m ipykernel install --sys-prefix --name tsevo --display-name "tsevo" >/dev/null
bash .ci/fetch_widget_assets.sh || echo "setup: widget assets unavailable (npm missing); offline HTML export disabled"
echo "setup: done in $(( $(date +%s) - start ))s"
