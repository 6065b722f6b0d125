"""Stand-ins for the ``@triton.jit`` helpers Model Runner V2's kernels call from another vLLM
module, for a user's file taken without its imports (``--kernels``: the file's functions are
written under eaglefuzz's imports, harness/sources/file.py).

A vLLM release or an installed vLLM runs its own helpers (``vllm/v1/worker/gpu/buffer_utils.py``
is loaded as it is, harness/sources/vllm_shims.py); a user's file that defines a helper of the
same name uses its own.
"""

import triton
import triton.language as tl


@triton.jit
def _load_ptr(ptr_to_ptr, elem_dtype):
    """The address stored (as an integer) at ``ptr_to_ptr``, as a pointer to ``elem_dtype``: how
    the block-table kernels (docs/CONTRACT.md §21, §22) reach each KV-cache group's table from
    ``BlockTables``' tensor of data pointers (vLLM's helper of this name in ``buffer_utils.py``)."""
    return tl.load(ptr_to_ptr).to(tl.pointer_type(elem_dtype))
