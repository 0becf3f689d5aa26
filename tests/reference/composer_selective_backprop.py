# Copyright 2022 MosaicML Composer authors
# SPDX-License-Identifier: Apache-2.0
"""Selective-Backprop's schedule and selection, transcribed from MosaicML Composer for
tests/test_selective.py.

Source: github.com/mosaicml/composer at commit 6405188805a0054b4551ec49e4919c54c971d0e8,
composer/algorithms/selective_backprop/selective_backprop.py: `should_selective_backprop` and
`select_using_loss`, line for line. Licence: Apache License 2.0 (the repository's LICENSE;
http://www.apache.org/licenses/LICENSE-2.0), copyright 2022 MosaicML Composer authors. Kept out
of the package, used by the tests alone.

Changed from the source, and only this: the docstrings are shortened, `ruff format` rewrote the
layout (quotes, brackets); the `SelectiveBackprop` algorithm class is left out (it calls these
two with `current_duration` = the state's elapsed duration and `batch_idx` =
`state.timestamp.batch_in_epoch`, and applies nothing when keep >= 1).
The draw stays `np.random.choice`, NumPy's global generator, which a test seeds or replaces.
"""

import inspect
from typing import Callable, Sequence, Union

import numpy as np
import torch
from torch.nn import functional as F


def should_selective_backprop(
    current_duration: float,
    batch_idx: int,
    start: float = 0.5,
    end: float = 0.9,
    interrupt: int = 2,
) -> bool:
    """Decides if selective backprop should be run based on time in training."""
    is_interval = (current_duration >= start) and (current_duration < end)
    is_step = (interrupt == 0) or ((batch_idx + 1) % interrupt != 0)

    return is_interval and is_step


def select_using_loss(
    input: torch.Tensor,
    target: torch.Tensor,
    model: Callable[[Union[torch.Tensor, Sequence[torch.Tensor]]], torch.Tensor],
    loss_fun: Callable,
    keep: float = 0.5,
    scale_factor: float = 1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Prunes minibatches as a subroutine of SelectiveBackprop."""
    INTERPOLATE_MODES = {3: "linear", 4: "bilinear", 5: "trilinear"}

    interp_mode = "bilinear"
    if scale_factor != 1:
        if input.dim() not in INTERPOLATE_MODES:
            raise ValueError(f"Input must be 3D, 4D, or 5D if scale_factor != 1, got {input.dim()}")
        interp_mode = INTERPOLATE_MODES[input.dim()]

    if scale_factor > 1:
        raise ValueError("scale_factor must be <= 1")

    if callable(loss_fun):
        sig = inspect.signature(loss_fun)
        if not "reduction" in sig.parameters:
            raise TypeError("Loss function `loss_fun` must take a keyword argument `reduction`.")
    else:
        raise TypeError("Loss function must be callable")

    with torch.no_grad():
        N = input.shape[0]

        # Maybe interpolate
        if scale_factor < 1:
            X_scaled = F.interpolate(
                input,
                scale_factor=scale_factor,
                mode=interp_mode,
                align_corners=False,
                recompute_scale_factor=False,
            )
        else:
            X_scaled = input

        # Get per-examples losses
        out = model(X_scaled)
        losses = loss_fun(out, target, reduction="none")

        # Sort losses
        sorted_idx = torch.argsort(losses)
        n_select = int(keep * N)

        # Sample by loss
        percs = np.arange(0.5, N, 1) / N
        probs = percs ** ((1.0 / keep) - 1.0)
        probs = probs / np.sum(probs)
        select_percs_idx = np.random.choice(N, n_select, replace=False, p=probs)
        select_idx = sorted_idx[select_percs_idx]

    return input[select_idx], target[select_idx]
