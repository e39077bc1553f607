#!/usr/bin/env bash
# The GPU checks in one go, for a machine with an NVIDIA GPU: installs vLLM into a venv of its
# own (vLLM brings its CUDA build of torch; the CPU venv stays untouched) and runs the tests
# marked `gpu`. Usage: bash tests/gpu/run_gpu_checks.sh [extra pytest args]
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! nvidia-smi -L; then
  echo "run_gpu_checks: no NVIDIA GPU visible, nothing to check" >&2
  exit 2
fi
VENV="${GPU_VENV:-.venv-gpu}"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
PY="$VENV/bin/python"
if ! "$PY" -c "import vllm" 2>/dev/null; then
  # no CPU-torch constraint here: vLLM pins the CUDA torch it was built against
  PIP_CONSTRAINT="" timeout 900 "$PY" -m pip install --quiet vllm \
    || { echo "run_gpu_checks: could not install vllm" >&2; exit 3; }
fi
timeout 600 "$PY" -m pip install --quiet -e . "tritonclient[http,grpc]==2.73.0" pytest pytest-timeout \
  pytest-asyncio peft llguidance
"$PY" -c "import torch, vllm; print('vllm', vllm.__version__, 'torch', torch.__version__, 'cuda', torch.cuda.is_available())"
exec "$PY" -m pytest -q -rs -m gpu tests/gpu "$@"
