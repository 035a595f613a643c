"""``proxima export RUN_DIR``: write the deterministic policy as one ONNX or TorchScript file."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import tyro

from proxima.commands.argv import parse


@dataclass
class ExportArgs:
    run_dir: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="RUN_DIR")]
    """the run directory written by `proxima train`"""
    format: Annotated[str, tyro.conf.arg(metavar="onnx|torchscript")] = "onnx"
    """onnx (run by onnxruntime, from any language; needs the export extra) or torchscript (torch.jit.load)"""
    output: Annotated[str | None, tyro.conf.arg(metavar="FILE")] = None
    """the file to write, and FILE.json beside it (default: RUN_DIR/policy.onnx or RUN_DIR/policy.pt)"""
    encoder: Annotated[str | None, tyro.conf.arg(metavar="MODULE:CLASS")] = None
    """build the network with this encoder class: the run's own named again, which proxima does not import because agent.json names it (docs/SECURITY.md)"""
    actor_critic: Annotated[str | None, tyro.conf.arg(metavar="MODULE:CLASS")] = None
    """build the network with this actor-critic class (--actor-critic): the run's own named again, which proxima does not import because agent.json names it (docs/SECURITY.md)"""
    trust_code: bool = False
    """import the code that the run's files name (an env factory, a module:ID env id, an encoder or actor-critic class) without its being named again; only for files you trust (docs/SECURITY.md)"""


def run(argv: list[str]) -> int:
    from proxima.run.export import export

    args = parse(ExportArgs, argv, "proxima export")
    path = export(
        args.run_dir,
        args.format,
        args.output,
        encoder=args.encoder,
        actor_critic=args.actor_critic,
        trust_code=args.trust_code,
    )
    print(f"wrote {path} and {path}.json")
    return 0
