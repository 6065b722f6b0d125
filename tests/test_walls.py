import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("check_walls", Path(__file__).with_name("check_walls.py"))
check_walls = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_walls)


def test_import_walls_hold():
    assert check_walls.violations() == []


def test_wall_check_sees_a_crossing(tmp_path, monkeypatch):
    (tmp_path / "oracles").mkdir()
    (tmp_path / "kernels").mkdir()
    (tmp_path / "oracles" / "bad.py").write_text("from ..kernels import spec_decode_utils\nimport triton\n")
    monkeypatch.setattr(check_walls, "ROOT", tmp_path)
    v = check_walls.violations()
    assert any("bad.py:1" in x and "kernels" in x for x in v)
    assert any("bad.py:2" in x and "triton" in x for x in v)
