"""Asking a process's probe port as a kubelet or Prometheus would: the status and the body,
whatever the status; 0 when nothing listens."""

from __future__ import annotations

import urllib.error
import urllib.request


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError as error:  # not listening yet, or gone
        return 0, str(error)
