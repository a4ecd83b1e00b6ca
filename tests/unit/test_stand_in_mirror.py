"""The stand-in base comes from the Debian mirror this host's apt already uses (a corporate
mirror or proxy may be the only way out), read from one-line and deb822 sources; MIRROR wins."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.helpers import ROOT

SCRIPT = ROOT / "scripts" / "build-stand-in-base.sh"


def mirror(apt: Path, **env: str) -> str:
    out = subprocess.run(
        ["bash", str(SCRIPT), "--mirror"],
        env={**os.environ, "APT_ETC": str(apt), **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def test_the_hosts_bookworm_source_is_taken_in_either_format(tmp_path):
    apt = tmp_path / "apt"
    (apt / "sources.list.d").mkdir(parents=True)
    assert mirror(apt) == "http://deb.debian.org/debian"  # apt names none: Debian's own
    (apt / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://security.corp/debian-security\nSuites: bookworm-security\n"
        "Components: main\n\n"
        "Types: deb\nURIs: http://old.corp/debian\nSuites: bookworm\nEnabled: no\n\n"
        "# the corporate mirror\nTypes: deb deb-src\nURIs: http://mirror.corp/debian "
        "http://other.corp/debian\nSuites: bookworm bookworm-updates\nComponents: main\n"
    )
    assert mirror(apt) == "http://mirror.corp/debian"
    (apt / "sources.list").write_text(
        "# deb http://commented.corp/debian bookworm main\n"
        "deb-src http://src.corp/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://proxy.corp:3142/debian "
        "bookworm main contrib\n"
    )
    assert mirror(apt) == "http://proxy.corp:3142/debian"  # sources.list first, as apt reads
    assert mirror(apt, MIRROR="https://chosen.corp/debian") == "https://chosen.corp/debian"
