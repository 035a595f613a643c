"""``proxima presets``: list the presets, or show one as the train flags it stands for."""

from __future__ import annotations

from proxima.base.errors import UserError
from proxima.commands.argv import helping


def run(argv: list[str]) -> int:
    from proxima.run.config import load_preset, preset_names, read_preset

    if helping(argv):
        print(
            "usage: proxima presets [NAME]\n\nWithout NAME: every preset, with what it is for and how long it took "
            "where a results table measured it (docs/RESULTS.md, docs/journal/benchmarks.md). With NAME: that "
            "preset's settings, as the train flags it stands for (proxima train --config NAME takes them; any "
            "flag given beside it wins)."
        )
        return 0
    if len(argv) > 1:
        raise UserError(f"unexpected argument {argv[1]!r}; proxima presets takes one preset NAME or none")
    if argv and argv[0] not in preset_names():
        raise UserError(f"unknown preset {argv[0]!r}; accepted: {', '.join(preset_names())}")
    if argv:  # one preset in full, as the flags it stands for
        for key, value in load_preset(argv[0]).items():
            value = " ".join(map(str, value)) if isinstance(value, list) else value
            print(f"--{key.replace('_', '-')} {value}")
        return 0
    for name in preset_names():
        preset = read_preset(name)
        print(f"{name:30s} {preset.get('description', '')}")
        print(f"{'':30s} how long: {preset.get('typical', 'not measured')}")
    return 0
