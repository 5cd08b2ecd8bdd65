#!/usr/bin/env python3
"""Strict field check of Kubernetes manifests against the official Python client's models.

  k8s_schema.py FILE...

kubectl cannot validate without a cluster; the client's generated models (Debian: python3-kubernetes) know
every field of every built-in kind, so a misspelt or misplaced field (readinesProbe, emptyDir.mediun) is
reported with its path. The few custom kinds deploy/ uses, for Rook (CephClient, CephBlockPool) and the
Prometheus Operator (ServiceMonitor, PrometheusRule), are checked against the fields listed in CRD_FIELDS
below (from those projects' CRDs); other kinds the client does not model (NetworkAttachmentDefinition,
Kustomization, Component) and kustomize's `$patch: delete` markers are skipped. Exit 1 on any unknown field.
"""
import re
import sys

import yaml
import kubernetes.client.models as models


def walk(obj, typ, path, errors):
    if obj is None:
        return
    m = re.fullmatch(r"list\[(.*)\]", typ)
    if m:
        for i, item in enumerate(obj):
            walk(item, m.group(1), f"{path}[{i}]", errors)
        return
    m = re.fullmatch(r"dict\(str, (.*)\)", typ)
    if m:
        for key, value in obj.items():
            walk(value, m.group(1), f"{path}.{key}", errors)
        return
    cls = getattr(models, typ, None)
    if cls is None:  # str, int, object, ...
        return
    if not isinstance(obj, dict):
        errors.append(f"{path}: {typ} must be a mapping")
        return
    by_json = {json_name: attr for attr, json_name in cls.attribute_map.items()}
    for key, value in obj.items():
        if key not in by_json:
            errors.append(f"{path}.{key}: no such field in {typ}")
        else:
            walk(value, cls.openapi_types[by_json[key]], f"{path}.{key}", errors)


# Custom kinds: the fields their CRDs define, as nested dicts; None = a leaf or a free-form map, not descended
# into; a one-item list = a list whose items have those fields. metadata is checked as V1ObjectMeta. Only
# levels listed are checked: spec.replicated, but not spec.mirroring's insides.
# Prometheus Operator (monitoring.coreos.com/v1, the CRDs of prometheus-operator v0.7x): ServiceMonitor's
# endpoints and their relabelings, PrometheusRule's groups and rules.
RELABEL = [{"action": None, "modulus": None, "regex": None, "replacement": None, "separator": None,
            "sourceLabels": None, "targetLabel": None}]
CRD_FIELDS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): {
        "spec": {
            "attachMetadata": None, "bodySizeLimit": None, "jobLabel": None, "keepDroppedTargets": None,
            "labelLimit": None, "labelNameLengthLimit": None, "labelValueLengthLimit": None,
            "namespaceSelector": {"any": None, "matchNames": None}, "nativeHistogramBucketLimit": None,
            "nativeHistogramMinBucketFactor": None, "podTargetLabels": None, "sampleLimit": None,
            "scrapeClass": None, "scrapeClassicHistograms": None, "scrapeProtocols": None, "selector": None,
            "targetLabels": None, "targetLimit": None,
            "endpoints": [{
                "authorization": None, "basicAuth": None, "bearerTokenFile": None, "bearerTokenSecret": None,
                "enableHttp2": None, "filterRunning": None, "followRedirects": None, "honorLabels": None,
                "honorTimestamps": None, "interval": None, "metricRelabelings": RELABEL, "oauth2": None,
                "params": None, "path": None, "port": None, "proxyUrl": None, "relabelings": RELABEL,
                "scheme": None, "scrapeTimeout": None, "targetPort": None, "tlsConfig": None,
                "trackTimestampsStaleness": None,
            }],
        },
    },
    ("monitoring.coreos.com/v1", "PrometheusRule"): {
        "spec": {
            "groups": [{
                "name": None, "interval": None, "limit": None, "partial_response_strategy": None,
                "query_offset": None, "labels": None,
                "rules": [{"alert": None, "record": None, "expr": None, "for": None, "keep_firing_for": None,
                           "labels": None, "annotations": None}],
            }],
        },
    },
    ("ceph.rook.io/v1", "CephClient"): {
        "spec": {"caps": None, "name": None},
    },
    ("ceph.rook.io/v1", "CephBlockPool"): {
        "spec": {
            # application: newer Rook releases only (older CRDs prune it: the pool is then tagged rbd).
            "application": None, "compressionMode": None, "crushRoot": None, "deviceClass": None,
            "enableCrushUpdates": None, "enableRBDStats": None, "erasureCoded": None, "failureDomain": None,
            "mirroring": None, "name": None, "parameters": None, "quotas": None, "statusCheck": None,
            "replicated": {"size": None, "requireSafeReplicaSize": None, "replicasPerFailureDomain": None,
                           "subFailureDomain": None, "targetSizeRatio": None, "hybridStorage": None},
        },
    },
}


def walk_crd(obj, fields, path, errors):
    if not isinstance(obj, dict):
        errors.append(f"{path}: must be a mapping")
        return
    for key, value in obj.items():
        if key not in fields:
            errors.append(f"{path}.{key}: no such field")
        elif isinstance(fields[key], dict) and value is not None:
            walk_crd(value, fields[key], f"{path}.{key}", errors)
        elif isinstance(fields[key], list) and value is not None:
            if not isinstance(value, list):
                errors.append(f"{path}.{key}: must be a list")
                continue
            for i, item in enumerate(value):
                walk_crd(item, fields[key][0], f"{path}.{key}[{i}]", errors)


def main():
    failed = False
    for name in sys.argv[1:]:
        with open(name) as f:
            for doc in yaml.safe_load_all(f):
                if not doc:
                    continue
                if doc.get("$patch") == "delete":
                    # A kustomize deletion marker names an object; it has none of the kind's fields to check.
                    print(f"skip: {name}: $patch: delete of {doc.get('kind')} {doc.get('metadata', {}).get('name')}")
                    continue
                group = doc.get("apiVersion", "").split("/")[0] if "/" in doc.get("apiVersion", "") else ""
                version = doc.get("apiVersion", "").split("/")[-1]
                typ = f"{version.capitalize()}{doc.get('kind', '')}"
                crd = CRD_FIELDS.get((doc.get("apiVersion"), doc.get("kind")))
                if crd is not None:
                    errors = []
                    top = {k: None for k in ("apiVersion", "kind", "metadata", "status")}
                    walk_crd(doc, {**top, **crd}, doc["kind"], errors)
                    walk(doc.get("metadata"), "V1ObjectMeta", f"{doc['kind']}.metadata", errors)
                    for e in errors:
                        print(f"FAIL: {name}: {e}")
                    failed |= bool(errors)
                    if not errors:
                        print(f"ok: {name}: {doc['kind']} has only fields of its CRD")
                    continue
                if group not in ("", "apps", "batch", "policy", "networking.k8s.io", "scheduling.k8s.io") or \
                        getattr(models, typ, None) is None:
                    print(f"skip: {name}: {doc.get('kind')} ({doc.get('apiVersion')}) is not a built-in kind")
                    continue
                errors = []
                walk(doc, typ, doc["kind"], errors)
                for e in errors:
                    print(f"FAIL: {name}: {e}")
                failed |= bool(errors)
                if not errors:
                    print(f"ok: {name}: {doc['kind']} has only known fields")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
