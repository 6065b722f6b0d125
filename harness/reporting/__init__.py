"""What a run says: the JSON documents of ``fuzz`` and ``replay`` and their text reports.

:mod:`.fuzz_report` (a fuzzing run's document, its table and findings, its exit code) and
:mod:`.replay_report` (a replay's document grouped by distinct finding, its text, its exit
code). A worker builds them, and a supervisor that merges several workers' runs prints them.
"""
