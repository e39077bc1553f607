"""Backends: the plug-ins that compute (python, onnxruntime, pytorch, LLM engines)."""
