"""The server CPU that every row of ``make bench`` carries, and the memory the LLM row's carry:
the whole process tree's."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from benchmarks.proc_cpu import PeakRss, tree_cpu_seconds, tree_rss_bytes

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


# A parent whose child holds 200 MiB it has written to (so resident), until told to go.
HOLDER = textwrap.dedent("""
    import subprocess, sys
    child = subprocess.Popen([sys.executable, "-c",
        "import sys; held = b'x' * (200 << 20); print('held', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    child.stdout.readline()
    print("ready", flush=True)
    sys.stdin.read()
    child.stdin.close()
    child.wait()
""")


def test_resident_memory_of_the_tree_counts_its_children() -> None:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        with PeakRss(proc.pid, interval=0.01) as rss:
            tree = tree_rss_bytes(proc.pid)
        with open(f"/proc/{proc.pid}/statm") as f:
            alone = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")  # the parent's own
        assert tree >= alone + (200 << 20)  # the child's 200 MiB on top of the parent's own
        assert rss.peak >= 200 << 20
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(30)
