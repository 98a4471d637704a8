"""Print the pin: list that makes dsh refuse a changed plugin.

    python -m dsh_plugin.pin FILE_OR_FOLDER...

A folder stands for every file under it (an installed package's folder,
say), bytecode caches left out: Python rewrites those itself. Paste the
output under the plugin's entry in config.yaml; re-run it after an
upgrade you meant.
"""

import hashlib
import os
import sys


def files(paths):
    """Every file the paths name, folders walked, in a stable order."""
    out = []
    for path in paths:
        path = os.path.abspath(path)
        if os.path.isdir(path):
            for root, dirs, names in os.walk(path):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__")
                out.extend(os.path.join(root, n) for n in sorted(names) if not n.endswith((".pyc", ".pyo")))
        elif os.path.isfile(path):
            out.append(path)
        else:
            raise SystemExit("dsh_plugin.pin: %s is neither a file nor a folder" % path)
    return out


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 16), b""):
            h.update(block)
    return h.hexdigest()


def main(argv=None):
    paths = sys.argv[1:] if argv is None else argv
    if not paths:
        raise SystemExit(__doc__.strip())
    lines = ["pin:"]
    for path in files(paths):
        lines.append("  - file: %s" % path)
        lines.append("    sha256: %s" % sha256(path))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
