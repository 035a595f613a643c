"""The trust boundary of a run directory (docs/SECURITY.md): its files may name code, and proxima never imports
or calls it because they do.

A run's JSON files (``agent.json``, ``config.json``, ``seeds.json``, ``sweep.json``, ``tune.json``, a ``--config``
file) record how the env and the network were made: an env id, which can name a module to import first
(``module:Env-v0``, ``pettingzoo:MODULE``, ``selfplay:MODULE``), the ``module:name`` of an env factory that is
called with the run's ``env_kwargs``, the ``module:Class`` of an encoder or of a whole actor-critic, the
``module:Name`` of an algorithm and the ``module:function`` of each of your functions in the loop
(proxima.algo.custom). A stranger's copy can name any module there (``subprocess:run``), so each reader of such a
file calls ``check`` before it makes anything, and ``check`` passes a name only where

- nothing is imported for it: an id without a module (looked up in Gymnasium's registry, which only code already
  imported fills), a module already imported (``module:Env-v0`` then only looks up the id it registered), or a
  module of a package that proxima itself runs envs from (``KNOWN_PACKAGES``: its own code and no one else's);
- the user gave that same name in this process: on the command line (``--env-id``, ``--env-factory``,
  ``--encoder``, ``--actor-critic``, ``--algo``, ``--policy-loss`` and the like) or from Python (``env=``,
  ``encoder=``, ``actor_critic=``, ``policy_loss=``, or an earlier ``train`` that was given the object;
  ``remember`` records those);
- or the user passed the trust switch for that one command: ``--trust-code``, ``trust_code=True``.

Otherwise it refuses in one line that names the module and how to give it.
"""

from __future__ import annotations

import sys

from proxima.base.errors import UserError

TRUST_FLAG = "--trust-code"

# Packages whose modules proxima imports to run their envs (the extras): importing one of their modules runs
# only that package's code, as a registered id does.
KNOWN_PACKAGES = ("proxima", "gymnasium", "ale_py", "pettingzoo", "vmas")

# env ids whose rest is a module that is imported and whose env() is called (proxima's multi-agent backends)
MODULE_PREFIXES = ("pettingzoo:", "selfplay:")

# The settings that can name code, and the flag (in Python: the argument) that names each again.
SETTINGS = {
    "env_id": ("env id", "--env-id ID (Python: `env_id=...`)"),
    "env_factory": ("env factory", "--env-factory MODULE:NAME (Python: `env=...`)"),
    "encoder": ("encoder", "--encoder MODULE:CLASS (Python: `encoder=...`)"),
    "actor_critic": ("actor-critic class", "--actor-critic MODULE:CLASS (Python: `actor_critic=...`)"),
    "algo": ("algorithm", "--algo MODULE:NAME (Python: `algo=...`)"),
}
# Your functions in the loop (proxima.algo.custom), each named by its own flag, or a module's all by --algo MODULE
FUNCTIONS = ("advantages", "policy_loss", "value_loss", "entropy_loss")
SETTINGS.update(
    {
        name: (words, f"--{name.replace('_', '-')} MODULE:FUNCTION or --algo MODULE (Python: `{name}=...`)")
        for name, words in zip(
            FUNCTIONS, ("advantage estimator", "policy loss", "value loss", "entropy loss"), strict=True
        )
    }
)

# Names given by the user in this process (setting -> the names), which a run's file may then name too.
_GIVEN: dict[str, set[str]] = {setting: set() for setting in SETTINGS}


def remember(setting: str, name: str | None) -> None:
    """Record that the user gave ``name`` for ``setting`` in this process (an object they passed, a name they
    typed, or one that ``check`` let through), so that files naming it later need no switch."""
    if name:
        _GIVEN[setting].add(name)


def module_of(setting: str, name: str | None) -> str | None:
    """The module that making ``setting``'s ``name`` would import, or None where it imports none (an id of
    Gymnasium's registry, a registered encoder's name, an object's placeholder such as ``<lambda>``)."""
    if not isinstance(name, str) or name.startswith("<"):
        return None
    if setting == "env_id":
        prefix = next((p for p in MODULE_PREFIXES if name.startswith(p)), None)
        if prefix is not None:
            return name[len(prefix) :]
        if name.startswith("object:") or ":" not in name or name.startswith("vmas:"):
            return None  # a label, a registered id, or one of VMAS's own scenarios (checked by name)
    return name.partition(":")[0] if ":" in name else None


def _passes_unnamed(setting: str, name: str, module: str) -> bool:
    """Whether ``name`` may be made without the user naming it: nothing but code already imported, or a known
    package's own, runs for it."""
    top = module.split(".")[0]
    if setting == "env_id":
        if name.startswith(MODULE_PREFIXES):  # its module's env() is called: a known package's only
            return top in KNOWN_PACKAGES
        return module in sys.modules or top in KNOWN_PACKAGES  # imported, then the id looked up
    if setting == "env_factory":  # called with the file's env_kwargs: always named
        return False
    return (
        top == "proxima"
    )  # an encoder or actor-critic class, an algorithm, a function in the loop: proxima's own only


def check(
    source: str,
    names: dict[str, str | None],
    *,
    trusted: bool = False,
    named: dict | None = None,
    switch: bool = True,
) -> None:
    """Refuse, in one line, a name in ``names`` (setting -> value, read from the file ``source``) that would
    import or call code the user has not named: ``named`` holds what this command was given (setting ->
    value), which must be the file's own; ``trusted`` is the user's switch (``--trust-code``) for this one command, where it has one
    (``switch``). A name that passes is remembered, so that the same process may make it again."""
    named = {k: v for k, v in (named or {}).items() if v is not None}
    for setting, name in names.items():
        if setting in named and named[setting] != name:  # given again, but not the run's own
            raise UserError(
                f"{source} has the {SETTINGS[setting][0]} {name!r}, and {named[setting]!r} was given: a resumed "
                f"run keeps its settings; give its own, or none"
            )
        module = module_of(setting, name)
        if name is None or module is None or name in _GIVEN[setting] or named.get(setting) == name:
            continue
        if not (trusted or _passes_unnamed(setting, name, module)):
            raise UserError(
                f"{source} names the {SETTINGS[setting][0]} {name!r}, which would import the module {module!r}; "
                "proxima runs no code because a run's files name it (docs/SECURITY.md): name it yourself with "
                f"{SETTINGS[setting][1]}"
                + (
                    f", or add {TRUST_FLAG} (Python: `trust_code=True`) if you trust where these files came from"
                    if switch
                    else ""
                )
            )
        remember(setting, name)


def names_of(args) -> dict[str, str | None]:
    """The settings of a ``PPOArgs`` that can name code."""
    env, algorithm = args.env, args.algorithm
    return {
        "env_id": env.env_id,
        "env_factory": env.env_factory,
        "encoder": args.network.encoder,
        "actor_critic": args.network.actor_critic,
        "algo": algorithm.algo,
        **{name: getattr(algorithm, name) for name in FUNCTIONS},
    }


def check_settings(source: str, args, *, env=None, trusted: bool = False, named: dict | None = None) -> None:
    """``check`` of a run's settings read from ``source``; ``env``, an env object given again, names the env."""
    names = names_of(args)
    if env is not None:
        del names["env_id"], names["env_factory"]
    check(source, names, trusted=trusted, named=named)
