"""What the server tells about itself: statistics, traces (Triton's files and OpenTelemetry),
the failed-request log line and the custom metrics that models create. (The log settings are
the logging extension's.)"""
