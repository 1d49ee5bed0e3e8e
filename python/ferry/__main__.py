"""``python -m ferry ARGS...`` runs the ``ferry`` command with ARGS (``python -m ferry generate -m DIR -p TEXT``).

The command is looked up as: $FERRY_CLI, the copy installed with this package (ferry/bin/ferry, in wheels), the
build tree's bin/ferry (when the package is imported from <build>/python), then ``ferry`` on PATH.
"""

import os
import shutil
import sys


def find_cli():
    """The path of the ``ferry`` executable, or None."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [
        os.environ.get("FERRY_CLI", ""),
        os.path.join(here, "bin", "ferry"),
        os.path.join(here, "..", "..", "bin", "ferry"),
    ]
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.normpath(path)
    return shutil.which("ferry")


def main(argv=None):
    """Replaces this process with the ferry command (its exit status becomes ours)."""
    args = sys.argv[1:] if argv is None else argv
    cli = find_cli()
    if cli is None:
        print("python -m ferry: the `ferry` command was not found (set FERRY_CLI, or install ferry with pip, "
              "which ships it)", file=sys.stderr)
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(cli, [cli, *args])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
