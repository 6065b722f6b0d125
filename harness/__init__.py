"""The fuzzing harness: strategies, cases, kernel and oracle runs, comparison, reports, CLI."""
