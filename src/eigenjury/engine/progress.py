"""Progress of a run: a live rich display on a terminal, plain lines otherwise."""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from eigenjury.engine.accounting import Tally


def describe(tally: Tally, total: int | None, elapsed: float) -> str:
    rate = (tally.calls - tally.cached) / elapsed if elapsed > 0 else 0.0
    errors = sum(tally.errors.values())
    cost = f"${tally.cost_usd:.4f}" + ("+?" if tally.unpriced else "")
    done = f"{tally.calls}" if total is None else f"{tally.calls}/{total}"
    return (
        f"{done} done, {tally.cached} cached, {errors} errors, "
        f"{tally.input_tokens + tally.output_tokens:,} tokens, {cost}, {rate:.1f} calls/s"
    )


class RunProgress:
    """Call `update(tally)` as results land; `close()` at the end. `total` None: a
    stream of calls of unknown length (counts and rate, no bar's end)."""

    def __init__(
        self,
        total: int | None,
        *,
        console: Console | None = None,
        label: str = "calls",
        plain_every_s: float = 10.0,
        enabled: bool = True,
    ) -> None:
        self.total = total
        self.console = console or Console(stderr=True)
        self.enabled = enabled and total != 0
        self.start = time.monotonic()
        self.plain_every_s = plain_every_s
        self._last_line = self.start
        self._live: Progress | None = None
        if self.enabled and self.console.is_terminal:
            self._live = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[detail]}"),
                TimeRemainingColumn(),
                console=self.console,
                transient=False,
            )
            self._task = self._live.add_task(label, total=total, detail="")
            self._live.start()

    def update(self, tally: Tally, *, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if self.total is not None and tally.calls > self.total:
            # a stream longer than announced (repairs, a cascade's second jury): counts
            # without an end, rather than a full bar while calls go on
            self.total = None
            if self._live is not None:
                self._live.update(self._task, total=None)
        detail = describe(tally, self.total, now - self.start)
        if self._live is not None:
            self._live.update(self._task, completed=tally.calls, detail=detail)
        elif force or now - self._last_line >= self.plain_every_s:
            self._last_line = now
            self.console.print(detail, highlight=False)

    def note(self, text: str) -> None:
        """A line the user must see (a warning), shown even without a progress display."""
        self.console.print(text, highlight=False, markup=False, soft_wrap=True)

    def close(self, tally: Tally) -> None:
        if self._live is not None:
            self.update(tally)
            self._live.stop()
        elif self.enabled:
            self.update(tally, force=True)
