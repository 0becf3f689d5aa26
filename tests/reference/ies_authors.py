"""IES's selection, transcribed from the authors' code for tests/test_ies.py.

Source: github.com/tmllab/2025_ICLR_IES, cifar_main.py at commit
fd51090ee430310afa0f87c9ddbe985839e8bd1b (functions correct_moving_average_new_new and
calculate_derivative; main()'s per-sample loss history, its second-derivative and exclusion
block, and which samples train or get the forward-only pass next). Licence: the repository
states none at that commit; this is a minimal excerpt kept for a test only, never distributed
with the package. Copyright (c) 2025 the authors (Suqin Yuan et al.).

Only the selection logic is kept: the loss appends (training and the `remaining_loader` pass
alike), the derivative history trimmed to moving_average_rate + k, the exclusion test, and the
loaders' index sets (kept when nothing is excluded, as the code does). Left out: the model,
the data, the loaders (drop_last and the training loop's skip of a one-sample batch decide which
losses arrive, not how they are judged), timing and CSV output.
"""

import numpy as np


def correct_moving_average_new_new(data, window_size):
    abs_data = np.abs(data)
    window = sum(abs_data[:window_size])
    result = [window / window_size]
    for i in range(window_size, len(data)):
        window += abs_data[i] - abs_data[i - window_size]
        result.append(window / window_size)
    return result


def calculate_derivative(x, order):
    if len(x) < order + 1:
        return 0
    if order == 2:
        return x[-1] - 2 * x[-2] + x[-3]
    else:
        raise ValueError(f"Unsupported derivative order: {order}")


class IES:
    """main()'s state for `num_samples` samples (defaults: the code's argparse defaults)."""

    def __init__(self, num_samples, threshold=1e-3, moving_average_rate=3, k=1):
        self.num_samples = num_samples
        self.threshold, self.moving_average_rate, self.k = threshold, moving_average_rate, k
        self.derivative_order = 2  # --removal_criteria second_derivative
        self.sample_loss_history = {idx: [] for idx in range(num_samples)}
        self.derivative_history = {idx: [] for idx in range(num_samples)}
        self.train_indices = list(range(num_samples))  # train_loader's samples
        self.remaining_indices = None  # remaining_loader's samples (None: no loader yet)

    def record(self, indices, losses):
        """A training batch, or a batch of the remaining_loader pass: each loss appended."""
        for i, index in enumerate(indices):
            self.sample_loss_history[int(index)].append(losses[i].item())

    def epoch_end(self):
        """The block after an epoch's training and remaining pass; returns excluded_samples."""
        args, threshold = self, self.threshold
        sample_loss_history, derivative_history = self.sample_loss_history, self.derivative_history
        derivative_order = self.derivative_order
        if args.threshold > 0:
            for idx, losses in sample_loss_history.items():
                if len(losses) >= derivative_order + 1:
                    latest_derivative = calculate_derivative(losses, derivative_order)
                    derivative_history[idx].append(latest_derivative)
                    if len(derivative_history[idx]) > args.moving_average_rate + args.k:
                        derivative_history[idx] = derivative_history[idx][-(args.moving_average_rate + args.k) :]

            excluded_samples = []
            for idx, derivatives in derivative_history.items():
                if len(derivatives) >= args.moving_average_rate + args.k:
                    ma_derivatives = correct_moving_average_new_new(derivatives, args.moving_average_rate)
                    derivative_sum = np.abs(ma_derivatives[-args.k :]).sum()
                    if derivative_sum < threshold:
                        excluded_samples.append(idx)

            if excluded_samples:
                excluded_set = set(excluded_samples)
                all_indices = set(range(self.num_samples))
                self.train_indices = list(all_indices - excluded_set)
                self.remaining_indices = list(excluded_set)
            return excluded_samples
        return []
