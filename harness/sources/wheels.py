"""Release wheels fetched once with the package installer, then used offline.

``pip download --no-deps`` brings one wheel (vLLM 0.33.0: about 340 MB) into
``~/.cache/eaglefuzz/wheels`` (``$EAGLEFUZZ_WHEELS`` overrides; ``$XDG_CACHE_HOME`` is
honoured); files are taken out of it into a folder beside it. Nothing is installed, and vLLM's
code is never copied into the repository.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from ..errors import UserError


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
        lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines()]
        lines = [ln for ln in lines if ln and not ln.startswith("WARNING")]
        why = lines[-1] if lines else f"pip exited with {proc.returncode} and brought no wheel"
        raise UserError(f"{dist}=={version}: cannot fetch the wheel ({why})")
    return have


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
