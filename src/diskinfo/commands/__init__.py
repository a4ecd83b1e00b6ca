"""One module per subcommand: wires parsed arguments to the modules that do the work."""

from diskinfo.logfiles import LOG_DIR as LOG_DIR  # where `watch` logs unless told
