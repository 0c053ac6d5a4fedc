"""Kept so the commands written in committed specs and docs still run: the module is
``simlab.analysis.experiments.recipe_table`` (``python -m simlab.analysis.experiments.recipe_table --help``)."""

from simlab.analysis.experiments.recipe_table import main

if __name__ == "__main__":
    main()
