"""Three replicas in network namespaces behind haproxy (HTTP and gRPC), one S3 repository:
the same answers everywhere, a rolling restart under steady mixed load that loses nothing,
and a `kill -9` that fails at most the requests the replica held while the balancer routes
around it. `OPENINFER_REPLICA_ROUNDS=<n>` runs n rolling restarts (the figures in
docs/deployment.md); `OPENINFER_REPLICA_REPORT=<file>` writes the figures as JSON."""

from __future__ import annotations

import json
import os
import time

import httpx
import pytest

from tests.replicas.cluster import HOST_IP, HTTP, Haproxy, Network, Replica, unavailable_reason
from tests.replicas.load import Load, summary
from tests.storage.emulators import S3_ENV, MotoS3, add_model_files

pytestmark = [pytest.mark.timeout(600)]

REPLICAS = 3
ADD = 7.0


@pytest.fixture(scope="module")
def skip_reason() -> None:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    pytest.importorskip("moto.server", reason="moto[server] is not installed (the test extra)")
    pytest.importorskip("s3fs", reason="s3fs is not installed (the storage extra)")


def _direct_answer(replica: Replica) -> list[float]:
    body = {"inputs": [{"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}
    reply = httpx.post(f"http://{replica.address}:{HTTP}/v2/models/add/infer", json=body, timeout=30)
    reply.raise_for_status()
    return reply.json()["outputs"][0]["data"]


def test_rolling_restart_and_kill_behind_haproxy(skip_reason, tmp_path) -> None:
    rounds = int(os.environ.get("OPENINFER_REPLICA_ROUNDS", "1"))
    with Network(REPLICAS):
        store = MotoS3(host=HOST_IP).start()
        haproxy = None
        replicas: list[Replica] = []
        load = None
        try:
            client = store.client()
            client.create_bucket(Bucket="models")
            store.put("models", "repo", add_model_files("add", ADD))
            args = ["--model-repository", f"s3://{HOST_IP}:{store.port}/models/repo", "--exit-timeout-secs", "20"]
            replicas = [Replica(i, args, dict(S3_ENV), tmp_path) for i in range(1, REPLICAS + 1)]
            for replica in replicas:
                replica.start()
            for replica in replicas:
                replica.wait_ready()
            # One repository, the same model everywhere: the same answer from each replica.
            answers = {replica.index: _direct_answer(replica) for replica in replicas}
            assert all(answer == [1 + ADD, 2 + ADD, 3 + ADD, 4 + ADD] for answer in answers.values()), answers

            haproxy = Haproxy(replicas, tmp_path)
            for replica in replicas:
                haproxy.wait_status(f"r{replica.index}", "UP")
            load = Load(f"127.0.0.1:{haproxy.http_port}", f"127.0.0.1:{haproxy.grpc_port}", "add", ADD).start()
            time.sleep(2)

            # Rolling restart: SIGTERM one, start its successor, wait until it is ready and the
            # balancer sends it traffic, then the next.
            restart_start = time.monotonic()
            for _ in range(rounds):
                for replica in replicas:
                    assert replica.terminate() == 0, replica.log()
                    replica.start()
                    replica.wait_ready()
                    haproxy.wait_status(f"r{replica.index}", "UP")
            restart_end = time.monotonic()
            time.sleep(1)

            # kill -9: only what that replica held may fail, and the balancer routes around it.
            victim = replicas[1]
            killed_at = time.monotonic()
            victim.kill()
            haproxy.wait_status(f"r{victim.index}", "DOWN")
            down_at = time.monotonic()
            time.sleep(2)
            outcomes = load.stop()
            load = None
        finally:
            if load is not None:
                load.stop()
            if haproxy is not None:
                haproxy.stop()
            for replica in replicas:
                replica.kill()
            store.stop()

    during = summary(outcomes, restart_start, restart_end)
    around_kill = summary(outcomes, killed_at - 30, down_at)
    after = summary(outcomes, down_at + 0.5)
    figures = {
        "replicas": REPLICAS, "rounds": rounds, "restart_seconds": round(restart_end - restart_start, 1),
        "overall": summary(outcomes), "during_restart": during, "kill_to_down": around_kill, "after_down": after,
    }
    print(json.dumps(figures, indent=1))
    if os.environ.get("OPENINFER_REPLICA_REPORT"):
        with open(os.environ["OPENINFER_REPLICA_REPORT"], "w") as out:
            json.dump(figures, out, indent=1)
    errors = [o.error for o in outcomes if o.error]
    assert during["requests"] > 0 and during["http"] > 0 and during["grpc"] > 0
    assert during["errors"] == 0, errors[:5]
    # At most the requests in flight when it died: one per client thread.
    assert around_kill["errors"] <= 2 * load_threads(), errors[:5]
    assert after["requests"] > 0 and after["errors"] == 0, errors[:5]


def load_threads() -> int:
    return Load("", "", "", 0).threads_per_protocol
