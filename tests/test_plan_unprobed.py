"""``probe = false``: a job file is planned on a Slurm or Kubernetes cluster that cannot be
reached, from the adapter's catalogue and the site's declarations alone (what a release build's
smoke test does, and a user on a laptop away from the cluster).

Each cluster here points at nothing: a Slurm whose commands do not exist, a kubeconfig that
does not exist. Probing, the plan fails as unreachable; unprobed, it plans, every answer that
would have been probed is ``unknown`` and says why, and a declaration still wins.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from jobdispatch_cli.main import main

CLUSTERS = {
    "slurm": 'adapter = "slurm"\ntransport = "local"\nbin_dir = "{missing}"\n',
    "kubeflow": 'adapter = "kubeflow"\nkubeconfig = "{missing}/kubeconfig"\n',
}

JOB = """\
name = "unprobed"
command = ["python3", "train.py"]
nodes = 2

[[recovery.rules]]
on = ["preempted"]
action = "resubmit"
budget = 2
"""


def plan(
    tmp_path: Path, adapter: str, extra: str, *, job_text: str = JOB, args: tuple[str, ...] = ()
) -> tuple[int, str, str]:
    config = tmp_path / "config" / "jobdispatch" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    section = CLUSTERS[adapter].format(missing=tmp_path / "missing")
    config.write_text(f"[clusters.far]\n{section}{extra}")
    job = tmp_path / "job.toml"
    job.write_text(job_text)
    env = {
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "JOBDISPATCH_CLUSTER": "far",
    }
    runner = CliRunner()
    with runner.isolation(env=env) as (out, err, _):
        try:
            main(["plan", str(job), "--json", *args])
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue().decode(), err.getvalue().decode()


@pytest.mark.parametrize("adapter", sorted(CLUSTERS))
def test_probing_a_cluster_out_of_reach_fails_as_unreachable(tmp_path: Path, adapter: str) -> None:
    code, _, err = plan(tmp_path, adapter, "")
    assert code == 5, err  # unreachable (docs/reference/errors.md)


@pytest.mark.parametrize("adapter", sorted(CLUSTERS))
def test_an_unprobed_cluster_plans_from_the_catalogue_and_the_declarations(
    tmp_path: Path, adapter: str
) -> None:
    code, out, err = plan(tmp_path, adapter, 'probe = false\ncapabilities = { hold = "yes" }\n')
    assert code == 0, err
    made = json.loads(out)
    assert [r["enforcer"] for r in made["rules"]] == ["supervisor"]
    answers = made["capabilities"]
    assert answers["hold"]["answer"] == "yes"
    assert answers["hold"]["source"] == "declared"
    probed = {c: a for c, a in answers.items() if a["source"] == "probed"}
    assert probed, "an adapter that probes has answers that rest on the probe"
    assert all(a["answer"] == "unknown" for a in probed.values()), probed
    assert all("probe = false" in a["detail"] for a in probed.values()), probed
    catalogue = [a for a in answers.values() if a["source"] == "catalogue"]
    assert any(a["answer"] != "unknown" for a in catalogue), "the catalogue still answers"
