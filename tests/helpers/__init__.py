"""What the test tiers share: the checkout they test, helpers in the modules beside this one."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository: README.md, docker/, docs/, ...
