"""The part of kustomize that deploy/ uses, in Python, for machines without kubectl or kustomize.

  render(DIR) -> list of objects, as `kubectl kustomize DIR` would print them (in another order)

kubectl is not a Debian package, so CI may lack it; check_deploy.py then checks what this renders. Where
kubectl is present check_deploy.py renders every overlay both ways and fails when they differ, which keeps
this file honest. Supported: resources (files and kustomization directories), components, patches that
are whole-object strategic merge patches (a file, no target; `$patch: delete` of a whole object, null to
remove a key, lists merged by the Kubernetes merge keys of the built-in kinds; no other $ directive),
namespace, images. Anything else in a kustomization raises Unsupported naming the field, rather than
being rendered wrongly.
"""
import copy
from pathlib import Path

import yaml


class Unsupported(Exception):
    pass


KUSTOMIZATION_KEYS = {"apiVersion", "kind", "resources", "components", "patches", "namespace", "images"}
# Kinds without a namespace (kustomize's namespace transformer leaves them alone).
CLUSTER_SCOPED = {"Namespace", "PriorityClass", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
                  "StorageClass", "PersistentVolume", "RuntimeClass", "Node"}
# Strategic merge keys of the lists deploy/ patches (k8s.io/api's patchMergeKey tags); other lists of
# built-in kinds are replaced, as are all lists of custom kinds (kustomize merges those as JSON).
MERGE_KEYS = {"containers": "name", "initContainers": "name", "ephemeralContainers": "name",
              "volumes": "name", "volumeMounts": "mountPath", "env": "name", "imagePullSecrets": "name",
              "volumeDevices": "devicePath"}
BUILTIN_GROUPS = {"v1", "apps/v1", "batch/v1", "policy/v1", "networking.k8s.io/v1", "scheduling.k8s.io/v1"}


def object_id(obj):
    meta = obj.get("metadata") or {}
    return obj.get("kind"), meta.get("namespace"), meta.get("name")


def _load_kustomization(directory):
    for name in ("kustomization.yaml", "kustomization.yml", "Kustomization"):
        path = directory / name
        if path.is_file():
            k = yaml.load(path.read_text(), Loader=LOADER) or {}
            extra = sorted(set(k) - KUSTOMIZATION_KEYS)
            if extra:
                raise Unsupported(f"{path}: {', '.join(extra)} (kustomize_lite.py renders only "
                                  f"{', '.join(sorted(KUSTOMIZATION_KEYS))})")
            return k
    raise Unsupported(f"{directory}: no kustomization.yaml")


# libyaml's loader when PyYAML has it: check_deploy.py renders every variant, also in its self-test runs.
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_parsed = {}


def _load_objects(path):
    if not path.is_file():
        raise Unsupported(f"{path}: no such file")
    if path not in _parsed:
        _parsed[path] = [d for d in yaml.load_all(path.read_text(), Loader=LOADER) if d]
    return copy.deepcopy(_parsed[path])


def _merge_list(base, patch, key):
    # kustomize's order: the patch's items first (merged with the base's item of the same key), then the
    # base's other items in their order.
    out, used = [], set()
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise Unsupported(f"strategic merge: a list item without its merge key {key}: {item}")
        at = next((i for i, b in enumerate(base) if isinstance(b, dict) and b.get(key) == item[key]), None)
        if at is not None:
            used.add(at)
        out.append(copy.deepcopy(item) if at is None else _merge_map(base[at], item, True))
    return out + [copy.deepcopy(b) for i, b in enumerate(base) if i not in used]


def _merge_map(base, patch, builtin):
    out = copy.deepcopy(base)
    for key, value in patch.items():
        if key.startswith("$"):
            raise Unsupported(f"strategic merge: directive {key}")
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge_map(out[key], value, builtin)
        elif isinstance(value, list) and isinstance(out.get(key), list) and builtin and key in MERGE_KEYS:
            out[key] = _merge_list(out[key], value, MERGE_KEYS[key])
        else:
            out[key] = copy.deepcopy(value)
    return out


def _apply_patch(objs, patch, where):
    if not isinstance(patch, dict) or set(patch) - {"path"}:
        raise Unsupported(f"{where}: a patch other than {{path: FILE}} ({patch}): JSON6902 and targets are "
                          "not rendered by kustomize_lite.py")
    for p in _load_objects(where / patch["path"]):
        kind, ns, name = object_id(p)
        hits = [i for i, o in enumerate(objs) if o.get("kind") == kind and o["metadata"].get("name") == name
                and o.get("apiVersion") == p.get("apiVersion") and ns in (None, o["metadata"].get("namespace"))]
        if len(hits) != 1:
            raise Unsupported(f"{where / patch['path']}: {kind}/{name} matches {len(hits)} objects")
        if p.get("$patch") == "delete":
            del objs[hits[0]]
            continue
        objs[hits[0]] = _merge_map(objs[hits[0]], p, p.get("apiVersion") in BUILTIN_GROUPS)


def _resources(directory, entries):
    objs = []
    for r in entries or []:
        path = (directory / r).resolve()
        objs += render(path) if path.is_dir() else _load_objects(path)
    return objs


def _set_images(objs, images):
    for img in images or []:
        for o in objs:
            spec = ((o.get("spec") or {}).get("template") or {}).get("spec") or {}
            for c in spec.get("containers", []) + spec.get("initContainers", []):
                name = c.get("image", "").split("@")[0].rsplit(":", 1)[0]
                if name == img["name"]:
                    c["image"] = f"{img.get('newName', name)}:{img['newTag']}" if "newTag" in img else \
                        img.get("newName", name)


def render(directory, kind="Kustomization"):
    directory = Path(directory).resolve()
    k = _load_kustomization(directory)
    if k.get("kind", "Kustomization") != kind:
        raise Unsupported(f"{directory}: kind {k.get('kind')}, expected {kind}")
    objs = _resources(directory, k.get("resources"))
    for comp in k.get("components") or []:
        objs = apply_component(objs, (directory / comp).resolve())
    for patch in k.get("patches") or []:
        _apply_patch(objs, patch, directory)
    if k.get("namespace"):
        for o in objs:
            if o.get("kind") not in CLUSTER_SCOPED:
                o.setdefault("metadata", {})["namespace"] = k["namespace"]
    _set_images(objs, k.get("images"))
    return objs


def apply_component(objs, directory):
    if not directory.is_dir():
        raise Unsupported(f"{directory}: no such component directory")
    k = _load_kustomization(directory)
    if k.get("kind") != "Component" or set(k) & {"components", "namespace", "images"}:
        raise Unsupported(f"{directory}: a Component with resources and patches only is rendered")
    objs = objs + _resources(directory, k.get("resources"))
    for patch in k.get("patches") or []:
        _apply_patch(objs, patch, directory)
    return objs
