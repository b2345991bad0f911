"""One BLAS thread for the many small array operations of a fit.

The fits here make thousands of tiny array calls; OpenBLAS worker threads that
busy-wait between them burn a second core for nothing, and on a loaded machine make
a fit several times slower. One controller is built once (building it scans the
loaded libraries, which costs milliseconds) and reused.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from threadpoolctl import ThreadpoolController

_controller: ThreadpoolController | None = None


def one_blas_thread() -> AbstractContextManager[Any]:
    global _controller
    if _controller is None:
        _controller = ThreadpoolController()
    limiter: AbstractContextManager[Any] = _controller.limit(limits=1, user_api="blas")
    return limiter
