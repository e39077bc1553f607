"""Bare echo servers: the ceiling of the stack, and stand-ins for tests.

``asgi_echo`` parses and echoes v2 JSON with orjson under uvicorn (uvloop, httptools);
``grpc_echo`` is a bare grpc.aio ``ModelInfer`` echo; ``openai_echo`` streams fixed tokens in
OpenAI's shapes. Whatever a real server adds on top of these is its own cost.
"""
