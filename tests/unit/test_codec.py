"""The daemon's own reading of EtcdCluster documents: defaults, every broken rule named."""

import pytest

from actors.codec import InvalidCluster, parse_cluster, parse_cluster_documents, status_to_dict
from actors.model import (
    ClusterRef,
    ClusterSpec,
    ClusterStatus,
    Compression,
    Condition,
    CopySpec,
    EncryptionSpec,
    ImageFamily,
    ImmutableSpec,
    MemberStatus,
    Phase,
    ReclaimPolicy,
    Role,
    S3Store,
    StoreSpec,
)


def doc(spec=None, name="demo", **meta):
    return {
        "apiVersion": "etcd.io/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {"name": name, **meta},
        "spec": spec if spec is not None else {},
    }


def errors_of(document):
    with pytest.raises(InvalidCluster) as info:
        parse_cluster(document)
    return {e.field: e.rule for e in info.value.errors}


def test_empty_spec_gets_the_documented_defaults():
    resource = parse_cluster(doc())
    assert resource.ref == ClusterRef("default", "demo")
    assert resource.spec == ClusterSpec()
    assert resource.spec.size == 3
    assert resource.spec.tls_enabled is True
    assert resource.spec.debug_sidecar is False
    assert resource.spec.storage.reclaim_policy is ReclaimPolicy.RETAIN
    assert resource.spec.image == "quay.io/coreos/etcd:v3.6.16"


def test_bitnami_is_detected_from_the_repository_and_tagged_without_v():
    spec = parse_cluster(doc({"repository": "bitnami/etcd", "version": "3.5.21"})).spec
    assert spec.image_family is ImageFamily.BITNAMI
    assert spec.image == "bitnami/etcd:3.5.21"


@pytest.mark.parametrize(
    ("spec", "field", "words"),
    [
        ({"size": 0}, "spec.size", "between 1 and 9"),
        ({"size": 10}, "spec.size", "between 1 and 9"),
        ({"size": "three"}, "spec.size", "integer"),
        ({"size": True}, "spec.size", "integer"),
        ({"size": 2.5}, "spec.size", "integer"),
        ({"version": ""}, "spec.version", "MAJOR.MINOR.PATCH"),
        ({"version": "v3.5"}, "spec.version", "MAJOR.MINOR.PATCH"),
        ({"repository": " "}, "spec.repository", "without tag or digest"),
        ({"repository": "bitnami/etcd:3.5"}, "spec.repository", "without tag or digest"),
        ({"version": "latest"}, "spec.version", "MAJOR.MINOR.PATCH"),
        ({"storage": {"size": "-1Gi"}}, "spec.storage.size", "positive quantity"),
        ({"storage": {"size": "0"}}, "spec.storage.size", "positive quantity"),
        ({"storage": {"size": "ten gigs"}}, "spec.storage.size", "positive quantity"),
        ({"storage": {"reclaimPolicy": "Recycle"}}, "spec.storage.reclaimPolicy", "Retain or Delete"),
        ({"security": {"tls": {"enabled": "yes"}}}, "spec.security.tls.enabled", "true or false"),
        ({"sise": 3}, "spec.sise", "unknown field"),
        ({"storage": {"class": "x"}}, "spec.storage.class", "unknown field"),
        ({"disasterRecovery": {"mode": "automatic"}}, "spec.disasterRecovery.mode", "Automatic or Manual"),
        ({"disasterRecovery": {"auto": True}}, "spec.disasterRecovery.auto", "unknown field"),
        (
            {"backup": {"deltaPeriod": "0s", "store": {"local": {"path": "b"}}}},
            "spec.backup.deltaPeriod",
            "at least 1s",
        ),
        (
            {"backup": {"encryption": {}, "store": {"local": {"path": "b"}}}},
            "spec.backup.encryption.keySecret",
            "required",
        ),
        (
            {"backup": {"encryption": {"keySecret": "../key"}, "store": {"local": {"path": "b"}}}},
            "spec.backup.encryption.keySecret",
            "must name a Secret",
        ),
        (
            {"backup": {"encryption": {"keySecret": "k", "key": "x"}, "store": {"local": {"path": "b"}}}},
            "spec.backup.encryption.key",
            "unknown field",
        ),
        (
            {"backup": {"compression": "gzip", "store": {"local": {"path": "b"}}}},
            "spec.backup.compression",
            "none or zstd",
        ),
        (
            {"backup": {"copyTo": {}, "store": {"local": {"path": "b"}}}},
            "spec.backup.copyTo.store",
            "required",
        ),
        (
            {"backup": {"copyTo": {"store": {"s3": {}}}, "store": {"local": {"path": "b"}}}},
            "spec.backup.copyTo.store.s3.bucket",
            "required",
        ),
        (
            {"backup": {"copyTo": {"store": {"local": {"path": "b"}}}, "store": {"local": {"path": "b"}}}},
            "spec.backup.copyTo.store",
            "another store than spec.backup.store",
        ),
        (
            {"backup": {"immutable": {"days": 7}, "store": {"local": {"path": "b"}}}},
            "spec.backup.immutable",
            "spec.backup.store (local) cannot lock objects",
        ),
        (
            {"backup": {"immutable": {"days": 7}, "store": {"azure": {"container": "backups"}}}},
            "spec.backup.immutable",
            "spec.backup.store (azure) cannot lock objects",
        ),
        (
            {
                "backup": {
                    "immutable": {"days": 7},
                    "store": {"s3": {"bucket": "locked"}},
                    "copyTo": {"store": {"gcs": {"bucket": "second"}}},
                }
            },
            "spec.backup.immutable",
            "spec.backup.copyTo.store (gcs) cannot lock objects",
        ),
        (
            {"backup": {"immutable": {"days": 0}, "store": {"s3": {"bucket": "locked"}}}},
            "spec.backup.immutable.days",
            "whole number of days from 1",
        ),
        (
            {"backup": {"immutable": {"days": "7"}, "store": {"s3": {"bucket": "locked"}}}},
            "spec.backup.immutable.days",
            "whole number of days from 1",
        ),
        (
            {"restore": {"store": {"local": {"path": "b"}}, "key": "a/b/c.db", "revision": 0}},
            "spec.restore.revision",
            "at least 1",
        ),
    ],
)
def test_each_broken_rule_names_its_field(spec, field, words):
    errors = errors_of(doc(spec))
    assert field in errors
    assert words in errors[field]


def test_encryption_and_compression_are_read_with_zstd_the_default():
    store = {"local": {"path": "b"}}
    plain = parse_cluster(doc({"backup": {"store": store}})).spec.backup
    assert plain.compression is Compression.ZSTD and plain.encryption is None
    spec = doc({"backup": {"store": store, "encryption": {"keySecret": "backup-key"}, "compression": "none"}})
    backup = parse_cluster(spec).spec.backup
    assert backup.encryption == EncryptionSpec("backup-key") and backup.compression is Compression.NONE


def test_a_second_site_and_immutability_are_read():
    spec = doc(
        {
            "backup": {
                "store": {"s3": {"bucket": "first", "credentialsSecret": "first-creds"}},
                "copyTo": {
                    "store": {"s3": {"bucket": "second", "region": "eu-west-1", "credentialsSecret": "dr"}}
                },
                "immutable": {"days": 30},
            }
        }
    )
    backup = parse_cluster(spec).spec.backup
    assert backup.copy_to == CopySpec(
        StoreSpec(s3=S3Store("second", region="eu-west-1", credentials_secret="dr"))
    )
    assert backup.immutable == ImmutableSpec(30)
    plain = parse_cluster(doc({"backup": {"store": {"local": {"path": "b"}}}})).spec.backup
    assert plain.copy_to is None and plain.immutable is None


def test_delta_period_and_a_restore_revision_are_read():
    spec = doc({
        "backup": {"deltaPeriod": "30s", "store": {"local": {"path": "b"}}},
        "restore": {"store": {"local": {"path": "b"}}, "key": "ns/demo/x.db", "revision": 1234},
    })  # fmt: skip
    resource = parse_cluster(spec)
    assert resource.spec.backup.delta_period == "30s" and resource.spec.restore.revision == 1234
    assert resource.spec.restore.describe() == "backup ns/demo/x.db at revision 1234"


def test_all_broken_rules_are_reported_not_just_the_first():
    errors = errors_of(doc({"size": 12, "version": "latest"}, name="Bad_Name"))
    assert set(errors) == {"spec.size", "spec.version", "metadata.name"}


def test_wrong_kind_is_refused():
    document = doc()
    document["kind"] = "EtcdBackup"
    assert "kind" in errors_of(document)


def test_a_bad_document_does_not_hide_the_good_ones_in_a_file():
    text = """
apiVersion: etcd.io/v1alpha1
kind: EtcdCluster
metadata: {name: good, namespace: prod}
spec: {size: 5}
---
apiVersion: etcd.io/v1alpha1
kind: EtcdCluster
metadata: {name: bad}
spec: {size: 0}
"""
    good, bad = parse_cluster_documents(text)
    assert good.ref == ClusterRef("prod", "good") and good.spec.size == 5
    assert bad.index == 1 and bad.name == "default/bad"
    assert "spec.size" in str(bad)


def test_unparseable_yaml_is_one_error_not_a_crash():
    (error,) = parse_cluster_documents("spec: [unclosed")
    assert "not valid YAML" in str(error)


def test_status_has_the_crd_shape():
    status = ClusterStatus(
        phase=Phase.RUNNING,
        ready_replicas=1,
        observed_generation=4,
        members=(MemberStatus("demo-0", "8e9e05c52164694d", "http://p", "http://c", Role.LEADER, True, 42),),
        conditions=(Condition("Available", "True", "QuorumHealthy", "1 of 1", 0.0),),
    )
    out = status_to_dict(status)
    assert out["phase"] == "Running" and out["readyReplicas"] == 1 and out["observedGeneration"] == 4
    assert out["members"] == [
        {
            "name": "demo-0",
            "id": "8e9e05c52164694d",
            "peerURL": "http://p",
            "clientURL": "http://c",
            "role": "leader",
            "healthy": True,
            "pid": 42,
        }
    ]
    assert out["conditions"][0]["lastTransitionTime"] == "1970-01-01T00:00:00Z"


def test_a_pre_release_version_is_accepted_as_the_crd_accepts_it():
    assert parse_cluster(doc({"version": "3.6.0-rc.1"})).spec.version == "3.6.0-rc.1"


def test_the_daemon_checks_versions_and_repositories_with_the_crds_own_patterns():
    import re
    from pathlib import Path

    import yaml

    from actors.codec import REPOSITORY_PATTERN, VERSION_PATTERN

    crd = yaml.safe_load((Path(__file__).parents[2] / "crds" / "etcdclusters.etcd.io.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]

    def cel_pattern(field):
        (rule,) = spec[field]["x-kubernetes-validations"]
        return re.fullmatch(r"self\.matches\('(.*)'\)", rule["rule"]).group(1).replace("\\\\", "\\")

    assert cel_pattern("version") == VERSION_PATTERN.pattern
    assert cel_pattern("repository") == REPOSITORY_PATTERN.pattern


def test_the_members_a_status_lists_are_recorded_and_a_malformed_status_is_ignored():
    written = status_to_dict(
        ClusterStatus(
            members=(MemberStatus("demo-1", "b", "p", "c"), MemberStatus("demo-0", "a", "p", "c")),
        )
    )
    assert parse_cluster({**doc(), "status": written}).recorded_members == ("demo-0", "demo-1")
    assert parse_cluster(doc()).recorded_members == ()
    for status in ("Running", {"members": "demo-0"}, {"members": [{"name": 7}, "x", {}]}):
        assert parse_cluster({**doc(), "status": status}).recorded_members == ()


def certificates(**fields):
    return doc({"security": {"tls": {"certificates": fields}}})


def test_certificates_default_to_90_days_a_third_and_ten_years() -> None:
    spec = parse_cluster(doc()).spec.certificates
    assert (spec.validity, spec.renew_before, spec.ca_validity) == ("2160h", None, "87600h")
    assert spec.renew_before_seconds == 30 * 24 * 3600


def test_short_certificate_lives_are_accepted_down_to_30s() -> None:
    spec = parse_cluster(certificates(validity="40s", renewBefore="25s")).spec.certificates
    assert (spec.validity_seconds, spec.renew_before_seconds) == (40, 25)


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"validity": "0s"}, "spec.security.tls.certificates.validity", "positive duration of at least 30s"),
        ({"validity": "10s"}, "spec.security.tls.certificates.validity", "at least 30s"),
        ({"validity": "90 days"}, "spec.security.tls.certificates.validity", "such as 2160h"),
        ({"renewBefore": "0s"}, "spec.security.tls.certificates.renewBefore", "positive duration"),
        (
            {"validity": "1h", "renewBefore": "1h"},
            "spec.security.tls.certificates.renewBefore",
            "shorter than validity",
        ),
        (
            {"validity": "100h", "caValidity": "100h"},
            "spec.security.tls.certificates.caValidity",
            "longer than validity",
        ),
        ({"caValidity": "-5h"}, "spec.security.tls.certificates.caValidity", "positive duration"),
        ({"lifetime": "5h"}, "spec.security.tls.certificates.lifetime", "unknown field"),
    ],
)
def test_bad_certificate_lives_name_the_field_and_the_rule(fields, field, words) -> None:
    errors = errors_of(certificates(**fields))
    assert field in errors
    assert words in errors[field]


def test_status_tls_is_written_with_rfc3339_times() -> None:
    from actors.model import LastRotation, RotationKind, TlsStatus

    status = ClusterStatus(tls=TlsStatus(0.0, 60.0, LastRotation(RotationKind.LEAF, 30.0)))
    assert status_to_dict(status)["tls"] == {
        "caNotAfter": "1970-01-01T00:00:00Z",
        "leafNotAfter": "1970-01-01T00:01:00Z",
        "lastRotation": {"kind": "leaf", "completionTime": "1970-01-01T00:00:30Z"},
    }
    assert "tls" not in status_to_dict(ClusterStatus())


def test_the_suspend_annotation_is_true_false_or_absent_else_a_named_error() -> None:
    def doc(value: object) -> dict[str, object]:
        meta: dict[str, object] = {"name": "demo"}
        if value is not None:
            meta["annotations"] = {"etcd.io/suspend": value}
        return {"apiVersion": "etcd.io/v1alpha1", "kind": "EtcdCluster", "metadata": meta, "spec": {}}

    assert parse_cluster(doc("true")).suspended is True
    assert parse_cluster(doc("false")).suspended is False
    assert parse_cluster(doc(None)).suspended is False
    with pytest.raises(
        InvalidCluster, match=r'metadata.annotations.etcd.io/suspend: must be "true" or "false"'
    ):
        parse_cluster(doc("yes"))


def test_etcd_options_take_known_flags_as_strings_and_refuse_ours_by_name() -> None:
    from supervisor.etcd.member_settings import config_fingerprint, member_settings

    def spec(options: object, version: str = "3.5.35") -> dict[str, object]:
        return {
            "apiVersion": "etcd.io/v1alpha1",
            "kind": "EtcdCluster",
            "metadata": {"name": "demo"},
            "spec": {"version": version, "etcdOptions": options},
        }

    tuned = parse_cluster(spec({"heartbeat-interval": "200", "election-timeout": "2000"})).spec
    assert tuned.etcd_options == {"heartbeat-interval": "200", "election-timeout": "2000"}
    assert member_settings(tuned)[-2:] == (("election-timeout", "2000"), ("heartbeat-interval", "200"))
    plain = parse_cluster(spec({})).spec
    assert config_fingerprint(tuned) != config_fingerprint(plain)  # a change rolls the members
    with pytest.raises(
        InvalidCluster, match=r"spec.etcdOptions.data-dir: cannot be set here: set by the supervisor"
    ):
        parse_cluster(spec({"data-dir": "/x"}))
    with pytest.raises(
        InvalidCluster, match=r"spec.etcdOptions.quota-backend-bytes: .*spec.maintenance.quotaBackendBytes"
    ):
        parse_cluster(spec({"quota-backend-bytes": "1"}))
    with pytest.raises(
        InvalidCluster, match=r"spec.etcdOptions.--heartbeat-interval: is not a flag of etcd 3.5"
    ):
        parse_cluster(spec({"--heartbeat-interval": "200"}))
    # A flag of 3.5 that 3.6 dropped (v2 emulation) is refused for 3.6 members.
    assert "enable-v2" in parse_cluster(spec({"enable-v2": "false"})).spec.etcd_options
    with pytest.raises(InvalidCluster, match=r"spec.etcdOptions.enable-v2: is not a flag of etcd 3.6"):
        parse_cluster(spec({"enable-v2": "false"}, "3.6.16"))
    with pytest.raises(InvalidCluster, match=r"spec.etcdOptions.heartbeat-interval: must be a string"):
        parse_cluster(spec({"heartbeat-interval": 200}))


def _options(options: object, version: str) -> dict[str, object]:
    return {
        "apiVersion": "etcd.io/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {"name": "demo"},
        "spec": {"version": version, "etcdOptions": options},
    }


def test_an_experimental_flag_3_7_removed_is_refused_naming_its_replacement() -> None:
    renamed = {"experimental-compact-hash-check-time": "2m"}
    assert parse_cluster(_options(renamed, "3.6.16")).spec.etcd_options == renamed
    with pytest.raises(
        InvalidCluster,
        match=r"spec.etcdOptions.experimental-compact-hash-check-time: is not a flag of etcd 3.7: etcd 3.7"
        r" removed it, use compact-hash-check-time",
    ):
        parse_cluster(_options(renamed, "3.7.3"))
    with pytest.raises(InvalidCluster, match=r"removed it, use feature-gates: CompactHashCheck=true"):
        parse_cluster(_options({"experimental-compact-hash-check-enabled": "true"}, "3.7.3"))
    assert (
        "compact-hash-check-time"
        in parse_cluster(_options({"compact-hash-check-time": "2m"}, "3.7.3")).spec.etcd_options
    )


def test_feature_gates_of_the_members_minor_join_the_supervisors_own() -> None:
    from supervisor.etcd.member_settings import config_fingerprint, member_settings

    gates = {"feature-gates": "CompactHashCheck=true, InitialCorruptCheck=true"}
    for version in ("3.6.16", "3.7.3"):
        spec = parse_cluster(_options(gates, version)).spec
        settings = member_settings(spec)
        assert [flag for flag, _ in settings].count("feature-gates") == 1
        assert dict(settings)["feature-gates"] == (
            "StopGRPCServiceOnDefrag=true,CompactHashCheck=true,InitialCorruptCheck=true"
        )
        assert config_fingerprint(spec) != config_fingerprint(parse_cluster(_options({}, version)).spec)
    assert (
        dict(
            member_settings(parse_cluster(_options({"feature-gates": "PriorityRequest=true"}, "3.7.3")).spec)
        )["feature-gates"]
        == "StopGRPCServiceOnDefrag=true,PriorityRequest=true"
    )

    def refused(value: str, version: str = "3.7.3") -> str:
        with pytest.raises(InvalidCluster) as raised:
            parse_cluster(_options({"feature-gates": value}, version))
        return str(raised.value)

    assert "spec.etcdOptions.feature-gates: is not a flag of etcd 3.5" in refused(
        "CompactHashCheck=true", "3.5.35"
    )
    assert "PriorityRequest is not a feature gate of etcd 3.6" in refused("PriorityRequest=true", "3.6.16")
    assert "StopGRPCServiceOnDefrag cannot be set here: set by the supervisor" in refused(
        "StopGRPCServiceOnDefrag=false"
    )
    assert "'CompactHashCheck' is not Name=true or Name=false" in refused("CompactHashCheck")
    assert "'CompactHashCheck=yes' is not Name=true or Name=false" in refused("CompactHashCheck=yes")
    assert "CompactHashCheck is given twice" in refused("CompactHashCheck=true,CompactHashCheck=false")


OLD_TLS = ["https://old-0.old:2379", "https://old-1.old:2379", "https://[fd00::7]:2379"]


def adopt(tls=None, **fields):
    """A spec adopting a cluster; TLS on exactly when the endpoints are https, unless `tls` says."""
    endpoints = fields.get("endpoints")
    if tls is None:
        tls = isinstance(endpoints, list) and any(str(e).startswith("https://") for e in endpoints)
    return doc({"adopt": fields, "security": {"tls": {"enabled": tls}}})


def test_adopt_is_read_with_remove_old_off_unless_asked_for() -> None:
    from actors.model import AdoptSpec

    plain = parse_cluster(adopt(endpoints=["http://10.0.0.5:2379"])).spec.adopt
    assert plain == AdoptSpec(endpoints=("http://10.0.0.5:2379",), remove_old=False)
    assert plain.tls is False and ClusterSpec().adopt is None
    spec = parse_cluster(
        adopt(endpoints=OLD_TLS, clientSecret="old-client", peerCASecret="old-peer-ca", removeOld=True)
    ).spec.adopt
    assert spec == AdoptSpec(tuple(OLD_TLS), "old-client", "old-peer-ca", remove_old=True) and spec.tls


def test_adopt_needs_the_tls_posture_of_the_old_cluster() -> None:
    """One posture for clients and peers: http endpoints with TLS off, https ones with TLS on
    and the old peer CA to sign the new members' peer certificates."""
    plain_with_tls = errors_of(adopt(tls=True, endpoints=["http://a:2379"]))
    assert "spec.security.tls.enabled: false" in plain_with_tls["spec.adopt.endpoints"]
    https_without_tls = errors_of(adopt(tls=False, endpoints=OLD_TLS[:1], clientSecret="c", peerCASecret="p"))
    assert "spec.security.tls.enabled: true" in https_without_tls["spec.adopt.endpoints"]
    no_peer_ca = errors_of(adopt(endpoints=OLD_TLS[:1], clientSecret="c"))
    assert "required with https endpoints" in no_peer_ca["spec.adopt.peerCASecret"]
    default_tls = doc({"adopt": {"endpoints": ["http://a:2379"]}})  # TLS on by default
    assert "spec.adopt.endpoints" in errors_of(default_tls)


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({}, "spec.adopt.endpoints", "required"),
        ({"endpoints": []}, "spec.adopt.endpoints", "non-empty list"),
        ({"endpoints": "http://a:2379"}, "spec.adopt.endpoints", "non-empty list"),
        (
            {"endpoints": [f"http://old-{i}:2379" for i in range(10)]},
            "spec.adopt.endpoints",
            "at most 9 URLs",
        ),
        ({"endpoints": ["old-0.old:2379"]}, "spec.adopt.endpoints[0]", "http:// or https:// URL"),
        ({"endpoints": ["http://a:2379", "http://b"]}, "spec.adopt.endpoints[1]", "a host and a port"),
        ({"endpoints": ["http://a:0"]}, "spec.adopt.endpoints[0]", "(1-65535)"),
        ({"endpoints": ["http://a:65536"]}, "spec.adopt.endpoints[0]", "(1-65535)"),
        ({"endpoints": ["http://a:2379/v3"]}, "spec.adopt.endpoints[0]", "nothing after it"),
        ({"endpoints": ["unix://a:2379"]}, "spec.adopt.endpoints[0]", "http:// or https://"),
        ({"endpoints": ["http://user@a:2379"]}, "spec.adopt.endpoints[0]", "a host and a port"),
        ({"endpoints": [2379]}, "spec.adopt.endpoints[0]", "got 2379"),
        ({"endpoints": ["http://a:2379", "http://a:2379"]}, "spec.adopt.endpoints[1]", "a second time"),
        (
            {"endpoints": ["http://a:2379", "https://b:2379"], "clientSecret": "c"},
            "spec.adopt.endpoints",
            "all http or all https",
        ),
        ({"endpoints": OLD_TLS}, "spec.adopt.clientSecret", "required with https endpoints"),
        (
            {"endpoints": ["http://a:2379"], "clientSecret": "c"},
            "spec.adopt.clientSecret",
            "must be absent with http endpoints",
        ),
        ({"endpoints": OLD_TLS, "clientSecret": "Old_Client"}, "spec.adopt.clientSecret", "a Secret name"),
        ({"endpoints": OLD_TLS, "clientSecret": "../c"}, "spec.adopt.clientSecret", "DNS subdomain"),
        ({"endpoints": ["http://a:2379"], "peerCASecret": "a/b"}, "spec.adopt.peerCASecret", "a Secret name"),
        ({"endpoints": ["http://a:2379"], "peerCASecret": 7}, "spec.adopt.peerCASecret", "must be a string"),
        ({"endpoints": ["http://a:2379"], "removeOld": "yes"}, "spec.adopt.removeOld", "true or false"),
        ({"endpoints": ["http://a:2379"], "peerCaSecret": "p"}, "spec.adopt.peerCaSecret", "unknown field"),
    ],
)
def test_each_broken_adopt_rule_names_its_field(fields, field, words) -> None:
    errors = errors_of(adopt(**fields))
    assert field in errors, errors
    assert words in errors[field]


def test_adopt_must_be_an_object_and_is_not_taken_with_a_restore() -> None:
    assert errors_of(doc({"adopt": ["http://a:2379"]})) == {"spec.adopt": "must be an object"}
    both = doc({"adopt": {"endpoints": ["http://a:2379"]}, "restore": {"backupName": "b"}})
    assert "both say where a new cluster's data comes from" in errors_of(both)["spec.adopt"]
