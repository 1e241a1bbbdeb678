"""What ``worker --dev`` (``statecore dev``) adds around a worker: the embedded dev server
with its files under the data folder, a codec server for its Web UI when payloads are
encrypted, and the next steps printed once the worker polls."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from temporalio.converter import PayloadCodec

from statecore.contract._session import DEFAULT_TASK_QUEUE
from statecore.store import redact_url
from statecore.temporal._devserver import DevServer

if TYPE_CHECKING:
    from statecore.temporal._worker_config import WorkerConfig

log = logging.getLogger("statecore.worker")


def dev_server_for(config: WorkerConfig, codec_endpoint: str | None) -> DevServer:
    """The embedded dev server ``config`` asks for, its files under ``config.data_dir``."""
    data = Path(config.data_dir)
    extra = ["--ui-codec-endpoint", codec_endpoint] if codec_endpoint else []
    return DevServer(
        port=config.dev_port,
        ui_port=config.dev_ui_port or None,
        db_filename=str(data / "temporal.db"),
        log_path=str(data / "temporal.log"),
        pid_file=str(data / "temporal.pid"),
        extra_args=extra,
    )


def start_ui_codec_server(codec: PayloadCodec, ui_port: int) -> Any:
    """A codec server on a free local port that the dev server's Web UI (and only it) may
    call, so the UI shows encrypted payloads decrypted (docs/encryption.md)."""
    from statecore.temporal.codec_server import CodecServer

    origins = [f"http://127.0.0.1:{ui_port}", f"http://localhost:{ui_port}"]
    server = CodecServer(codec, port=0, allowed_origins=origins).start()
    log.info("codec server for the Web UI on %s", server.url)
    return server


def next_steps(config: WorkerConfig, server: DevServer, codec_server: Any) -> str:
    """What to type next, printed once a dev worker polls: addresses as they really are."""
    here = Path(sys.executable).parent
    try:
        bin_dir = here.relative_to(Path.cwd())
    except ValueError:
        bin_dir = here
    address = server.address
    codec = f" --codec-endpoint {codec_server.url}" if codec_server is not None else ""
    keys = " (with STATECORE_ENCRYPTION_KEYS set as here)" if config.encryption_keys else ""
    queue = "" if config.task_queue == DEFAULT_TASK_QUEUE else f" --task-queue {config.task_queue}"
    lines = [
        "ready. Next steps:",
        f"  talk to a session:  {bin_dir / 'statecore'} --address {address}{queue} "
        f"chat my-agent my-session{keys}",
        f"  list sessions:      {bin_dir / 'statecore'} --address {address} sessions list",
        f"  temporal CLI:       {bin_dir / 'temporal'} workflow list --address {address}{codec}",
    ]
    if server.ui_url:
        lines.append(f"  Web UI:             {server.ui_url}/namespaces/default/workflows")
    if codec_server is not None:
        lines.append(f"  codec server:       {codec_server.url} (the Web UI decrypts through it)")
    lines += [
        f"  statecore data:     {redact_url(config.database_url)}",
        f"  Temporal data:      {server.db_filename} (log {server.log_path})",
        "  stop:               Ctrl-C",
    ]
    return "\n".join(lines)
