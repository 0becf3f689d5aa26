"""torchrun as `--nproc-per-node` starts it, ending in one line when a signal stops it.

torch's launcher turns SIGTERM (a scheduler ending the job, `kill`, `make gpu`'s time limit)
and SIGINT into a SignalException that escapes its `main` as a traceback and exit 1, although
its ranks stopped cleanly (each finished its epoch and recorded itself `interrupted`).

    python -m fineprune_cli.distributed.torchrun [torchrun's arguments]
"""

from __future__ import annotations

import sys

EXIT_STOPPED = 130  # what an interrupted run exits with (engine/checkpoint.Interrupted)


def main(argv: list[str] | None = None) -> int:
    from torch.distributed.elastic.multiprocessing import SignalException
    from torch.distributed.run import main as torchrun

    try:
        torchrun(argv)
    except SignalException as exc:
        print(
            f"torchrun: stopped by {exc.sigval.name}; its ranks were stopped "
            "(a run records itself 'interrupted' once its epoch ends)",
            file=sys.stderr,
        )
        return EXIT_STOPPED
    return 0


if __name__ == "__main__":
    sys.exit(main())
