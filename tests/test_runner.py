"""The stage prologue and the quiet run (pipeline/stages/runner.py, pipeline/runlog.py), without a model:
library output of every kind goes to the stage's log, the terminal gets one line, a failure names the
log, a bad-input message reaches stderr alone, exit codes are the stage's own."""
import logging
import os
import pty
import re
import shutil
import time
import subprocess
import sys

import pytest

from pipeline import paths, runlog
from pipeline.stages import runner

BNB = "bitsandbytes.autograd._functions"


@pytest.fixture
def project(tmp_path, monkeypatch, root):
    shutil.copy(root / "params.yaml", tmp_path / "params.yaml")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["stage", "smollm2-135m", "int8"])
    return tmp_path


def run_stage(body, kind="quantize", argnames=("model", "tier")):
    main = runner.stage_main(kind, argnames)(body)      # as the stages declare their main()
    main()


def log_of(project, name="quantize@smollm2-135m-int8"):
    return (project / paths.stage_log(name)).read_text()


def run_script(project, root, body: str, argv=("smollm2-135m", "int8")) -> subprocess.CompletedProcess:
    """A stage of its own in a fresh interpreter, as DVC runs one: real logging, warnings, fds."""
    code = ("import sys\nfrom pipeline.stages import runner\n"
            "with runner.stage('quantize', ('model', 'tier')) as st:\n"
            + "".join(f"    {line}\n" for line in body.strip().splitlines()))
    # PYTHONUNBUFFERED would make libc's stdout unbuffered too, hiding what a buffered one does
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, "-c", code, *argv], cwd=project, env=env, capture_output=True,
                          text=True, timeout=60)


def test_all_output_goes_to_the_log_and_the_terminal_gets_one_line(project, root):
    r = run_script(project, root, """
import ctypes, logging, os, subprocess, warnings
print("python stdout")
print("python stderr", file=sys.stderr)
os.write(1, b"fd 1\\n")
os.write(2, b"fd 2\\n")
logging.getLogger("some.library").warning("a library warning")
warnings.warn("a python warning")
ctypes.CDLL(None).printf(b"C stdio\\n")   # buffered in libc: must reach the log, not the terminal at exit
subprocess.run([sys.executable, "-c", "import os; os.write(2, b'child process')"], check=True)
assert st.params.tiers["int8"] and st.args == ["smollm2-135m", "int8"]
""")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert len(r.stdout.splitlines()) == 1 and r.stdout.startswith("quantize@smollm2-135m-int8: ok in "), r.stdout
    log = log_of(project)
    for text in ("python stdout", "python stderr", "fd 1", "fd 2", "a library warning", "a python warning",
                 "C stdio", "child process"):
        assert text in log, text


def test_the_terminal_is_back_after_the_stage(project, capfd):
    run_stage(lambda st: os.write(1, b"inside\n"))
    assert capfd.readouterr().out.startswith("quantize@smollm2-135m-int8: ok in ")
    print("after")
    os.write(2, b"fd 2 after\n")
    assert capfd.readouterr() == ("after\n", "fd 2 after\n")


def test_a_handler_made_during_the_stage_writes_to_the_terminal_after_it(project, capfd):
    made = []
    run_stage(lambda st: made.append(logging.StreamHandler()))     # as a library's first import does
    capfd.readouterr()
    made[0].emit(logging.LogRecord("lib", logging.WARNING, __file__, 1, "later", None, None))
    assert capfd.readouterr().err == "later\n"


def test_a_failed_variant_says_so_and_names_the_log(project, capfd):
    run_stage(lambda st: st.done("failed", "ValueError: no_such_option"))
    out, _ = capfd.readouterr()
    assert out.startswith("quantize@smollm2-135m-int8: failed in ")
    assert out.rstrip().endswith("(ValueError: no_such_option; log: logs/quantize@smollm2-135m-int8.log)")
    run_stage(lambda st: st.done("unsupported", "no AVX-512 here"))
    out, _ = capfd.readouterr()
    assert out.startswith("quantize@smollm2-135m-int8: unsupported in ") and out.rstrip().endswith("(no AVX-512 here)")
    assert "log:" not in out


def test_a_crash_is_one_line_naming_the_log_and_its_error_exit_1(project, capfd):
    def body(st):
        print("loading...")
        raise RuntimeError("boom\nsecond line")

    with pytest.raises(SystemExit) as e:
        run_stage(body)
    assert e.value.code == 1
    out, err = capfd.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith("quantize@smollm2-135m-int8: failed in ")
    assert "RuntimeError: boom / second line; log: logs/quantize@smollm2-135m-int8.log" in err
    assert "Traceback" in log_of(project) and "loading..." in log_of(project)


def test_a_non_zero_exit_relays_the_last_error_line(project, capfd):
    def body(st):
        os.write(2, b"some library line\nException: the real cause\n")
        raise SystemExit(3)

    with pytest.raises(SystemExit) as e:
        run_stage(body)
    assert e.value.code == 3
    err = capfd.readouterr().err
    assert "failed in" in err and "(Exception: the real cause; log: logs/quantize@smollm2-135m-int8.log)" in err


def test_a_bad_input_message_reaches_stderr_alone_with_its_exit_code(project, capfd):
    def body(st):
        print("qtier: eval set x: 3 rows")       # an earlier message of the stage's own
        print("qtier: error: eval.tasks.x.data: file not found: nope.jsonl", file=sys.stderr)
        raise SystemExit(2)

    with pytest.raises(SystemExit) as e:
        run_stage(body)
    assert e.value.code == 2
    out, err = capfd.readouterr()
    assert (out, err) == ("", "qtier: error: eval.tasks.x.data: file not found: nope.jsonl\n")


def test_a_params_error_reaches_stderr(project, capsys):
    (project / "params.yaml").write_text((project / "params.yaml").read_text().replace("tiers:", "tierz:", 1))
    ran = []
    with pytest.raises(SystemExit) as e:
        run_stage(ran.append)
    assert e.value.code == 2 and not ran
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("qtier: params error: ") and "tierz" in err


def test_an_unknown_variant_is_one_line_before_any_work(project, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["stage", "smollm2-135m", "int9"])
    ran = []
    with pytest.raises(SystemExit) as e:
        run_stage(ran.append)
    assert e.value.code == 1 and not ran       # exit 1, as the stages' own check had it
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith("qtier: no variant smollm2-135m/int9 in params.yaml: tiers has no 'int9' (it has ")


def test_wrong_arguments_get_the_usage_line(project, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["stage", "smollm2-135m"])
    with pytest.raises(SystemExit) as e:
        run_stage(lambda st: None, "evaluate", ("model", "tier", "kv"))
    assert e.value.code == 2
    assert capsys.readouterr().err == "qtier: usage: python -m pipeline.stages.evaluate <model> <tier> <kv>\n"


def test_decide_style_exit_1_after_writing_shows_its_summary_then_the_failure(project, monkeypatch, capfd):
    monkeypatch.setattr(sys, "argv", ["decide", "-q"])      # a stage of no arguments reads none

    def body(st):
        st.done("ok", None, report=["qtier: decision written to results/decision.md", "  m: recommended int8"])
        print("qtier: 1 variant(s) failed: m/x-auto (quantize: boom)", file=sys.stderr)
        raise SystemExit(1)

    with pytest.raises(SystemExit) as e:
        run_stage(body, "decide", ())
    assert e.value.code == 1
    out, err = capfd.readouterr()
    lines = out.splitlines()
    assert lines[0].startswith("decide: ok in ") and lines[1:] == ["qtier: decision written to results/decision.md",
                                                                    "  m: recommended int8"]
    assert err == "qtier: 1 variant(s) failed: m/x-auto (quantize: boom)\n"


def test_keyboard_interrupt_still_propagates_and_the_terminal_is_restored(project, capfd):
    def body(st):
        raise KeyboardInterrupt("signal 15")

    with pytest.raises(KeyboardInterrupt):
        run_stage(body)
    err = capfd.readouterr().err
    assert err.startswith("quantize@smollm2-135m-int8: interrupted after ")
    os.write(1, b"back\n")
    assert capfd.readouterr().out == "back\n"


def test_the_bitsandbytes_warning_is_kept_once_and_counted(project, root):
    r = run_script(project, root, f"""
import logging
for _ in range(500):
    logging.getLogger("{BNB}").warning("MatMul8bitLt: inputs will be cast from %s to float16 during quantization", "torch.bfloat16")
logging.getLogger("{BNB}").warning("another bitsandbytes message")
assert logging.getLogger("{BNB}").filters
""")
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 1 and r.stderr == ""
    log = log_of(project)
    assert log.count("MatMul8bitLt: inputs will be cast from torch.bfloat16") == 1
    assert "(499 identical bitsandbytes warnings suppressed" in log
    assert "another bitsandbytes message" in log


def test_the_collapse_filter_leaves_with_the_stage(project):
    run_stage(lambda st: None)
    assert logging.getLogger(BNB).filters == []


class FakeTerm:
    def __init__(self, tty):
        self.tty, self.written = tty, []

    def write(self, text):
        self.written.append(text)

    def width(self):
        return 200


def test_the_tty_bar_overwrites_one_line_and_forgets_a_finished_step():
    now = [0.0]
    term = FakeTerm(tty=True)
    bar = runlog.Bar(term, "evaluate@m-t-kv", clock=lambda: now[0])
    now[0] = 1.0
    bar.update(5, 10, "log-likelihood")
    assert term.written == ["\r\x1b[Kevaluate@m-t-kv  1.0s  log-likelihood [##########..........] 5/10"]
    bar.update(6, 10, "log-likelihood")                  # within the redraw interval: not drawn
    assert len(term.written) == 1
    now[0] = 75.0
    bar.update(10, 10, "log-likelihood")
    assert term.written[-1].endswith("1m15s  log-likelihood [####################] 10/10")
    bar.tick()
    assert term.written[-1] == "\r\x1b[Kevaluate@m-t-kv  1m15s"
    bar.clear()
    assert term.written[-1] == "\r\x1b[K"


def test_the_stage_line_replaces_the_bar_for_good():
    term = FakeTerm(tty=True)
    console = runlog.Console(term, term, runlog.Bar(term, "quantize@m-t"))
    runlog.progress(1, 2, "not in a stage")            # the module's bar is only the running stage's
    console.bar.update(1, 2, "calibration")
    console.line("quantize@m-t: ok in 1.0s")
    assert term.written[1:] == ["\r\x1b[K", "quantize@m-t: ok in 1.0s\n"]
    console.bar.tick()
    console.bar.update(2, 2, "calibration")
    assert len(term.written) == 3


def test_the_bar_fits_the_terminal_width():
    term = FakeTerm(tty=True)
    term.width = lambda: 30
    runlog.Bar(term, "evaluate@a-long-model-name-int8-fp8").update(1, 10, "log-likelihood")
    assert len(term.written[0]) == len("\r\x1b[K") + 29


def test_on_a_tty_the_bar_ticks_and_the_stage_line_replaces_it(project, root):
    """A real pseudo-terminal: the ticking clock, the bar, then one line; library output stays out."""
    code = ("import time\nfrom pipeline import runlog\nfrom pipeline.stages import runner\n"
            "with runner.stage('quantize', ('model', 'tier')) as st:\n"
            "    print('library chatter')\n"
            "    runlog.progress(2, 4, 'calibration')\n"
            "    time.sleep(0.2)\n")
    main, child = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", code, "smollm2-135m", "int8"], cwd=project, stdout=child,
                            stderr=child, env={**os.environ, "PYTHONPATH": str(root)})
    os.close(child)
    seen = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:         # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(main)
    assert proc.wait(timeout=60) == 0
    text = seen.decode()
    bar = r"\r\x1b\[Kquantize@smollm2-135m-int8  {}s  calibration \[#{{10}}\.{{10}}\] 2/4"
    assert re.search(bar.format(r"0\.\d"), text), text         # the clock's ticking: test_the_ticker_redraws_the_clock
    assert re.search(r"\r\x1b\[Kquantize@smollm2-135m-int8: ok in \d+\.\ds\r\n$", text), text
    assert "library chatter" not in text


def test_off_a_tty_progress_is_at_most_a_line_a_minute():
    now = [0.0]
    term = FakeTerm(tty=False)
    bar = runlog.Bar(term, "quantize@m-t", clock=lambda: now[0])
    for i in range(100):
        now[0] = i
        bar.update(i, 200, "calibration")
    assert term.written == ["quantize@m-t: calibration 60/200 (30%), 1m00s\n"]
    bar.tick()
    bar.clear()
    assert len(term.written) == 1


def test_progress_outside_a_stage_does_nothing(capfd):
    runlog.progress(1, 2, "anything")
    assert capfd.readouterr() == ("", "")


def test_durations_and_the_last_error_line(tmp_path):
    assert [runlog.duration(s) for s in (0.44, 59.9, 185, 3725)] == ["0.4s", "59.9s", "3m05s", "1h02m"]
    log = tmp_path / "x.log"
    log.write_text("qtier: earlier\nTraceback\nValueError: late\n")
    assert runlog.last_error_line(log) == "qtier: earlier"
    log.write_text("a\n  10%|#  | 1/10\r 100%|###| 10/10\n\n")
    assert runlog.last_error_line(log) == "100%|###| 10/10"
    assert runlog.last_error_line(tmp_path / "missing.log") is None


def test_the_ticker_redraws_the_clock_until_stopped():
    import threading

    class Bar:
        ticks = 0

        def tick(self):
            self.ticks += 1

    bar, stop = Bar(), threading.Event()
    t = threading.Thread(target=runlog._tick, args=(bar, stop, 0.01))
    t.start()
    deadline = time.monotonic() + 5
    while bar.ticks < 3 and time.monotonic() < deadline:
        time.sleep(0.005)
    stop.set()
    t.join(timeout=5)
    assert not t.is_alive() and bar.ticks >= 3
    after = bar.ticks
    runlog._tick(bar, stop, 0.01)          # already stopped: no redraw
    assert bar.ticks == after
