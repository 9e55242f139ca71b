"""Frontends: programs written elsewhere, brought to shardc's tensor IR."""
