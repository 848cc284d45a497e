"""The operator as users install it: ``kubectl apply --server-side -k deploy/``, a real pod
authenticating with its in-cluster ServiceAccount, reaching the API server through the
``kubernetes`` Service and its members through cluster DNS.

On the built-in node the image is tests/harness/images.py's operator_archive (deploy/Dockerfile's
two parts as layers of our own: no base image can be pulled here); on another cluster
(E2E_KUBECONFIG) ``etcd-supervisor:dev`` must already be loaded (deploy/kind does that).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator

import pytest

from supervisor.kube.leader import LEASE_NAME
from tests.harness import images
from tests.harness.cluster import Cluster
from tests.harness.formation import TIMINGS, assert_no_member_failed, form_cluster, is_ready, wait_for
from tests.harness.kube import OPERATOR_NAMESPACE, REPO, require_helm
from tests.harness.node import ROOT

CHART = REPO / "deploy" / "helm" / "etcd-operator"
NEXT_BUILD = "etcd-supervisor:dev-next"  # a second build of the operator (an upgrade)


@pytest.fixture
def deployed_operator(e2e_cluster: Cluster, operator_image: str) -> Iterator[None]:
    e2e_cluster.kubectl("apply", "--server-side", "--force-conflicts", "-k", REPO / "deploy")
    try:
        e2e_cluster.kubectl(
            "rollout",
            "status",
            "-n",
            OPERATOR_NAMESPACE,
            "deployment/etcd-supervisor",
            "--timeout=180s",
            timeout=200,
        )
        yield
    finally:
        logs = e2e_cluster.kubectl(
            "logs", "-n", OPERATOR_NAMESPACE, "deployment/etcd-supervisor", "--tail=20", check=False
        )
        print(f"operator pod log (tail):\n{logs.stdout}{logs.stderr}")
        # Later tests run operators of their own: this one must not manage their clusters.
        e2e_cluster.kubectl(
            "scale", "-n", OPERATOR_NAMESPACE, "deployment/etcd-supervisor", "--replicas=0", check=False
        )


def test_deployed_operator_forms_a_tls_cluster(
    e2e_cluster: Cluster, e2e_namespace: str, deployed_operator: None
) -> None:
    start = time.monotonic()
    seconds, seen = form_cluster(e2e_cluster, e2e_namespace, "inpod", tls=True)
    TIMINGS["operator-pod-tls"] = seconds
    ratio = f" = {seconds / TIMINGS['static']:.2f}x the static pods" if "static" in TIMINGS else ""
    print(f"\nEtcdCluster (3 members, TLS, operator pod): apply -> Running in {seconds:.2f}s{ratio}")
    assert_no_member_failed(seen)
    tls = ["--cacert=/etc/etcd/tls/ca.crt", "--cert=/etc/etcd/tls/tls.crt", "--key=/etc/etcd/tls/tls.key"]
    endpoint = f"--endpoints=https://inpod-client.{e2e_namespace}.svc:2379"
    ns = ["-n", e2e_namespace]
    e2e_cluster.kubectl("exec", *ns, "inpod-0", "--", "etcdctl", endpoint, *tls, "put", "k", "v")
    got = e2e_cluster.kubectl(
        "exec", *ns, "inpod-1", "--", "etcdctl", endpoint, *tls, "get", "--print-value-only", "k"
    )
    assert got.stdout.strip() == "v"
    assert time.monotonic() - start < 300
    log_level_follows_the_configmap(e2e_cluster)


def operator_pods(cluster: Cluster) -> dict[str, tuple[str, int]]:
    """name -> (uid, restarts) of the operator's running pods."""
    listed = cluster.get_json(
        "pods", "-l", "app.kubernetes.io/component=operator", namespace=OPERATOR_NAMESPACE
    )
    return {
        p["metadata"]["name"]: (p["metadata"]["uid"], p["status"]["containerStatuses"][0]["restartCount"])
        for p in listed["items"]
        if p["status"].get("phase") == "Running"
    }


def level_of(cluster: Cluster, pod: str) -> str:
    """GET /loglevel of the pod, through the API server's pod proxy."""
    path = f"/api/v1/namespaces/{OPERATOR_NAMESPACE}/pods/{pod}:8080/proxy/loglevel"
    return cluster.kubectl("get", "--raw", path, check=False).stdout.strip()


def log_level_follows_the_configmap(cluster: Cluster) -> None:
    """`kubectl patch` of the ConfigMap's LOG_LEVEL reaches both replicas without a restart: the
    kubelet rewrites the mounted file, --log-level-file follows it. (This node's kubelet syncs
    every 5 s; a default kubelet within about a minute and a half.)"""
    before = operator_pods(cluster)
    assert len(before) == 2 and all(level_of(cluster, pod) == "info" for pod in before), before
    patch = ["patch", "configmap", "etcd-supervisor", "-n", OPERATOR_NAMESPACE, "--type=merge", "-p"]
    changed = time.monotonic()
    cluster.kubectl(*patch, '{"data":{"LOG_LEVEL":"debug"}}')
    try:
        for pod in before:
            wait_for(f"{pod} at log level debug", lambda p=pod: level_of(cluster, p) == "debug", 120)
        print(
            f"\nConfigMap LOG_LEVEL=debug -> both operator pods at debug in {time.monotonic() - changed:.1f}s"
        )
        assert operator_pods(cluster) == before  # the same pods, no container restarted
        for pod in before:
            logs = cluster.kubectl("logs", "-n", OPERATOR_NAMESPACE, pod).stdout
            assert "log level info -> debug (/etc/etcd-supervisor/LOG_LEVEL)" in logs, logs[-2000:]
    finally:
        cluster.kubectl(*patch, '{"data":{"LOG_LEVEL":"info"}}', check=False)


def test_helm_installed_operator_forms_a_tls_cluster(
    e2e_cluster: Cluster, e2e_namespace: str, operator_image: str
) -> None:
    """The chart, installed with helm (not just rendered), runs the same image as a real pod."""
    helm = require_helm()  # $HELM, else built once by tests/envtest/build-helm.sh
    release_ns = f"{e2e_namespace}-helm"
    install = [str(helm), "--kubeconfig", str(e2e_cluster.kubeconfig), "--namespace", release_ns]
    subprocess.run(
        [*install, "install", "rel", str(CHART), "--create-namespace", "--wait", "--timeout", "180s"],
        check=True,
        capture_output=True,
        text=True,
        timeout=240,
    )
    try:
        seconds, seen = form_cluster(e2e_cluster, e2e_namespace, "chart", tls=True)
        print(f"\nEtcdCluster (3 members, TLS, helm-installed operator): apply -> Running in {seconds:.2f}s")
        assert_no_member_failed(seen)
    finally:
        subprocess.run([*install, "uninstall", "rel", "--wait"], capture_output=True, text=True, timeout=120)


def test_standby_operator_takes_over_when_the_leader_pod_dies(
    e2e_cluster: Cluster, e2e_namespace: str, deployed_operator: None
) -> None:
    _, seen = form_cluster(e2e_cluster, e2e_namespace, "ha", tls=True)
    assert_no_member_failed(seen)

    def holder() -> str:
        lease = e2e_cluster.get_json("lease", LEASE_NAME, namespace=OPERATOR_NAMESPACE)
        return str(lease["spec"].get("holderIdentity") or "")

    leader = holder()
    start = time.monotonic()
    # Gone at once, as when its node dies: no graceful hand-over of the Lease.
    e2e_cluster.kubectl("delete", "pod", "-n", OPERATOR_NAMESPACE, leader, "--grace-period=0", "--force")
    new = wait_for("another replica holding the Lease", lambda: (h := holder()) not in ("", leader) and h, 60)
    print(f"\noperator leader {leader} killed -> {new} leads after {time.monotonic() - start:.2f}s")

    # The new leader carries on: a member pod deleted now is replaced.
    old_uid = e2e_cluster.get_json("pod", "ha-1", namespace=e2e_namespace)["metadata"]["uid"]
    e2e_cluster.kubectl("delete", "pod", "-n", e2e_namespace, "ha-1", "--wait=false")

    def replaced() -> bool:
        out = e2e_cluster.kubectl("get", "pod", "-n", e2e_namespace, "ha-1", "-o", "json", check=False)
        return (
            out.returncode == 0
            and json.loads(out.stdout)["metadata"]["uid"] != old_uid
            and is_ready(json.loads(out.stdout))
        )

    wait_for("ha-1 replaced by the new leader", replaced, 90)


def _member_pods(cluster: Cluster, namespace: str, name: str) -> dict[str, tuple[str, int]]:
    """Each member pod's uid and its containers' restarts."""
    found = cluster.get_json("pods", "-l", f"app.kubernetes.io/instance={name}", namespace=namespace)["items"]
    return {
        p["metadata"]["name"]: (
            p["metadata"]["uid"],
            sum(c.get("restartCount", 0) for c in p["status"].get("containerStatuses") or []),
        )
        for p in found
        if p["metadata"]["labels"].get("app.kubernetes.io/component") == "member"
    }


def test_an_operator_upgrade_to_another_build_restarts_no_member(
    e2e_cluster: Cluster, e2e_namespace: str, deployed_operator: None
) -> None:
    """Issue 29: members restart only when their pod would differ in a way that matters (the
    configuration fingerprint: image, resources, pod template, etcd settings), never because the
    operator changed. A second build of the operator (one module edited, another tag) takes over
    from the first; the members' pods stay the same pods, none restarted."""
    if e2e_cluster.node is None:
        pytest.skip("a second operator build is imported on the built-in node only")
    _, seen = form_cluster(e2e_cluster, e2e_namespace, "kept", tls=True)
    assert_no_member_failed(seen)
    before = _member_pods(e2e_cluster, e2e_namespace, "kept")
    assert len(before) == 3, before
    note = (
        REPO / "supervisor" / "__init__.py"
    ).read_text() + "# the next build: a change members never see\n"
    archive = images.operator_archive(
        ROOT / "images" / "operator-next", tag=NEXT_BUILD, changed={"/app/supervisor/__init__.py": note}
    )
    e2e_cluster.node.import_image(archive)
    deployment = ["-n", OPERATOR_NAMESPACE, "deployment/etcd-supervisor"]
    e2e_cluster.kubectl("set", "image", *deployment, f"etcd-supervisor={NEXT_BUILD}")
    e2e_cluster.kubectl("rollout", "status", *deployment, "--timeout=180s", timeout=200)

    def next_build_leads() -> bool:
        lease = e2e_cluster.get_json("lease", LEASE_NAME, namespace=OPERATOR_NAMESPACE)
        holder = str(lease["spec"].get("holderIdentity") or "")
        pod = e2e_cluster.kubectl("get", "pod", "-n", OPERATOR_NAMESPACE, holder, "-o", "json", check=False)
        return pod.returncode == 0 and json.loads(pod.stdout)["spec"]["containers"][0]["image"] == NEXT_BUILD

    wait_for("the next build holding the Lease", next_build_leads, 120)
    # It looks at every member each tick and takes a member step within 30 s: what it would
    # restart, it restarts by then.
    time.sleep(35)
    after = _member_pods(e2e_cluster, e2e_namespace, "kept")
    assert after == before, (before, after)
    status = e2e_cluster.get_json("etcdcluster", "kept", namespace=e2e_namespace)["status"]
    assert status["phase"] == "Running" and status["readyReplicas"] == 3, status
