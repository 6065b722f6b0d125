"""Drawing cases: the building blocks the targets' generators are written with.

:mod:`.strategies` (ragged batches, scales, the shapes of production extremes),
:mod:`.choosers` (one generator body for the Hypothesis and the bulk NumPy driver) and
:mod:`.shrink_steps` (pure helpers of shrinking: shorter lengths, which requests to keep).
"""
