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


def test_a_byte_that_is_not_utf8_names_file_line_and_column(tmp_path):
    f = tmp_path / "set.jsonl"
    f.write_bytes(b'{"text": "ok"}\n{"text": "caf\xe9"}\n')        # latin-1, not UTF-8
    with pytest.raises(io.DataError) as e:
        io.read_jsonl(f, ("text",))
    assert str(e.value) == f"{f}:2: not UTF-8 (byte 0xe9 at column 14); save the file as UTF-8"
    with pytest.raises(io.DataError, match=r"^eval_sets/set\.jsonl:1: not UTF-8 \(byte 0xff at column 1\)"):
        io.read_text(_bytes(tmp_path, b"\xff{}\n"), shown="eval_sets/set.jsonl")


def _bytes(tmp_path, data: bytes):
    f = tmp_path / "raw.txt"
    f.write_bytes(data)
    return f


def test_read_jsonl_numbers_lines_as_text_mode_does(tmp_path):
    f = tmp_path / "crlf.jsonl"
    f.write_bytes(b'{"a": 1}\r\n{"a": 2}\r{"a": "\xe2\x80\xa8"}\n{"a": \n')   # CRLF, lone CR, U+2028 in a string
    with pytest.raises(io.DataError, match=r"crlf\.jsonl:4: not valid JSON"):
        io.read_jsonl(f)
    f.write_bytes(b'{"a": 1}\r\n{"a": 2}\r{"a": "\xe2\x80\xa8"}\n')
    assert io.read_jsonl(f) == [{"a": 1}, {"a": 2}, {"a": "\u2028"}]
