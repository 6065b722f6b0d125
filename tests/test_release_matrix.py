"""The release matrix (``benchmarks/releases.py``) on a release whose rejection-sampler kernels
have an older signature: each such target gets its interface verdict, naming what differs, and
the release's other targets are still fuzzed. Offline: the release is a small wheel made at test
time (the bundled spec-decode module, and a local ``rejection_sampler.py`` whose kernels have
vLLM 0.12's and 0.17's parameter lists; their bodies never run, the interface check comes first).
"""

from __future__ import annotations

import importlib.util
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

from eaglefuzz.harness import cli
from eaglefuzz.harness.core.errors import UserError
from eaglefuzz.harness.sources import implementations_for, parse_source

ROOT = Path(__file__).resolve().parents[1]
GREEDY = "rejection_greedy_sample_kernel"
RECOVERED = "sample_recovered_tokens_kernel"
NT = "eagle_prepare_next_token_padded_kernel"
VERSION = "9.6.1"

OLDER_KERNELS = '''\
from collections.abc import Sequence

import torch

from vllm.triton_utils import tl, triton
from vllm.v1.outputs import LogprobsLists, LogprobsTensors


class RejectionSampler:
    @staticmethod
    def parse_output(
        output_token_ids: torch.Tensor,
        vocab_size: int,
        discard_req_indices: Sequence[int] = (),
        logprobs_tensors: LogprobsTensors | None = None,
    ) -> tuple[list[list[int]], LogprobsLists | None]:
        pass


@triton.jit(do_not_specialize=["max_spec_len"])
def rejection_greedy_sample_kernel(
    output_token_ids_ptr,
    cu_num_draft_tokens_ptr,
    draft_token_ids_ptr,
    target_argmax_ptr,
    bonus_token_ids_ptr,
    is_greedy_ptr,
    max_spec_len,
):
    pass


@triton.jit
def sample_recovered_tokens_kernel(
    output_token_ids_ptr,
    cu_num_draft_tokens_ptr,
    draft_token_ids_ptr,
    draft_probs_ptr,
    target_probs_ptr,
    inv_q_ptr,
    vocab_size,
    BLOCK_SIZE: tl.constexpr,
    NO_DRAFT_PROBS: tl.constexpr,
):
    pass
'''
"""vLLM 0.12-0.19's greedy kernel signature (no synthetic mode) and 0.17-0.22's recovered-token
kernel signature (no ``USE_FP64_GUMBEL``), as the release matrix's signature table shows them;
and, as in vLLM 0.14-0.19's file (no ``from __future__ import annotations``), annotations that
are evaluated when the module runs, of names eaglefuzz has no stand-in for."""

OLDER_V2_KERNELS = '''\
from vllm.triton_utils import tl, triton


@triton.jit
def _expand_idx_mapping_kernel(
    idx_mapping_ptr,
    expanded_idx_mapping_ptr,
    cu_num_logits_ptr,
    BLOCK_SIZE: tl.constexpr,
):
    pass
'''
"""Model Runner V2's ``vllm/v1/worker/gpu/input_batch.py`` with vLLM 0.14-0.15's
``_expand_idx_mapping_kernel`` signature (no ``expanded_local_pos_ptr``), as the release matrix's
signature table shows it; the file defines none of the module's other targets."""

EXPAND_V2 = "_expand_idx_mapping_kernel"
EXPAND_V2_DIFF = "missing expanded_local_pos_ptr"

GREEDY_DIFF = "missing uniform_probs_ptr, synthetic_conditional_rates_ptr, SYNTHETIC_MODE"
RECOVERED_DIFF = "missing USE_FP64_GUMBEL"


def _module(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def older_release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A release ``VERSION`` in a wheel cache of its own: the bundled spec-decode module (with
    vLLM's imports) and the older rejection-sampler kernels."""
    fake = _module("eaglefuzz_test_vllm_sources", ROOT / "tests" / "test_vllm_sources.py")
    monkeypatch.setenv("EAGLEFUZZ_WHEELS", str(tmp_path / "wheels"))
    (tmp_path / "wheels").mkdir()
    wheel = fake.fake_wheel(tmp_path / "wheels", VERSION)
    with zipfile.ZipFile(wheel, "a") as z:
        z.writestr("vllm/v1/sample/rejection_sampler.py", OLDER_KERNELS)
        z.writestr("vllm/v1/worker/gpu/input_batch.py", OLDER_V2_KERNELS)
    return VERSION


def test_an_older_signature_gets_its_interface_verdict(older_release: str, capsys: pytest.CaptureFixture[str]) -> None:
    impls = implementations_for(parse_source(f"vllm-release:{older_release}"))
    assert set(impls.untested) == {GREEDY, RECOVERED, EXPAND_V2}
    assert impls.untested[EXPAND_V2].endswith(f"({EXPAND_V2_DIFF}): not a bug finding, {EXPAND_V2} not tested")
    assert NT in impls.funcs  # the release's other targets are tested
    where = f"vLLM {older_release} release wheel, vllm/v1/sample/rejection_sampler.py"
    assert impls.untested[GREEDY] == (
        f"{where}: {GREEDY} has another interface than the contract's ({GREEDY_DIFF}): not a bug "
        f"finding, {GREEDY} not tested")
    assert f"({RECOVERED_DIFF}): not a bug finding" in impls.untested[RECOVERED]

    # the command line: one line per target, exit 2, no traceback
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        cli.main(["fuzz", "--vllm-version", older_release, "--kernel", GREEDY, "--kernel", RECOVERED,
                  "--no-progress", "--no-isolate"])
    out, err = capsys.readouterr()
    assert exc.value.code == 2
    assert err.splitlines() == [f"eaglefuzz: error: {impls.untested[GREEDY]}",
                                f"eaglefuzz: error: {impls.untested[RECOVERED]}"], out + err
    # the release matrix's cells for such a run (it prints no report: those lines are the verdicts)
    releases = _module("eaglefuzz_test_releases", ROOT / "benchmarks" / "releases.py")
    lines = [ln.removeprefix("eaglefuzz: error: ") for ln in err.splitlines()]
    assert releases.verdicts_from_errors(lines) == {GREEDY: f"interface: {GREEDY_DIFF}",
                                                    RECOVERED: f"interface: {RECOVERED_DIFF}"}
    assert releases.verdicts_from_errors(["vLLM 9.6.1: cannot load x.py: boom"]) is None


@pytest.mark.kernel
def test_the_release_matrix_gives_each_target_its_verdict(older_release: str, tmp_path: Path) -> None:
    releases = _module("eaglefuzz_test_releases", ROOT / "benchmarks" / "releases.py")
    row = releases.run_release(older_release, 1, "interpreter", tmp_path / "found", [GREEDY, RECOVERED, NT, EXPAND_V2])
    assert not row.whole and not row.finding, row.verdict
    assert row.verdicts == {GREEDY: f"interface: {GREEDY_DIFF}", RECOVERED: f"interface: {RECOVERED_DIFF}",
                            NT: "clean (1)", EXPAND_V2: f"interface: {EXPAND_V2_DIFF}"}
    text = releases.table([row], 1, "interpreter", [GREEDY, RECOVERED, NT])
    assert f"| {older_release} | interface: {GREEDY_DIFF} | interface: {RECOVERED_DIFF} | clean (1) |" in text
    sigs = releases.signature_table(releases.signatures([older_release], [GREEDY, RECOVERED, NT]))
    assert f"| {GREEDY} | {older_release} | {GREEDY_DIFF} |" in sigs
    assert f"| {RECOVERED} | {older_release} | {RECOVERED_DIFF} |" in sigs
    assert f"| {NT} | {older_release} | the contract's |" in sigs
    v2 = releases.signature_table(releases.signatures([older_release], [EXPAND_V2]))
    assert f"| {EXPAND_V2} | {older_release} | {EXPAND_V2_DIFF} |" in v2


def test_a_rejection_module_that_cannot_load_stops_its_targets_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The spec-decode targets are still tested; each rejection target the file defines gets the
    load's one-line reason."""
    fake = _module("eaglefuzz_test_vllm_sources", ROOT / "tests" / "test_vllm_sources.py")
    monkeypatch.setenv("EAGLEFUZZ_WHEELS", str(tmp_path))
    wheel = fake.fake_wheel(tmp_path, "9.6.2")
    with zipfile.ZipFile(wheel, "a") as z:
        z.writestr("vllm/v1/sample/rejection_sampler.py",
                   "from vllm.v1.outputs import SamplerOutput\n\nDEFAULT = SamplerOutput()  # no stand-in: it raises\n\n\n"
                   "def rejection_greedy_sample_kernel(output_token_ids_ptr):\n    pass\n")
    impls = implementations_for(parse_source("vllm-release:9.6.2"))
    assert NT in impls.funcs and list(impls.untested) == [GREEDY]
    line = impls.untested[GREEDY]
    assert line.startswith("vLLM 9.6.2: cannot load vllm/v1/sample/rejection_sampler.py: ") and "\n" not in line
    assert "SamplerOutput is not available to eaglefuzz" in line and line.endswith(f": {GREEDY} not tested")
    absent = next(n for n in impls.notes if "does not define" in n)
    assert RECOVERED in absent and GREEDY not in absent  # it defines the one, not the other
    with pytest.raises(UserError) as exc:  # nothing else asked for: the verdict is the error
        implementations_for(parse_source("vllm-release:9.6.2"), [GREEDY])
    assert str(exc.value) == line


def test_the_tables_go_between_their_markers(tmp_path: Path) -> None:
    releases = _module("eaglefuzz_test_releases", ROOT / "benchmarks" / "releases.py")
    results = tmp_path / "RESULTS.md"
    results.write_text("# Results\n\nbefore\n<!-- releases:x -->\nold table\n<!-- /releases:x -->\nafter\n")
    releases.write_results("new table\n", "x", results)
    assert results.read_text() == "# Results\n\nbefore\n<!-- releases:x -->\nnew table\n<!-- /releases:x -->\nafter\n"
    releases.write_results("other", "y", results)  # no markers yet: a section at the end
    assert results.read_text().endswith("after\n\n### The release matrix: y\n\n<!-- releases:y -->\nother\n"
                                        "<!-- /releases:y -->\n")


def test_a_release_without_the_spec_decode_module_tests_its_other_targets(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM 0.34.0's wheel has no ``vllm/v1/spec_decode/utils.py`` (the V1 runner's helpers are
    gone), only Model Runner V2's modules: its V2 targets are tested (here one, with an older
    signature: its interface verdict), the V1 targets are not defined there; a wheel with none of
    the target modules is one line."""
    monkeypatch.setenv("EAGLEFUZZ_WHEELS", str(tmp_path))
    for version, files in (("9.7.0", {"vllm/v1/worker/gpu/input_batch.py": OLDER_V2_KERNELS}), ("9.7.1", {})):
        with zipfile.ZipFile(tmp_path / f"vllm-{version}-py3-none-any.whl", "w") as z:
            for name, text in files.items():
                z.writestr(name, text)
            z.writestr("vllm/envs.py", "")
            z.writestr(f"vllm-{version}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    with pytest.raises(UserError) as exc:  # nothing else to test: the verdict is the error
        implementations_for(parse_source("vllm-release:9.7.0"))
    assert f"{EXPAND_V2} has another interface than the contract's ({EXPAND_V2_DIFF})" in str(exc.value)
    with pytest.raises(UserError, match=r"^vLLM 9\.7\.1: has none of the modules eaglefuzz tests"):
        implementations_for(parse_source("vllm-release:9.7.1"))
