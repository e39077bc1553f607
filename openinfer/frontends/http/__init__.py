"""KServe v2 over HTTP/REST with Triton's extensions, as a plain ASGI app."""
