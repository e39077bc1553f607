"""Where tensors and models live: what the core asks of client shared memory (the registry
itself is the shared-memory extension's), the GPUs this process may use and the load limit on
them, and keeping what was loaded out of the garbage collector's full passes."""
