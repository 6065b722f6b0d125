"""Independent reference implementations (oracles) of vLLM's EAGLE helper kernels and of its
rejection sampler's kernels.

They are written from ``docs/CONTRACT.md`` (§1-§27) alone, not from the code under test:

* ``vectorized`` -- plain NumPy, vectorised (no Python loop over requests or tokens);
* ``loops`` -- Numba, plain nested loops over requests and slots;
* ``python_functions`` -- the two Python functions (§4 and §5) on plain data: a NumPy
  and a plain-Python oracle of ``extend_all_queries_by_N``, and the draft config as nested dicts.
* ``vectorized_v2``, ``loops_v2`` -- the same two kinds for Model Runner V2's input and
  bookkeeping kernels (§14-§27).

The oracles of one function are independent of each other and must agree on every input.
This package never imports ``kernels/``, ``harness/``, triton or torch.
"""
