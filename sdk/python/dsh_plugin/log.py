"""Logging to the host: hclog JSON lines on stderr.

go-plugin reads each line the plugin writes on stderr; one that parses as
an hclog JSON entry is logged again by the host at its level, under the
plugin's id, with its extra keys. Anything else is logged as plain text.
"""

import datetime
import json
import logging
import sys

_LEVELS = {logging.DEBUG: "debug", logging.INFO: "info", logging.WARNING: "warn",
           logging.ERROR: "error", logging.CRITICAL: "error"}
_formatter = logging.Formatter()


def _level(levelno):
    if levelno < logging.DEBUG:
        return "trace"
    for n in (logging.CRITICAL, logging.ERROR, logging.WARNING, logging.INFO):
        if levelno >= n:
            return _LEVELS[n]
    return "debug"


class HostLogHandler(logging.Handler):
    """A logging handler that writes hclog JSON lines for the host.

    Extra fields given with `extra={"fields": {...}}` become key/value
    pairs of the host's log line.
    """

    def __init__(self, stream=None):
        super().__init__()
        self.stream = stream

    def emit(self, record):
        try:
            entry = {
                "@level": _level(record.levelno),
                "@message": record.getMessage(),
                "@module": record.name,
                # go-plugin parses exactly this layout (microseconds, zone).
                "@timestamp": datetime.datetime.fromtimestamp(record.created, datetime.timezone.utc)
                .strftime("%Y-%m-%dT%H:%M:%S.%f+00:00"),
            }
            fields = getattr(record, "fields", None)
            if isinstance(fields, dict):
                for k, v in fields.items():
                    entry.setdefault(str(k), v if isinstance(v, (str, int, float, bool)) else str(v))
            if record.exc_info:
                entry["error"] = _formatter.formatException(record.exc_info)
            stream = self.stream or sys.stderr
            stream.write(json.dumps(entry) + "\n")
            stream.flush()
        except Exception:  # a log line must never take the plugin down
            self.handleError(record)


def host_logger(name):
    """A logger named name whose records reach the host's log."""
    log = logging.getLogger(name)
    if not any(isinstance(h, HostLogHandler) for h in log.handlers):
        log.addHandler(HostLogHandler())
    log.setLevel(logging.DEBUG)
    log.propagate = False
    return log
