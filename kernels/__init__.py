"""Production code under test: vLLM's ``vllm/v1/spec_decode/utils.py`` and its call sites.

``spec_decode_utils`` holds the module's kernels and functions unchanged; ``launchers`` launches
each kernel the way vLLM's call sites do; ``vllm_types`` holds minimal stand-ins for the vLLM
types the module's Python functions use. This package knows nothing of the harness or oracles.
"""
