"""Exit codes of the ``eaglefuzz`` command (and of its worker processes)."""

EXIT_OK = 0
"""No output differs."""
EXIT_FINDINGS = 1
"""An output differs (or a case crashed): reported and saved to the corpus."""
EXIT_USAGE = 2
"""A usage or input error: one line on stderr, no traceback."""
EXIT_INTERNAL = 3
"""A bug of eaglefuzz itself (an unexpected exception): its traceback is printed."""
EXIT_DEVICE_LOST = 70
"""A worker left on purpose: a CUDA error made the device unusable (its case is journaled)."""
EXIT_INTERRUPTED = 130
"""Interrupted (Ctrl-C, SIGTERM) with nothing found; what was found is saved."""
