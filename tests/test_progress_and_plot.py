"""Console output (progress bar on a terminal, plain lines elsewhere, nothing with --quiet) and `proxima plot`."""

import io

import proxima
from proxima.cli import main
from proxima.progress import ProgressReport


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def _record(step, ret=None):
    return {"global_step": step, "sps": 1000.0, "episodic_return": ret}


def test_plain_lines_every_5_percent_when_not_a_terminal():
    out = io.StringIO()
    report = ProgressReport(40 * 100, 40, stream=out)
    for u in range(1, 41):
        report.update(u, _record(u * 100, 10.0), [10.0])
    report.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 20 and lines[-1] == "global_step=4000 episodic_return=10.0 SPS=1000"
    assert "\x1b" not in out.getvalue()  # no escape codes in logs


def test_progress_bar_on_a_terminal_shows_steps_speed_and_return():
    out = _Terminal()
    report = ProgressReport(1000, 10, stream=out)
    report.update(1, _record(100), [5.0, 7.0])
    report.message("hello")
    report.close()
    text = out.getvalue()
    assert "steps/s" in text and "mean return 6.0" in text and "hello" in text


def test_quiet_prints_nothing(tmp_path, capsys):
    proxima.train(total_timesteps=1024, quiet=True, run_dir=str(tmp_path / "run"))
    assert capsys.readouterr().out == ""
    proxima.train(total_timesteps=1024, run_dir=str(tmp_path / "run2"))
    out = capsys.readouterr().out
    assert "global_step=1024" in out and "saved agent" in out


def test_plot_overlays_runs(tmp_path, capsys):
    for name in ("a", "b"):
        proxima.train(total_timesteps=2048, quiet=True, seed=len(name), run_dir=str(tmp_path / name))
    output = tmp_path / "curves.png"
    assert main(["plot", str(tmp_path / "a"), str(tmp_path / "b"), "--output", str(output)]) == 0
    assert output.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["plot", str(tmp_path / "missing"), "--output", str(tmp_path / "x.png")]) == 2
    assert main(["plot", str(tmp_path / "a"), "--output", str(tmp_path / "x.jpg")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("proxima plot: error:") for line in err)
    assert not (tmp_path / "x.png").exists()
