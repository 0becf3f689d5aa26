"""Model zoo: a name -> constructor registry for the CIFAR/MNIST-sized networks.

Installed as `fineprune_cli.models` (pyproject's package-dir), never as a top-level `models`.
"""

from .registry import check_outputs, count_parameters, create, factory, is_factory, list_models, register, shapes_hash

# the import order fixes the order of list_models(): not sorted
# isort: off
from . import lenet, vgg, resnet, wrn  # noqa: E402,F401
# isort: on

__all__ = ["register", "create", "factory", "is_factory", "list_models", "count_parameters", "shapes_hash"]
__all__ += ["check_outputs"]
