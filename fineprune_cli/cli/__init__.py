"""The `fineprune` command line: parse flags into settings and call a plain function.

Every settings flag is generated from its declaration (`options.with_settings`); commands
only parse and delegate, and print through the console helper. The app and its shared
options are in `app`; `train` and `compare` in `runs`; the other commands in `tools`.
"""

from __future__ import annotations

import os

from . import runs, tools  # noqa: F401  (each module registers its commands on the app)
from .app import OWN_PROCESS, app

__all__ = ["app", "main"]


def main() -> None:
    if os.environ.get("TORCHELASTIC_ERROR_FILE"):  # under torchrun: a rank's uncaught error goes
        from torch.distributed.elastic.multiprocessing.errors import record  # into its failure report

        record(_main)()
    else:  # torch is imported by the commands that train, not for --help
        _main()


def _main() -> None:
    OWN_PROCESS["main"] = True
    try:
        app()
    finally:  # called in-process (tests, a wrapper that catches SystemExit): later commands own nothing
        OWN_PROCESS["main"] = False
