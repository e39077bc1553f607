"""A Python model's prints reach the server's log a whole line at a time, so the server's own
lines (and other workers') never land inside one."""

from __future__ import annotations

import numpy as np
import tritonclient.http as httpclient

from tests.hardening.models import ONE_FP32
from tests.hardening.oracle import wait_until
from tests.helpers import Server, write_model

# Starts a line, writes a marker straight to the file descriptor (as another process sharing the
# log would), then ends the line: a line written whole comes out after the marker, in one piece.
MODEL = '''
import os
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        print("begun-", end="")
        os.write(1, b"MARKER-LINE\\n")
        print("ended")
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy())])
                for r in requests]
'''


def test_a_models_print_is_written_as_one_line(tmp_path):
    write_model(tmp_path / "repo", "printer", ONE_FP32, MODEL)
    with Server(tmp_path / "repo").start(wait_for="ready") as server:
        tensor = httpclient.InferInput("IN", [1], "FP32")
        tensor.set_data_from_numpy(np.array([1.0], np.float32))
        httpclient.InferenceServerClient(server.http_url).infer("printer", [tensor])
        log = wait_until(lambda: server.log() if "begun-ended" in server.log() else "")
        assert "MARKER-LINE\n" in log and "begun-MARKER-LINE" not in log
        assert log.index("MARKER-LINE") < log.index("begun-ended")
