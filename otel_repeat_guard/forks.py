"""After ``os.fork()``: the child's guard starts with fresh locks and nothing in flight, and counts its own spans.

A pre-forking server (gunicorn ``--preload``, multiprocessing with ``fork``) forks while other threads may be
inside the guard, holding its locks: in the child no thread will ever release them, and its first span would
wait for ever. So each object that has locks or state in flight (open spans, runs, steps, counts, a
connection) says what it starts the child with, in its own ``after_fork`` method; the guard's configuration
stays as it was. :func:`renew_after_fork` holds the objects whose ``after_fork`` runs in every child weakly
(a forked child never keeps a processor alive), behind one ``os.register_at_fork`` hook for the process
(as the SDK's batch processor has, but one for all, not one per object: the hooks cannot be unregistered).
A module with locks of its own registers its own hook.

A compiled object is never held by a weak reference: mypyc's classes do not clear their weak references when
they are collected, and the garbage collector then crashes. A compiled owner registers a :class:`ForkHandle`
instead (this module stays interpreted), keeps it, and lets it go with itself.
"""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("otel_repeat_guard")

_owners: weakref.WeakSet[Any] = weakref.WeakSet()


def renew_after_fork(owner: Any) -> None:
    """``owner.after_fork()`` runs first thing in every child this process forks, while ``owner`` lives (an
    interpreted object: a compiled one registers a :class:`ForkHandle`)."""
    _owners.add(owner)


class ForkHandle:
    """``actions`` run in every forked child while the handle lives: its owner keeps it, so it goes with the owner
    (it holds the actions, bound to the owner's parts, never the owner itself)."""

    __slots__ = ("__weakref__", "_actions")

    def __init__(self, *actions: Callable[[], object]) -> None:
        self._actions = actions
        _owners.add(self)

    def after_fork(self) -> None:
        for action in self._actions:
            action()


def _in_child() -> None:
    for owner in list(_owners):
        try:
            owner.after_fork()
        except Exception:
            logger.exception("repeat guard: %s could not start afresh after a fork", type(owner).__name__)


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_in_child)
