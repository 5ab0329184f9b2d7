"""A throwaway self-signed certificate for loopback TLS tests."""

import subprocess
from pathlib import Path


def make_cert(folder: Path) -> tuple[str, str]:
    """A certificate and key for 127.0.0.1 / localhost, valid one day, written into ``folder``."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"], check=True, capture_output=True)
    return str(cert), str(key)
