#!/usr/bin/env bash
# The GPU checks in one go, for a machine with an NVIDIA GPU: a venv of its own (seeing the
# system's packages, so a preinstalled vLLM/CUDA torch is used as is), vLLM installed only when
# missing (vLLM pins the CUDA torch it was built against; the CPU venv stays untouched), then the
# tests marked `gpu`. Offline machines: GPU_WHEELS=/dir/with/wheels installs from that folder only.
# Usage: bash tests/gpu/run_gpu_checks.sh [extra pytest args]
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! nvidia-smi -L; then
  echo "run_gpu_checks: no NVIDIA GPU visible, nothing to check" >&2
  exit 2
fi
VENV="${GPU_VENV:-.venv-gpu}"
[ -x "$VENV/bin/python" ] || python3 -m venv --system-site-packages "$VENV"
PY="$VENV/bin/python"
PIP=("$PY" -m pip install --quiet)
if [ -n "${GPU_WHEELS:-}" ]; then
  PIP+=(--no-index --find-links "$GPU_WHEELS")
fi
if ! "$PY" -c "import vllm" 2>/dev/null; then
  PIP_CONSTRAINT="" timeout 900 "${PIP[@]}" vllm \
    || { echo "run_gpu_checks: could not install vllm (offline? set GPU_WHEELS)" >&2; exit 3; }
fi
timeout 600 "${PIP[@]}" -e . "tritonclient[http,grpc]==2.73.0" pytest pytest-timeout pytest-asyncio \
  peft llguidance nvidia-ml-py \
  || { echo "run_gpu_checks: could not install the test dependencies" >&2; exit 3; }
"$PY" -c "import torch, vllm; print('vllm', vllm.__version__, 'torch', torch.__version__, 'cuda', torch.cuda.is_available())"
exec "$PY" -m pytest -q -rs -m gpu tests/gpu tests/e2e/test_gpu_metrics.py "$@"
