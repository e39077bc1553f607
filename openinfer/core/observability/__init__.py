"""What the server tells about itself: statistics, what the infer path asks of tracing and the
W3C trace context requests carry, the failed-request log line and the custom metrics that
models create. (The trace manager and the log settings are their extensions'.)"""
