"""What the demo prints: a live line of counts, and each reminder as the guard delivers it."""

from __future__ import annotations

import sys
import threading
from typing import TextIO

from otel_repeat_guard.core.reminders import Reminder
from otel_repeat_guard.demo.runner import Counts


class Console:
    """Thread-safe output for the demo. On a terminal the counts line redraws in place."""

    def __init__(self, counts: Counts, stream: TextIO | None = None, interval: float = 0.5) -> None:
        self._counts = counts
        self._stream = sys.stdout if stream is None else stream
        self._tty = self._stream.isatty()
        self._interval = interval
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="demo-progress", daemon=True)

    def status(self) -> str:
        calls, repeats, reminders, done, total = self._counts.snapshot()
        excluded, model_calls = self._counts.details()
        return (
            f"agents {done}/{total} done · tool calls {calls} ({calls - excluded} tracked, {excluded} excluded)"
            f" · repeated {repeats} · reminders {reminders} · model calls {model_calls}"
        )

    def reminder(self, reminder: Reminder) -> None:
        """``on_reminder`` for the guard: print the reminder's headline."""
        who = reminder.agent_name or reminder.agent_id
        line = (
            f"reminder ({reminder.tier}) to {who}: {reminder.tool_name} called {reminder.run_length}x "
            f"with identical arguments {reminder.arguments_preview}"
        )
        self._print(line)

    def line(self, text: str) -> None:
        self._print(text)

    def __enter__(self) -> Console:
        self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._ticker.join()
        with self._lock:
            self._stream.write(("\r\033[K" if self._tty else "") + self.status() + "\n")
            self._stream.flush()

    def _print(self, text: str) -> None:
        with self._lock:
            if self._tty:
                self._stream.write("\r\033[K" + text + "\n" + self.status())
            else:
                self._stream.write(text + "\n")
            self._stream.flush()

    def _tick(self) -> None:
        last = ""
        while not self._stop.wait(self._interval):
            status = self.status()
            if status == last:
                continue
            last = status
            with self._lock:
                self._stream.write(("\r\033[K" + status) if self._tty else status + "\n")
                self._stream.flush()
