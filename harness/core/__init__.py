"""The data and rules every other part of the harness shares.

A case (:mod:`.case`), guarded buffers (:mod:`.buffers`), the element-by-element comparison
(:mod:`.compare`), errors and exit codes, cost limits (:mod:`.limits`), where things are kept on
disk (:mod:`.paths`), the Hypothesis profiles, pinned generation (:mod:`.determinism`) and the
bookkeeping of signals (:mod:`.interrupts`). Nothing here imports another part of eaglefuzz.
"""
