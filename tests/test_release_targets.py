"""The targets newer than the bundled copy, run against vLLM's own code in default CI.

The bundled copy predates ``eagle_step_slot_mapping_metadata_kernel``, ``compute_new_slot_mapping``
and ``copy_and_expand_dflash_inputs_kernel``: their code under test is the pinned vLLM release's
module (``harness/sources/vllm.py: PINNED_RELEASE``), fetched once by the tests themselves and
cached. Each is fuzzed briefly and its regression corpus replayed against that release.
"""

from __future__ import annotations

import pytest

from eaglefuzz.harness.checking.check import check_case
from eaglefuzz.harness.checking.corpus import CORPUS_DIR, load_case
from eaglefuzz.harness.checking.fuzz import fuzz_target
from eaglefuzz.harness.generation.strategies import derive_seed
from eaglefuzz.harness.sources import implementations_for, parse_source
from eaglefuzz.harness.sources import vllm as vsrc
from eaglefuzz.harness.sources.bundled import BundledSource
from eaglefuzz.harness.targets import TARGETS

EXAMPLES = 15


@pytest.fixture(scope="module")
def release_impls(needs):
    """The pinned release's implementations; a skip, saying why, only when pip cannot reach the
    index (a failure under CI)."""
    needs.release_files(vsrc.PINNED_RELEASE)
    return implementations_for(parse_source(f"vllm-release:{vsrc.PINNED_RELEASE}"))


NEWER = sorted(set(TARGETS) - set(BundledSource().load().funcs))


def test_newer_targets_exist():
    assert {"eagle_step_slot_mapping_metadata_kernel", "compute_new_slot_mapping",
            "copy_and_expand_dflash_inputs_kernel"} <= set(NEWER)


@pytest.mark.kernel
@pytest.mark.parametrize("name", NEWER)
def test_newer_target_against_the_pinned_release(name, release_impls, backend, scale, fuzz_seed, warm_oracles):
    """Fuzzed briefly, then its regression corpus replayed: one item, so that one process
    compiles the release's code once (batch_change's compiled path: TorchDynamo and Inductor,
    tens of seconds on a fresh machine)."""
    if name not in release_impls:
        pytest.skip(f"vLLM {vsrc.PINNED_RELEASE} does not define {name}")
    assert release_impls.origin[name].source == f"vLLM {vsrc.PINNED_RELEASE} release wheel"
    stats = fuzz_target(name, release_impls, backend.device, scale, seed=derive_seed(fuzz_seed, name, "release"),
                        examples=EXAMPLES)
    assert not stats.findings, stats.findings[0].report()
    assert stats.examples == EXAMPLES
    files = sorted((CORPUS_DIR / name).glob("*.json"))
    assert files, f"{name} has no corpus under {CORPUS_DIR / name}"
    for f in files:
        finding = check_case(load_case(f), release_impls, backend.device, domain="extended")
        assert finding is None, f"{f}\n{finding.report(saved=f)}"


def test_a_compiled_function_is_warmed_before_any_case_clock_runs():
    """``torch.compile``'d code (vLLM's update_num_computed_tokens_for_batch_change) compiles at
    its first calls; the campaign runs it on two tiny cases first (``warm_compiled``), so that
    compiling never counts against a case's time limit. A plain implementation is not run."""
    from eaglefuzz.harness.checking.check import warm_compiled
    from eaglefuzz.harness.sources import implementations_for
    from eaglefuzz.harness.sources.bundled import BundledSource

    name = "extend_all_queries_by_N"
    bundled = implementations_for(BundledSource(), [name])
    calls = []

    class Compiled:
        _torchdynamo_orig_callable = bundled[name]

        def __call__(self, *args, **kwargs):
            calls.append(1)
            return bundled[name](*args, **kwargs)

    impls = type(bundled)(funcs={name: Compiled()}, origin=bundled.origin, source=bundled.source)
    assert warm_compiled(impls, [name], "cpu") == [name] and len(calls) == 2
    assert warm_compiled(bundled, [name], "cpu") == []
