"""What every request passes through, whichever frontend brought it.

The rules a frontend must not decide alone: input shapes and leftover bytes, a raw body's
shape, built-in parameters, version strings, what may be asked of each output, how responses
reach the caller, the response cache and the count of requests in flight. HTTP, gRPC, OpenAI
and in-process callers all meet them here, so one mistake gets one answer.
"""
