"""The HTTP transport under every frontend: how a request's body is read, its response written
and its handler cancelled when the client leaves (`transport`), the uvicorn fast path behind
that (`uvicorn_protocol`, `uvicorn_compat`), and the one uvicorn server every listener runs
(`listener`)."""
