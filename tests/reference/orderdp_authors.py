"""OrderDP, the authors' selection function, transcribed for a fidelity test.

Source: github.com/shengze-xu/OrderDP at commit b48eaccef9ed4390919a7370b4862fcf8abbc86d,
cifar/orderDP/orderDP.py: class OrderDP (__init__'s sizes and scores, update, prune). Licence: the repository has no licence file at that
commit; this is the selection logic only, transcribed line for line, kept out of the package and
used by tests/test_policies_2026.py alone.

Changed from the source, and only this: the dataset is replaced by `n_train`; `update` takes the
batch's indices as an argument (the source's DataLoader hook sets them); the data-parallel
gather, the usage bookkeeping and the final shuffle of the kept indices (their order only) are left
out; the random draw is a parameter `choice` (the source calls np.random.choice, after IBSampler.reset
seeds numpy with the epoch counter), so a test can give it the policy's own draws and compare the
selection, which is the method.
"""

import numpy as np
import torch


class OrderDP:
    def __init__(self, n_train, random_len_ratio=0.75, top_q_ratio=0.85, choice=np.random.choice):
        self.total = n_train
        self.random_len = int(random_len_ratio * n_train)
        self.top_q = int(top_q_ratio * self.random_len)
        self.scores = torch.ones(n_train) * 3
        self.choice = choice

    def update(self, indices, values):
        loss_val = values.detach().clone()
        self.scores[indices.cpu().long()] = loss_val.cpu()
        return values.mean()

    def prune(self):
        selected_indices = self.choice(self.total, self.random_len, replace=False)
        if self.top_q == self.random_len:
            result_indices = selected_indices
        else:
            top_indices = torch.topk(self.scores[selected_indices], self.top_q, dim=0, largest=True, sorted=False)[1]
            result_indices = selected_indices[top_indices]
        return result_indices
