"""SeTa's selection, transcribed from the authors' code for tests/test_seta.py.

Source: github.com/mrazhou/SeTa, seta.py at commit 341df62f1957420db7ebf53fce2c9c2689536c2a
(functions random_select_with_ratio, kmeans_group, slide_easy2hard; the SeTa class's prune and
no_prune; InfoBatch's scores, keep_ratio, no_prune; IBSampler.reset).
Licence: MIT, as the repository's setup.py declares (license='MIT'; the repository has no
LICENSE file at that commit). Copyright (c) 2025 Qing Zhou.

Only the selection logic is kept. Left out: printing, the DataLoader hooks, the distributed
branch (all_gather, the seed broadcast) and the dataset wrapper. One change, marked SEED: the
authors' IBSampler.reset seeds NumPy with its epoch counter and leaves torch's global generator
as training left it (unseeded); here the caller gives the seed that both are set to, so the test
can hand fineprune's policy the same randomness.
"""

import numpy as np
import torch
from sklearn.cluster import KMeans


def random_select_with_ratio(data, ratio):
    assert 0 <= ratio <= 1
    assert len(data) > 0

    indices = torch.arange(len(data))
    num = int(len(data) * ratio)
    _indices = torch.randperm(len(data))[:num]
    selected_indices = indices[_indices]
    selected_data = data[_indices]
    return selected_data, selected_indices


def kmeans_group(scores, indices, num_group=10):
    assert len(scores) > 0, "empty scores"
    assert len(scores) > num_group, "num_group must be less than len(scores)"
    if num_group == 1:
        return [scores], [indices]

    max_score, min_score = scores.max(), scores.min()
    if max_score == min_score:
        return torch.chunk(scores, num_group), torch.chunk(indices, num_group)

    kmeans = KMeans(n_clusters=num_group, random_state=0).fit(scores.unsqueeze(1))
    labels = kmeans.labels_

    grouped_scores = [[] for _ in range(num_group)]
    grouped_indices = [[] for _ in range(num_group)]

    for score, index, label in zip(scores, indices, labels):
        grouped_scores[label].append(score)
        grouped_indices[label].append(index)

    group_centers = [np.mean(group) for group in grouped_scores]
    sorted_groups = sorted(zip(group_centers, grouped_scores, grouped_indices), key=lambda x: x[0])

    sorted_grouped_scores = [group[1] for group in sorted_groups]
    sorted_grouped_indices = [group[2] for group in sorted_groups]
    return sorted_grouped_scores, sorted_grouped_indices


def slide_easy2hard(grouped_indices, cur_iterations, window_scale=0.5):
    if cur_iterations == 0:
        return grouped_indices
    num_group = len(grouped_indices)
    window_size = round(num_group * window_scale)
    assert window_size > 0
    slide_size = num_group - window_size

    start = cur_iterations % (slide_size + 1)
    end = start + window_size
    return grouped_indices[start:end]


class SeTa:
    """InfoBatch's and SeTa's state and selection for a dataset of `num_samples`."""

    def __init__(self, num_samples, num_epochs, prune_ratio=0.0, num_group=10, window_scale=0.5, delta=0.875):
        self.num_samples = num_samples
        self.keep_ratio = min(1.0, max(1e-1, 1.0 - prune_ratio))
        self.num_epochs = num_epochs
        self.delta = delta
        self.scores = torch.ones(num_samples) * 3
        self.num_group = num_group
        self.window_scale = window_scale
        self.iterations = 0  # SeTa's own counter: prune() calls so far
        self.sampler_iterations = 1  # IBSampler's: the 1-based epoch

    def update(self, indices, values):
        """InfoBatch.update's score write: the latest loss of each trained sample."""
        self.scores[indices.long()] = values.detach().clone().cpu()

    def reset(self, seed):
        """IBSampler.reset: the epoch's sample indices. SEED: the authors call
        np.random.seed(self.sampler_iterations) and leave torch's generator unseeded."""
        np.random.seed(seed)
        torch.manual_seed(seed)
        if self.sampler_iterations > self.num_epochs * self.delta:
            indices = self.no_prune()
        else:
            indices = self.prune()
        self.sampler_iterations += 1
        return indices

    def prune(self):
        scores, indices = random_select_with_ratio(self.scores, self.keep_ratio)
        grouped_scores, grouped_indices = kmeans_group(scores, indices, num_group=self.num_group)
        selected_grouped_indices = slide_easy2hard(grouped_indices, self.iterations, self.window_scale)
        selected_indices = [index for group in selected_grouped_indices for index in group]
        self.iterations += 1
        if len(selected_indices) == 0:
            selected_indices = np.random.choice(self.num_samples, 1)
        np.random.shuffle(selected_indices)
        return np.array(selected_indices)

    def no_prune(self):
        # InfoBatch.no_prune, then SeTa's partial annealing
        sample_indices = list(range(self.num_samples))
        np.random.shuffle(sample_indices)
        size = int(self.keep_ratio * len(sample_indices))
        selected_indices = np.random.choice(sample_indices, size, replace=False)
        return np.array(selected_indices)
