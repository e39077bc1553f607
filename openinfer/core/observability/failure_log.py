"""The log line of an inference that failed, in Triton's words: at `--log-verbose 1` Triton
writes `[request id: <id>] Infer failed: <why>` for every failed request, whichever protocol
brought it, so an operator can see why a client (a Flink job, say) gave up. Every frontend
calls `log_failure` with the request's id as far as it was read, and the error it answers."""

from __future__ import annotations

import logging

from ..errors import request_label

log = logging.getLogger("openinfer.server")


def log_failure(request_id: str | None, message: str) -> None:
    """One `Infer failed` line (verbose level 1); the request id is not repeated when the
    message already starts with it, as the core's own validation messages do."""
    if not log.isEnabledFor(logging.DEBUG):
        return
    label = request_label(request_id)
    log.debug("%sInfer failed: %s", label, message.removeprefix(label))
