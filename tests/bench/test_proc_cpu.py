"""The server CPU that every row of ``make bench`` carries: the whole process tree's."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from bench.proc_cpu import tree_cpu_seconds

# A parent that starts a child burning 0.3 s of CPU and a grandchild doing the same, reaps the
# first, and waits with the grandchild's parent still alive until told to go.
TREE = textwrap.dedent("""
    import subprocess, sys
    burn = "import time\\nwhile time.process_time() < 0.3: pass\\n"
    reaped = subprocess.Popen([sys.executable, "-c", burn])
    reaped.wait()
    alive = subprocess.Popen([sys.executable, "-c",
        "import subprocess, sys; subprocess.Popen([sys.executable, '-c', %r]).wait();"
        "print('burnt', flush=True); sys.stdin.read()" % burn],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    alive.stdout.readline()
    print("ready", flush=True)
    sys.stdin.read()
    alive.stdin.close()
    alive.wait()
""")


def test_cpu_of_reaped_children_and_live_descendants_counts() -> None:
    proc = subprocess.Popen([sys.executable, "-c", TREE], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        # the reaped child's 0.3 s, the grandchild's 0.3 s (reaped by its live parent)
        assert tree_cpu_seconds(proc.pid) >= 0.55
        assert tree_cpu_seconds(proc.pid, itself=False) >= 0.25  # the live child's share
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(30)
