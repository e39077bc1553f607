"""``openinfer bench openai``: genai-perf's measurements for OpenAI-compatible endpoints."""
