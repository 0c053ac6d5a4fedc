"""The analysis layer: reports with standard errors, figures, and the published-results audit."""
