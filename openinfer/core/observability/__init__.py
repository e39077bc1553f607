"""What the server tells about itself: statistics, traces (Triton's files and OpenTelemetry),
log settings, the failed-request log line and the custom metrics that models create."""
