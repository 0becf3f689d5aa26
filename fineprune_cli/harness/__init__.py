"""Your own training script under `fineprune compare --script`: `start()` at its beginning, then
`run.log(...)` each epoch and `run.finish()` (docs/howto/own-script.md)."""

from .identity import folder_identity, tensor_identity
from .run import COMMAND_ENV, JOB_ENV, RUN_DIR_ENV, ScriptError, ScriptRun, start

__all__ = [
    "COMMAND_ENV",
    "JOB_ENV",
    "RUN_DIR_ENV",
    "ScriptError",
    "ScriptRun",
    "folder_identity",
    "start",
    "tensor_identity",
]
