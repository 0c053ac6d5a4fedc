"""Kept so the commands written in committed specs and docs still run: the module is
``simlab.analysis.experiments.predict_findings`` (``python -m simlab.analysis.experiments.predict_findings --help``)."""

from simlab.analysis.experiments.predict_findings import main

if __name__ == "__main__":
    main()
