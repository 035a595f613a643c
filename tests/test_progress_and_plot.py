"""Console output (progress bar on a terminal, plain lines elsewhere, nothing with --quiet) and `proxima plot`."""

import io
import json
import os

import numpy as np

import proxima
from proxima.commands import main
from proxima.run.progress import ProgressReport


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
    # --num-seeds: the steps of one seed, which --total-timesteps counts, and the speed of all
    out = io.StringIO()
    report = ProgressReport(40 * 100, 40, stream=out, seeds=3)
    report.update(40, _record(4000, 10.0), [10.0])
    assert out.getvalue() == "global_step=4000 per seed (3 seeds) episodic_return=10.0 SPS=1000 (all seeds)\n"


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


def _episodes(path, steps, ret) -> str:
    """A run directory as far as `proxima plot` reads it: episodes of return ``ret`` finished at ``steps``."""
    os.makedirs(path)
    with open(os.path.join(path, "episodes.jsonl"), "w") as f:
        for step in steps:
            f.write(json.dumps({"global_step": step, "return": ret, "length": 10}) + "\n")
    return str(path)


def _drawn(monkeypatch) -> list:
    """The figures `proxima plot` saves, to read their lines back."""
    import matplotlib.figure

    figures, save = [], matplotlib.figure.Figure.savefig

    def keep(fig, *args, **kwargs):
        figures.append(fig)
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep)
    return figures


def _ends(ax) -> dict:
    """Each line's last drawn step and the values it draws."""
    ends = {}
    for line in ax.lines:
        x, y = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
        ends[line.get_label()] = (float(x[np.isfinite(y)].max()), set(y[np.isfinite(y)].tolist()))
    return ends


def test_plot_ends_each_curve_at_its_own_last_step_and_holds_a_stopped_seed_to_its_groups_end(
    tmp_path, monkeypatch
):
    long = _episodes(tmp_path / "long", range(100, 1001, 100), 1.0)
    short = _episodes(tmp_path / "short", range(100, 501, 100), 3.0)
    batch = tmp_path / "batch"  # a batched run whose seed 1 stopped at step 500
    _episodes(batch / "seed0", range(100, 1001, 100), 1.0)
    _episodes(batch / "seed1", range(100, 501, 100), 3.0)
    (batch / "seeds.json").write_text("{}")
    figures = _drawn(monkeypatch)
    assert main(["plot", long, short, str(batch), "--output", str(tmp_path / "mixed.png")]) == 0
    ax = figures[0].axes[0]
    assert _ends(ax) == {
        "long (n=1)": (1000.0, {1.0}),
        "short (n=1)": (500.0, {3.0}),
        "batch (n=2)": (1000.0, {2.0}),  # seed 1, stopped at 500, counts with its last value
    }
    (band,) = ax.collections  # seed 0 to seed 1, to the group's end
    x, y = band.get_paths()[0].vertices.T
    assert x.max() == 1000.0 and (y.min(), y.max()) == (1.0, 3.0)


def test_plot_into_a_missing_directory_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys):
    run = _episodes(tmp_path / "run", range(100, 501, 100), 1.0)
    output = tmp_path / "nodir" / "x.png"
    assert main(["plot", run, "--output", str(output)]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"proxima plot: error: cannot write {output}: the directory {tmp_path / 'nodir'} does not exist\n"
    )
    assert os.listdir(tmp_path) == ["run"] and os.listdir(run) == ["episodes.jsonl"]


def test_plot_draws_a_run_named_twice_once(tmp_path, monkeypatch):
    run = _episodes(tmp_path / "run", range(100, 501, 100), 1.0)
    figures = _drawn(monkeypatch)
    assert main(["plot", run, run + "/", run, "--output", str(tmp_path / "x.png")]) == 0
    assert _ends(figures[0].axes[0]) == {"run (n=1)": (500.0, {1.0})}
