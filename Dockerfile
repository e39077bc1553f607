# openinfer: a Triton-compatible inference server, serving the model repository at /models.
#   make image                                    # bundled example repository, ONNX Runtime backend
#   docker build --build-arg EXTRAS=onnx,torch,gpu -t openinfer .
#   docker run -p 8000-8002:8000-8002 -v "$PWD/models:/models" openinfer
# Extras (pyproject.toml): onnx, torch, llm, openai, gpu; a comma-separated list.
ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim AS build
ARG EXTRAS=onnx
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY openinfer ./openinfer
RUN python -m venv /opt/openinfer \
 && /opt/openinfer/bin/pip install --no-cache-dir "/src[${EXTRAS}]"

FROM python:${PYTHON_VERSION}-slim
LABEL org.opencontainers.image.title="openinfer" \
      org.opencontainers.image.description="A Triton-compatible inference server in Python" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 1000 openinfer \
 && useradd --system --uid 1000 --gid openinfer --create-home --home-dir /home/openinfer openinfer
COPY --from=build /opt/openinfer /opt/openinfer
COPY --chown=openinfer:openinfer examples/model_repository /models
ENV PATH=/opt/openinfer/bin:$PATH \
    PYTHONUNBUFFERED=1
USER 1000:1000
WORKDIR /home/openinfer
# HTTP (KServe v2), gRPC, Prometheus metrics
EXPOSE 8000 8001 8002
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/v2/health/ready', timeout=2)"]
ENTRYPOINT ["openinfer", "serve"]
CMD ["--model-repository=/models"]
