"""Every citation of the contract resolves: ``docs/CONTRACT.md`` exists and has what is cited.

The page's sections are its headings ``## N. title``, its sub-sections ``### N.M title``. A
citation is ``§N`` or ``§N.M`` anywhere in a ``.py`` or ``.md`` file of the repository (the sign
means nothing else here), written ``docs/CONTRACT.md §N`` where the page is not obvious; a
range names both ends, each with its own sign (``§N-§M``). Checked, as plain text (no project
import, so it runs in milliseconds):

* every section or sub-section cited is a heading of the page;
* every path ending in the page's file name names the page (from the repository root or from
  the citing file's folder), and every link anchor into it (``...md#anchor``) is the
  GitHub anchor of one of its headings;
* the old forms are gone: "section N" / "sections N-M" after the page's name, and ranges whose
  second end lacks its sign;
* every bullet of every ``N.2 Production preconditions`` section ends with its citations of the
  vLLM code (or test) that makes the precondition true, in the form fixed for issue 22:
  ``(vLLM: <path inside the wheel>, <function or Class.method>)``, several separated by ``; ``
  inside one parenthesis, and ``(vLLM test: tests/<path>, <test>)`` for a test of vLLM's
  repository (:func:`citation_problems`); each cited wheel path exists in vLLM
  :data:`CITED_RELEASE`'s wheel and names a function or class (``Class.method``: a method of that
  class) defined in that file (:func:`resolution_problems`; the files are fetched once through
  ``tests/needs.py``, which skips when the package index cannot be reached).
* the page's sections are numbered 1, 2, 3, ... in order, and each target record of
  ``harness/targets/`` (``<name>/record.py``) cites, in its docstring, the section whose
  heading names its target (the folder's name), and gives that number as its ``section``.

This file itself is not scanned: it has to spell out the forms it forbids.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = Path("docs") / "CONTRACT.md"
SKIP_DIRS = frozenset(
    {".git", ".tox", ".venv", "venv", "build", "dist", "__pycache__", ".hypothesis",
     ".pytest_cache", ".ruff_cache", "node_modules", "eaglefuzz-findings"}
)  # fmt: skip
SUFFIXES = (".py", ".md")

SECTION = re.compile(r"^## (\d+)\. \S", re.M)
SUBSECTION = re.compile(r"^### (\d+)\.(\d+) \S", re.M)
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
CITE = re.compile(r"§\s*(\d+(?:\.\d+)?)")
OPEN_RANGE = re.compile(r"§\s*\d+(?:\.\d+)?\s*[-–]\s*\d")
OLD_FORM = re.compile(r"CONTRACT\.md`*\)?,?\s+\(?sections?\s+\d", re.I)
PATH = re.compile(r"[\w./-]*CONTRACT\.md(?:#([\w-]*))?")
SECTION_NUMBER = re.compile(r"^    section = (\d+)$", re.M)


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def page_outline(text: str) -> tuple[list[int], set[str], set[str]]:
    """Section numbers in order, citable numbers (``"1"``, ``"1.2"``), anchors of ``text``."""
    body = FENCE.sub("", text)
    sections = [int(n) for n in SECTION.findall(body)]
    citable = {str(n) for n in sections} | {f"{a}.{b}" for a, b in SUBSECTION.findall(body)}
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for heading in HEADING.findall(body):
        base = github_anchor(heading)
        k = seen.get(base, 0)
        seen[base] = k + 1
        anchors.add(base if k == 0 else f"{base}-{k}")
    return sections, citable, anchors


def repository_files(root: Path) -> list[Path]:
    """Every ``.py`` and ``.md`` file under ``root``, build/tool folders and this file excluded.

    Skipped folders are pruned, not filtered: a checkout's ``.tox`` holds whole environments.
    """
    me = Path(__file__).resolve()
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info"))
        for name in sorted(files):
            path = Path(folder) / name
            if path.suffix in SUFFIXES and path.resolve() != me:
                out.append(path)
    return out


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def problems(root: Path) -> list[str]:
    """Every citation of the contract under ``root`` that does not resolve, one line each."""
    page = root / PAGE
    if not page.is_file():
        return [f"{PAGE} is missing"]
    sections, citable, anchors = page_outline(page.read_text(encoding="utf-8"))
    found = []
    if sections != list(range(1, len(sections) + 1)):
        found.append(f"{PAGE}: sections numbered {sections}, expected 1, 2, 3, ... in order")
    for path in repository_files(root):
        text = path.read_text(encoding="utf-8", errors="replace")
        rel = path.relative_to(root)
        for m in CITE.finditer(text):
            if m.group(1) not in citable:
                found.append(
                    f"{rel}:{_line(text, m.start())}: §{m.group(1)} is not a heading of {PAGE}"
                )
        for m in OPEN_RANGE.finditer(text):
            found.append(f"{rel}:{_line(text, m.start())}: write a range as §N-§M ({m.group(0)!r})")
        for m in OLD_FORM.finditer(text):
            found.append(f"{rel}:{_line(text, m.start())}: cite as '{PAGE} §N' ({m.group(0)!r})")
        for m in PATH.finditer(text):
            name = m.group(0).split("#", 1)[0]
            where = [(root / name), (path.parent / name)]
            if not any(w.is_file() and w.resolve() == page.resolve() for w in where):
                found.append(f"{rel}:{_line(text, m.start())}: {name!r} is not {PAGE}")
            elif m.group(1) is not None and m.group(1) not in anchors:
                found.append(
                    f"{rel}:{_line(text, m.start())}: no heading of {PAGE} has anchor #{m.group(1)}"
                )
    found += _target_citations(root, page)
    return found


def _target_citations(root: Path, page: Path) -> list[str]:
    """Each target record's docstring cites the section whose heading names its target (the
    folder's name), and its ``section`` is that number."""
    titles = dict(
        re.findall(r"^## (\d+)\. (.+)$", FENCE.sub("", page.read_text(encoding="utf-8")), re.M)
    )
    found = []
    for path in sorted((root / "harness" / "targets").glob("*/record.py")):
        text = path.read_text(encoding="utf-8")
        names = [path.parent.name]
        try:
            doc = ast.get_docstring(ast.parse(text)) or ""
        except SyntaxError as exc:
            found.append(f"{path.relative_to(root)}: cannot be parsed ({exc.msg})")
            continue
        cited = re.findall(r"docs/CONTRACT\.md §(\d+)\b", doc)
        rel = path.relative_to(root)
        for name in names:
            if not any(f"`{name}`" in titles.get(n, "") for n in cited):
                found.append(f"{rel}: its docstring must cite the {PAGE} section titled `{name}`")
            number = [n for n, title in titles.items() if f"`{name}`" in title]
            if SECTION_NUMBER.findall(text) != number[:1]:
                found.append(f"{rel}: its section must be {number[0] if number else 'a heading of ' + str(PAGE)}")
    return found


def test_every_contract_citation_resolves():
    assert problems(ROOT) == []


def test_the_page_has_a_section_per_target():
    sections, citable, _ = page_outline((ROOT / PAGE).read_text(encoding="utf-8"))
    assert sections[:5] == [1, 2, 3, 4, 5]
    for n in range(1, 6):
        assert {f"{n}.{k}" for k in range(1, 5)} <= citable  # semantics ... outside the domain


def _mini_repo(root: Path, citing: str) -> None:
    (root / "docs").mkdir()
    (root / PAGE).write_text("# C\n\n## 1. `f`\n\n### 1.1 Semantics\n\n## 2. `g`\n")
    (root / "harness" / "targets" / "f").mkdir(parents=True)
    (root / "harness" / "targets" / "f" / "record.py").write_text(
        '"""``f``: docs/CONTRACT.md §1."""\n\n\nclass F:\n    name = "f"\n    section = 1\n'
    )
    (root / "README.md").write_text(citing)


def test_a_well_cited_mini_repo_passes(tmp_path):
    _mini_repo(tmp_path, "See docs/CONTRACT.md §1, §1.1 and §1-§2, [here](docs/CONTRACT.md#1-f).\n")
    assert problems(tmp_path) == []


def test_each_kind_of_broken_citation_is_seen(tmp_path):
    _mini_repo(
        tmp_path,
        "docs/CONTRACT.md §99\n"
        "§1.7\n"
        "CONTRACT.md §1\n"
        "../shared/CONTRACT.md\n"
        "[x](docs/CONTRACT.md#nowhere)\n"
        "docs/CONTRACT.md section 1\n"
        "§1-2\n",
    )
    (tmp_path / "harness" / "targets" / "g").mkdir()
    (tmp_path / "harness" / "targets" / "g" / "record.py").write_text(
        '"""``g``: docs/CONTRACT.md §1."""\n\n\nclass G:\n    name = "g"\n    section = 1\n'
    )
    found = "\n".join(problems(tmp_path))
    assert "README.md:1: §99 is not a heading" in found
    assert "README.md:2: §1.7 is not a heading" in found
    assert "README.md:3: 'CONTRACT.md' is not docs/CONTRACT.md" in found
    assert "README.md:4: '../shared/CONTRACT.md' is not" in found
    assert "README.md:5: no heading of docs/CONTRACT.md has anchor #nowhere" in found
    assert "README.md:6: cite as" in found
    assert "README.md:7: write a range as" in found
    assert "g/record.py: its docstring must cite the docs/CONTRACT.md section titled `g`" in found
    assert "g/record.py: its section must be 2" in found
    assert "f/record.py" not in found


def test_a_missing_page_or_a_gap_in_the_numbering_is_seen(tmp_path):
    assert problems(tmp_path) == [f"{PAGE} is missing"]
    _mini_repo(tmp_path, "")
    (tmp_path / PAGE).write_text("## 1. `f`\n\n## 3. `h`\n")
    assert any("sections numbered [1, 3]" in p for p in problems(tmp_path))


def test_github_anchors():
    assert (
        github_anchor("1. `copy_and_expand_eagle_inputs_kernel`")
        == "1-copy_and_expand_eagle_inputs_kernel"
    )
    assert github_anchor("4.2 Production preconditions") == "42-production-preconditions"
    assert github_anchor("4. `extend_all_queries_by_N`") == "4-extend_all_queries_by_n"


# -- citations of the vLLM code behind each production precondition (N.2) -----------------

CITED_RELEASE = "0.33.0"
"""The vLLM release whose wheel every ``(vLLM: ...)`` citation names a file of."""

PENDING_CITATIONS: frozenset[int] = frozenset()
"""Sections whose N.2 bullets are not all cited yet (their owners cite them; remove a section
here once it is: its test is a strict xfail, so a fully cited pending section fails the run)."""

PRECONDITIONS = re.compile(r"^### (\d+)\.2 Production preconditions[ \t]*$", re.M)
NEXT_HEADING = re.compile(r"^#{1,3} ", re.M)
CITATION = re.compile(r"\((vLLM|vLLM test): ([^()]*)\)")
TAIL = re.compile(r"(?:\((?:vLLM|vLLM test): [^()]*\)\s*)+\.?$")
CITED_ITEM = re.compile(r"^([\w./-]+\.py), ([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)$")


def precondition_bullets(text: str) -> dict[int, list[tuple[int, str]]]:
    """Section number -> the bullets of its ``N.2 Production preconditions`` sub-section, each as
    (line of its first line, its text with the lines joined). A bullet is a line starting
    ``- `` and the lines after it up to a blank line, another top-level bullet or a heading
    (nested bullets belong to their parent)."""
    body = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    out: dict[int, list[tuple[int, str]]] = {}
    for m in PRECONDITIONS.finditer(body):
        end = NEXT_HEADING.search(body, m.end())
        chunk = body[m.end() : end.start() if end else len(body)]
        first = _line(body, m.end())
        bullets: list[tuple[int, str]] = []
        current: list[str] | None = None
        for k, line in enumerate(chunk.split("\n")):
            if line.startswith("- "):
                current = [line[2:].strip()]
                bullets.append((first + k, ""))
            elif current is not None and line.strip() and line[:1] in (" ", "\t"):
                current.append(line.strip())
            else:
                current = None
            if current is not None:
                bullets[-1] = (bullets[-1][0], " ".join(current))
        out[int(m.group(1))] = bullets
    return out


def citation_problems(text: str, sections: set[int] | frozenset[int] | None = None) -> list[str]:
    """Every bullet of an N.2 section of ``text`` (of ``sections``; all when ``None``) that does
    not end with well-formed citations, one line each."""
    found = []
    for n, bullets in precondition_bullets(text).items():
        if sections is not None and n not in sections:
            continue
        if not bullets:
            found.append(f"{PAGE} §{n}.2: no precondition bullets")
        for line, bullet in bullets:
            tail = TAIL.search(bullet)
            if tail is None:
                found.append(f"{PAGE}:{line}: §{n}.2 bullet cites no vLLM code: {bullet[:60]!r}...")
                continue
            for kind, items in CITATION.findall(tail.group(0)):
                for item in items.split("; "):
                    m = CITED_ITEM.match(item.strip())
                    if m is None or item != item.strip():
                        found.append(f"{PAGE}:{line}: §{n}.2 citation {item!r} is not 'path/file.py, name'")
                    elif kind == "vLLM test" and not m.group(1).startswith("tests/"):
                        found.append(f"{PAGE}:{line}: §{n}.2 vLLM test {m.group(1)!r} is not under tests/")
                    elif kind == "vLLM" and not m.group(1).startswith("vllm/"):
                        found.append(f"{PAGE}:{line}: §{n}.2 vLLM code {m.group(1)!r} is not a path inside the wheel (vllm/...)")
    return found


def cited_code(text: str) -> dict[tuple[str, str], int]:
    """(wheel path, name) -> the page line that first cites it, for every well-formed
    ``(vLLM: vllm/..., name)`` citation in an N.2 bullet of ``text``."""
    out: dict[tuple[str, str], int] = {}
    for bullets in precondition_bullets(text).values():
        for line, bullet in bullets:
            for kind, items in CITATION.findall(bullet):
                for item in items.split("; "):
                    m = CITED_ITEM.match(item.strip())
                    if kind == "vLLM" and m is not None and m.group(1).startswith("vllm/"):
                        out.setdefault((m.group(1), m.group(2)), line)
    return out


def defines(tree: ast.Module, name: str) -> bool:
    """Whether ``tree`` defines function or class ``name``; ``A.b``: a class ``A`` (at any depth)
    whose body defines ``b``."""
    *outer, last = name.split(".")
    scopes: list[ast.AST] = [tree]
    for part in outer:
        scopes = [n for s in scopes for n in ast.walk(s) if isinstance(n, ast.ClassDef) and n.name == part]
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    if not outer:
        return any(isinstance(n, kinds) and n.name == last for n in ast.walk(tree))
    return any(isinstance(n, kinds) and n.name == last for s in scopes for n in s.body)  # type: ignore[attr-defined]


def resolution_problems(cited: dict[tuple[str, str], int], files: Path) -> list[str]:
    """Every citation of ``cited`` whose file is not under ``files`` (a release's extraction) or
    does not define the name, one line each."""
    found, trees = [], {}
    for (path, name), line in sorted(cited.items()):
        if path not in trees:
            f = files / path
            trees[path] = ast.parse(f.read_text(encoding="utf-8")) if f.is_file() else None
        if trees[path] is None:
            found.append(f"{PAGE}:{line}: cites {path}, which vLLM {CITED_RELEASE}'s wheel lacks")
        elif not defines(trees[path], name):
            found.append(f"{PAGE}:{line}: cites {name} in {path}, which does not define it")
    return found


def _sections_with_preconditions() -> list[int]:
    return sorted(precondition_bullets((ROOT / PAGE).read_text(encoding="utf-8")))


@pytest.mark.parametrize("section", [
    pytest.param(n, marks=pytest.mark.xfail(strict=True, reason="citations pending (PENDING_CITATIONS)"))
    if n in PENDING_CITATIONS else n
    for n in _sections_with_preconditions()
])
def test_every_production_precondition_cites_vllm(section):
    assert citation_problems((ROOT / PAGE).read_text(encoding="utf-8"), {section}) == []


def test_cited_vllm_code_exists(needs):
    """Each ``(vLLM: path, name)`` of the page: the path is a file of vLLM 0.33.0's wheel and
    defines the name (the files are taken out of the wheel once, into its extraction)."""
    from eaglefuzz.harness.sources import wheels

    cited = cited_code((ROOT / PAGE).read_text(encoding="utf-8"))
    assert cited, "the page cites no vLLM code"
    try:
        files = wheels.fetch_members("vllm", CITED_RELEASE, sorted({path for path, _ in cited}))
    except wheels.FetchFailed as exc:
        if not exc.offline:
            raise
        needs.unavailable("offline", f"vLLM {CITED_RELEASE}: {exc}")
    assert resolution_problems(cited, files) == []


_CITED_PAGE = """# C

## 1. `f`

### 1.2 Production preconditions

Call site: prose is no bullet.

- a precondition over
  two lines (vLLM: vllm/a.py, f; vllm/a.py, C.g)
- tested (vLLM: vllm/a.py, f) (vLLM test: tests/v1/test_a.py, test_f)
  - a nested bullet belongs to its parent (vLLM: vllm/a.py, C)

### 1.3 Launch

- not a precondition

## 2. `g`

### 2.2 Production preconditions

- uncited
- cited in the middle (vLLM: vllm/a.py, f) but not at the end
- (vLLM: a.py, f)
- (vLLM: vllm/a.py f)
- (vLLM test: vllm/test_a.py, test_f)
- (vLLM: vllm/a.py, h; vllm/b.py, f; vllm/a.py, f.g; vllm/a.py, C.f)
"""


def test_a_well_cited_section_passes_and_each_fault_is_seen(tmp_path):
    assert citation_problems(_CITED_PAGE, {1}) == []
    assert {n: len(b) for n, b in precondition_bullets(_CITED_PAGE).items()} == {1: 2, 2: 6}
    found = "\n".join(citation_problems(_CITED_PAGE))
    assert "§1.2" not in found
    assert ":22: §2.2 bullet cites no vLLM code" in found
    assert ":23: §2.2 bullet cites no vLLM code" in found
    assert "citation 'vllm/a.py f' is not 'path/file.py, name'" in found
    assert "vLLM code 'a.py' is not a path inside the wheel" in found
    assert "vLLM test 'vllm/test_a.py' is not under tests/" in found
    assert len(found.splitlines()) == 5
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "a.py").write_text("def f():\n    pass\n\n\nclass C:\n    def g(self):\n        pass\n")
    cited = cited_code(_CITED_PAGE)
    assert ("vllm/a.py", "C.g") in cited and ("tests/v1/test_a.py", "test_f") not in cited
    problems_ = resolution_problems(cited, tmp_path)
    assert problems_ == [
        f"{PAGE}:27: cites C.f in vllm/a.py, which does not define it",
        f"{PAGE}:27: cites f.g in vllm/a.py, which does not define it",
        f"{PAGE}:27: cites h in vllm/a.py, which does not define it",
        f"{PAGE}:27: cites vllm/b.py, which vLLM {CITED_RELEASE}'s wheel lacks",
    ]
