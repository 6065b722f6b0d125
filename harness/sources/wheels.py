"""Release wheels fetched once with the package installer, then used offline.

``pip download --no-deps`` brings one wheel (vLLM 0.33.0: about 340 MB) into
``~/.cache/eaglefuzz/wheels`` (``$EAGLEFUZZ_WHEELS`` overrides; ``$XDG_CACHE_HOME`` is
honoured); files are taken out of it into a folder beside it. Nothing is installed, and vLLM's
code is never copied into the repository.

:func:`fetch_members` keeps only the files taken out (a few hundred kB): the extraction, with
its manifest, is the cache, and the wheel is deleted after it (``EAGLEFUZZ_KEEP_WHEELS=1``
keeps it), so a later run needs neither the network nor the disk space of the wheel.

pip is asked once per attempt, with a short timeout and no retries (:data:`PIP_TIMEOUT`,
:data:`FETCH_BOUND`). A failed fetch is remembered, with its reason, for
:data:`FAILURE_TTL` seconds: in this process, and in a marker file in the cache
(``.<dist>-<version>.failed``) that every other process honours (xdist workers, other commands).
An offline run thus pays for one attempt; a run after the network returns tries again. One
process at a time fetches a given release (a lock file beside the marker); the others wait
for it a bounded time, and a waiter that sees the failure recorded raises it at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace

from ..core.errors import UserError

clock = SimpleNamespace(time=time.time, monotonic=time.monotonic, sleep=time.sleep)
"""This module's clock: when a failure was recorded, the wait for another process's fetch and
its polls (a test replaces them here, not in the ``time`` module every thread uses)."""

MANIFEST = "EAGLEFUZZ-EXTRACTED.json"
"""The file in an extraction folder that lists what was asked of the wheel and what it held."""

_NO_NETWORK = re.compile(
    r"NewConnectionError|Failed to establish a new connection|Temporary failure in name "
    r"resolution|Name or service not known|Network is unreachable|ProxyError|ConnectTimeout|"
    r"Read timed out|didn't respond within|\(from versions: none\)|No matching distribution found"
)


RELEASE_VERSION = re.compile(r"^(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*)){2,}((a|b|rc)(0|[1-9][0-9]*))?"
                             r"(\.post(0|[1-9][0-9]*))?(\.dev(0|[1-9][0-9]*))?$")
"""A release's full version as its wheel is named: ``X.Y.Z`` (or more parts: vLLM 0.10.1.1), no
leading zeros, an optional pre-, post- or dev-release suffix."""


def check_release_version(flag: str, version: str, example: str) -> str:
    """``version`` when it names one release exactly as its wheel is named (:data:`RELEASE_VERSION`);
    else a :class:`UserError` for option ``flag``, before anything is fetched. pip takes
    ``0.33`` for ``0.33.0`` and fetches that wheel, whose name then matches no file asked for."""
    if RELEASE_VERSION.match(version):
        return version
    parts = version.split(".")
    hint = ""
    if 1 <= len(parts) < 3 and all(p.isdigit() for p in parts):
        hint = f" ({'.'.join(parts + ['0'] * (3 - len(parts)))}?)"
    raise UserError(f"{flag} {version}: not a release's full version{hint}; give X.Y.Z as the wheel is named, "
                    f"e.g. {example}")


PIP_TIMEOUT = 5
"""pip's ``--timeout``: seconds it waits to connect, or for the next bytes (``--retries 0``)."""

FETCH_BOUND = 600.0
"""Seconds one ``pip download`` may take in all (a 340 MB wheel at 0.6 MB/s); past it, pip is
killed and the fetch has failed."""

LOCK_WAIT = FETCH_BOUND + 120.0
"""Seconds a process waits for another that fetches the same release (its pip, then its
extraction); past it the fetch has failed."""

FAILURE_TTL = 300.0
"""Seconds a failed fetch is remembered (this process and the cache's marker file)."""

_POLL_S = 0.1
_FAILED: dict[tuple[str, str, str], FetchFailed] = {}
"""(cache folder, dist, version) -> the failure this process saw or read from a marker."""


class FetchFailed(UserError):
    """pip could not fetch a wheel; ``offline`` when it could not reach the package index.

    ``at``: when the attempt failed (``time.time()``); ``reason``: the message without the note
    that says it was remembered.
    """

    def __init__(self, message: str, offline: bool = False, at: float | None = None,
                 reason: str | None = None) -> None:
        super().__init__(message)
        self.offline = offline
        self.at = clock.time() if at is None else at
        self.reason = str(self) if reason is None else reason


def wheel_cache() -> Path:
    """The folder wheels are kept in."""
    if os.environ.get("EAGLEFUZZ_WHEELS"):
        return Path(os.environ["EAGLEFUZZ_WHEELS"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "eaglefuzz" / "wheels"


def _normalise(dist: str) -> str:
    return dist.replace("-", "_").lower()


def cached_wheel(dist: str, version: str, cache: Path | None = None) -> Path | None:
    """The cached wheel of ``dist==version`` for this machine, if one was fetched before."""
    d = cache or wheel_cache()
    if not d.is_dir():
        return None
    found = sorted(d.glob(f"{_normalise(dist)}-{version}-*.whl"))
    native = [p for p in found if platform.machine() in p.name or p.name.endswith("-any.whl")]
    return (native or found or [None])[0]


def fetch_wheel(dist: str, version: str, cache: Path | None = None) -> Path:
    """The wheel of ``dist==version``: from the cache, else fetched with pip (no dependencies).

    The download goes to a private folder first and is renamed into place, so a concurrent
    reader (another xdist worker) never sees half a file. Raises :class:`FetchFailed` (one
    line) when pip cannot fetch it (no network, no such release, no wheel for this platform),
    or when such a failure is remembered (:data:`FAILURE_TTL`).
    """
    d = cache or wheel_cache()
    have = cached_wheel(dist, version, d)
    if have is not None:
        return have
    _raise_remembered(d, dist, version)
    with _locked(d, dist, version):
        return _fetch_locked(d, dist, version)


def _fetch_locked(d: Path, dist: str, version: str) -> Path:
    """:func:`fetch_wheel` for a caller that holds :func:`_locked`."""
    have = cached_wheel(dist, version, d)
    if have is not None:
        return have
    _raise_remembered(d, dist, version)
    try:
        have = _download(d, dist, version)
    except FetchFailed as exc:
        _remember(d, dist, version, exc)
        raise
    _forget_failure(d, dist, version)
    return have


def _download(d: Path, dist: str, version: str) -> Path:
    """One ``pip download`` of ``dist==version`` into ``d``: one attempt, bounded."""
    if sys.stderr.isatty():  # progress, as the command line's progress lines
        print(f"eaglefuzz: fetching {dist}=={version} (the wheel only, once) into {d}", file=sys.stderr)
    with tempfile.TemporaryDirectory(dir=d, prefix=".fetch-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-vv", "--timeout", str(PIP_TIMEOUT), "--retries", "0",
               "--dest", tmp, f"{dist}=={version}"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=FETCH_BOUND,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise FetchFailed(f"{dist}=={version}: cannot fetch the wheel (pip download did not finish "
                              f"within {FETCH_BOUND:.0f} s)", offline=True) from None
        got = cached_wheel(dist, version, Path(tmp))
        if got is not None:
            os.replace(got, d / got.name)
    have = cached_wheel(dist, version, d)
    if proc.returncode != 0 or have is None:
        text = (proc.stderr or "") + (proc.stdout or "")
        offline = bool(_NO_NETWORK.search(text)) and not _index_lists(dist, text)
        raise FetchFailed(f"{dist}=={version}: cannot fetch the wheel ({_why(text, proc.returncode, offline)})",
                          offline=offline)
    return have


_UNREACHABLE = re.compile(r"^Could not fetch URL (\S+): (.*?)(?: - skipping)?$", re.M)


def _why(pip_output: str, returncode: int, offline: bool) -> str:
    """pip's reason, in a few words: the connection error where it could not reach an index,
    else its last error line."""
    hits = [m for m in _UNREACHABLE.finditer(pip_output) if "Client Error" not in m.group(2)]  # not a 404
    if offline and hits:
        url, cause = hits[0].group(1), " ".join(hits[0].group(2).split())
        cause = cause if len(cause) <= 200 else cause[:197] + "..."
        return f"the package index cannot be reached: {url}: {cause}"
    lines = [ln.strip() for ln in pip_output.splitlines() if ln.startswith("ERROR:")]
    if not lines:
        lines = [ln.strip() for ln in pip_output.splitlines() if ln.strip() and "WARNING" not in ln]
    why = lines[-1] if lines else f"pip exited with {returncode}"
    return ("no connection to the package index: " if offline else "") + why


def _key(d: Path, dist: str, version: str) -> tuple[str, str, str]:
    return (str(d.resolve()), _normalise(dist), version)


def _marker(d: Path, dist: str, version: str) -> Path:
    return d / f".{_normalise(dist)}-{version}.failed"


def _remember(d: Path, dist: str, version: str, exc: FetchFailed) -> None:
    """Record a failed fetch for this process and, in the cache's marker file, for the others."""
    _FAILED[_key(d, dist, version)] = exc
    marker = _marker(d, dist, version)
    try:
        tmp = marker.with_name(f"{marker.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"reason": exc.reason, "offline": exc.offline, "at": exc.at}))
        os.replace(tmp, marker)
    except OSError:
        pass  # a read-only cache: this process still remembers


def _forget_failure(d: Path, dist: str, version: str) -> None:
    _FAILED.pop(_key(d, dist, version), None)
    _marker(d, dist, version).unlink(missing_ok=True)


def remembered_failure(dist: str, version: str, cache: Path | None = None) -> FetchFailed | None:
    """The failed fetch of ``dist==version`` still remembered (at most :data:`FAILURE_TTL`
    seconds old), from this process or another one's marker file; ``None`` if there is none."""
    d = cache or wheel_cache()
    key = _key(d, dist, version)
    now = clock.time()
    exc = _FAILED.get(key)
    if exc is None or not 0 <= now - exc.at < FAILURE_TTL:
        exc = None
        try:
            data = json.loads(_marker(d, dist, version).read_text())
            exc = FetchFailed(str(data["reason"]), offline=bool(data["offline"]), at=float(data["at"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if not 0 <= now - exc.at < FAILURE_TTL:
            return None
        _FAILED[key] = exc
    return exc


def _raise_remembered(d: Path, dist: str, version: str) -> None:
    exc = remembered_failure(dist, version, d)
    if exc is None:
        return
    age = max(0, round(clock.time() - exc.at))
    raise FetchFailed(
        f"{exc.reason} [failed {age} s ago, not tried again for {FAILURE_TTL / 60:.0f} min: delete "
        f"{_marker(d, dist, version)} to try now]", offline=exc.offline, at=exc.at, reason=exc.reason,
    )


def _index_lists(dist: str, pip_output: str) -> bool:
    """Whether pip's output shows the index answering with releases of ``dist`` (then a
    failure is about the release asked for, not the network)."""
    m = re.search(r"\(from versions: ([^)]*)\)", pip_output)
    return bool(m and m.group(1).strip() not in ("", "none"))


def extract(wheel: Path, members: list[str]) -> Path:
    """Take ``members`` (paths inside the wheel; a trailing ``/`` takes a folder) out of
    ``wheel`` into ``<cache>/<wheel name>/``, once; that folder."""
    out = wheel.parent / wheel.name.removesuffix(".whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        for m in members:
            chosen = [n for n in names if n.startswith(m)] if m.endswith("/") else [m] if m in names else []
            for n in chosen:
                target = out / n
                if target.is_file() and target.stat().st_size == z.getinfo(n).file_size:
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                tmp = target.with_suffix(target.suffix + f".{os.getpid()}.tmp")
                tmp.write_bytes(z.read(n))
                os.replace(tmp, target)
    return out


def wheel_members(wheel: Path) -> list[str]:
    """Every path inside ``wheel``."""
    with zipfile.ZipFile(wheel) as z:
        return z.namelist()


def extraction_dir(dist: str, version: str) -> Path:
    """Where :func:`fetch_members` keeps the files of ``dist==version`` (no wheel needed)."""
    return wheel_cache() / f"{_normalise(dist)}-{version}"


def _manifest(folder: Path) -> dict[str, list[str]] | None:
    try:
        data = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@contextlib.contextmanager
def _locked(d: Path, dist: str, version: str) -> Iterator[None]:
    """One process at a time fetches and extracts ``dist==version`` into ``d`` (xdist workers
    race). The wait is bounded (:data:`LOCK_WAIT`), and ends with the failure another process
    recorded while this one waited (:class:`FetchFailed`)."""
    d.mkdir(parents=True, exist_ok=True)
    deadline = clock.monotonic() + LOCK_WAIT
    with open(d / f".{_normalise(dist)}-{version}.lock", "w") as lock:
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                pass
            _raise_remembered(d, dist, version)
            if clock.monotonic() > deadline:
                raise FetchFailed(f"{dist}=={version}: cannot fetch the wheel (another process has held "
                                  f"{lock.name} for more than {LOCK_WAIT:.0f} s)")
            clock.sleep(_POLL_S)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def fetch_members(dist: str, version: str, members: Sequence[str],
                  keep_wheel: bool | None = None) -> Path:
    """A folder holding ``members`` (paths inside the wheel; a trailing ``/`` takes a folder)
    of the wheel of ``dist==version``, as ``<folder>/<member>``; a member the wheel lacks is
    simply absent (older releases lack newer files).

    An earlier extraction that was asked for every one of ``members`` is used as it is, with no
    network; else the wheel is fetched (:func:`fetch_wheel`), everything asked for so far is
    taken out, and the wheel is deleted unless ``keep_wheel`` (default: ``$EAGLEFUZZ_KEEP_WHEELS``
    set, or the wheel was in the cache before; a file already taken out is not taken again).
    Raises :class:`FetchFailed` (one line) when the fetch fails or a failed one is remembered.
    """
    out = extraction_dir(dist, version)
    done = _manifest(out)
    if done is not None and set(members) <= set(done.get("requested", [])):
        return out
    d = wheel_cache()
    if cached_wheel(dist, version, d) is None:
        _raise_remembered(d, dist, version)
    with _locked(d, dist, version):
        done = _manifest(out)
        if done is not None and set(members) <= set(done.get("requested", [])):
            return out
        requested = sorted(set(members) | set((done or {}).get("requested", [])))
        had_wheel = cached_wheel(dist, version, d) is not None
        wheel = _fetch_locked(d, dist, version)
        present = _extract_into(wheel, requested, out)
        tmp = out / f"{MANIFEST}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps({"wheel": wheel.name, "requested": requested, "present": present}, indent=1))
        os.replace(tmp, out / MANIFEST)
        if keep_wheel is None:
            keep_wheel = had_wheel or bool(os.environ.get("EAGLEFUZZ_KEEP_WHEELS"))
        if not keep_wheel:
            wheel.unlink(missing_ok=True)
    return out


def _extract_into(wheel: Path, members: Sequence[str], out: Path) -> list[str]:
    """Take ``members`` out of ``wheel`` into ``out``; the paths taken."""
    taken: list[str] = []
    try:
        z = zipfile.ZipFile(wheel)
    except zipfile.BadZipFile:
        wheel.unlink(missing_ok=True)
        raise UserError(f"{wheel}: not a wheel (a broken download, now deleted): try again") from None
    with z:
        names = z.namelist()
        for m in members:
            chosen = [n for n in names if n.startswith(m)] if m.endswith("/") else [m] if m in names else []
            for n in chosen:
                target = out / n
                taken.append(n)
                if target.is_file() and target.stat().st_size == z.getinfo(n).file_size:
                    continue  # taken out before (a build of the port: 100 to 200 MB)
                target.parent.mkdir(parents=True, exist_ok=True)
                tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
                with z.open(n) as src, open(tmp, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 22)
                os.replace(tmp, target)
    return taken


def forget(dist: str, version: str) -> None:
    """Delete the extraction (and any wheel) of ``dist==version`` from the cache, and any
    failure of its fetch remembered."""
    _forget_failure(wheel_cache(), dist, version)
    shutil.rmtree(extraction_dir(dist, version), ignore_errors=True)
    have = cached_wheel(dist, version)
    if have is not None:
        have.unlink(missing_ok=True)
