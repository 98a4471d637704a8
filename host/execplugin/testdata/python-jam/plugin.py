"""A plugin whose admission hangs for good on "hang", ignoring the host's
cancel as a stuck handler does, and admits anything else."""

import threading

from dsh_plugin import Plugin, events

plugin = Plugin("jam", "1.0.0")
forever = threading.Event()


@plugin.admission
def admission(payload, next):
    if "hang" in payload.message.content:
        forever.wait()
    return events.Decision(kind="admit")


plugin.serve()
