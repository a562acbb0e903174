"""TODO docstring"""
from __future__ import annotations

import os
import socket
import threading

_TRUTHY = {"1", "true", "yes", "on"}


def offline_requested() -> bool:
    return any(os.environ.get(v, "").lower() in _TRUTHY for v in ("HF_HUB_OFFLINE", "NEGBOOK_OFFLINE"))


def network_reachable(host: str = "huggingface.co", port: int = 443, timeout: float = 1.0) -> bool:
    """One bounded connection attempt (DNS included) instead of a client's retry loop."""
    answer: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                answer.append(True)
        except OSError:
            answer.append(False)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout + 0.25)
    return bool(answer and answer[0])
