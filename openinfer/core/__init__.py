"""The frontend-neutral core: the one API every frontend calls (`server.py`), and its parts.

- `server.py`, `model.py`, `backend.py`: the server, a loaded model version, the seam to backends.
- `types.py`, `datatypes.py`, `config.py`, `errors.py`: requests, responses and tensors; the one
  datatype table; model configuration; the one error tree and status table.
- `requests/`: the rules every request passes, whichever frontend brought it.
- `repository/`: models on disk and their lifecycle.
- `scheduling/`: between a model's requests and its instances (direct, dynamic and sequence
  batchers).
- `observability/`: statistics, traces, log settings, custom metrics.
- `memory/`: client shared memory, GPUs, the garbage collector.
"""
