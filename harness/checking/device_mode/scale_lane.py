"""Production-scale cases in a process of their own: a fault cannot poison the campaign.

A production-scale case (:mod:`~...targetkit.scale`: tables past ``2**31`` elements) is where
vLLM's int32 flat indices wrap (PR #48055): an address before the table, which on a GPU may be
``CUDA error: an illegal memory access``, after which every launch of the process fails. So
``--mode device`` runs such cases in a *lane*: a child process (started at the first scale case
of a target, kept for the next ones) that draws the case from its seed with NumPy, runs it on
the device as the device campaign runs its cases (the torch oracle, the guarded buffers of
:class:`~...targetkit.device.Arenas`, whose poison before a large table catches a wrapped read
the same way every time), and answers with its verdict. A difference is confirmed in the lane
by the ordinary check (:func:`~..check.check_case`: the NumPy and Numba oracles); a target checked
by its record (Model Runner V2's verification) checks a scale case by its own
:meth:`~...targetkit.device.DeviceTarget.scale_check` instead (a torch oracle a block of rows at a
time on the device, the NumPy and Numba oracles on the rows that matter: no host copy of a
table of 8 GiB). A fault ends
the lane: the campaign records a ``crash`` finding of that case and starts a new lane for the
next one; a lane that does not answer within its time limit is killed (a ``hang``).
A case that does not fit in the device's free memory (another lane of the GPU holds it) is not
checked, never a finding: the lane says so (``unfit``), the campaign counts it and its report
says how many.

The campaign (:mod:`.engine`) builds the same case from the same seed with NumPy alone (no
device work in its own process) for its report, and minimises a finding through the lane
(:func:`minimise`): the target's :meth:`~...targetkit.device.DeviceTarget.scale_minimal` cases
(one row past ``2**31``, plain values), the first that still fails kept and confirmed.

A target whose device module draws production-scale *batches*
(:attr:`~...targetkit.device.DeviceTarget.scale_batches`: ``draw_batch(..., scale=True)``) has
its scale examples checked as ordinary batches are (:func:`~.batch_run.check_batch`: the batched
torch oracle, the guarded buffers, a launch per case, one comparison), in the lane: each example
:data:`SCALE_BATCH` cases drawn on the device over tables past ``2**31`` elements that
:data:`SCALE_TABLE_EPOCH` examples share, so that the tables' draw and check are paid once for
many cases. A failing batch is minimised to its vocabulary's minimal cases
(:meth:`~...targetkit.device.DeviceTarget.scale_minimal_of`, drawn with NumPy alone); where
none fails, the case that failed is found (after a fault, by a fresh lane launching the batch a
case at a time) and written to files by the lane (:func:`save_case`: tables of gigabytes do not
cross a pipe), which the campaign maps (:func:`load_case`).

    python -m eaglefuzz.harness.checking.device_mode.scale_lane    # the lane itself (stdin: requests)
"""

from __future__ import annotations

import base64
import functools
import json
import os
import pickle
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...core.case import Case
from ...core.lazy import seal
from ...core.mps import alone
from ...generation.strategies import derive_seed
from ...targetkit.scale import flat_limit

START_S = 600.0
"""How long a lane may take to start (import torch, load the code under test, a CUDA context)."""
CASE_S = 900.0
"""How long one scale case may take in the lane (drawing, the device check, the confirmation by
the NumPy and Numba oracles: seconds to a minute on a GPU host) before it is a hang."""


SCALE_BATCH = 256
"""Production-scale cases per scale example of a target with scale batches, on a GPU: the
batch's one check of its shared tables (every element of each against its source, and the band
of poison before it: about 50 GB read for two tables of 8.5 GiB, some 12 ms at an H200's
bandwidth) is shared by them, some 50 us a case, against a kernel that reads a few elements a
row (0.06 ms a case, benchmarks/RESULTS.md): such a kernel's batches are larger
(:func:`scale_batch_size`)."""
CPU_SCALE_BATCH = 4
"""The same on the CPU (the interpreter, a lowered flat limit: tests)."""


def scale_batch_size(dt: Any, device: str) -> int:
    """Cases per scale batch of device target ``dt`` on ``device``: :data:`CPU_SCALE_BATCH` on
    the CPU, else its own (:attr:`~...targetkit.device.DeviceTarget.scale_batch_size`) or
    :data:`SCALE_BATCH`."""
    return CPU_SCALE_BATCH if device == "cpu" else dt.scale_batch_size or SCALE_BATCH
SCALE_TABLE_EPOCH = 4
"""Consecutive scale examples of a target whose batches share one set of tables (drawn on the
device, past ``2**31`` elements each: a second or two to draw and guard)."""


def scale_batch_of(dt: Any, seed: int, example: int, epoch: int, k: int, device: str) -> Any:
    """Scale example ``example``'s batch of ``k`` production-scale cases (``draw_batch(...,
    scale=True)``), over the tables of scale epoch ``epoch``: the same batch whoever asks (the
    lane, a fresh lane locating a fault, the benchmark's kernel alone)."""
    tables = derive_seed(seed, dt.name, "scale tables", epoch)
    return dt.draw_batch((tables, derive_seed(seed, dt.name, "scale batch", example)), device, k, scale=True)


def batch_minimal(name: str, seed: int, epoch: int, minimal: int) -> Case:
    """The ``minimal``-th minimal case of scale epoch ``epoch``'s vocabulary (NumPy alone)."""
    return _batch_minimal(name, seed, epoch, flat_limit())[minimal]


def batch_minimal_count(name: str, seed: int, epoch: int) -> int:
    """How many minimal cases scale epoch ``epoch``'s vocabulary has."""
    return len(_batch_minimal(name, seed, epoch, flat_limit()))


@functools.lru_cache(maxsize=1)
def _batch_minimal(name: str, seed: int, epoch: int, limit: int) -> list[Case]:
    from . import device_targets

    dt = device_targets()[name]
    V = dt.scale_batch_vocab(derive_seed(seed, name, "scale tables", epoch))
    return [_sealed(c) for c in dt.scale_minimal_of(V)]


def save_case(case: Case, directory: str) -> None:
    """``case`` written to ``directory``: an ``.npy`` file per array, the rest pickled."""
    d = Path(directory)
    for n, a in case.arrays.items():
        np.save(d / f"{n}.npy", np.ascontiguousarray(a), allow_pickle=False)
    (d / "case.pickle").write_bytes(pickle.dumps({"kernel": case.kernel, "arrays": list(case.arrays),
                                                  "scalars": dict(case.scalars), "launch": dict(case.launch),
                                                  "note": case.note}))


def load_case(directory: str, keep: bool = False) -> Case:
    """The case :func:`save_case` wrote to ``directory``, its arrays mapped read-only; the
    directory is removed unless ``keep`` (the mappings keep the data until they go)."""
    d = Path(directory)
    meta = pickle.loads((d / "case.pickle").read_bytes())  # noqa: S301 - written by our own lane, just now
    arrays = {n: np.load(d / f"{n}.npy", mmap_mode="r", allow_pickle=False) for n in meta["arrays"]}
    if not keep:
        shutil.rmtree(d, ignore_errors=True)
    return Case(meta["kernel"], arrays, meta["scalars"], meta["launch"], meta["note"])


def scale_rng(seed: int, name: str, example: int) -> np.random.Generator:
    """The generator a scale case of example ``example`` is drawn with (lane and campaign alike)."""
    return np.random.default_rng(derive_seed(seed, name, "scale", example))


def scale_case(name: str, seed: int, example: int, minimal: int | None = None) -> Case:
    """Example ``example``'s scale case of ``name`` (NumPy alone), or its ``minimal``-th minimal
    case (:meth:`~...targetkit.device.DeviceTarget.scale_minimal`). The last example's cases
    are kept (:func:`forget_scale_cases`): a case is checked, minimised, confirmed and reported
    by its seed, and drawing one writes up to gigabytes on the host (a table of ones). A caller
    does not write into the arrays."""
    key = (name, seed, example, flat_limit())  # the limit: a test's knob
    return _drawn(*key) if minimal is None else _minimal(*key)[minimal]


def scale_minimal_count(name: str, seed: int, example: int) -> int:
    """How many minimal cases example ``example``'s scale case of ``name`` has."""
    return len(_minimal(name, seed, example, flat_limit()))


@functools.lru_cache(maxsize=1)
def _drawn(name: str, seed: int, example: int, limit: int) -> Case:
    from . import device_targets

    return _sealed(device_targets()[name].scale_case(scale_rng(seed, name, example)))


@functools.lru_cache(maxsize=1)
def _minimal(name: str, seed: int, example: int, limit: int) -> list[Case]:
    from . import device_targets

    return [_sealed(c) for c in device_targets()[name].scale_minimal(_drawn(name, seed, example, limit))]


def _sealed(case: Case) -> Case:
    """``case`` with its lazily paged tables sealed (:func:`~...core.lazy.seal`): what is made
    of them is known before anything reads them."""
    for a in case.arrays.values():
        seal(a)
    return case


def forget_scale_cases() -> None:
    """Let the kept scale cases go (a target's scale examples are done)."""
    _drawn.cache_clear()
    _minimal.cache_clear()
    _batch_minimal.cache_clear()


@dataclass
class Verdict:
    """What the lane said of one case: ``bad`` elements not as expected on the device,
    ``tokens`` output elements verified, ``features`` reached, ``crash`` (its message) and
    whether it was ``fatal`` (the lane is gone), ``hang``, and the ordinary check's ``outcome``
    when the lane confirmed it (``None``: not asked, or the check found nothing); ``unfit``:
    why it was not checked."""

    bad: int = 0
    tokens: int = 0
    features: list[str] = field(default_factory=list)
    crash: str | None = None
    fatal: bool = False
    hang: str | None = None
    outcome: Any = None
    confirmed: bool = False
    seconds: float = 0.0
    examples: int = 1
    """Cases checked (a scale batch's launched cases)."""
    case: int | None = None
    """A scale batch with a difference: its first case that differs alone (``None``: none does)."""
    unfit: str | None = None
    """The case (or its confirmation) did not fit in the device's free memory (another lane of
    the GPU held it): not checked, never a finding of the kernel (:func:`out_of_memory`)."""

    @property
    def failed(self) -> bool:
        return not self.unfit and bool(self.bad or self.crash or self.hang or (self.outcome is not None and not self.outcome.ok))


class ScaleLane:
    """The campaign's side of a lane for target ``name`` of source ``spec`` on ``device``
    (``batches``: its scale examples are scale batches)."""

    def __init__(self, name: str, spec: str, device: str, seed: int, batches: bool = False) -> None:
        self.name, self.spec, self.device, self.seed = name, spec, device, seed
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = 0
        self.batches = batches
        """Whether the campaign checks its scale examples as scale batches (:meth:`batch`)."""

    def _start(self) -> str | None:
        """Start the lane; ``None``, or why it could not start."""
        env = {**alone(), "EAGLEFUZZ_LANE_PARENT": str(os.getpid())}  # its fault its own, under --mps too
        self.proc = subprocess.Popen(  # noqa: S603 - our own module, our own interpreter
            [sys.executable, "-m", "eaglefuzz.harness.checking.device_mode.scale_lane"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, start_new_session=True)
        self.started += 1
        reply = self._ask({"name": self.name, "source": self.spec, "device": self.device, "seed": self.seed}, START_S)
        return None if reply.get("ready") else reply.get("crash") or reply.get("hang") or "the lane did not start"

    def _ask(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send ``request``, wait for the answer (a dict; on a dead lane or a timeout, one saying so)."""
        proc = self.proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write((json.dumps(request) + "\n").encode())
            proc.stdin.flush()
        except BrokenPipeError:
            return self._dead()
        end = time.monotonic() + timeout
        line = b""
        while not line.endswith(b"\n"):
            left = end - time.monotonic()
            if left <= 0:
                self.close()
                return {"hang": f"the scale lane did not answer within {timeout:g} s (killed)"}
            ready, _, _ = select.select([proc.stdout], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(proc.stdout.fileno(), 1 << 20)
                if not chunk:
                    return self._dead()
                line += chunk
        return json.loads(line)

    def _dead(self) -> dict[str, Any]:
        proc = self.proc
        code = proc.wait() if proc is not None else None
        self.proc = None
        how = (f"signal {signal.Signals(-code).name}" if code is not None and code < 0 and -code in signal.valid_signals()
               else f"exit code {code}")
        return {"crash": f"the scale lane died ({how}) while running this case", "fatal": True}

    def run(self, example: int, *, minimal: int | None = None, confirm: bool = False, epoch: int | None = None) -> Verdict:
        """The verdict on example ``example``'s scale case (its ``minimal``-th minimal case; with
        ``epoch``, the ``minimal``-th minimal case of that scale epoch's vocabulary:
        :func:`batch_minimal`); ``confirm``: a failing case is checked by the NumPy and Numba
        oracles too."""
        return self._verdict({"example": example, "minimal": minimal, "confirm": confirm, "epoch": epoch})

    def batch(self, example: int, epoch: int, k: int) -> Verdict:
        """The verdict on scale example ``example``'s batch of ``k`` cases (:func:`scale_batch_of`)."""
        return self._verdict({"batch": example, "epoch": epoch, "k": k})

    def save(self, example: int, epoch: int, k: int, case: int, directory: str, *, confirm: bool) -> Verdict:
        """Case ``case`` of scale example ``example``'s batch written to ``directory``
        (:func:`save_case`); ``confirm``: checked by the NumPy and Numba oracles (the verdict's
        ``outcome``)."""
        return self._verdict({"batch": example, "epoch": epoch, "k": k, "save": case, "dir": directory,
                              "confirm": confirm})

    def locate(self, example: int, epoch: int, k: int) -> int | None:
        """The case of scale example ``example``'s batch whose launch faults or hangs, found by a
        fresh lane launching the batch a case at a time, the device waited for after each
        (``None``: none does)."""
        self.close()
        with tempfile.TemporaryDirectory(prefix="eaglefuzz-locate-") as d:
            at = Path(d) / "at"
            v = self._verdict({"batch": example, "epoch": epoch, "k": k, "locate": str(at)})
            if not (v.crash or v.hang):
                return None
            text = at.read_text() if at.exists() else ""
            self.close()
            return int(text) if text.strip() else None

    def _verdict(self, request: dict[str, Any]) -> Verdict:
        t0 = time.monotonic()
        if self.proc is None or self.proc.poll() is not None:
            why = self._start()
            if why is not None:
                self.close()
                return Verdict(crash=f"the scale lane could not start: {why}", fatal=True, seconds=time.monotonic() - t0)
        reply = self._ask(request, CASE_S)
        if reply.get("harness_error"):
            self.close()
            raise RuntimeError(f"{self.name}: the scale lane: {reply['harness_error']}")
        if reply.get("fatal"):
            self.close()
        outcome = reply.get("outcome")
        return Verdict(
            bad=int(reply.get("bad", 0)), tokens=int(reply.get("tokens", 0)), features=list(reply.get("features", ())),
            crash=reply.get("crash"), fatal=bool(reply.get("fatal")), hang=reply.get("hang"),
            outcome=None if outcome is None else pickle.loads(base64.b64decode(outcome)),  # noqa: S301 - our own child
            confirmed=bool(reply.get("confirmed")), seconds=time.monotonic() - t0,
            examples=int(reply.get("examples", 1)), case=reply.get("case"), unfit=reply.get("unfit"),
        )

    def close(self) -> None:
        """Stop the lane (its process group)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()
        proc.wait()


def minimise(lane: ScaleLane, example: int, budget_s: float, *, first_anyway: bool = False,
             epoch: int | None = None) -> tuple[int | None, Verdict | None]:
    """The first of example ``example``'s minimal scale cases (with ``epoch``: of that scale
    epoch's vocabulary, :func:`batch_minimal`) that still fails in ``lane``,
    confirmed (its index and verdict), within ``budget_s`` seconds (``first_anyway``: the
    first minimal case is tried however little is left: confirming it costs no more than
    confirming the drawn case, the alternative); ``(None, None)`` when none does (the case stays
    as found)."""

    end = time.monotonic() + budget_s
    count = (scale_minimal_count(lane.name, lane.seed, example) if epoch is None
             else batch_minimal_count(lane.name, lane.seed, epoch))
    for k in range(count):
        if time.monotonic() > end and not (first_anyway and k == 0):
            break
        v = lane.run(example, minimal=k, confirm=True, epoch=epoch)
        if v.failed:
            return k, v
    return None, None


# -- the lane process ---------------------------------------------------------------------


def out_of_memory(what: BaseException | str | None) -> bool:
    """Whether an exception (or an outcome's ``crash`` text) is the device running out of
    memory: torch's ``OutOfMemoryError``, or a CUDA allocation that failed, said in words. A
    production-scale case needs tens of GB; where another lane of the GPU holds them, the case
    is not checked, and the kernel is not to blame."""
    if what is None:
        return False
    text = what if isinstance(what, str) else f"{type(what).__name__}: {what}"
    return text.startswith("OutOfMemoryError") or "CUDA out of memory" in text or "[CUDA]: out of memory" in text


def _unfit(what: BaseException | str, device: str) -> dict[str, Any]:
    """The answer for a case that did not fit in the device's free memory, its memory given
    back to the device (the other lanes need it): an exception's traceback is dropped first
    (its frames hold the tensors that were made), then the cache is emptied."""
    text = what if isinstance(what, str) else f"{type(what).__name__}: {what}"
    if device != "cpu":
        import gc

        import torch

        if isinstance(what, BaseException):
            what.__traceback__ = None
        gc.collect()
        torch.cuda.empty_cache()
    return {"unfit": " ".join(text.split())[:300], "examples": 0}


def _reached(dt: Any, case: Case) -> list[str]:
    return sorted(dt.reached(case))


def _serve() -> None:  # pragma: no cover - runs in the child; tests/test_scale.py drives it
    """The lane: one request per line on stdin, one answer per line on the original stdout."""
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever else prints goes to stderr, never into the answers
    _die_with_parent()

    def answer(d: dict[str, Any]) -> None:
        out.write(json.dumps(d) + "\n")
        out.flush()

    init = json.loads(sys.stdin.readline())
    try:
        from ...sources import implementations_for, parse_source
        from ...targets import Outcome
        from ..check import check_case
        from . import device_targets

        name, device, seed = init["name"], init["device"], init["seed"]
        impls = implementations_for(parse_source(init["source"]), [name])
        impl, dt = impls[name], device_targets()[name]
    except Exception as exc:  # noqa: BLE001 - reported to the campaign, one line
        answer({"crash": f"{type(exc).__name__}: {exc}"})
        return
    answer({"ready": True})
    state: dict[str, Any] = {"bigs": {}, "epoch": None}  # a scale batch's guarded tables, for the next of its epoch
    for line in sys.stdin:
        req = json.loads(line)
        t0 = time.monotonic()
        if "batch" in req:
            if req["epoch"] != state["epoch"]:  # the last epoch's guarded tables go before the next are drawn
                state["bigs"].clear()
                state["epoch"] = req["epoch"]
            try:
                batch = scale_batch_of(dt, seed, int(req["batch"]), int(req["epoch"]), int(req["k"]), device)
            except Exception as exc:  # noqa: BLE001 - the harness's own failure: said as such, never a finding
                if out_of_memory(exc):  # another lane holds the GPU's memory: not checked here
                    state["bigs"].clear()
                    answer(_unfit(exc, device))
                    continue
                answer({"harness_error": f"drawing scale batch {req['batch']}: {type(exc).__name__}: {exc}"})
                return
            reply = _batch_request(req, batch, dt, impl, impls, device, state["bigs"], t0)
            del batch
            answer(reply)
            if reply.get("fatal"):
                return
            continue
        case = (scale_case(name, seed, int(req["example"]), req.get("minimal")) if req.get("epoch") is None
                else batch_minimal(name, seed, int(req["epoch"]), int(req["minimal"])))
        _log(t0, f"{req}: drawn, {', '.join(f'{n} {list(a.shape)}' for n, a in case.arrays.items() if a.ndim > 1)}")
        reply: dict[str, Any] = {"features": _reached(dt, case)}
        if dt.scale_by_rows:  # a block of rows at a time on the device; confirmed on the rows that matter
            try:
                reply["bad"], reply["tokens"], outcome = dt.scale_check(impl, case, device, bool(req.get("confirm")))
                _log(t0, f"device check: {reply['bad']} element(s) not as expected")
            except Exception as exc:  # noqa: BLE001 - any failure of the code under test is a finding
                if out_of_memory(exc):
                    answer(_unfit(exc, device))
                    continue
                outcome = Outcome().crashed(exc, device)
                _log(t0, f"device check raised: {outcome.crash}")
                reply |= {"crash": outcome.crash, "fatal": outcome.fatal}
            if outcome is not None and out_of_memory(outcome.crash):
                answer(_unfit(outcome.crash, device))
                continue
            if outcome is not None and (reply.get("bad") or outcome.crash):
                reply["confirmed"] = True
                if not outcome.ok:
                    reply["outcome"] = base64.b64encode(pickle.dumps(outcome)).decode()
            answer(reply)
            if reply.get("fatal"):
                return
            continue
        try:
            reply["bad"], reply["tokens"] = _run_on_device(dt, impl, case, device)
            _log(t0, f"device check: {reply['bad']} element(s) not as expected")
        except Exception as exc:  # noqa: BLE001 - any failure of the code under test is a finding
            if out_of_memory(exc):
                answer(_unfit(exc, device))
                continue
            o = Outcome().crashed(exc, device)
            _log(t0, f"device check raised: {o.crash}")
            reply |= {"crash": o.crash, "fatal": o.fatal}
            if o.fatal:
                answer(reply)
                return
        if req.get("confirm") and (reply.get("bad") or reply.get("crash")):
            finding = check_case(case, impls, device)
            reply["confirmed"] = True
            _log(t0, f"confirmed: {'no finding' if finding is None else finding.kind}")
            if finding is not None and out_of_memory(finding.outcome.crash):  # the confirmation did not fit
                answer(_unfit(finding.outcome.crash, device))
                continue
            if finding is not None:
                reply["outcome"] = base64.b64encode(pickle.dumps(finding.outcome)).decode()
                if finding.outcome.fatal:
                    answer(reply | {"fatal": True})
                    return
        answer(reply)


def _batch_request(req: dict[str, Any], batch: Any, dt: Any, impl: Any, impls: Any, device: str, bigs: dict,
                   t0: float) -> dict[str, Any]:  # pragma: no cover - runs in the child; tests/test_scale.py drives it
    """A scale batch's request (``batch``: drawn): checked (``{"batch", "epoch", "k"}``),
    launched a case at a time to find a fault (``"locate"``: the file each case's index is
    written to before its launch), or one case written to files and, with ``confirm``, checked
    by the NumPy and Numba oracles (``"save"``, ``"dir"``)."""
    from ...targets import Outcome
    from ..check import check_case
    from .batch_run import check_batch, first_failing

    _log(t0, f"{req}: {len(batch)} case(s) drawn")
    if "save" in req:
        j = int(req["save"])
        dc = batch.case(j)
        save_case(dt.to_case(dc), req["dir"])
        del dc
        bigs.clear()  # the guarded tables' copies go before the ordinary check makes its own
        if device != "cpu":
            import torch

            torch.cuda.empty_cache()
        reply: dict[str, Any] = {"examples": 0}
        if req.get("confirm"):
            finding = check_case(load_case(req["dir"], keep=True), impls, device)
            reply["confirmed"] = True
            if finding is not None and out_of_memory(finding.outcome.crash):
                return _unfit(finding.outcome.crash, device)
            if finding is not None:
                reply["outcome"] = base64.b64encode(pickle.dumps(finding.outcome)).decode()
                reply["fatal"] = bool(finding.outcome.fatal)
        _log(t0, f"case {j} saved")
        return reply
    if "locate" in req:
        writes = dt.oracle_batch(batch)
        from ...targetkit.device_batch import BatchArenas

        views = BatchArenas(batch, writes, device).views
        for j in range(len(batch)):
            Path(req["locate"]).write_text(str(j))
            try:
                dt.launch(impl, views[j], batch.launch_case(j))
                if device != "cpu":
                    import torch

                    torch.cuda.synchronize()
            except Exception as exc:  # noqa: BLE001 - the fault looked for
                o = Outcome().crashed(exc, device)
                return {"examples": 0, "crash": o.crash, "fatal": True}
        return {"examples": 0}
    try:  # a failure of the code under test is the run's (check_batch catches it); any other is the harness's
        run = check_batch(dt, impl, batch, device, bigs)
    except Exception as exc:  # noqa: BLE001 - said as such, never a finding
        if out_of_memory(exc):
            bigs.clear()
            return _unfit(exc, device)
        return {"harness_error": f"checking scale batch {req['batch']}: {type(exc).__name__}: {exc}", "fatal": True}
    reply = {"examples": run.launched, "tokens": sum(batch.tokens(j) for j in range(run.launched))}
    if run.failed is not None and out_of_memory(run.failed.crash):
        bigs.clear()
        return _unfit(run.failed.crash, device)
    if run.failed is not None:
        _log(t0, f"batch raised: {run.failed.crash}")
        return reply | {"crash": run.failed.crash, "fatal": run.failed.fatal, "case": run.launched - 1}
    reply["bad"] = run.bad
    if run.bad:
        reply["case"] = first_failing(dt, impl, batch, device)
    else:
        reply["features"] = sorted(set().union(*dt.batch_features(batch, run.writes)))
    _log(t0, f"batch checked: {run.bad} element(s) not as expected")
    return reply


def _log(t0: float, line: str) -> None:
    """With ``$EAGLEFUZZ_SCALE_LOG=1``: the lane's steps on stderr (diagnostics)."""
    if os.environ.get("EAGLEFUZZ_SCALE_LOG") == "1":
        print(f"scale lane: {time.monotonic() - t0:6.1f} s: {line}", file=sys.stderr, flush=True)


def _run_on_device(dt: Any, impl: Any, case: Case, device: str) -> tuple[int, int]:
    """The device campaign's check of ``case``: its elements not as expected, and its outputs'."""
    import torch

    from ...targetkit.device import Arenas

    dc = dt.from_case(case, device)
    arenas = Arenas(dc, dt.oracle(dc), device)
    dt.launch(impl, arenas.views, dc)
    bad = int(arenas.mismatch())
    tokens = dc.tokens
    del arenas, dc
    if device != "cpu":
        torch.cuda.empty_cache()
    return bad, tokens


def _die_with_parent() -> None:
    """Linux: the lane is killed when the campaign's process dies (no orphan holding a GPU)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    parent = os.environ.get("EAGLEFUZZ_LANE_PARENT")
    if parent and os.getppid() != int(parent):
        os._exit(125)


if __name__ == "__main__":
    _serve()
