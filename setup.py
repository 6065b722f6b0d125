"""Which packages the wheel holds; every other setting is in ``pyproject.toml``.

The checkout's folders ``harness/``, ``kernels/`` and ``oracles/`` are the subpackages
``eaglefuzz.harness``, ``eaglefuzz.kernels`` and ``eaglefuzz.oracles`` (``eaglefuzz/__init__.py``
says why). setuptools' ``packages.find`` cannot put a folder under another package's name, so
the folders are mapped here and every package below them is found (``find_packages``: any
folder with an ``__init__.py``), never listed. The regression corpus (``corpus/<target>/*.json``)
travels as the package data ``eaglefuzz/corpus/``, which ``harness/core/paths.py`` replays.
``tests/test_wheel.py`` builds the wheel and checks that it holds every module and corpus file.
"""

from setuptools import find_namespace_packages, find_packages, setup

FOLDERS = {"eaglefuzz": "eaglefuzz", "eaglefuzz.harness": "harness", "eaglefuzz.kernels": "kernels",
           "eaglefuzz.oracles": "oracles"}
CODE = [f"{name}{sub}" for name, folder in FOLDERS.items() for sub in ("", *(f".{p}" for p in find_packages(folder)))]
# Each corpus/<target>/ is a data-only package (setuptools warns about a folder of package data
# that is not a package).
CORPUS = [f"eaglefuzz.corpus{sub}" for sub in ("", *(f".{p}" for p in find_namespace_packages("corpus")))]

setup(
    packages=CODE + CORPUS,
    package_dir={**FOLDERS, "eaglefuzz.corpus": "corpus"},
    package_data={name: ["*.json"] for name in CORPUS[1:]},
)
