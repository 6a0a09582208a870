"""A researcher's own project, outside the harness: tabular regression on scikit-learn's bundled
diabetes data, a model with its own kwargs, a loss term of its own and a training loop of its own,
written against the harness's public Run API. See ../README.md."""
