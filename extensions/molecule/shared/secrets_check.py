"""Fail when a fleet report file holds a secret.

    python extensions/molecule/shared/secrets_check.py REPORT_DIR STATE_DIR

Checks every fleet-report*.* file in REPORT_DIR and its run folders against
- the material of every key under STATE_DIR (*.key of each cluster's PKI: client, CA, serving, SA keys),
  matched by any 32-character piece of its base64 body, and PEM headers of keys;
- token shapes: JWTs (service-account tokens), `Bearer <value>`, `token: <value>` that is not redacted;
- the kubeconfig (STATE_DIR/kubeconfig and each cluster's): inline credential fields
  (client-key-data, client-certificate-data, token, password) and every line of it that is more
  than a name (server URLs, certificate and key paths, the `kind: Config` header).
Prints JSON {"files": [...], "findings": [...]}; exit status 1 when there is a finding.
"""
import json
import re
import sys
from pathlib import Path

PATTERNS = {
    "private key PEM": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    "JWT": re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
    "bearer token": re.compile(r"(?i)bearer\s+(?!<redacted>)[A-Za-z0-9._~+/=-]{8,}"),
    "token value": re.compile(r"(?i)\btoken\"?\s*[:=]\s*\"?(?!<redacted>)[A-Za-z0-9._~+/=-]{16,}"),
    "kubeconfig credential field": re.compile(
        r"(client-key-data|client-certificate-data|certificate-authority-data|auth-provider|exec:\s|password:)"),
    "kubeconfig header": re.compile(r"kind:\s*Config\b"),
}


def key_fragments(state_dir: Path):
    for key in sorted(state_dir.rglob("*.key")):
        body = "".join(line.strip() for line in key.read_text(errors="replace").splitlines()
                       if line and not line.startswith("-----"))
        for i in range(0, max(len(body) - 32, 0), 32):
            yield key, body[i:i + 32]


def kubeconfig_lines(state_dir: Path):
    for kc in sorted(state_dir.rglob("kubeconfig")):
        for line in kc.read_text(errors="replace").splitlines():
            text = line.strip().lstrip("- ").strip()
            # names (contexts, clusters, users) belong in the report; paths, URLs and data do not
            if ":" in text and not re.match(r"^(name|cluster|user|context|namespace|current-context|preferences"
                                            r"|apiVersion|clusters|users|contexts):", text):
                value = text.split(":", 1)[1].strip()
                if len(value) >= 12:
                    yield kc, value


def main() -> int:
    report_dir, state_dir = Path(sys.argv[1]), Path(sys.argv[2])
    files = sorted(report_dir.glob("*/fleet-report*.*")) + sorted(report_dir.glob("fleet-report*.*"))  # every run folder
    findings = []
    secrets = list(key_fragments(state_dir))
    kube_values = list(kubeconfig_lines(state_dir))
    for f in files:
        text = f.read_text(errors="replace")
        for name, pattern in PATTERNS.items():
            m = pattern.search(text)
            if m:
                findings.append({"file": f.name, "what": name, "at": m.start()})
        for key, fragment in secrets:
            if fragment in text:
                findings.append({"file": f.name, "what": "key material of %s" % key.name})
                break
        for kc, value in kube_values:
            if value in text:
                findings.append({"file": f.name, "what": "kubeconfig content (%s)" % kc.name, "value": value[:40]})
                break
    print(json.dumps({"files": [f.name for f in files], "keys_checked": len({pair[0] for pair in secrets}),
                      "kubeconfig_values_checked": len(kube_values), "findings": findings}))
    return 1 if findings or len(files) < 3 else 0


if __name__ == "__main__":
    sys.exit(main())
