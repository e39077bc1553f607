"""Protocol extensions: the parts of the KServe v2 protocol that Triton adds and names in
`GET /v2` (shared memory, trace, logging, statistics, model repository, ...).

Each extension is a feature (`openinfer/features/`): one package here holds its HTTP routes
(`http.py`), its gRPC methods (`grpc.py`, a mixin of the servicer), its flags and what it makes
of them (`flags.py`, where it has any) and, in `__init__.py`, its `FEATURE`: the names `GET /v2`
reports and its restricted-API group. `openinfer/features/__init__.py` lists them; the frontends
and the core never import this package.
"""
