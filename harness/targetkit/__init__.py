"""What a target is built from: the record interface and the interfaces of a target folder's roles.

:mod:`.base` (``Target``: the record interface every target has; ``TritonTarget``, ``Outcome``),
:mod:`.roles` (a folder's file roles, what each defines, and the one way to find them),
:mod:`.pyfunc` (Python-function targets), :mod:`.properties` (the audit role: ``Audit``),
:mod:`.interface` (an implementation's parameters against the contract's). Every target folder
of :mod:`..targets` builds on this package; nothing here knows a target by name.
"""
