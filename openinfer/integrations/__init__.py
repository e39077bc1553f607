"""Client-side integrations that call an openinfer (or Triton) server from other systems.

Each subpackage is importable without the server's own dependencies, because it runs inside
someone else's process (a PyFlink Python worker, for example).
"""
