"""Model zoo: a name -> constructor registry for the CIFAR/MNIST-sized networks.

Installed as `fineprune_cli.models` (pyproject's package-dir), never as a top-level `models`.
"""

from .registry import count_parameters, create, list_models, register

# the import order fixes the order of list_models()
from . import lenet, vgg, resnet, wrn  # noqa: E402,F401

__all__ = ["register", "create", "list_models", "count_parameters"]
