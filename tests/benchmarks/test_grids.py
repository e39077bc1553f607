"""``make bench``'s plan: the repositories Triton and openinfer share, the grids, the cores."""

from __future__ import annotations

import pytest

from benchmarks import grids, repository, servers, suite
from openinfer.core.config import parse_config_text


@pytest.mark.parametrize("batching", [False, True])
def test_triton_and_openinfer_read_the_same_files(tmp_path, batching: bool) -> None:
    triton = repository.write(tmp_path / "triton", batching) / repository.MODEL
    default = repository.write(tmp_path / "default", batching) / repository.MODEL
    inproc = repository.write(tmp_path / "inproc", batching, in_process=True) / repository.MODEL
    for name in ("config.pbtxt", "1/model.py"):
        assert (triton / name).read_bytes() == (default / name).read_bytes()
    assert (inproc / "1/model.py").read_bytes() == (triton / "1/model.py").read_bytes()
    # in_process is the same config and one parameter more
    assert (inproc / "config.pbtxt").read_text() == (triton / "config.pbtxt").read_text() + repository.IN_PROCESS


def test_configs_say_what_each_grid_means() -> None:
    plain = parse_config_text(repository.config_text(batching=False))
    assert plain.max_batch_size == 0 and not plain.HasField("dynamic_batching")
    assert list(plain.input[0].dims) == [-1, -1]
    batching = parse_config_text(repository.config_text(batching=True))
    assert batching.max_batch_size == 8 and batching.HasField("dynamic_batching")
    assert list(batching.input[0].dims) == [-1]
    for config in (plain, batching):
        assert [(g.count, g.kind) for g in config.instance_group] == [(1, 2)]  # one KIND_CPU
        assert config.backend == "python" and config.name == servers.MODEL
    inproc = parse_config_text(repository.config_text(False) + repository.IN_PROCESS)
    assert inproc.parameters["execution_mode"].string_value == "in_process"


def test_servers_of_a_grid_serve_its_repository(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(servers, "RESULTS", tmp_path)
    for grid in grids.GRIDS.values():
        server = servers.make("openinfer", grid, (0,), install=False)
        if server.skip:
            pytest.skip(server.skip)
        assert server.cpus == (0,) and server.batch_dim == grid.batching
        repo = server.argv[server.argv.index("--model-repository") + 1]
        config = (tmp_path / f"{grid.key}-1cpu" / "openinfer" / servers.MODEL / "config.pbtxt")
        assert repo == str(config.parent.parent)
        assert config.read_text() == repository.config_text(grid.batching)
    assert servers.make("mlserver", grids.GRIDS["plain"], install=False).batch_dim  # its own shapes


def test_cores_split_server_and_client() -> None:
    one = grids.cores(1, [0, 1])
    assert (one.server, one.client) == ((0,), (1,))
    assert "load generator on CPU 1" in one.note
    two = grids.cores(2, [0, 1])
    assert (two.server, two.client) == ((0, 1), (0, 1))
    assert "sharing" in two.note
    with pytest.raises(ValueError):
        grids.cores(3, [0, 1])


def test_plan_runs_each_grid_on_each_core_setting_with_the_servers_it_can_hold() -> None:
    pts = grids.points(["http", "grpc"], [16, 65536], [16, 65536], [1, 16])
    assert len(pts) == 12 and (grids.BINARY, 16, 1) in pts
    phases = grids.plan(["plain", "batching"], [1, 2], ["triton", "openinfer", "mlserver", "grpc_echo"],
                        pts, available=[0, 1])
    assert [(p.grid.key, p.cores.count) for p in phases] == [
        ("plain", 1), ("plain", 2), ("batching", 1), ("batching", 2)]
    assert phases[0].servers == ("triton", "openinfer", "mlserver", "grpc_echo")
    assert phases[2].servers == ("triton", "openinfer")  # MLServer does not batch here
    # triton and openinfer: every point; MLServer: no binary tensors; the gRPC echo: gRPC only
    assert phases[0].cells() == 12 + 12 + 8 + 4
    assert grids.plan(["batching"], [1], ["mlserver"], pts, available=[0, 1]) == []


def test_frontend_processes_run_only_http_and_only_on_more_than_one_core() -> None:
    pts = grids.points(["http", "grpc"], [16], [16], [16])
    phases = grids.plan(["plain", "batching"], [1, 2], ["openinfer", "openinfer_fp"], pts, available=[0, 1])
    assert [(p.grid.key, p.cores.count, p.servers) for p in phases] == [
        ("plain", 1, ("openinfer",)), ("plain", 2, ("openinfer", "openinfer_fp")),
        ("batching", 1, ("openinfer",)), ("batching", 2, ("openinfer",))]
    assert phases[1].cells() == 3 + 2  # no gRPC cell for the frontend processes


def test_frontend_processes_get_one_process_per_server_core(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(servers, "RESULTS", tmp_path)
    server = servers.make("openinfer_inproc_fp", grids.GRIDS["plain"], (0, 1), install=False)
    if server.skip:
        pytest.skip(server.skip)
    assert server.argv[-2:] == ["--frontend-processes", "2"] and server.protocols == ("http",)
    assert server.speaks(grids.BINARY) and not server.speaks("grpc")


def test_options_for_quick_runs_and_subsets() -> None:
    ns = suite.parse(["--quick", "--grids", "plain", "--cores", "1"])
    assert ns.rounds == 1 and ns.out.endswith("results/RESULTS.quick.md")
    assert suite.parse([]).out.endswith("benchmarks/RESULTS.md")
    with pytest.raises(SystemExit):
        suite.parse(["--grids", "plain,bogus"])


def test_a_server_that_died_is_started_again_and_says_why(tmp_path, monkeypatch) -> None:
    import os
    import signal

    monkeypatch.setattr(servers, "RESULTS", tmp_path)
    server = servers.make("asgi_echo", grids.GRIDS["plain"])
    server.start(timeout=60)
    try:
        assert server.alive()
        os.killpg(server.proc.pid, signal.SIGKILL)
        server.proc.wait(10)
        assert not server.alive()
        note = server.restart()
        assert server.alive() and "exited with -9" in note and str(server.log) in note
    finally:
        server.stop()
