"""LLM backends behind the tensor interface of Triton's vLLM backend.

`transformers` runs Hugging Face models on the CPU with its own continuous-batching engine;
`vllm` drives vLLM's async engine where vLLM and a GPU exist. Both read the same inputs
(`text_input`, `stream`, `sampling_parameters`, ...) and answer with the same outputs
(`text_output`, `finish_reason`, `num_input_tokens`, ...), so tritonclient users and the
OpenAI frontend drive them alike. The shared pieces live here once: `interface` (tensors),
`sampling` (sampling parameters), `model_files` (model.json / multi_lora.json).
"""
