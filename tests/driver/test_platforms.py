"""The platforms (pav.platform): which stage functions each gives the one pipeline, and runs of it in process
through their real stages where those need no playbook (provision of a static inventory; report)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from pav import pipeline, platform
from pav.context import Options, RunContext
from pav.platform import k8s_platform
from pav.results import HostRecord
from pav.stages import collect, configure, isolate, provision, teardown, validate
from pav.stages import k8s as k8s_stages
from tests.driver.contexts import context
from tests.driver.signals import forget

INVENTORY = (
    "all:\n  hosts:\n    node-1:\n      ansible_host: 10.0.0.11\n    node-2:\n      ansible_host: 10.0.0.12\n"
)


@pytest.fixture(autouse=True)
def no_wrap_up_left() -> Iterator[None]:
    yield
    forget()  # execute marks the process as wrapping up


def static_env(tmp_path: Path, options: Options, **settings: object) -> RunContext:
    """A run of a static env whose inventory is a real file (the hosts are never contacted here)."""
    inv = tmp_path / "inv"
    (inv / "group_vars").mkdir(parents=True)
    (inv / "group_vars" / "all.yml").write_text("pav_isolate: true\n")
    (inv / "hosts.yml").write_text(INVENTORY)
    ctx = context(0, options=options, **settings)
    ctx.env = replace(ctx.env, inventory_dir=inv, hosts_file=inv / "hosts.yml")
    ctx.run_dir = tmp_path / "run"
    ctx.run_dir.mkdir()
    return ctx


def test_hosts_gives_the_pipeline_the_ansible_stages() -> None:
    made = platform.hosts_platform()
    assert made.name == "hosts"
    assert dict(made.stages) == {
        "provision": provision.run, "configure": configure.run, "validate": validate.run,
        "collect": collect.run, "isolate": isolate.run, "teardown": teardown.run,
    }  # fmt: skip
    assert set(made.after) == {"provision", "configure"}  # provision: hosts resolved, gone runs' work ended
    assert made.finish is not None


def test_k8s_runs_jobs_and_has_no_isolate_stage() -> None:
    made = k8s_platform()
    assert made.name == "k8s"
    assert dict(made.stages) == {
        "provision": k8s_stages.provision_stage, "configure": k8s_stages.configure_stage,
        "validate": k8s_stages.validate_stage, "collect": k8s_stages.collect_stage,
        "report": k8s_stages.report_stage, "teardown": k8s_stages.teardown_stage,
    }  # fmt: skip
    # --recheck's nodes and --on-fail's marks are the pipeline's (pav.marking.flow), as on hosts
    assert made.after == {} and made.finish is None


def test_the_setting_picks_the_platform() -> None:
    assert pipeline.platform_for(context()).name == "hosts"
    assert pipeline.platform_for(context(platform="k8s", tests=["torch_nccl_allreduce"])).name == "k8s"


def test_facts_are_read_from_the_run_dir_when_validate_runs_without_configure(tmp_path: Path) -> None:
    facts = {"gpu": {"count": 2}}
    for stages, loaded in ((("validate", "collect"), facts), (("configure", "validate"), {})):
        ctx = context(1, options=Options(stages=stages))
        ctx.run_dir = tmp_path
        ctx.results.hosts = {"h0": HostRecord("h0")}
        (tmp_path / "hosts" / "h0").mkdir(parents=True, exist_ok=True)
        (tmp_path / "hosts" / "h0" / "facts.json").write_text(json.dumps(facts))
        platform.hosts_platform().after["configure"](ctx)
        assert ctx.results.hosts["h0"].facts == loaded, stages


def test_a_static_env_run_resolves_its_hosts_after_provision(tmp_path: Path) -> None:
    """The hosts platform through the pipeline: provision of a static env stages its inventory, the hook
    after it resolves the hosts (ansible-inventory), the report writes its files."""
    ctx = static_env(tmp_path, Options(stages=("provision",), results_root=tmp_path / "runs"))
    assert pipeline.execute(ctx, platform.hosts_platform()) == 0
    assert ctx.results.verdict == "NONE"  # the run did not validate
    assert ctx.host_names == ["node-1", "node-2"]
    assert {n: r.address for n, r in ctx.results.hosts.items()} == {
        "node-1": "10.0.0.11",
        "node-2": "10.0.0.12",
    }
    staged = ctx.run_dir / "inventory"
    assert (staged / "hosts.yml").read_text() == INVENTORY
    assert (staged / "group_vars" / "all.yml").is_file()
    recorded = json.loads((ctx.run_dir / "results.json").read_text())
    assert [(s["name"], s["status"], s["detail"]) for s in recorded["stages"]] == [
        ("provision", "ok", "static inventory: nothing to provision"),
        ("report", "ok", "verdict NONE"),
    ]


def test_a_kept_static_run_tears_nothing_down(tmp_path: Path) -> None:
    ctx = static_env(tmp_path, Options(stages=("teardown",), keep=True, results_root=tmp_path / "runs"))
    assert pipeline.execute(ctx, platform.hosts_platform()) == 0
    [_, record] = ctx.results.stages
    assert (record.name, record.status) == ("teardown", "ok")
    assert record.detail.startswith("kept (--keep): nothing removed")


def test_a_k8s_run_on_an_existing_cluster_names_its_kubeconfig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    ctx = context(
        0,
        platform="k8s",
        tests=["torch_nccl_allreduce"],  # a k8s run takes GPU tests only
        options=Options(stages=("provision",), results_root=tmp_path / "runs"),
    )
    ctx.run_dir = tmp_path
    assert pipeline.execute(ctx, pipeline.platform_for(ctx)) == 0
    record = ctx.results.stages[0]
    assert (record.name, record.status) == ("provision", "ok")
    assert record.detail == f"existing cluster: {kubeconfig}"
    assert not ctx.provisioned  # nothing for teardown to destroy
