"""The packages, found: pyproject.toml cannot both find packages and add one from another folder
(models/, installed as fineprune_cli.models; its package-dir line is in pyproject.toml)."""

from setuptools import find_packages, setup

setup(
    packages=[
        *find_packages(include=["fineprune", "fineprune.*", "fineprune_cli", "fineprune_cli.*"]),
        "fineprune_cli.models",
    ]
)
