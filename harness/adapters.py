"""Public name of :func:`~.sources.adapters.grid_kernel` (``from eaglefuzz.harness.adapters import
grid_kernel``): a port's file makes a plain function look like a Triton kernel with it."""

from .sources.adapters import grid_kernel

__all__ = ["grid_kernel"]
