"""Exclusive wall- and CPU-time accounting by label, by wrapping functions in place for one run.

``Probe.wrap`` returns a timed version of a callable; nested timed calls are subtracted from
their caller, so each label gets only its own time (e.g. ``embed`` without the ``landmarks``
call it makes inside). CPU time is the process's (every thread: the models' thread pools work
for the label that called them). ``Probe.patch`` swaps an attribute for its timed version until the
context exits. Overhead is about a microsecond per call, far below the work being timed.
"""
from __future__ import annotations

import functools
import time
from collections import defaultdict
from contextlib import ExitStack, contextmanager


class Probe:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._children: list[list[float]] = []   # per open timed call: wall, cpu spent in timed callees
        self.target_calls: dict[str, int] = {}

    def _enter(self) -> tuple[float, float]:
        self._children.append([0.0, 0.0])
        return time.perf_counter(), time.process_time()

    def _exit(self, label: str, t0: tuple[float, float]) -> None:
        dt, dc = time.perf_counter() - t0[0], time.process_time() - t0[1]
        child = self._children.pop()
        self.seconds[label] += dt - child[0]
        self.cpu[label] += dc - child[1]
        self.calls[label] += 1
        if self._children:
            self._children[-1][0] += dt
            self._children[-1][1] += dc

    def wrap(self, label: str, fn):
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            t0 = self._enter()
            try:
                return fn(*args, **kwargs)
            finally:
                self._exit(label, t0)
        return timed

    def wrap_generator(self, label: str, fn):
        """Time each step of the generator ``fn`` returns (decoding happens inside next())."""
        probe = self

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            it = iter(fn(*args, **kwargs))
            try:
                while True:
                    t0 = probe._enter()
                    try:
                        item = next(it)
                    except StopIteration:
                        return
                    finally:
                        probe._exit(label, t0)
                    yield item
            finally:
                close = getattr(it, "close", None)
                if close is not None:
                    close()
        return timed

    @contextmanager
    def patch(self, targets):
        """``targets``: ``bench.instrument.Target``s; restored on exit. A name that is not there
        raises ``StaleTargetError`` before anything is patched; ``target_calls`` counts the calls
        of each target by ``Target.name``."""
        from .instrument import check_exists

        targets = list(targets)
        check_exists(targets)
        with ExitStack() as stack:
            for t in targets:
                original = getattr(t.owner, t.attr)
                own = t.attr in getattr(t.owner, "__dict__", {})   # else: an instance shadows its class
                timed = (self.wrap_generator if t.gen else self.wrap)(t.label, original)
                setattr(t.owner, t.attr, self._counted(t.name, timed))
                if own:
                    stack.callback(setattr, t.owner, t.attr, original)
                else:
                    stack.callback(delattr, t.owner, t.attr)
            yield self

    def _counted(self, name: str, fn):
        self.target_calls.setdefault(name, 0)

        @functools.wraps(fn)
        def counted(*args, **kwargs):
            self.target_calls[name] += 1
            return fn(*args, **kwargs)
        return counted

    def to_json(self) -> dict:
        return {k: round(v, 4) for k, v in sorted(self.seconds.items())}

    def cpu_json(self) -> dict:
        return {k: round(v, 4) for k, v in sorted(self.cpu.items())}
