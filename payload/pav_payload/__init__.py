"""Acceptance payload run on each host under torchrun; depends only on torch and the stdlib."""
