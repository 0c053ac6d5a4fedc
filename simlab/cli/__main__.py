"""``python -m simlab.cli``: the console script."""

from simlab.cli import main

main()
