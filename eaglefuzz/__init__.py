"""eaglefuzz: differential fuzzing of vLLM's EAGLE speculative-decoding helper kernels.

The design card keeps the project's parts in top-level folders (``kernels/``, ``oracles/``,
``harness/``). Generic names like those are taken on PyPI (``kernels`` is a popular package),
so they are never importable on their own: they are the subpackages ``eaglefuzz.kernels``,
``eaglefuzz.oracles`` and ``eaglefuzz.harness``. An installed wheel holds them inside this
package; in a source checkout (``PYTHONPATH=<checkout>``, or an editable install) the lines
below let this package find them beside it.
"""

from pathlib import Path as _Path

__version__ = "0.1.0"

_checkout = _Path(__file__).resolve().parent.parent
if (_checkout / "pyproject.toml").is_file() and (_checkout / "harness" / "__init__.py").is_file():
    __path__.append(str(_checkout))  # noqa: F821 - __path__ is defined for packages
