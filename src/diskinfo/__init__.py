"""diskinfo: tells an ML engineer whether the GPU waits for data, why, and what to change."""

__version__ = "0.1.0"
