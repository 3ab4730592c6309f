"""The shipped deployment files agree with Kubernetes' schemas (offline: kubernetes-validate bundles
them; kubectl would need a server) and with thinkwire itself: the probes ask its health endpoint,
the ports are the image's, the key options are thinkwire's and point into the mounted Secret."""

from __future__ import annotations

import re

import kubernetes_validate
import pytest
import yaml

from conftest import ROOT
from support.containerfile import final_stage, listen_port
from thinkwire.endpoints import HEALTH, METRICS
from thinkwire.settings import BY_NAME

KUBE = ROOT / "deploy" / "kubernetes"
MANIFESTS = sorted(p for p in KUBE.glob("*.yaml") if p.name != "kustomization.yaml")
# The oldest Kubernetes these are meant for (sleep-free preStop, policy/v1 PDBs: both older) and
# the newest the package knows.
VERSIONS = ["1.29.0", kubernetes_validate.latest_version()]


def resources() -> dict:
    out = {}
    for path in MANIFESTS:
        for doc in yaml.safe_load_all(path.read_text()):
            out[doc["kind"]] = doc
    return out


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_each_manifest_is_valid_kubernetes_strictly(path, version):
    for doc in yaml.safe_load_all(path.read_text()):
        kubernetes_validate.validate(doc, version, strict=True)   # raises, naming the field, if not


def test_the_kustomization_lists_every_manifest():
    assert sorted(yaml.safe_load((KUBE / "kustomization.yaml").read_text())["resources"]) == \
        [p.name for p in MANIFESTS]


def test_the_deployment_probes_thinkwires_health_on_the_images_port():
    dep = resources()["Deployment"]
    pod = dep["spec"]["template"]
    c = pod["spec"]["containers"][0]
    port = listen_port(final_stage())
    assert c["ports"] == [{"name": "http", "containerPort": port}, {"name": "metrics", "containerPort": 9090}]
    for probe in ("readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"] == {"path": HEALTH, "port": "http"}
    assert pod["metadata"]["annotations"] == {"prometheus.io/scrape": "true", "prometheus.io/port": "9090",
                                              "prometheus.io/path": METRICS}
    assert c["args"][0] == final_stage().exec_form("CMD")[0] == "--mode"   # args replace the image's CMD
    # The metrics are answered on their own port only (issue 33, finding 7), which the Service leaves out.
    upstream = c["args"][1]
    assert c["args"] == ["--mode", upstream, "--mode", f"{upstream}@9090"]
    assert {e["name"]: e["value"] for e in c["env"]}["THINK_METRICS_PORT"] == "9090"
    assert dep["spec"]["replicas"] >= 2
    service = resources()["Service"]
    assert service["spec"]["ports"] == [{"name": "http", "port": port, "targetPort": "http"}]
    assert service["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"] == pod["metadata"]["labels"]


def test_the_deployment_takes_the_key_from_the_secret_with_thinkwires_options():
    pod = resources()["Deployment"]["spec"]["template"]["spec"]
    c = pod["containers"][0]
    env = {e["name"]: e["value"] for e in c["env"]}
    assert set(env) == {BY_NAME[n].env for n in ("think_key_file", "think_key_previous_files", "think_key_id",
                                                 "think_metrics_port")}
    mount = next(m for m in c["volumeMounts"] if m["name"] == "keys")
    secret = next(v for v in pod["volumes"] if v["name"] == "keys")["secret"]
    assert mount["readOnly"] and secret["secretName"] == "thinkwire-keys"
    assert env["THINK_KEY_FILE"] == f"{mount['mountPath']}/current"
    assert env["THINK_KEY_PREVIOUS_FILES"] == f"{mount['mountPath']}/previous"
    # The id is the operator's to set: a placeholder that thinkwire refuses with the command to run.
    assert "thinkwire key id --file current" in env["THINK_KEY_ID"]
    # Non-root, as the image is; the key files readable by its group.
    run = " ".join(final_stage().all("RUN"))
    uid, gid = (int(re.search(rf"{flag} (\d+)", run).group(1)) for flag in ("--uid", "--gid"))
    sc = pod["securityContext"]
    assert (sc["runAsUser"], sc["runAsGroup"], sc["fsGroup"]) == (uid, gid, gid) and sc["runAsNonRoot"]
    assert secret["defaultMode"] == 0o440


def test_the_operations_page_names_both_endpoints_and_every_key_option():
    operations = (ROOT / "docs" / "operations.md").read_text()
    for path in (HEALTH, METRICS, "deploy/haproxy/haproxy.cfg", "deploy/kubernetes/", "Containerfile"):
        assert path in operations
    assert "replicas = " in operations
    options = (ROOT / "docs" / "options.md").read_text()
    for name in ("think_key_file", "think_key_previous_files", "think_key_id"):
        assert f"| `{name}` | `{BY_NAME[name].env}` |" in options
    assert "THINK_SIGNING_KEY_PREVIOUS" in options


MEMORY = KUBE / "redis" / "redis.yaml"


@pytest.mark.parametrize("version", VERSIONS)
def test_the_shared_memorys_redis_is_valid_kubernetes_and_the_deployment_points_at_it(version):
    docs = list(yaml.safe_load_all(MEMORY.read_text()))
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)
    assert yaml.safe_load((KUBE / "redis" / "kustomization.yaml").read_text())["resources"] == ["redis.yaml"]
    service = next(d for d in docs if d["kind"] == "Service")
    # The Deployment says how to point at it (commented: the shipped image has no redis library).
    said = re.search(r"# - name: (THINK_MEMORY_STORE)\n\s*#   value: (\S+)", (KUBE / "deployment.yaml").read_text())
    assert said.group(1) == BY_NAME["think_memory_store"].env
    assert said.group(2) == f"redis://{service['metadata']['name']}:{service['spec']['ports'][0]['port']}/0"
    assert BY_NAME["think_memory_store"].parse(said.group(2)) == said.group(2)
    args = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--maxmemory-policy") + 1] == "volatile-lru" and "--maxmemory" in args
