#!/usr/bin/python3
"""A dsh admission plugin in Python, on the dsh_plugin SDK (sdk/python).

It refuses messages that contain the configured word and admits the rest,
exactly like examples/plugin-admission does in Go.
"""

from dsh_plugin import Plugin, events

plugin = Plugin("no-secrets-py", "1.0.0")
word = ""


@plugin.configure
def configure(config):
    global word
    word = str(config.get("word", "")).lower()
    plugin.log.info("refusing messages that contain a word", extra={"fields": {"word": word}})


@plugin.admission
def admission(payload, next):
    """Refuse a message with the word; leave the others to the rest of the chain."""
    if word and word in payload.message.content.lower():
        return events.Decision(kind="reject", reason="no-secrets/word",
                               message="Please do not send %ss to the agent." % word)
    return None  # passes on what the rest of the chain decides


if __name__ == "__main__":
    plugin.serve()
