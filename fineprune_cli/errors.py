"""User-facing errors: the CLI prints their message as one line and exits with code 2."""


class FinepruneError(Exception):
    """Bad input or missing files: the user can fix it, so no traceback is shown."""

    exit_code = 2
    stop = False  # a stop the user asked for, not a failure: the CLI prints it without 'error:'


class ConfigError(FinepruneError, ValueError):
    """An invalid option, flag combination or config file (a ValueError to library callers)."""


class DataError(FinepruneError):
    """Dataset files missing, unreadable or malformed."""
