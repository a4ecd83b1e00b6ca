"""One module per subcommand: wires parsed arguments to the modules that do the work."""
