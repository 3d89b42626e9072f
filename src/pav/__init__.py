"""provision-and-validate: bring up a GPU cluster and prove it runs at the speed it should."""

__version__ = "0.1.0"
