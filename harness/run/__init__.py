"""How a command runs in processes: the worker's loops, and everything that watches them.

:mod:`.campaign` (``eaglefuzz fuzz`` in a worker) and :mod:`.replaying` (``eaglefuzz replay``);
the supervisor that runs them in a worker process (:mod:`.supervisor`), the crash journal and
the run's record it reads (:mod:`.journal`, :mod:`.runlog`), the lifeline that ends a worker
with its parent (:mod:`.lifeline`), warm servers (:mod:`.warm_servers`), shards on several GPUs
or Ray (:mod:`.multi`, :mod:`.ray_shards`, :mod:`.cuda_devices`) and compute-sanitizer
(:mod:`.sanitize`).
"""
