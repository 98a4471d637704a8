"""Back-pressure: a fixed number of handlers run at once; beyond that a
call is refused at once instead of queueing behind handlers that may never
return.

A slot is held from the moment a call is admitted until its handler
returns, even when the host gave up on the call (its deadline passed, the
model aborted): Python cannot stop a running thread, so a handler that
hangs keeps its slot. When every slot is held by a call the host already
abandoned, the plugin can do nothing useful again; its health check then
answers NOT_SERVING and dsh restarts it.
"""

import os
import threading

#: How many handlers run at once unless the plugin or its entry says.
DEFAULT_CONCURRENCY = 32
#: The environment variable an entry's env: sets to change the limit.
CONCURRENCY_ENV = "DSH_PLUGIN_CONCURRENCY"
#: The gRPC status code of a refused call, as the host maps it.
BUSY = "RESOURCE_EXHAUSTED"


def concurrency_from(value=None):
    """The limit: value if given, else $DSH_PLUGIN_CONCURRENCY, else 32."""
    if value is None:
        raw = os.environ.get(CONCURRENCY_ENV, "")
        if raw == "":
            return DEFAULT_CONCURRENCY
        try:
            value = int(raw)
        except ValueError:
            raise ValueError("%s=%r is not a number; set a whole number of calls, such as 32" % (CONCURRENCY_ENV, raw))
    if value < 1:
        raise ValueError("concurrency must be 1 or more, not %r" % value)
    return value


class Slot:
    """One admitted call: done once its handler returned, abandoned once
    the host ended the call before that."""

    def __init__(self, workers):
        self._workers = workers
        self.done = False
        self.abandoned = False

    def abandon(self):
        """The RPC ended; if the handler still runs, the host gave up on it."""
        with self._workers._lock:
            if not self.done:
                self.abandoned = True

    def release(self):
        with self._workers._lock:
            if self.done:
                return
            self.done = True
            self._workers._held.discard(self)


class Workers:
    """The slots of one plugin."""

    def __init__(self, limit):
        self.limit = limit
        self._lock = threading.Lock()
        self._held = set()

    def acquire(self):
        """A Slot, or None when all are held: the caller refuses the call."""
        with self._lock:
            if len(self._held) >= self.limit:
                return None
            slot = Slot(self)
            self._held.add(slot)
            return slot

    def busy(self):
        with self._lock:
            return len(self._held)

    def jammed(self):
        """Every slot is held by a call the host abandoned."""
        with self._lock:
            return len(self._held) >= self.limit and all(s.abandoned for s in self._held)

    def refusal(self, plugin):
        return ("plugin %s: all %d of its workers are busy, so the call was refused at once instead of queued; "
                "raise its concurrency (%s in the entry's env, or Plugin(concurrency=...)) "
                "or make its handlers return sooner" % (plugin, self.limit, CONCURRENCY_ENV))
