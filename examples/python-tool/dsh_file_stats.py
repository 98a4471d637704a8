#!/usr/bin/python3
"""A dsh tool plugin in Python, on the dsh_plugin SDK (sdk/python).

It gives the model `file_stats`: lines, words and bytes of the workspace's
files that match a glob pattern, like `wc` but confined to the workspace
and without a shell. It reads only, so it is parallel-safe and needs no
approval by default.
"""

import glob
import os

from dsh_plugin import Plugin, ToolError

plugin = Plugin("file-stats", "1.0.0")
limit = 200  # files per call, so a "**/*" in a large tree stays cheap


@plugin.configure
def configure(config):
    global limit
    wanted = int(config.get("max_files", 200))
    if wanted < 1:
        raise ValueError("max_files must be at least 1, got %d" % wanted)
    limit = wanted


PARAMETERS = {
    "type": "object",
    "properties": {
        "pattern": {"type": "string", "description": "A glob relative to the workspace, such as *.py or src/**/*.go."},
    },
    "required": ["pattern"],
    "additionalProperties": False,
}


@plugin.tool("file_stats", "Count the lines, words and bytes of the workspace files matching a glob pattern.",
             parameters=PARAMETERS, parallel_safe=True, approval="allow")
def file_stats(args, ctx):
    root = os.path.realpath(ctx.workspace or os.getcwd())
    pattern = args["pattern"]
    if os.path.isabs(pattern) or ".." in pattern.split("/"):
        raise ToolError("pattern %r leaves the workspace; give a pattern relative to it, without .." % pattern)
    rows, total = [], [0, 0, 0]
    for path in sorted(glob.glob(os.path.join(root, pattern), recursive=True)):
        if ctx.is_cancelled():
            return "cancelled after %d files" % len(rows)
        real = os.path.realpath(path)
        if not os.path.isfile(real) or os.path.commonpath([root, real]) != root:
            continue  # a directory, or a link out of the workspace
        if len(rows) == limit:
            rows.append("... more than %d files; narrow the pattern" % limit)
            break
        with open(real, "rb") as f:
            data = f.read()
        counts = (data.count(b"\n"), len(data.split()), len(data))
        total = [a + b for a, b in zip(total, counts)]
        rows.append("%d %d %d %s" % (counts + (os.path.relpath(path, root),)))
    if not rows:
        raise ToolError("no file matches %r in the workspace" % pattern)
    rows.append("%d %d %d total" % tuple(total))
    return "lines words bytes file\n" + "\n".join(rows)


def main():
    """The console script dsh-file-stats (see pyproject.toml)."""
    plugin.serve()


if __name__ == "__main__":
    main()
