"""A throwaway PKI made with the openssl CLI: CA, apiserver serving cert, admin client cert, SA key.

Existing files are kept, so a restarted cluster keeps its identity and old kubeconfigs stay valid.
Leaf certs carry SKI/AKI so that strict X.509 verification (Python >= 3.13) accepts them too.
"""
from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pki:
    folder: Path

    @property
    def ca_cert(self) -> Path:
        return self.folder / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.folder / "ca.key"

    @property
    def serving_cert(self) -> Path:
        return self.folder / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.folder / "apiserver.key"

    @property
    def admin_cert(self) -> Path:
        return self.folder / "admin.crt"

    @property
    def admin_key(self) -> Path:
        return self.folder / "admin.key"

    @property
    def sa_key(self) -> Path:
        return self.folder / "sa.key"


def _openssl(*args: str) -> None:
    proc = subprocess.run(["openssl", *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args[:2])} failed: {proc.stderr.strip()}")


def _sign(pki: Pki, key: Path, cert: Path, subject: str, extensions: str) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(key))
    with tempfile.TemporaryDirectory() as tmp:
        csr, ext = Path(tmp) / "req.csr", Path(tmp) / "ext.cnf"
        ext.write_text(extensions)
        _openssl("req", "-new", "-key", str(key), "-subj", subject, "-out", str(csr))
        _openssl("x509", "-req", "-in", str(csr), "-CA", str(pki.ca_cert), "-CAkey", str(pki.ca_key),
                 "-CAcreateserial", "-days", "3650", "-sha256", "-extfile", str(ext), "-out", str(cert))


def sign_client_cert(pki: Pki, name: str, user: str, groups: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """A client cert for `user` in `groups` (x509 authn: CN = user, O = groups)."""
    key, cert = pki.folder / f"{name}.key", pki.folder / f"{name}.crt"
    if not cert.exists():
        subject = "".join(f"/O={g}" for g in groups) + f"/CN={user}"
        _sign(pki, key, cert, subject,
              "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
              "extendedKeyUsage=clientAuth\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n")
    return cert, key


def ensure_pki(folder: Path, extra_ips: tuple[str, ...] = ()) -> Pki:
    folder.mkdir(parents=True, exist_ok=True)
    pki = Pki(folder)
    if not pki.ca_cert.exists():
        _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(pki.ca_key))
        _openssl("req", "-x509", "-new", "-key", str(pki.ca_key), "-subj", "/CN=crdops-test-ca", "-days", "3650",
                 "-sha256", "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-addext", "subjectKeyIdentifier=hash",
                 "-out", str(pki.ca_cert))
    if not pki.serving_cert.exists():
        ips = ["127.0.0.1", "10.0.0.1", *extra_ips]
        names = ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"]
        san = ",".join([f"IP:{ip}" for ip in ips] + [f"DNS:{n}" for n in names])
        _sign(pki, pki.serving_key, pki.serving_cert, "/CN=kube-apiserver",
              "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
              f"extendedKeyUsage=serverAuth\nsubjectAltName={san}\n"
              "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n")
    sign_client_cert(pki, "admin", "admin", ("system:masters",))
    if not pki.sa_key.exists():
        _openssl("genrsa", "-out", str(pki.sa_key), "2048")
    return pki
