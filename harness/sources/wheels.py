"""Release wheels fetched once with the package installer, then used offline.

``pip download --no-deps`` brings one wheel (vLLM 0.33.0: about 340 MB) into
``~/.cache/eaglefuzz/wheels`` (``$EAGLEFUZZ_WHEELS`` overrides; ``$XDG_CACHE_HOME`` is
honoured); files are taken out of it into a folder beside it. Nothing is installed, and vLLM's
code is never copied into the repository.

:func:`fetch_members` keeps only the files taken out (a few hundred kB): the extraction, with
its manifest, is the cache, and the wheel is deleted after it (``EAGLEFUZZ_KEEP_WHEELS=1``
keeps it), so a later run needs neither the network nor the disk space of the wheel.
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
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..errors import UserError

MANIFEST = "EAGLEFUZZ-EXTRACTED.json"
"""The file in an extraction folder that lists what was asked of the wheel and what it held."""

_NO_NETWORK = re.compile(
    r"NewConnectionError|Failed to establish a new connection|Temporary failure in name "
    r"resolution|Name or service not known|Network is unreachable|ProxyError|ConnectTimeout|"
    r"Read timed out|\(from versions: none\)|No matching distribution found"
)


class FetchFailed(UserError):
    """pip could not fetch a wheel; ``offline`` when it could not reach the package index."""

    def __init__(self, message: str, offline: bool = False) -> None:
        super().__init__(message)
        self.offline = offline


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
    reader (another xdist worker) never sees half a file. Raises :class:`UserError` (one line)
    when pip cannot fetch it (no network, no such release, no wheel for this platform).
    """
    d = cache or wheel_cache()
    have = cached_wheel(dist, version, d)
    if have is not None:
        return have
    d.mkdir(parents=True, exist_ok=True)
    print(f"eaglefuzz: fetching {dist}=={version} (the wheel only, once) into {d}", file=sys.stderr)
    with tempfile.TemporaryDirectory(dir=d, prefix=".fetch-") as tmp:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
             "--disable-pip-version-check", "--quiet", "--dest", tmp, f"{dist}=={version}"],
            capture_output=True, text=True, check=False,
        )
        got = cached_wheel(dist, version, Path(tmp))
        if got is not None:
            os.replace(got, d / got.name)
    have = cached_wheel(dist, version, d)
    if proc.returncode != 0 or have is None:
        text = (proc.stderr or "") + (proc.stdout or "")
        lines = [ln for ln in text.splitlines() if ln.strip() and "WARNING" not in ln]
        why = lines[-1].strip() if lines else f"pip exited with {proc.returncode}"
        raise FetchFailed(f"{dist}=={version}: cannot fetch the wheel ({why})",
                          offline=bool(_NO_NETWORK.search(text)) and not _index_lists(dist, text))
    return have


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
def _locked(dist: str, version: str) -> Iterator[None]:
    """One process at a time fetches and extracts ``dist==version`` (xdist workers race)."""
    d = wheel_cache()
    d.mkdir(parents=True, exist_ok=True)
    with open(d / f".{_normalise(dist)}-{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
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
    set, or the wheel was in the cache before). Raises :class:`FetchFailed` (one line).
    """
    out = extraction_dir(dist, version)
    done = _manifest(out)
    if done is not None and set(members) <= set(done.get("requested", [])):
        return out
    with _locked(dist, version):
        done = _manifest(out)
        if done is not None and set(members) <= set(done.get("requested", [])):
            return out
        requested = sorted(set(members) | set((done or {}).get("requested", [])))
        had_wheel = cached_wheel(dist, version) is not None
        wheel = fetch_wheel(dist, version)
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
                target.parent.mkdir(parents=True, exist_ok=True)
                tmp = target.with_suffix(target.suffix + f".{os.getpid()}.tmp")
                tmp.write_bytes(z.read(n))
                os.replace(tmp, target)
                taken.append(n)
    return taken


def forget(dist: str, version: str) -> None:
    """Delete the extraction (and any wheel) of ``dist==version`` from the cache."""
    shutil.rmtree(extraction_dir(dist, version), ignore_errors=True)
    have = cached_wheel(dist, version)
    if have is not None:
        have.unlink(missing_ok=True)
