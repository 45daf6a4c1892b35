"""`labkit export k8s` and `labkit cluster ...` (registered into the main CLI)."""


def register(sub) -> None:
    """Add this subsystem's subcommands to the `labkit` parser."""
