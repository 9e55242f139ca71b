"""The failures every tool reports the same way (`shardc.tools.cli.run_tool`), defined
without imports so that any layer can raise them (the run side of the runtime loads no
xDSL). Bad input is one line or a located diagnostic, exit 1, never a traceback."""

from __future__ import annotations


class FailureReport(Exception):
    """A failure whose message is already the whole report for a user (a located
    diagnostic, or one line): a tool prints it as it is (escaped) and exits 1."""


class ReportedElsewhere(Exception):
    """A failure another rank of the job reports (the one that failed): this rank
    exits 1 without a word, so the job prints the error once."""
