"""``make bench``: openinfer against MLServer, KServe and the bare-stack ceilings, one command.

Every server serves the same FP32 identity model and is driven by the same generator
(``openinfer bench``), one server at a time, on the same machine; ``RESULTS.md`` gets the table.
"""
