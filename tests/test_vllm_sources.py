"""vLLM itself as the code under test: release wheels (``--vllm-version``) and the installed
package (``--vllm``), loaded from vLLM's own file without importing vLLM.

Offline tests use a fake release made at test time from the bundled copy with vLLM's imports put
back; the tests marked ``network`` fetch the pinned release once (cached in
``~/.cache/eaglefuzz/wheels``) and are skipped, saying so, only when pip cannot reach the index.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from eaglefuzz.harness.checking.fuzz import fuzz_target
from eaglefuzz.harness.core.errors import UserError
from eaglefuzz.harness.generation.strategies import Scale
from eaglefuzz.harness.sources import implementations_for, parse_source, source_from_options, wheels
from eaglefuzz.harness.sources import vllm as vsrc
from eaglefuzz.harness.sources.bundled import BundledSource
from eaglefuzz.harness.targetkit.interface import InterfaceMismatch
from eaglefuzz.harness.targets import TARGETS

BUNDLED_TARGETS = set(BundledSource().load().funcs)  # what a fake release (the bundled module) defines

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "kernels" / "spec_decode_utils.py"
OUR_IMPORTS = "from .vllm_types import CommonAttentionMetadata, VllmConfig\n"
VLLM_IMPORTS = """\
from vllm.config import VllmConfig
from vllm.platforms import current_platform
from vllm.triton_utils import tl, triton  # noqa: F811 - vLLM's re-export of the real modules
from vllm.utils.math_utils import cdiv  # a stand-in (Model Runner V2's modules import it)
from vllm.utils.torch_utils import async_tensor_h2d  # no stand-in: a placeholder, unused by the targets
from vllm.v1.attention.backends.utils import CommonAttentionMetadata

BACKEND = current_platform.simple_compile_backend
"""
SMALL = Scale(max_requests=3, request_tail=4, max_query_len=6)
PI = "eagle_prepare_inputs_padded_kernel"
RELEASE_TARGETS = ("copy_and_expand_eagle_inputs_kernel", PI,
                   "eagle_prepare_next_token_padded_kernel", "extend_all_queries_by_N")


def fake_module_text() -> str:
    """The bundled copy with vLLM's imports in place of ours (a 0.16-like module)."""
    text = BUNDLED.read_text()
    assert text.count(OUR_IMPORTS) == 1, "kernels/spec_decode_utils.py changed its imports"
    return text.replace(OUR_IMPORTS, VLLM_IMPORTS)


def fake_wheel(folder: Path, version: str, text: str | None = None) -> Path:
    """A small wheel of "vllm" ``version`` holding only the module under test."""
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"vllm-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("vllm/v1/spec_decode/utils.py", text if text is not None else fake_module_text())
        z.writestr(f"vllm-{version}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    return wheel


def no_pip(*args, **kwargs):  # noqa: ANN002, ANN003, ANN201
    raise AssertionError(f"pip was called: {args[0] if args else kwargs}")


def assert_vllm_not_imported() -> None:
    assert not [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]


def fuzz_clean(impls, names, device: str, examples: int) -> None:  # noqa: ANN001
    for name in names:
        stats = fuzz_target(name, impls, device, SMALL, seed=1, examples=examples, shrink=False)
        assert stats.examples >= examples and not stats.findings, (name, [f.report() for f in stats.findings])


# -- fetching: once, then offline ----------------------------------------------------------------


def test_fetch_once_then_from_the_extraction(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLEFUZZ_WHEELS", str(tmp_path / "cache"))
    monkeypatch.delenv("EAGLEFUZZ_KEEP_WHEELS", raising=False)
    calls = []

    def fake_pip(cmd, **kwargs):  # noqa: ANN001, ANN003, ANN202 - stands for `pip download`
        calls.append(cmd)
        assert cmd[1:4] == ["-m", "pip", "download"] and cmd[-1] == "vllm==9.8.7"
        dest = cmd.index("--dest") if "--dest" in cmd else cmd.index("-d")
        fake_wheel(Path(cmd[dest + 1]), "9.8.7")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(wheels.subprocess, "run", fake_pip)
    path = vsrc.release_module_file("9.8.7")
    assert path.read_text() == fake_module_text() and len(calls) == 1
    assert wheels.cached_wheel("vllm", "9.8.7") is None, "the wheel is deleted once extracted"
    manifest = json.loads((wheels.extraction_dir("vllm", "9.8.7") / wheels.MANIFEST).read_text())
    assert manifest["present"] == [vsrc.MODULE]  # the fake lacks the other members: fine
    monkeypatch.setattr(wheels.subprocess, "run", no_pip)
    assert vsrc.release_module_file("9.8.7") == path
    impls = implementations_for(parse_source("vllm-release:9.8.7"))
    assert set(impls.funcs) == BUNDLED_TARGETS and len(calls) == 1


def test_a_wheel_already_in_the_cache_is_used_and_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLEFUZZ_WHEELS", str(tmp_path))
    monkeypatch.setattr(wheels.subprocess, "run", no_pip)
    wheel = fake_wheel(tmp_path, "9.8.6")
    assert vsrc.release_module_file("9.8.6").is_file()
    assert wheel.is_file()


def test_fetch_failures_are_one_line_and_say_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLEFUZZ_WHEELS", str(tmp_path))

    def pip_says(text: str):  # noqa: ANN202
        return lambda cmd, **kw: subprocess.CompletedProcess(cmd, 1, "", text)

    offline = ("WARNING: Retrying ... NewConnectionError('Failed to establish a new connection')\n"
               "ERROR: Could not find a version that satisfies the requirement vllm==9.9.9 (from versions: none)\n"
               "ERROR: No matching distribution found for vllm==9.9.9\n")
    monkeypatch.setattr(wheels.subprocess, "run", pip_says(offline))
    with pytest.raises(wheels.FetchFailed) as exc:
        vsrc.release_module_file("9.9.9")
    assert exc.value.offline and "\n" not in str(exc.value) and "vllm==9.9.9" in str(exc.value)
    unknown = ("ERROR: Could not find a version that satisfies the requirement vllm==9.9.8 "
               "(from versions: 0.1.0, 0.33.0)\nERROR: No matching distribution found for vllm==9.9.8\n")
    monkeypatch.setattr(wheels.subprocess, "run", pip_says(unknown))
    with pytest.raises(wheels.FetchFailed) as exc:
        vsrc.release_module_file("9.9.8")
    assert not exc.value.offline


@pytest.mark.parametrize("bad", ["latest", "0.33.0; rm -rf /", ""])
def test_bad_versions_are_one_line_errors(bad):
    with pytest.raises(UserError, match="--vllm-version|needs a version"):
        parse_source(f"vllm-release:{bad}")


# -- loading without importing vLLM --------------------------------------------------------------


def test_fake_release_loads_and_passes_a_short_fuzz(tmp_path, monkeypatch, backend):
    monkeypatch.setenv("EAGLEFUZZ_WHEELS", str(tmp_path))
    fake_wheel(tmp_path, "9.8.5")
    source = source_from_options({"vllm_version": "9.8.5"})
    assert source.spec == "vllm-release:9.8.5" and source.production
    assert source.cli_args() == ["--vllm-version", "9.8.5"]
    impls = implementations_for(source)
    assert set(impls.funcs) == BUNDLED_TARGETS
    assert impls.origin[PI].source == "vLLM 9.8.5 release wheel"
    assert impls.origin[PI].file == "vllm/v1/spec_decode/utils.py"
    assert any("vllm.utils.torch_utils" in n for n in impls.notes)  # the placeholder is said
    assert not any("vllm.utils.math_utils" in n for n in impls.notes)  # a stand-in
    module = sys.modules["_eaglefuzz_vllm_r9_8_5.v1.spec_decode.utils"]
    assert (module.cdiv(7, 2), module.cdiv(8, 2), module.cdiv(0, 3)) == (4, 4, 0)
    assert module.BACKEND == "inductor"  # vLLM's CPU and CUDA platforms' default
    assert_vllm_not_imported()
    fuzz_clean(impls, sorted(BUNDLED_TARGETS), backend.device, examples=3)


ELSEWHERE = "vllm/v1/sample/elsewhere.py"


def test_a_target_is_taken_from_the_module_its_record_names(tmp_path, monkeypatch):
    """A target whose record names another vLLM module (as the rejection sampler's kernels do:
    vllm/v1/sample/rejection_sampler.py) is fetched, loaded and found there, not in the spec-decode
    module; the bundled copy, a copy of the spec-decode module only, does not define it."""
    name = "extend_all_queries_by_N"
    monkeypatch.setattr(TARGETS[name], "module", ELSEWHERE)
    monkeypatch.setenv("EAGLEFUZZ_WHEELS", str(tmp_path))
    wheel = tmp_path / "vllm-9.8.3-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("vllm/v1/spec_decode/utils.py", fake_module_text())
        z.writestr(ELSEWHERE, "def extend_all_queries_by_N(common_attn_metadata, N, arange, new_slot_mapping):\n"
                              "    return common_attn_metadata\n")
        z.writestr("vllm-9.8.3.dist-info/METADATA", "Metadata-Version: 2.1\nName: vllm\nVersion: 9.8.3\n")
    assert ELSEWHERE in vsrc.members()
    impls = implementations_for(parse_source("vllm-release:9.8.3"))
    assert impls.funcs[name].__code__.co_filename.endswith(ELSEWHERE)
    assert impls.origin[name].file == ELSEWHERE
    assert impls.origin[PI].file == "vllm/v1/spec_decode/utils.py" and PI in impls.funcs
    assert name not in BundledSource().load().funcs


def test_a_module_that_raises_while_loading_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLEFUZZ_WHEELS", str(tmp_path))
    fake_wheel(tmp_path, "9.8.4", fake_module_text() + "\nraise RuntimeError('boom at import')\n")
    with pytest.raises(UserError) as exc:
        implementations_for(parse_source("vllm-release:9.8.4"))
    assert "cannot load" in str(exc.value) and "boom at import" in str(exc.value)
    assert "\n" not in str(exc.value)


def fake_site(tmp_path: Path, version: str, files: Path | None) -> Path:
    """A site folder with an installed "vllm" whose ``import vllm`` fails (as without its
    dependencies or a GPU); its module copied from ``files`` (a release's) or the fake one."""
    site = tmp_path / "site"
    if files is not None:
        shutil.copytree(files / "vllm", site / "vllm")
    else:
        (site / "vllm/v1/spec_decode").mkdir(parents=True)
        (site / vsrc.MODULE).write_text(fake_module_text())
    (site / "vllm/__init__.py").write_text("raise ImportError('vLLM needs its dependencies and a GPU')\n")
    info = site / f"vllm-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    return site


def test_installed_vllm_is_read_not_imported(tmp_path, monkeypatch, backend):
    site = fake_site(tmp_path, "9.8.3", None)
    monkeypatch.syspath_prepend(str(site))
    source = source_from_options({"vllm": True})
    assert source.spec == "vllm" and source.cli_args() == ["--vllm"] and not source.production
    assert "installed vLLM 9.8.3" in source.describe()
    impls = implementations_for(source)
    assert impls.origin[PI].file == str((site / vsrc.MODULE).resolve())
    assert impls.origin[PI].source == "installed vLLM 9.8.3"
    assert_vllm_not_imported()
    fuzz_clean(impls, [PI], backend.device, examples=3)


def test_vllm_not_installed_is_one_line(monkeypatch):
    import importlib.metadata

    def missing(name: str):  # noqa: ANN202
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(UserError) as exc:
        implementations_for(parse_source("vllm"))
    assert "vLLM is not installed" in str(exc.value) and "\n" not in str(exc.value)


def test_two_sources_at_once_are_refused():
    with pytest.raises(UserError, match="choose one"):
        source_from_options({"vllm": True, "vllm_version": "0.33.0"})


# -- the pinned release (network once, then the cache) -------------------------------------------


@pytest.fixture(scope="session")
def pinned_files(needs) -> Path:
    """The pinned release's files; a skip, saying why, only when pip cannot reach the index (a
    failure under CI)."""
    return needs.release_files(vsrc.PINNED_RELEASE)


@pytest.mark.kernel
def test_pinned_release_passes_a_short_fuzz(pinned_files, backend):
    impls = implementations_for(parse_source(f"vllm-release:{vsrc.PINNED_RELEASE}"))
    assert set(RELEASE_TARGETS) <= set(impls.funcs)
    assert "create_vllm_config_for_draft_model" not in impls.funcs  # gone since 0.19
    assert any("does not define create_vllm_config_for_draft_model" in n for n in impls.notes)
    module = sys.modules[f"_eaglefuzz_vllm_r{vsrc.PINNED_RELEASE.replace('.', '_')}.v1.spec_decode.utils"]
    dispatcher = type(module._eagle_prepare_inputs_padded)
    assert dispatcher.__module__.endswith("model_executor.warmup.jit_warmup_triton_helper")  # vLLM's own
    assert_vllm_not_imported()
    fuzz_clean(impls, RELEASE_TARGETS, backend.device, examples=6)


def test_pinned_release_runs_through_vllms_own_dispatcher(pinned_files, backend):
    import torch

    implementations_for(parse_source(f"vllm-release:{vsrc.PINNED_RELEASE}"))
    module = sys.modules[f"_eaglefuzz_vllm_r{vsrc.PINNED_RELEASE.replace('.', '_')}.v1.spec_decode.utils"]
    i32 = dict(dtype=torch.int32, device=backend.device)
    out, rejected = torch.full((3,), -7, **i32), torch.full((3,), -7, **i32)
    module._eagle_prepare_inputs_padded(torch.tensor([1, 3, 3], **i32), torch.tensor([2, 1, 1], **i32),
                                        torch.tensor([0, 2, 6, 7], **i32), out, rejected, 3)
    assert out.tolist() == [1, 3, 6] and rejected.tolist() == [0, 2, 0]


def test_installed_copy_of_the_pinned_release(pinned_files, tmp_path, monkeypatch):
    site = fake_site(tmp_path, vsrc.PINNED_RELEASE, pinned_files)
    monkeypatch.syspath_prepend(str(site))
    impls = implementations_for(parse_source("vllm"))
    assert set(RELEASE_TARGETS) <= set(impls.funcs)
    assert impls.source.describe().startswith(f"installed vLLM {vsrc.PINNED_RELEASE} (")
    assert_vllm_not_imported()


def test_list_shows_every_function_of_the_release(pinned_files, capsys):
    from eaglefuzz.harness import cli

    with pytest.raises(SystemExit) as exc:
        cli.main(["list", "--vllm-version", vsrc.PINNED_RELEASE])
    out = capsys.readouterr().out
    assert exc.value.code == 0
    defs = vsrc.module_definitions(pinned_files / vsrc.MODULE)
    kernels = [d.name for d in defs if d.kind == "triton kernel"]
    assert len(kernels) >= 5 and all(k in out for k in kernels)
    assert all(d.name in out for d in defs)
    listing = out.split(" defines (every top-level function):")[1].splitlines()
    for d in defs:
        line = next(ln for ln in listing if ln.split()[:1] == [d.name])
        assert line.endswith("target" if d.name in TARGETS else "private helper" if d.private else "NO TARGET")
    assert "stand-ins model (kernels/vllm_types.py): CommonAttentionMetadata fields query_start_loc" in out


def test_interface_mismatch_of_an_older_release_is_one_line(tmp_path, monkeypatch):
    """A kernel without the rejected-count output (0.12/0.13's) and no variant for it."""
    text = fake_module_text()
    old = "    num_rejected_tokens_gpu_ptr,  # [num_reqs] (output)\n"
    assert old in text
    text = text.replace(old, "").replace("    tl.store(num_rejected_tokens_gpu_ptr + req_idx, num_rejected_tokens)\n", "")
    monkeypatch.setenv("EAGLEFUZZ_WHEELS", str(tmp_path))
    fake_wheel(tmp_path, "9.8.2", text.replace("num_reqs,  # tl.int32\n):\n    \"\"\"\n    Fused kernel for Eagle prepare_input_padded",
                                               "num_reqs,  # tl.int32\n    extra_flag,\n):\n    \"\"\"\n    Fused kernel for Eagle prepare_input_padded"))
    impls = implementations_for(parse_source("vllm-release:9.8.2"))
    verdict = impls.untested[PI]  # that target's verdict; the module's other targets are tested
    assert "missing num_rejected_tokens_gpu_ptr" in verdict and "extra extra_flag" in verdict
    assert "\n" not in verdict and PI not in impls and "eagle_prepare_next_token_padded_kernel" in impls
    with pytest.raises(InterfaceMismatch) as exc:  # nothing else to test: the verdict is the error
        implementations_for(parse_source("vllm-release:9.8.2"), [PI])
    assert str(exc.value) == verdict


# -- older interfaces as variants ----------------------------------------------------------------

REJECTED_PARAM = "    num_rejected_tokens_gpu_ptr,  # [num_reqs] (output)\n"
REJECTED_STORE = "    tl.store(num_rejected_tokens_gpu_ptr + req_idx, num_rejected_tokens)\n"


def without_rejected_output(text: str) -> str:
    """The module with vLLM 0.12/0.13's ``eagle_prepare_inputs_padded_kernel`` (no
    rejected-count output)."""
    assert text.count(REJECTED_PARAM) == 1 and text.count(REJECTED_STORE) == 1
    return text.replace(REJECTED_PARAM, "").replace(REJECTED_STORE, "")


def test_older_interface_is_tested_as_a_variant(tmp_path, monkeypatch, backend):
    monkeypatch.setenv("EAGLEFUZZ_WHEELS", str(tmp_path))
    fake_wheel(tmp_path, "9.8.1", without_rejected_output(fake_module_text()))
    impls = implementations_for(parse_source("vllm-release:9.8.1"))
    assert TARGETS[PI].variant_of(impls[PI]) == "without num_rejected_tokens"
    assert impls.origin[PI].variant == "without num_rejected_tokens"
    assert impls.origin[PI].describe().endswith("[variant: without num_rejected_tokens]")
    assert any("tested as variant 'without num_rejected_tokens'" in n and "no num_rejected_tokens output" in n
               for n in impls.notes)
    fuzz_clean(impls, [PI], backend.device, examples=4)


def test_a_bug_in_a_variant_is_found(tmp_path, monkeypatch, backend):
    text = without_rejected_output(fake_module_text())
    good = "    index_to_sample = q_last_tok_idx - num_rejected_tokens\n"
    assert text.count(good) == 1
    text = text.replace(good, "    index_to_sample = q_last_tok_idx - num_rejected_tokens + (req_idx == 1)\n")
    monkeypatch.setenv("EAGLEFUZZ_WHEELS", str(tmp_path))
    fake_wheel(tmp_path, "9.8.0", text)
    impls = implementations_for(parse_source("vllm-release:9.8.0"))
    stats = fuzz_target(PI, impls, backend.device, SMALL, seed=1, examples=40, shrink=False)
    assert stats.findings, "an off-by-one in request 1 of the variant went unnoticed"
    assert {d.array for d in stats.findings[0].outcome.differences} == {"token_indices_to_sample"}


# -- a real installed vLLM (tox -e vllm) ---------------------------------------------------------


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                    reason="vLLM is not installed here (not a dependency of eaglefuzz; tox -e vllm installs it)")
def test_the_installed_vllm_is_found_and_loaded_without_importing_it():
    import importlib.metadata

    if any(m == "vllm" or m.startswith("vllm.") for m in sys.modules):
        pytest.skip("vLLM was imported by an earlier test of this session")
    source = parse_source("vllm")
    impls = implementations_for(source)
    assert impls.funcs and source.describe().startswith(f"installed vLLM {importlib.metadata.version('vllm')} (")
    assert_vllm_not_imported()


def test_a_class_derived_from_a_placeholder_loads_but_cannot_be_made(tmp_path):
    """Model Runner V2's speculator derives from classes eaglefuzz has no stand-in for
    (``class TargetDependentARSpeculator(DraftModelSpeculator)``): the module loads, its kernels
    are there, and only making such an object fails, naming the placeholder."""
    from eaglefuzz.harness.sources.vllm_shims import load_module

    module = "vllm/v1/worker/gpu/spec_decode/fake/speculator.py"
    (tmp_path / module).parent.mkdir(parents=True)
    (tmp_path / module).write_text(
        "from vllm.v1.worker.gpu.spec_decode.speculator import DraftModelSpeculator\n"
        "from vllm.v1.attention.backends.utils import PAD_SLOT_ID\n\n\n"
        "class Speculator(DraftModelSpeculator):\n    PAD = PAD_SLOT_ID\n\n\n"
        "def kernel():\n    return Speculator.PAD\n"
    )
    loaded, notes = load_module(tmp_path, "derived", module)
    assert loaded.kernel() == -1
    assert any("vllm.v1.worker.gpu.spec_decode.speculator" in n for n in notes)
    with pytest.raises(ImportError, match="DraftModelSpeculator is not available.*Speculator derives from it"):
        loaded.Speculator()
