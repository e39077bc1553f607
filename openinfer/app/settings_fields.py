"""Every `openinfer serve` flag, typed and frozen: the fields of `settings.Settings`.

Written from the argument parser by `python -m openinfer.app.settings_schema` (`make docs`); do
not edit by hand. A test checks it is current.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServeFlags:
    """Each flag by its Python name, with the type it parses into and its default."""

    id: str = 'triton'
    exit_timeout_secs: float = 30
    exit_linger_secs: float = 5
    model_repository: tuple[str, ...] = ()
    model_control_mode: str = 'none'
    load_model: tuple[str, ...] = ()
    repository_poll_secs: float = 15
    exit_on_error: bool = True
    strict_readiness: bool = True
    model_namespacing: bool = False
    disable_auto_complete_config: bool = False
    model_config_name: str | None = None
    model_load_thread_count: int = 4
    rate_limit: str = 'off'
    model_load_retry_count: int = 0
    allow_http: bool = True
    http_address: str = '0.0.0.0'
    http_port: int = 8000
    reuse_http_port: bool = False
    http_max_input_size: int = 67108864
    http_restricted_api: tuple[str, ...] = ()
    http_header_forward_pattern: str | None = None
    http_thread_count: int = 8
    frontend_processes: int = 1
    http_client_timeout_secs: float = 30.0
    allow_grpc: bool = True
    grpc_address: str = '0.0.0.0'
    grpc_port: int = 8001
    reuse_grpc_port: bool = False
    grpc_restricted_protocol: tuple[str, ...] = ()
    grpc_header_forward_pattern: str | None = None
    grpc_infer_response_compression_level: str = 'none'
    grpc_infer_thread_count: int = 2
    grpc_infer_allocation_pool_size: int = 8
    grpc_max_response_pool_size: int | None = None
    grpc_use_ssl: bool = False
    grpc_use_ssl_mutual: bool = False
    grpc_server_cert: str = ''
    grpc_server_key: str = ''
    grpc_root_cert: str = ''
    grpc_keepalive_time: int = 7200000
    grpc_keepalive_timeout: int = 20000
    grpc_http2_max_pings_without_data: int = 2
    grpc_http2_min_recv_ping_interval_without_data: int = 300000
    grpc_http2_max_ping_strikes: int = 2
    grpc_max_connection_age: int | None = None
    grpc_max_connection_age_grace: int | None = None
    grpc_keepalive_permit_without_calls: bool = False
    backend_directory: str = '/opt/tritonserver/backends'
    backend_config: tuple[str, ...] = ()
    cache_config: tuple[str, ...] = ()
    cache_directory: str = ''
    pinned_memory_pool_byte_size: int = 268435456
    cuda_memory_pool_byte_size: tuple[tuple[int, int], ...] = ()
    model_load_gpu_limit: tuple[str, ...] = ()
    cuda_virtual_address_size: tuple[str, ...] = ()
    min_supported_compute_capability: tuple[str, ...] = ()
    enable_peer_access: tuple[str, ...] = ()
    buffer_manager_thread_count: tuple[str, ...] = ()
    host_policy: tuple[str, ...] = ()
    allow_client_shm: bool = False
    trace_config: tuple[str, ...] = ()
    log_verbose: int = 0
    log_info: bool = True
    log_warning: bool = True
    log_error: bool = True
    log_format: str = 'default'
    log_file: str = ''
    allow_metrics: bool = True
    allow_gpu_metrics: bool = True
    allow_cpu_metrics: bool = True
    metrics_address: str | None = None
    metrics_port: int = 8002
    metrics_interval_ms: float = 2000
    metrics_config: tuple[str, ...] = ()
    openai_port: int | None = None
    openai_address: str = '0.0.0.0'
    tokenizer: str | None = None
    chat_template: str | None = None
    backend: str | None = None
    lora_separator: str | None = None
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    max_tool_call_parse_bytes: int = 131072
    default_max_tokens: int | None = None
    responses_store_size: int = 1000
    openai_restricted_api: tuple[tuple[str, ...], ...] = ()
    api_key: tuple[str, ...] = ()
    openai_allowed_origins: tuple[str, ...] | None = None
    enable_kserve_frontends: bool = True
    uvicorn_log_level: str = 'warning'
    strict_model_config: bool = False
    response_cache_byte_size: int | None = None
    trace_file: str | None = None
    trace_level: tuple[str, ...] = ()
    trace_rate: int | None = None
    trace_count: int | None = None
    trace_log_frequency: int | None = None
