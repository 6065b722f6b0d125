"""Checking a case against the contract, and searching for cases that fail.

:mod:`.check` (one case: implementation and oracles run, compared, a finding explained),
:mod:`.fuzz` (the Hypothesis and bulk drivers, the tour of production extremes),
:mod:`.shrinking`, :mod:`.domains` (production and extended tiers), :mod:`.corpus` (the case
files), :mod:`.audit` (hazards), :mod:`.device_mode` (cases drawn and checked on a GPU).
"""
