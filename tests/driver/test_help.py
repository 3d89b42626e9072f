"""The run's --help names every command the tool has (issue 64: it left preflight out): the list is made
from the registry of subcommands, and the registry holds every module of src/pav/commands/."""

from __future__ import annotations

import pkgutil

from pav import cli, commands
from tests.conftest import run_cli_here


def test_every_command_module_is_a_registered_subcommand() -> None:
    modules = {m.name.replace("_", "-") for m in pkgutil.iter_modules(commands.__path__)}
    assert modules == set(cli.SUBCOMMANDS)


def test_help_names_every_subcommand_and_each_answers_its_own_help() -> None:
    run = run_cli_here("--help")
    said = " ".join(run.stdout.split())  # argparse wraps the epilog anywhere
    assert run.rc == 0
    for name, spec in cli.SUBCOMMANDS.items():
        assert f"provision-and-validate {name} {' '.join(spec.usage.split())}" in said, name
        own = run_cli_here(name, "--help")
        assert own.rc == 0 and f"usage: provision-and-validate {name}" in own.stdout, name
