"""Minimal stand-ins for the vLLM types that ``spec_decode_utils`` names.

vLLM itself is not a dependency: the Python functions under test only read fields, call
``CommonAttentionMetadata.replace`` / ``batch_size`` / ``naive_query_lens`` and
``dataclasses.replace``, and the module's decorators read ``current_platform``, so plain
dataclasses with vLLM's field names (and a platform stand-in) are enough to run them. The field names and defaults
follow vLLM's own classes (``vllm/v1/attention/backend.py``, ``vllm/config/*.py``); only the
fields a spec-decode helper could touch are kept, plus a few others so that "every other field
is unchanged" has something to check. Nothing here validates or derives values (vLLM's
``__post_init__`` hooks are left out on purpose): ``dataclasses.replace`` builds a copy with
exactly the fields given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from dataclasses import replace as _replace
from typing import Any

__all__ = [
    "CacheConfig",
    "CommonAttentionMetadata",
    "CompilationConfig",
    "DeviceConfig",
    "LoadConfig",
    "ModelConfig",
    "ObservabilityConfig",
    "ParallelConfig",
    "QuantizationConfig",
    "SchedulerConfig",
    "SpeculativeConfig",
    "VllmConfig",
    "current_platform",
]


@dataclass
class CommonAttentionMetadata:
    """Per-batch attention metadata shared by every attention layer (device and CPU copies).

    ``query_start_loc``/``query_start_loc_cpu``: ``(batch_size + 1,)`` int32 start offsets of
    each request's tokens; ``seq_lens``: ``(batch_size,)`` int32 context lengths (computed +
    new tokens); ``num_reqs`` may be smaller than ``batch_size()`` when the batch is padded.
    """

    query_start_loc: Any
    query_start_loc_cpu: Any
    seq_lens: Any
    num_reqs: int
    num_actual_tokens: int
    max_query_len: int
    max_seq_len: int
    block_table_tensor: Any
    slot_mapping: Any
    causal: Any = True
    logits_indices_padded: Any = None
    num_logits_indices: int | None = None
    encoder_seq_lens: Any = None
    encoder_seq_lens_cpu: Any = None
    dcp_local_seq_lens: Any = None
    dcp_local_seq_lens_cpu: Any = None
    # Older vLLM kept these as plain fields; newer releases keep deprecated ``_``-prefixed
    # caches behind properties. Plain fields here: the helpers under test never read them.
    seq_lens_cpu: Any = None
    num_computed_tokens_cpu: Any = None

    def batch_size(self) -> int:
        """The (possibly padded) number of requests: the length of ``seq_lens``."""
        return self.seq_lens.shape[0]

    def naive_query_lens(self) -> Any:
        """Each request's query length, ``query_start_loc[1:] - query_start_loc[:-1]`` (naive:
        a query is taken to end where the next one starts)."""
        return self.query_start_loc[1:] - self.query_start_loc[:-1]

    def replace(self, **kwargs: Any) -> CommonAttentionMetadata:
        """A copy with ``kwargs`` fields replaced (``dataclasses.replace``); the rest shared."""
        return _replace(self, **kwargs)


@dataclass
class ModelConfig:
    """The model: what is loaded, in which dtype, with which limits and quantization."""

    model: str = "facebook/opt-125m"
    tokenizer: str | None = None
    revision: str | None = None
    dtype: str = "auto"
    seed: int = 0
    max_model_len: int = 2048
    quantization: str | None = None
    trust_remote_code: bool = False
    enforce_eager: bool = False
    max_logprobs: int = 20
    hf_config_model_type: str | None = None
    hf_config: Any = None
    served_model_name: str | None = None


@dataclass
class ParallelConfig:
    """How the model is split over devices, and this worker's place in that split."""

    pipeline_parallel_size: int = 1
    tensor_parallel_size: int = 1
    data_parallel_size: int = 1
    data_parallel_rank: int = 0
    decode_context_parallel_size: int = 1
    enable_expert_parallel: bool = False
    world_size: int = 1
    rank: int = 0
    distributed_executor_backend: str | None = None


@dataclass
class SpeculativeConfig:
    """Speculative decoding: the drafter's method, model and parallel layout."""

    method: str | None = None
    num_speculative_tokens: int | None = None
    model: str | None = None
    draft_model_config: ModelConfig | None = None
    draft_parallel_config: ParallelConfig | None = None
    draft_tensor_parallel_size: int | None = None
    parallel_drafting: bool = False
    quantization: str | None = None


@dataclass
class QuantizationConfig:
    """Stand-in for vLLM's quantization config object (a method name and a few settings)."""

    method: str = "fp8"
    weight_bits: int = 8
    group_size: int = -1


@dataclass
class CacheConfig:
    block_size: int = 16
    gpu_memory_utilization: float = 0.9
    cache_dtype: str = "auto"
    num_gpu_blocks: int | None = None


@dataclass
class SchedulerConfig:
    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 256
    max_model_len: int = 2048
    enable_chunked_prefill: bool = True


@dataclass
class DeviceConfig:
    device: str = "cuda"


@dataclass
class LoadConfig:
    load_format: str = "auto"
    download_dir: str | None = None


@dataclass
class CompilationConfig:
    mode: int = 0
    cudagraph_capture_sizes: list[int] = field(default_factory=list)


@dataclass
class ObservabilityConfig:
    collect_detailed_traces: list[str] | None = None


@dataclass
class VllmConfig:
    """All of vLLM's configuration in one object (the fields a drafter's copy can differ in)."""

    model_config: ModelConfig | None = None
    cache_config: CacheConfig = field(default_factory=CacheConfig)
    parallel_config: ParallelConfig = field(default_factory=ParallelConfig)
    scheduler_config: SchedulerConfig = field(default_factory=SchedulerConfig)
    device_config: DeviceConfig = field(default_factory=DeviceConfig)
    load_config: LoadConfig = field(default_factory=LoadConfig)
    lora_config: Any = None
    speculative_config: SpeculativeConfig | None = None
    observability_config: ObservabilityConfig = field(default_factory=ObservabilityConfig)
    quant_config: QuantizationConfig | None = None
    compilation_config: CompilationConfig = field(default_factory=CompilationConfig)
    kv_transfer_config: Any = None
    additional_config: dict[str, Any] = field(default_factory=dict)
    instance_id: str = ""


@dataclass(frozen=True)
class Platform:
    """Stand-in for ``vllm.platforms.current_platform``: what the module's decorators read.

    ``simple_compile_backend`` is the ``torch.compile`` backend vLLM's simple compiled helpers
    use (``update_num_computed_tokens_for_batch_change``): ``"inductor"`` on every platform
    vLLM 0.33 ships (its ``Platform`` default; neither CUDA nor CPU overrides it).
    """

    simple_compile_backend: str = "inductor"


current_platform = Platform()
