"""Where tensors and models live: client shared-memory regions (system and CUDA IPC), the GPUs
this process may use and the load limit on them, and keeping what was loaded out of the garbage
collector's full passes."""
