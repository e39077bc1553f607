"""``make bench``: openinfer against MLServer, KServe and the bare-stack ceilings, one command.

Every server serves the same FP32 identity model and is driven by the same generator
(``openinfer bench``) on the same machine, one request stream at a time; ``RESULTS.md`` gets
the table.
"""
