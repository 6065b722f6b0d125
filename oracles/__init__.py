"""Independent reference implementations (oracles) of vLLM's EAGLE helper kernels.

They are written from ``CONTRACT.md`` (sections 1-3) alone, not from the kernel code:

* ``vectorized`` -- plain NumPy, vectorised (no Python loop over requests or tokens);
* ``loops`` -- Numba, plain nested loops over requests and slots.

The two are independent of each other too and must agree with each other on every input.
This package never imports ``kernels/``, ``harness/``, triton or torch.
"""
