"""Extensions that are ways of calling infer, with no endpoints of their own.

Their rules run on every infer request, so they live where the request is decoded and admitted:
- classification: `core/requests/outputs.py` (an output's `classification` parameter);
- sequence: `core/scheduling/sequence_batcher.py` (sequence id, start and end flags);
- schedule_policy: `core/scheduling/` (priority and queue policy);
- binary_tensor_data: `frontends/http/codec.py` (`binary_data` and the header length);
- parameters: `core/requests/parameters.py` (request and response parameters).
"""

from __future__ import annotations

from ..features.contract import Feature

CLASSIFICATION = Feature(name="classification", extensions=("classification",))
SEQUENCE = Feature(name="sequence", extensions=("sequence",))
SCHEDULE_POLICY = Feature(name="schedule_policy", extensions=("schedule_policy",))
BINARY_TENSOR_DATA = Feature(name="binary_tensor_data", extensions=("binary_tensor_data",))
PARAMETERS = Feature(name="parameters", extensions=("parameters",))
