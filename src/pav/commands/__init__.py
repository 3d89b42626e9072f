"""User subcommands beside the main run (check-nccl, ...)."""
