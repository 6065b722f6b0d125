"""Domain tiers: the extended tier, edge divergences, their exit code and their corpus files.

The headline case: a fork-style kernel that differs from the reference only on empty requests
(a ``query_start_loc`` that repeats, which vLLM never produces) is clean in the production
tier and reported as an edge divergence, apart from contract violations, in the extended tier.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import seed as hseed

from eaglefuzz.harness import cli
from eaglefuzz.harness.checking.check import check_case
from eaglefuzz.harness.checking.corpus import CORPUS_DIR, encode, load_entry, save_case
from eaglefuzz.harness.checking.domains import shrink_candidates_for
from eaglefuzz.harness.checking.fuzz import bulk_fuzz_target, fuzz_target
from eaglefuzz.harness.core.case import Case
from eaglefuzz.harness.core.errors import UserError
from eaglefuzz.harness.core.exitcodes import (
    EXIT_EDGE,
    EXIT_FINDINGS,
    EXIT_INTERRUPTED,
    EXIT_OK,
    findings_exit,
)
from eaglefuzz.harness.generation.strategies import Scale, derive_seed
from eaglefuzz.harness.sources import implementations_for
from eaglefuzz.harness.sources.bundled import BundledSource
from eaglefuzz.harness.sources.file import FileSource
from eaglefuzz.harness.targetkit.base import TritonTarget
from eaglefuzz.harness.targets import TARGETS, ContractViolation

PI = "eagle_prepare_inputs_padded_kernel"
SMALL = Scale(max_requests=6, request_tail=8, max_query_len=16, max_programs=64)
BULK, DRAWN = 90, 90

FORK_EDIT = (
    """\
    index_to_sample = q_last_tok_idx - num_rejected_tokens
""",
    """\
    # fork: an empty request (no token) samples at its own start, not at the previous
    # request's last token
    q_first_tok_idx = tl.load(query_start_loc_gpu_ptr + req_idx)
    q_last_tok_idx = tl.where(q_last_tok_idx < q_first_tok_idx, q_first_tok_idx, q_last_tok_idx)
    index_to_sample = q_last_tok_idx - num_rejected_tokens
""",
)


@pytest.fixture(scope="module")
def fork(mutants, tmp_path_factory) -> Path:
    """The fork as a ``--kernels`` file: the production kernel with :data:`FORK_EDIT`."""
    m = mutants.Mutant("fork_empty_request_own_start", PI,
                       "FORK: an empty request samples at its own start (qs), not at qs - 1", (FORK_EDIT,))
    return mutants.write(m, tmp_path_factory.mktemp("forks"))


def _empty_request_case() -> Case:
    return Case(PI, {
        "cu_num_draft_tokens": np.array([0, 0], dtype=np.int32),
        "valid_sampled_tokens_count": np.array([1, 1], dtype=np.int32),
        "query_start_loc": np.array([0, 0, 2], dtype=np.int32),
    }, {"num_reqs": 2}, {"grid_size": None})


# -- the fork ---------------------------------------------------------------------------


@pytest.mark.kernel
def test_fork_is_clean_in_production_and_an_edge_divergence_in_extended(fork, backend, warm_oracles, monkeypatch):
    monkeypatch.setenv("EAGLEFUZZ_SHRINK_BUDGET", "600")  # shrunk to the end on any machine (asserted below)
    impls = implementations_for(FileSource(fork))
    # Production: fuzzing and the whole production corpus of the kernel find nothing.
    stats = bulk_fuzz_target(PI, impls, backend.device, SMALL, seed=derive_seed(0, "fork"), examples=30)
    assert not stats.findings, stats.findings[0].report()
    assert stats.tiers == {"production": 30}
    for f in sorted((CORPUS_DIR / PI).glob("*.json")):
        entry = load_entry(f)
        assert check_case(entry.case, impls, backend.device, domain=entry.tier) is None, f
    # Extended: an edge divergence, shrunk, with its tier; not a contract violation.
    stats = bulk_fuzz_target(PI, impls, backend.device, SMALL, seed=derive_seed(0, "fork"), examples=40,
                             domain="extended")
    assert [f.kind for f in stats.findings] == ["edge divergence"], [f.report() for f in stats.findings]
    (finding,) = stats.findings
    assert finding.tier == "extended" and finding.is_edge and not stats.contract_findings
    assert "empty_request" in TARGETS[PI].extended_features_of(finding.case)
    assert np.any(np.diff(finding.case.arrays["query_start_loc"]) == 0), "the shrunk case has an empty request"
    assert finding.case.scalars["num_reqs"] <= 2 and not finding.shrink, f"not shrunk: {finding.case}"
    assert "tier: extended" in finding.report() and "edges: " in finding.report()
    assert stats.searched == ["production", "extended"] and stats.tiers["production"] >= 40, \
        "the production tier is searched in full first"
    # The same case is no finding against the reference: the oracles model it there.
    bundled = implementations_for(BundledSource(), [PI])
    assert check_case(finding.case, bundled, backend.device, domain="extended") is None
    # A hand-written empty request: the fork differs exactly there.
    mine = check_case(_empty_request_case(), impls, backend.device, domain="extended")
    assert mine is not None and [d.array for d in mine.outcome.differences] == ["token_indices_to_sample"]



@pytest.mark.kernel
def test_the_extended_tier_alone_draws_the_edges_of_a_default_run(fork, backend, warm_oracles):
    """``fuzz_target(tiers=("extended",))`` (the seeded-bug hunts of extended-tier bugs) is the
    second half of a run of the extended domain: the same edge divergence, on the same case,
    without the production tier's examples before it."""
    impls = implementations_for(FileSource(fork))
    args = (PI, impls, backend.device, SMALL)
    kw = {"seed": derive_seed(0, "fork", "stop"), "examples": 30, "shrink": False}
    alone = fuzz_target(*args, **kw, tiers=("extended",))
    full = fuzz_target(*args, **kw, domain="extended")
    assert [f.kind for f in alone.findings] == [f.kind for f in full.findings] == ["edge divergence"]
    assert alone.searched == ["extended"] and full.searched == ["production", "extended"]
    assert full.examples == 30 + alone.examples, (full.examples, alone.examples)
    assert encode(alone.findings[0].case) == encode(full.findings[0].case)


CE = "copy_and_expand_eagle_inputs_kernel"


def _padding_in_a_second_block(padding_id: int) -> Case:
    """One draft-model request of 300 tokens with 100 rejected: vLLM's launch takes two blocks of
    256 slots, and the rejected slots 200-300 fall in the second."""
    from eaglefuzz.harness.targets.copy_and_expand_eagle_inputs_kernel.layout import build

    return build([300], [100], shift=False, P=1, token_ids=np.arange(1, 301, dtype=np.int32),
                 positions=np.arange(300, dtype=np.int64), next_ids=np.array([7], dtype=np.int32),
                 padding_id=padding_id, parallel_id=0, launch={"block_size_tokens": None, "num_blocks": None})


@pytest.mark.kernel
def test_padding_id_written_in_the_first_block_only_is_an_edge_divergence(mutants, tmp_path, backend, warm_oracles):
    """Issue 22: a variant that writes ``padding_token_id`` only in the first token block is
    identical whenever the id is 0, vLLM's literal (docs/CONTRACT.md §1.2): a default
    (production) run finds nothing, in Hypothesis and bulk mode alike; a non-zero padding id
    is the extended tier, where it is an edge divergence."""
    impls = implementations_for(FileSource(mutants.write(mutants.BY_NAME["ce_padding_id_first_block_only"], tmp_path)))
    stats = fuzz_target(CE, impls, backend.device, SMALL, seed=derive_seed(0, "issue-22"), examples=40, shrink=False)
    assert not stats.findings, stats.findings[0].report()
    stats = bulk_fuzz_target(CE, impls, backend.device, SMALL, seed=derive_seed(0, "issue-22"), examples=40)
    assert not stats.findings, stats.findings[0].report()
    assert check_case(_padding_in_a_second_block(0), impls, backend.device) is None
    case = _padding_in_a_second_block(329411)
    with pytest.raises(ContractViolation, match="padding_token_id"):
        TARGETS[CE].validate(case)
    finding = check_case(case, impls, backend.device, domain="extended")
    assert finding is not None and finding.kind == "edge divergence" and finding.tier == "extended"
    assert {d.array for d in finding.outcome.differences} == {"out_input_ids"}


def _cli(capsys, *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        cli.main(list(args))
    return exc.value.code, capsys.readouterr().out


@pytest.mark.kernel
def test_exit_codes_and_the_corpus_file_of_an_edge_divergence(fork, backend, tmp_path, capsys, warm_oracles):
    be = "cuda" if backend.compiled else "interpreter"
    base = ["fuzz", "--kernels", str(fork), "--kernel", PI, "--mode", "bulk", "--examples", "12", "--json",
            "--no-isolate", "--backend", be, "--corpus", str(tmp_path)]
    code, out = _cli(capsys, *base, "--domain", "production")
    assert code == EXIT_OK, out
    assert json.loads(out)["targets"][PI]["examples"] == 12
    code, out = _cli(capsys, *base)  # the default: the production tier, then the edges
    assert code == EXIT_EDGE, out
    report = json.loads(out)
    assert report["domain"] == "extended"
    assert report["targets"][PI]["tiers_searched"] == ["production", "extended"]
    t = report["targets"][PI]
    assert t["findings"] == [] and len(t["edge_divergences"]) == 1
    (edge,) = t["edge_divergences"]
    assert edge["kind"] == "edge divergence" and edge["tier"] == "extended"
    entry = load_entry(edge["file"])
    assert entry.schema == 2 and entry.tier == "extended"
    assert json.loads(Path(edge["file"]).read_text())["tier"] == "extended"
    # Replayed: still an edge divergence against the fork, nothing against the reference.
    code, out = _cli(capsys, "replay", edge["file"], "--kernels", str(fork), "--no-isolate", "--backend", be)
    assert code == EXIT_EDGE and "edge divergence" in out, out
    code, out = _cli(capsys, "replay", edge["file"], "--no-isolate", "--backend", be)
    assert code == EXIT_OK, out


def test_findings_exit():
    edge = "edge divergence"
    assert EXIT_EDGE == 4
    assert findings_exit([]) == EXIT_OK
    assert findings_exit([], None, True) == EXIT_INTERRUPTED
    assert findings_exit([edge]) == EXIT_EDGE
    assert findings_exit([edge, "difference"]) == EXIT_FINDINGS
    assert findings_exit(["crash"], None, True) == EXIT_FINDINGS
    assert findings_exit(["oracle disagreement"]) == EXIT_FINDINGS


# -- tiers and the corpus ---------------------------------------------------------------


def test_tier_of_and_the_domain_of_check_case():
    target = TARGETS[PI]
    case = _empty_request_case()
    assert target.tier_of(case, "extended") == "extended"
    with pytest.raises(ContractViolation):
        target.tier_of(case)  # the production domain refuses it
    with pytest.raises(ContractViolation):
        target.validate(case)
    target.validate(case, "extended")
    plain = case.replace(arrays={"query_start_loc": np.array([0, 1, 2], dtype=np.int32)})
    assert target.tier_of(plain, "extended") == "production"
    beyond = case.replace(arrays={"query_start_loc": np.array([0, 2, 1], dtype=np.int32)})
    with pytest.raises(ContractViolation, match="never decrease"):
        target.tier_of(beyond, "extended")


def test_schema_1_files_load_as_production():
    old = [p for p in sorted(CORPUS_DIR.rglob("*.json")) if json.loads(p.read_text())["schema"] == 1]
    assert old, "the seed corpus is schema 1"
    for p in old[:20]:
        entry = load_entry(p)
        assert entry.schema == 1 and entry.tier == "production"


def test_the_tier_is_stored_and_checked(tmp_path):
    case = _empty_request_case()
    path = save_case(case, tmp_path)
    doc = json.loads(path.read_text())
    assert doc["schema"] == 2 and doc["tier"] == "extended"
    entry = load_entry(path)
    assert entry.tier == "extended" and entry.case == case
    # The name does not depend on the tier or the schema.
    assert path.stem in {p.stem for p in tmp_path.rglob("*.json")}
    # The same case claimed as production, or written as schema 1: one line naming the rule.
    for text in (encode(case, tier="production"), encode(case, schema=1)):
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        with pytest.raises(UserError) as info:
            load_entry(bad)
        msg = str(info.value)
        assert "\n" not in msg and "arrays.query_start_loc" in msg and "increase strictly" in msg, msg
    prod = _empty_request_case().replace(arrays={"query_start_loc": np.array([0, 1, 2], dtype=np.int32)})
    assert json.loads(save_case(prod, tmp_path).read_text())["tier"] == "production"


# -- the extended tier of every target, without kernels ----------------------------------


EXTENDED = sorted(n for n, t in TARGETS.items() if t.extended_features)
"""The targets with an extended tier (a target without one has its production tier only)."""


def test_the_original_targets_have_an_extended_tier():
    assert {"copy_and_expand_eagle_inputs_kernel", PI, "eagle_prepare_next_token_padded_kernel",
            "extend_all_queries_by_N", "create_vllm_config_for_draft_model"} <= set(EXTENDED)


@pytest.mark.parametrize("name", EXTENDED)
def test_extended_generators_reach_every_edge(name, fuzz_seed, warm_oracles):
    target = TARGETS[name]
    reached: set[str] = set()
    rng = np.random.default_rng(derive_seed(fuzz_seed, "edges-bulk", name))
    for i in range(BULK):
        case = target.extended_case(rng, SMALL)
        if target.tier_of(case, "extended") == "extended":
            reached |= target.extended_features_of(case)
            if i < BULK // 3:
                assert target.oracle_check(case) == [], case
    missed = sorted(set(target.extended_features) - reached)
    assert not missed, f"{BULK} bulk extended cases of {name} never reach {missed}"

    drawn: set[str] = set()

    @settings(max_examples=DRAWN, phases=[Phase.generate], database=None, deadline=None)
    @hseed(derive_seed(fuzz_seed, "edges-strategy", name))
    @given(target.extended_strategy(SMALL))
    def collect(case: Case) -> None:
        if target.tier_of(case, "extended") == "extended":
            drawn.update(target.extended_features_of(case))

    collect()
    missed = sorted(set(target.extended_features) - drawn)
    assert not missed, f"{DRAWN} extended strategy cases of {name} never reach {missed}"
    assert reached <= set(target.extended_features) and drawn <= set(target.extended_features)


@pytest.mark.parametrize("mode", ["hypothesis", "bulk"])
@pytest.mark.parametrize("name", EXTENDED)
def test_a_run_of_the_extended_domain_checks_production_first_then_the_edges(name, mode, fuzz_seed, monkeypatch):
    """``--domain extended --examples 10`` (the default domain) checks 10 examples of the
    production tier, the very cases of ``--domain production --examples 10``, and then 10 of
    the extended tier's strategy (edge cases, which no strategy of the production tier draws).
    No kernel runs: every check passes."""
    from eaglefuzz.harness.checking import fuzz
    from eaglefuzz.harness.generation.strategies import INTERPRETER_SCALE
    from eaglefuzz.harness.sources import Implementations

    checked: list[Case] = []
    monkeypatch.setattr(fuzz, "check_case", lambda case, *a, **k: checked.append(case))
    run = fuzz.fuzz_target if mode == "hypothesis" else fuzz.bulk_fuzz_target
    stats = run(name, Implementations({}, {}), "cpu", INTERPRETER_SCALE, seed=fuzz_seed, examples=10,
                domain="extended")
    both = [encode(c) for c in checked]
    checked.clear()
    production = run(name, Implementations({}, {}), "cpu", INTERPRETER_SCALE, seed=fuzz_seed, examples=10)
    assert stats.examples == 20 and stats.searched == ["production", "extended"], (stats.examples, stats.searched)
    assert production.examples == 10 and production.searched == ["production"]
    assert both[:10] == [encode(c) for c in checked], "the production tier first, its cases as in a production run"
    assert stats.tiers.get("extended", 0) >= 1 and stats.edges, stats.tiers
    assert stats.tiers.get("production", 0) >= 10, stats.tiers


@pytest.mark.parametrize("name", EXTENDED)
def test_shrink_moves_apply_to_edge_cases(name):
    target = TARGETS[name]
    rng = np.random.default_rng(derive_seed(0, "edges-shrink", name))
    for _ in range(20):
        case = target.extended_case(rng, SMALL)
        if target.tier_of(case, "extended") != "extended":
            continue
        moves = list(target.shrink_candidates(case)) + list(target.extended_shrink_candidates(case))
        assert len(list(shrink_candidates_for(target, case, "extended"))) == len(moves)


@pytest.mark.kernel
@pytest.mark.parametrize("name", EXTENDED)
def test_the_reference_agrees_with_the_oracles_in_the_extended_tier(name, backend, warm_oracles, needs):
    """The production code is the reference (the bundled copy; for a target it lacks, the pinned
    vLLM release's module): the oracles model it at the edges too."""
    target = TARGETS[name]
    if name in BundledSource().load([name]).funcs:
        impls = implementations_for(BundledSource(), [name])
    else:
        from eaglefuzz.harness.sources import parse_source
        from eaglefuzz.harness.sources.vllm import PINNED_RELEASE

        needs.release_files(PINNED_RELEASE)
        impls = implementations_for(parse_source(f"vllm-release:{PINNED_RELEASE}"), [name])
    rng = np.random.default_rng(derive_seed(0, "edges-reference", name))
    n = 12 if isinstance(target, TritonTarget) else 60
    for _ in range(n):
        case = target.extended_case(rng, SMALL)
        finding = check_case(case, impls, backend.device, domain="extended")
        assert finding is None, finding.report()


def test_the_default_domain_is_both_tiers_but_in_device_mode():
    """`eaglefuzz fuzz` with no --domain checks the production tier, then the extended tier;
    device mode, which draws production cases only, checks the production tier."""
    from eaglefuzz.harness.checking.domains import default_domain, tiers_of

    assert [tiers_of(default_domain(m)) for m in ("hypothesis", "bulk", "device")] == [
        ("production", "extended"), ("production", "extended"), ("production",)]
