"""One module per subcommand: wires parsed arguments to the modules that do the work."""

LOG_DIR = "/workspace/logs"  # where `watch` logs unless told: the image's logs folder
