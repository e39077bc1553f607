"""The application around the core: the `openinfer` command and what it composes.

- `cli.py`, `openai_command.py`, `scaffold.py`: the commands (`serve`, `openai`, `new-model`);
  `clidoc.py` writes docs/cli.md from the parser.
- `serve_flags.py`, `settings.py`: every `serve` flag (tritonserver's names and defaults), parsed
  once into frozen settings.
- `server_options.py`, `compose.py`, `plugins.py`: settings -> the core, its services and the
  plug-ins (the OpenAI frontend).
- `listeners.py`, `addresses.py`: the HTTP, gRPC and metrics listeners in front of the core.
- `serve.py`, `startup.py`: `openinfer serve`'s event loop, start-up report and ordered shutdown.
"""
