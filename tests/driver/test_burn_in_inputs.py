"""--burn-in (issue 40): resolved once with the run's inputs, a flag over pav_burn_in_s; it adds gpu_burn
with its duration and grows its limit; a burn-in without a length, or a duration that is none, stops the
run with one line; PAV_FAULT_SDC_GPU reaches every SDC check of the run."""

from __future__ import annotations

from pathlib import Path

import pytest

from pav import catalog, cli
from pav.envs import custom_env
from pav.errors import PavError
from pav.options import Options
from pav.run_inputs import resolve
from pav.settings import Settings
from pav.units import parse_duration
from tests.conftest import ROOT
from tests.driver.test_run_inputs import made, names, own_inventory

LOCAL = custom_env(ROOT / "inventories" / "local" / "hosts.yml")


def args_of(inputs: object, test: str) -> tuple[str, ...]:
    spec = inputs.spec(test)  # type: ignore[attr-defined]
    assert spec is not None
    return spec.args


@pytest.mark.parametrize(
    ("text", "seconds"), [("300", 300), ("300s", 300), ("5m", 300), ("1.5h", 5400), ("0", 0)]
)
def test_parse_duration(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


def test_burn_in_adds_gpu_burn_with_its_length_and_limit() -> None:
    inputs = resolve(LOCAL, Options(burn_in_s=300), Settings(tests=["sdc_check"], test_timeout_s=900))
    assert names(inputs) == ["sdc_check", "gpu_burn"]
    assert args_of(inputs, "gpu_burn")[-2:] == ("--duration-s", "300")
    assert inputs.timeouts.for_test("gpu_burn") == 1200
    assert inputs.timeouts.for_test("sdc_check") == 900
    assert inputs.burn_in_s == 300


def test_a_selected_gpu_burn_is_not_added_twice_and_the_setting_gives_the_length() -> None:
    inputs = resolve(LOCAL, Options(), Settings(tests=["gpu_burn", "sdc_check"], burn_in_s=3600))
    assert names(inputs) == ["gpu_burn", "sdc_check"]
    assert args_of(inputs, "gpu_burn").count("--duration-s") == 1
    assert resolve(LOCAL, Options(burn_in_s=60), Settings(burn_in_s=3600)).burn_in_s == 60


def test_no_burn_in_by_default() -> None:
    inputs = resolve(LOCAL, Options(), Settings())
    assert "gpu_burn" not in names(inputs) and inputs.burn_in_s == 0


def test_gpu_burn_without_a_length_stops_the_run() -> None:
    with pytest.raises(PavError, match=r"gpu_burn is a burn-in and needs its length: --burn-in 5m"):
        resolve(LOCAL, Options(), Settings(tests=["gpu_burn"]))
    with pytest.raises(PavError, match=r"gpu_burn is a burn-in"):
        resolve(LOCAL, Options(burn_in_s=0), Settings(tests=["gpu_burn"], burn_in_s=300))


def test_a_bad_duration_is_one_line_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(PavError, match=r"--burn-in: '5 minutes' is not a duration .*5m"):
        made("--inventory", str(own_inventory(tmp_path)), "--burn-in", "5 minutes")
    assert cli.main(["--inventory", str(own_inventory(tmp_path)), "--burn-in", "soon", "--dry-run"]) != 0
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: --burn-in: 'soon' is not a duration (seconds, or a number with s, m or h: 300s, 5m, 1h)"
    ]


def test_the_flag_reaches_the_inputs_through_the_cli(tmp_path: Path) -> None:
    ctx = made("--inventory", str(own_inventory(tmp_path)), "--burn-in", "2m")
    assert names(ctx.inputs)[-1] == "gpu_burn"
    assert ctx.inputs.timeouts.for_test("gpu_burn") == 600 + 120


def test_a_negative_setting_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PavError, match="pav_burn_in_s must be 0"):
        made("--inventory", str(own_inventory(tmp_path, "pav_burn_in_s: -5\n")))


def test_the_sdc_fault_reaches_every_sdc_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(catalog.SDC_FAULT_ENV, "1")
    inputs = resolve(LOCAL, Options(burn_in_s=60), Settings(tests=["sdc_check", "torch_nccl_allreduce"]))
    assert args_of(inputs, "sdc_check")[-4:] == ("--inject-sdc-gpu", "1", "--inject-sdc-rep", "1")
    assert "--inject-sdc-gpu" in args_of(inputs, "gpu_burn")
    assert "--inject-sdc-gpu" not in args_of(inputs, "torch_nccl_allreduce")
    monkeypatch.delenv(catalog.SDC_FAULT_ENV)
    assert "--inject-sdc-gpu" not in args_of(
        resolve(LOCAL, Options(), Settings(tests=["sdc_check"])), "sdc_check"
    )


def test_burn_in_and_sdc_are_pytorch_jobs_on_k8s() -> None:
    inputs = resolve(LOCAL, Options(platform="k8s", burn_in_s=60), Settings(tests=["sdc_check"]))
    assert [catalog.k8s_job_kind(s) for s in inputs.tests] == [catalog.K8S_KINDS["torchrun"]] * 2
