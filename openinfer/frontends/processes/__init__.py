"""HTTP frontends in processes of their own, in front of the one process that holds the core.

`--frontend-processes N` (N > 1) starts N frontend processes that accept on the HTTP listening
socket the core process opened, parse requests, decode and encode tensors, and send each
inference to the core over a framed channel (`channel`); every other route is forwarded whole
to the core's own HTTP app (`core_link`), so its rules stay written once. `pool` starts, watches
and restarts the processes; `child` is what runs in each. docs/multicore.md has the design and
its measured costs.
"""
