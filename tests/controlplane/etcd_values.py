"""Read the raw JSON values etcd holds for a CRD's objects (etcd_reader.py reads only their apiVersion).

    python -m tests.controlplane.etcd_values ETCD_URL GROUP PLURAL [--field spec.replicas --field spec.size]

Prints JSON: {"revision", "total", "counts": {apiVersion: n}, "fields": {field: keys that have it},
"objects": {key: {"apiVersion", <field>: value}}}. One snapshot across pages, read from etcd's
grpc-gateway; the apiserver is not involved, so this shows what is really stored, field by field.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter

from .etcd_reader import read_range, resource_prefix


def read_values(etcd_url: str, group: str, plural: str, etcd_prefix: str = "/registry") -> tuple[int, dict[str, dict]]:
    """Every key of the resource and its decoded JSON value (values that are not JSON map to {})."""
    revision, pairs = read_range(etcd_url, resource_prefix(group, plural, etcd_prefix))
    out = {}
    for key, value in pairs:
        try:
            out[key.decode(errors="replace")] = json.loads(value)
        except ValueError:
            out[key.decode(errors="replace")] = {}
    return revision, out


def _get(obj: dict, dotted: str):
    for part in dotted.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return None
        obj = obj[part]
    return obj


def summary(etcd_url: str, group: str, plural: str, fields: list[str], etcd_prefix: str = "/registry") -> dict:
    revision, values = read_values(etcd_url, group, plural, etcd_prefix)
    objects = {k: dict({"apiVersion": v.get("apiVersion")}, **{f: _get(v, f) for f in fields}) for k, v in values.items()}
    return {"revision": revision, "total": len(values),
            "counts": dict(Counter(v.get("apiVersion", "<no apiVersion>") for v in values.values())),
            "fields": {f: sum(1 for o in objects.values() if o[f] is not None) for f in fields},
            "objects": objects}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.controlplane.etcd_values", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("etcd_url")
    parser.add_argument("group")
    parser.add_argument("plural")
    parser.add_argument("--field", action="append", default=[], help="dotted path, e.g. spec.replicas (repeatable)")
    parser.add_argument("--etcd-prefix", default="/registry")
    args = parser.parse_args(argv)
    print(json.dumps(summary(args.etcd_url, args.group, args.plural, args.field, args.etcd_prefix)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
