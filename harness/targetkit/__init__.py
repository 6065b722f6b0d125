"""What a target is built from: the base classes and the interfaces of a target folder's roles.

:mod:`.base` (``Target``, ``TritonTarget``, ``Outcome``), :mod:`.pyfunc` (Python-function
targets), :mod:`.interface` (an implementation's parameters against the contract's). Every
target folder of :mod:`..targets` builds on this package; nothing here knows a target by name.
"""
