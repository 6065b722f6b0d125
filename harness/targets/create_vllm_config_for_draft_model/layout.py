"""How a case of ``create_vllm_config_for_draft_model`` describes its configs (docs/CONTRACT.md §5.1):
scalars only, each field of the target's configs encoded as an int, a bool or ``None``.
"""

from __future__ import annotations

from typing import Any

NAME = "create_vllm_config_for_draft_model"
"""The target's name (its registry key, folder and vLLM name)."""




DTYPES = ("auto", "float16", "bfloat16", "float32")


QUANT_METHODS = ("fp8", "awq", "gptq", "modelopt")


EXECUTOR_BACKENDS = ("mp", "ray", "uni", "external_launcher")


SPEC_METHODS = ("eagle", "eagle3", "draft_model", "mtp")


PRODUCTION_METHOD = "draft_model"
"""The speculative method of every production case: only ``DraftModelProposer`` calls the
function (docs/CONTRACT.md §5.2)."""


SAME_AS_TARGET = ("tensor_parallel_size",)
"""Parallel fields whose draft value is the target's in production: ``DraftModelProposer``
refuses a drafter of another tensor-parallel size (docs/CONTRACT.md §5.2)."""


DEVICES = ("cuda", "cpu", "xpu")


# field -> encoding: "int" (non-negative), "bool", "name" (an int id), a tuple of choices
# (an index into it), or ("optional", choices) (None or an index).
MODEL_FIELDS: dict[str, Any] = {
    "model": "name",
    "dtype": DTYPES,
    "seed": "int",
    "max_model_len": "int",
    "quantization": ("optional", QUANT_METHODS),
    "trust_remote_code": "bool",
    "enforce_eager": "bool",
    "max_logprobs": "int",
}


PARALLEL_FIELDS: dict[str, Any] = {
    "pipeline_parallel_size": "size",
    "tensor_parallel_size": "size",
    "data_parallel_size": "size",
    "data_parallel_rank": "int",
    "decode_context_parallel_size": "size",
    "enable_expert_parallel": "bool",
    "world_size": "size",
    "rank": "int",
    "distributed_executor_backend": ("optional", EXECUTOR_BACKENDS),
}


OTHER_SCALARS: dict[str, Any] = {
    "speculative_config_present": "bool",
    "spec.method": SPEC_METHODS,
    "spec.num_speculative_tokens": "size",
    "spec.parallel_drafting": "bool",
    "quant_config_present": "bool",
    "quant.method": QUANT_METHODS,
    "quant.weight_bits": "size",
    "cache.block_size": "size",
    "scheduler.max_num_seqs": "size",
    "scheduler.max_num_batched_tokens": "size",
    "device": DEVICES,
    "compilation.mode": "int",
    "instance_id": ("optional", "int"),
    "additional_config": ("optional", "int"),
}


SIDES = {"target_model": MODEL_FIELDS, "draft_model": MODEL_FIELDS, "target_parallel": PARALLEL_FIELDS, "draft_parallel": PARALLEL_FIELDS}


def _all_scalars() -> dict[str, Any]:
    out = {f"{side}.{f}": enc for side, fields in SIDES.items() for f, enc in fields.items()}
    out.update(OTHER_SCALARS)
    return out


SCALARS = _all_scalars()


def decode(enc: Any, value: Any) -> Any:
    if enc == "name":
        return f"org/model-{value}"
    if isinstance(enc, tuple) and enc[0] == "optional":
        return None if value is None else decode(enc[1], value)
    if isinstance(enc, tuple):
        return enc[value]
    return value


def value_ok(enc: Any, value: Any) -> bool:
    if isinstance(enc, tuple) and enc[0] == "optional":
        return value is None or value_ok(enc[1], value)
    if enc == "bool":
        return isinstance(value, bool)
    if not isinstance(value, int) or isinstance(value, bool):
        return False
    if isinstance(enc, tuple):
        return 0 <= value < len(enc)
    return value >= (1 if enc == "size" else 0)


def rule(enc: Any) -> str:
    if isinstance(enc, tuple) and enc[0] == "optional":
        return f"must be null or {rule(enc[1]).removeprefix('must be ')}"
    if enc == "bool":
        return "must be true or false"
    if isinstance(enc, tuple):
        return f"must be an index from 0 to {len(enc) - 1} into {', '.join(enc)}"
    return "must be a positive int" if enc == "size" else "must be a non-negative int"
