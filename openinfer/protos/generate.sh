#!/usr/bin/env bash
# Regenerate the Python protobuf/gRPC modules in openinfer/_proto from the
# .proto files in this directory.
#
# Usage (from anywhere):   openinfer/protos/generate.sh
# The interpreter must have grpcio-tools installed; override with PYTHON=...
#
# protoc emits top-level imports such as `import model_config_pb2`, which
# only work when the output directory is on sys.path. They are rewritten to
# package-relative imports so the modules work as `openinfer._proto.*`.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "${here}/../.." && pwd)"
out="${root}/openinfer/_proto"

if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "${root}/.venv/bin/python" ]]; then
    PYTHON="${root}/.venv/bin/python"
  else
    PYTHON=python3
  fi
fi

protos=(model_config.proto grpc_service.proto health.proto)

# Remove previous output (keep the package __init__.py).
rm -f "${out}"/*_pb2.py "${out}"/*_pb2.pyi "${out}"/*_pb2_grpc.py

cd "${here}"
"${PYTHON}" -m grpc_tools.protoc \
  -I "${here}" \
  --python_out="${out}" \
  --pyi_out="${out}" \
  --grpc_python_out="${out}" \
  "${protos[@]}"

# Make sibling imports package-relative, e.g.
#   import model_config_pb2 as model__config__pb2
# becomes
#   from . import model_config_pb2 as model__config__pb2
for f in "${out}"/*_pb2.py "${out}"/*_pb2.pyi "${out}"/*_pb2_grpc.py; do
  sed -i -E 's/^import ([A-Za-z0-9_]+_pb2(_grpc)?) as /from . import \1 as /' "${f}"
done

# The gRPC plugin also writes an empty stub module for model_config.proto,
# which declares no service; drop it.
rm -f "${out}/model_config_pb2_grpc.py"

echo "generated:" "${out}"/*_pb2*.py*
