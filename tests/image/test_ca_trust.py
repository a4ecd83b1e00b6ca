"""CA_BUNDLE_FILE: behind a TLS-inspecting proxy, a mounted CA certificate is trusted by pip,
requests, curl and git in the running container. A local HTTPS server (127.0.0.1, the
container shares the host's network) presents a certificate signed by a CA made here; it serves
a file, a package index with one wheel and a git repository over git's dumb HTTP protocol."""

from __future__ import annotations

import datetime
import functools
import http.server
import ipaddress
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.helpers.wheels import build_wheel

pytestmark = pytest.mark.image

SCRIPT = """
url=https://127.0.0.1:$PORT
curl -sS --max-time 10 "$url/hello.txt" && echo CURL_OK
python -c "import requests, sys; print(requests.get(sys.argv[1], timeout=10).text)" \
  "$url/hello.txt" && echo REQUESTS_OK
pip download -q --retries 0 --timeout 10 --no-deps --index-url "$url/simple/" -d /tmp/dl \
  demo-pkg && echo PIP_OK
GIT_TERMINAL_PROMPT=0 git clone -q "$url/repo.git" /tmp/repo && cat /tmp/repo/README \
  && echo GIT_OK
"""
TOOLS = ("CURL_OK", "REQUESTS_OK", "PIP_OK", "GIT_OK")


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _certificates(directory: Path) -> tuple[Path, Path, Path]:
    """(CA certificate, server certificate, server key) as PEM files."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("diskinfo test CA"))
        .issuer_name(_name("diskinfo test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    server = (
        x509.CertificateBuilder()
        .subject_name(_name("127.0.0.1"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    directory.mkdir()
    paths = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    for path in paths:
        path.chmod(0o644)
    directory.chmod(0o755)
    return paths


def _site(root: Path) -> None:
    """hello.txt, a PEP 503 index with demo-pkg, and repo.git for git's dumb HTTP."""
    root.mkdir()
    (root / "hello.txt").write_text("hello over TLS\n")
    package = root / "simple" / "demo-pkg"
    package.mkdir(parents=True)
    wheel = build_wheel(package, "demo-pkg", "0.1", {"demo_pkg.py": b"VALUE = 1\n"})
    (package / "index.html").write_text(f'<a href="{wheel.name}">{wheel.name}</a>\n')
    work = root.parent / "work"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q", str(work)], check=True)
    (work / "README").write_text("cloned over TLS\n")
    subprocess.run([*git, "-C", str(work), "add", "README"], check=True)
    subprocess.run([*git, "-C", str(work), "commit", "-q", "-m", "one"], check=True)
    subprocess.run([*git, "clone", "-q", "--bare", str(work), str(root / "repo.git")], check=True)
    subprocess.run(["git", "-C", str(root / "repo.git"), "update-server-info"], check=True)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def https_server(tmp_path: Path, new_port) -> Iterator[tuple[int, Path, Path]]:
    """(port, CA certificate, the server's private key) of a running HTTPS server."""
    ca, cert, key = _certificates(tmp_path / "ca")
    _site(tmp_path / "www")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    port = new_port()
    handler = functools.partial(_Quiet, directory=str(tmp_path / "www"))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield port, ca, key
    finally:
        httpd.shutdown()
        httpd.server_close()


def _run(container, port: int, env: dict[str, str], volumes: dict) -> str:
    running = container("bash", "-c", SCRIPT, env={"PORT": str(port), **env}, volumes=volumes)
    running.wait(timeout=240)
    return running.logs()


def test_a_mounted_ca_is_trusted_by_pip_requests_curl_and_git(container, https_server) -> None:
    port, ca, _ = https_server
    # without the setting the server's certificate is refused by every tool: the test can fail
    logs = _run(container, port, {}, {})
    assert not [tool for tool in TOOLS if tool in logs], logs[-3000:]
    logs = _run(
        container,
        port,
        {"CA_BUNDLE_FILE": "/run/extra-ca/ca.pem"},
        {str(ca.parent): {"bind": "/run/extra-ca", "mode": "ro"}},
    )
    assert [tool for tool in TOOLS if tool in logs] == list(TOOLS), logs[-3000:]
    assert "hello over TLS" in logs and "cloned over TLS" in logs
    assert "CA_BUNDLE_FILE: 1 certificate(s) from /run/extra-ca/ca.pem trusted" in logs


def test_a_private_key_as_ca_stops_the_start_without_printing_it(container, https_server) -> None:
    _, _, key = https_server
    running = container(
        env={"CA_BUNDLE_FILE": "/run/extra-ca/server.key"},
        volumes={str(key.parent): {"bind": "/run/extra-ca", "mode": "ro"}},
    )
    assert running.wait(timeout=60) != 0
    logs = running.logs()
    assert "CA_BUNDLE_FILE=/run/extra-ca/server.key holds a private key" in logs, logs[-2000:]
    body = key.read_text().splitlines()[1]
    assert body not in logs
