import json

import pytest

from pipeline import io


def test_atomic_write_replaces_and_leaves_no_temp(tmp_path):
    f = tmp_path / "a" / "r.json"
    io.atomic_write_json(f, {"x": 1})
    io.atomic_write_json(f, {"x": 2})
    assert json.loads(f.read_text()) == {"x": 2}
    assert [p.name for p in f.parent.iterdir()] == ["r.json"]


def test_failed_write_keeps_previous_content(tmp_path):
    f = tmp_path / "r.json"
    io.atomic_write_json(f, {"ok": True})
    with pytest.raises(TypeError):
        io.atomic_write_json(f, {"bad": object()})
    assert json.loads(f.read_text()) == {"ok": True}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_atomic_dir_keeps_old_dir_on_failure(tmp_path):
    d = tmp_path / "ckpt"
    with io.AtomicDir(d) as tmp:
        (tmp / "w").write_text("v1")
    with pytest.raises(RuntimeError):
        with io.AtomicDir(d) as tmp:
            (tmp / "w").write_text("partial")
            raise RuntimeError("crash")
    assert (d / "w").read_text() == "v1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]


def test_one_line_keeps_the_cause_line():
    from pipeline.errors import one_line

    e = ValueError("1 validation error for GPTQModifier\nno_such_option\n  Extra inputs are not permitted")
    assert one_line(e) == "ValueError: 1 validation error for GPTQModifier / no_such_option"
    assert one_line(RuntimeError("x" * 500)).startswith("RuntimeError: x") and len(one_line(RuntimeError("x" * 500))) == 300
