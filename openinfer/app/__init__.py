"""The application around the core: the `openinfer` command and what it composes.

- `cli.py`, `openai_command.py`, `scaffold.py`: the commands (`serve`, `openai`, `new-model`);
  `clidoc.py` writes docs/cli.md from the parser.
- `serve_flags.py`, `settings.py`: the server's own `serve` flags (tritonserver's names and
  defaults) and every feature's (`openinfer/features/`), parsed once into frozen, typed settings
  (`settings_fields.py`, written from the parser by `settings_schema.py`).
- `server_options.py`, `compose.py`: settings -> the core, its services and the features.
- `listeners.py`: the HTTP and gRPC listeners in front of the core, and the features' own.
- `serve.py`, `startup.py`: `openinfer serve`'s event loop, start-up report and ordered shutdown.
"""
