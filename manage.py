#!/usr/bin/env python
"""Django's command-line utility for administrative tasks (see contexts/stack/cli.py: the settings
`make run` recorded, and a one-line answer when the database cannot be reached)."""

import sys


def main() -> None:
    from contexts.stack.cli import main as run

    run(sys.argv)


if __name__ == "__main__":
    main()
